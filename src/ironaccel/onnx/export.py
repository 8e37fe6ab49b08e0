"""``export(model) -> tosa.Program``: an ONNX model through torch-mlir and tosa-opt to a TOSA 1.0 program
whose inputs and outputs carry the ONNX graph's names and shapes."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..tosa.ir import Program
from . import stages
from .environment import find_tools
from .errors import ConversionFailed

# A TOSA flatbuffer is below 2 GiB; a larger ONNX model cannot become one.
MAX_MODEL_BYTES = 2 * 1024**3 - 1


def _source(model: Any, work: Path) -> tuple[Path, str]:
    """The model as a file, and what to call it in messages: a path is used where it lies; bytes or an
    ``onnx.ModelProto`` (anything with ``SerializeToString``) are written into ``work``."""
    if isinstance(model, str | os.PathLike):
        path = Path(model)
        if not path.is_file():
            raise ConversionFailed(str(path), "prepare", f"  {path}: no such file")
        if path.stat().st_size > MAX_MODEL_BYTES:
            raise ConversionFailed(str(path), "prepare", "  larger than a TOSA flatbuffer can be (2 GiB)")
        return path, path.name
    if hasattr(model, "SerializeToString"):
        data = model.SerializeToString()
        name = getattr(getattr(model, "graph", None), "name", "") or "model"
    elif isinstance(model, bytes | bytearray | memoryview):
        data, name = bytes(model), "model"
    else:
        raise TypeError(f"export takes a path, the bytes of an .onnx file or an onnx.ModelProto, not {type(model)}")
    path = work / "model.onnx"
    path.write_bytes(data)
    return path, name


def export(
    model: str | os.PathLike[str] | bytes | Any,
    *,
    shapes: Mapping[str, Sequence[int]] | None = None,
    environment: str | os.PathLike[str] | None = None,
    keep: str | os.PathLike[str] | None = None,
) -> Program:
    """Convert an ONNX model to a TOSA 1.0 program (``Device.compile`` takes it as it is).

    ``model``: a path to an ``.onnx`` file, its bytes, or an ``onnx.ModelProto``. ``shapes`` fixes inputs
    whose dimensions the model leaves symbolic (``{"x": [1, 3, 224, 224]}``): TOSA 1.0 shapes are static.
    ``environment``: the tools' virtual environment (default ``$IRONACCEL_ONNX_ENV``, else ``.venv-onnx``).
    ``keep``: a directory to leave every stage's file in (``prepared.onnx``, ``model.torch.mlir``,
    ``model.tosa.mlir``, ``model.tosa``), for a look at where a conversion went wrong.

    The program's inputs and outputs are named as the ONNX graph's, in its order, with its shapes. Raises
    :class:`~ironaccel.onnx.errors.OnnxEnvironmentMissing` without the tools and
    :class:`~ironaccel.onnx.errors.ConversionFailed` (its ``stage`` and ``operator``) when a stage fails.
    """
    tools = find_tools(environment)
    with tempfile.TemporaryDirectory(prefix="ironaccel-onnx-") as scratch:
        work = Path(keep) if keep is not None else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        source, name = _source(model, work)
        prepared, torch_mlir, lowered = work / "prepared.onnx", work / "model.torch.mlir", work / "lowered.mlir"
        tosa_mlir, flatbuffer = work / "model.tosa.mlir", work / "model.tosa"
        signature = stages.prepare(tools, name, source, prepared, shapes)
        stages.import_onnx(tools, name, prepared, torch_mlir)
        stages.lower(tools, name, torch_mlir, lowered)
        stages.rewrite_constants(name, lowered, tosa_mlir)
        if keep is None:  # the largest intermediates go as soon as the next stage has read them
            for done in (prepared, torch_mlir, lowered):
                done.unlink(missing_ok=True)
        stages.serialize(tools, name, tosa_mlir, flatbuffer)
        return _read(name, flatbuffer, signature)


def _read(name: str, flatbuffer: Path, signature: Mapping[str, Any]) -> Program:
    """The flatbuffer read and validated by IronAccel, its inputs and outputs renamed after the ONNX graph's
    once their count and shapes are checked to be the graph's."""
    from ..torch.program import rename_io  # a function on tosa.Program: imports neither torch nor ExecuTorch
    from ..tosa.codec import DEFAULT_LIMITS, load
    from ..tosa.errors import FormatError, ValidationError
    from ..tosa.validate import validate

    try:
        program = load(flatbuffer, limits=DEFAULT_LIMITS.replace(max_file_bytes=MAX_MODEL_BYTES))
        validate(program)
    except (FormatError, ValidationError) as exc:
        raise ConversionFailed(name, "read", f"  {exc}", getattr(exc, "op", None)) from exc
    main = program.main
    tensors = {t.name: t for t in main.tensors}
    sides = (("input", main.inputs, signature["inputs"]), ("output", main.outputs, signature["outputs"]))
    for side, names, expected in sides:
        got = [tuple(tensors[n].shape) for n in names]
        want = [tuple(t["shape"]) for t in expected]
        comparable = all(isinstance(d, int) for shape in want for d in shape)
        if len(got) != len(want) or (comparable and got != want):
            raise ConversionFailed(name, "read", f"  the program's {side}s have shapes {got}; the ONNX graph's {want}")
    return rename_io(program, [t["name"] for t in signature["inputs"]], [t["name"] for t in signature["outputs"]])


__all__ = ["MAX_MODEL_BYTES", "export"]
