"""The stages of ONNX -> TOSA 1.0 as subprocesses of the ONNX environment, each failure turned into a
:class:`ConversionFailed` naming the stage and, where the tool says it, the operator.

    prepare    prepare_tool.py: static input shapes, shape arithmetic folded (onnx, onnxruntime)
    import     python -m torch_mlir.tools.import_onnx: ONNX -> torch dialect (onnx.* operators)
    lower      torch-mlir-opt --torch-onnx-to-torch-backend-pipeline --torch-backend-to-tosa-backend-pipeline
    (rewrite)  splat constants that torch-mlir's TOSA constant folding leaves as arith.constant made tosa.const
    serialize  tosa-opt --tosa-attach-target --tosa-validate --tosa-serialize: TOSA 1.0 flatbuffer
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .environment import Tools
from .errors import ConversionFailed

PREPARE_TOOL = Path(__file__).with_name("prepare_tool.py")
LOWERING = ("--torch-onnx-to-torch-backend-pipeline", "--torch-backend-to-tosa-backend-pipeline")
# Both profiles: the validator then accepts a float program and an integer one alike; IronAccel's own
# validator checks the program again when it is read.
TARGET = "--tosa-attach-target=profiles=pro_int,pro_fp specification_version=1.0"
DETAIL_LINES = 6

# torch-mlir: `failed to legalize operation 'torch.operator' ... <{name = "onnx.Transpose"}>` or
# `failed to legalize operation 'torch.aten.sort'`.
_LEGALIZE = re.compile(r"failed to legalize operation '(?P<op>[\w.]+)'(?P<rest>.*)")
_ONNX_NAME = re.compile(r'name = "(?P<name>onnx\.\w+)"')
# tosa-opt: `unsupported tosa operator tosa.foo` or `error: 'tosa.foo' op ...`.
_UNSUPPORTED = re.compile(r"unsupported tosa operator (?P<op>[\w.]+)")
_OP_ERROR = re.compile(r"error: '(?P<op>[\w.]+)' op")
# A splat or a dense constant printed on one line: `%cst = arith.constant dense<0.0> : tensor<1x1x768xf32>`.
_ARITH_CONSTANT = re.compile(
    r"^(?P<lhs>\s*%[\w.#-]+) = arith\.constant (?P<value>dense<.*>) : (?P<type>tensor<[^>]*>)$"
)
# The operation a line defines, read from its start only (constants' lines run to hundreds of megabytes).
_OPERATION = re.compile(r'\s*%[^=\n]*= "?(?P<op>[a-z_]+\.[\w.]+)')


def _run(
    model: str, stage: str, command: Sequence[str | Path], source: Path | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise _failure(model, stage, done.stderr or done.stdout or f"exit status {done.returncode}", source)
    return done


def _first_errors(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()] or lines[-DETAIL_LINES:]
    # MLIR prints the operation after its error: a line of a few hundred characters is enough to know it.
    return "\n".join(f"  {line[:400]}" for line in errors[:DETAIL_LINES])


def _onnx_operator(text: str, source: Path | None) -> str | None:
    """The ONNX operator (``onnx.Sinh``) at the line of ``source`` (the imported torch-dialect file) that
    torch-mlir's first error points at: its lowering keeps each ONNX operator's location."""
    where = re.search(re.escape(source.name) + r":(\d+):\d+: error", text) if source is not None else None
    if where is None or source is None or not source.exists():
        return None
    wanted = int(where[1])
    with source.open() as lines:
        for number, line in enumerate(lines, 1):
            if number == wanted:
                found = re.search(r'torch\.operator "(onnx\.\w+)"', line[:2000])
                return found[1] if found else None
    return None


def _failure(model: str, stage: str, text: str, source: Path | None = None) -> ConversionFailed:
    operator = None
    if source is not None:  # paths of the scratch directory mean nothing to the caller
        text = text.replace(str(source.parent) + "/", "")
    legalize = _LEGALIZE.search(text)
    if legalize:
        named = _ONNX_NAME.search(legalize["rest"])
        operator = named["name"] if named and legalize["op"] == "torch.operator" else legalize["op"]
        onnx_operator = _onnx_operator(text, source) if operator and not operator.startswith("onnx.") else None
        if onnx_operator:
            operator = f"{onnx_operator} (as {operator})"
    else:
        found = _UNSUPPORTED.search(text) or _OP_ERROR.search(text)
        operator = found["op"] if found else None
    if stage in ("prepare", "import") and text.strip():  # one line, or a traceback whose last line says it
        detail = "  " + text.strip().splitlines()[-1]
    else:
        detail = _first_errors(text)
    return ConversionFailed(model, stage, detail, operator)


def prepare(tools: Tools, model: str, source: Path, target: Path, shapes: Mapping[str, Sequence[int]] | None) -> Any:
    command: list[str | Path] = [tools.python, PREPARE_TOOL, source, target]
    if shapes:
        command.append(json.dumps({name: [int(n) for n in dims] for name, dims in shapes.items()}))
    return json.loads(_run(model, "prepare", command, source).stdout)


def import_onnx(tools: Tools, model: str, source: Path, target: Path) -> None:
    command = [tools.python, "-W", "ignore", "-m", "torch_mlir.tools.import_onnx", source, "-o", target]
    _run(model, "import", command, source)


def lower(tools: Tools, model: str, source: Path, target: Path) -> None:
    _run(model, "lower", [tools.torch_mlir_opt, source, *LOWERING, "-o", target], source)


def rewrite_constants(model: str, source: Path, target: Path) -> int:
    """Copy ``source`` to ``target`` with every one-line ``arith.constant`` of a tensor made a ``tosa.const``
    (torch-mlir's layerwise constant folding leaves splats as arith.constant, which tosa-opt does not
    serialize); raises on an operator of another dialect left behind. The number rewritten."""
    count = 0
    with source.open() as reading, target.open("w") as writing:
        for line in reading:
            operation = _OPERATION.match(line)
            if operation is not None and not operation["op"].startswith("tosa."):
                match = _ARITH_CONSTANT.match(line.rstrip("\n")) if operation["op"] == "arith.constant" else None
                if match is None:
                    raise ConversionFailed(model, "lower", f"  {line.strip()[:400]}", operation["op"])
                value, kind = match["value"], match["type"]
                line = f'{match["lhs"]} = "tosa.const"() <{{values = {value} : {kind}}}> : () -> {kind}\n'
                count += 1
            writing.write(line)
    return count


def serialize(tools: Tools, model: str, source: Path, target: Path) -> None:
    # strict-op-spec-alignment: without it the validator lets 64-bit integer tensors (a 1.1-draft type that
    # torch-mlir emits for indices and argmax) through to the flatbuffer.
    command = [tools.tosa_opt, source, TARGET, "--tosa-validate=strict-op-spec-alignment", "--tosa-serialize"]
    _run(model, "serialize", [*command, f"--tosa-flatbuffer-filename={target}", "-o", "/dev/null"], source)
    if not target.exists():
        raise ConversionFailed(model, "serialize", f"  tosa-opt exited 0 without writing {target.name}")


__all__ = ["import_onnx", "lower", "prepare", "rewrite_constants", "serialize"]
