"""Reading the graph ExecuTorch lowered: whether one delegate call holds the whole module, which operators
stayed outside it and where the user's code calls them, and how the delegated TOSA program's inputs and
outputs map onto the module's, with the quantization ExecuTorch applies around it.

For an int8 module the delegated program takes and returns integers: the lowered graph quantizes each float
input before the delegate (quantize_per_tensor) and dequantizes each output after it
(dequantize_per_tensor). Their scale, zero point and range are the program's quantization parameters.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import re
from typing import Any

from ..core.errors import Unsupported
from .errors import OutsideOperator

# `File "/path/model.py", line 15, in forward` then the line's source, as torch records stack traces.
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)\s*$')


@dataclasses.dataclass(frozen=True)
class Partition:
    """The one delegated program: its flatbuffer, and per program input / output the index of the module's
    input / output it is, with its per-tensor quantization (the sidecar form) or None."""

    payload: bytes
    inputs: tuple[tuple[int, dict[str, Any] | None], ...]
    outputs: tuple[tuple[int, dict[str, Any] | None], ...]


def _ops() -> tuple[Any, Any, Any]:
    import torch

    return (
        torch.ops.higher_order.executorch_call_delegate,
        torch.ops.quantized_decomposed.quantize_per_tensor.default,
        torch.ops.quantized_decomposed.dequantize_per_tensor.default,
    )


def _op_of(node: Any) -> Any:
    """The torch operator a call node runs (edge dialect operators wrap one)."""
    return getattr(node.target, "_op", node.target)


def _is(node: Any, op: Any) -> bool:
    return getattr(node, "op", None) == "call_function" and _op_of(node) is op


def delegate_calls(graph: Any) -> list[Any]:
    delegate = _ops()[0]
    return [n for n in graph.nodes if n.op == "call_function" and n.target is delegate]


def outside_operators(graph: Any, reasons: dict[str, str]) -> list[OutsideOperator]:
    """Every operator the lowered graph runs outside the delegates, but the plumbing around them (tuple
    items, and the quantize / dequantize steps that only convert at a partition's edge)."""
    delegate, quantize, dequantize = _ops()
    library = _library_dirs()
    found = []
    for node in graph.nodes:
        if node.op != "call_function" or node.target is delegate or _op_of(node) in (operator.getitem,):
            continue
        if _op_of(node) in (quantize, dequantize):
            continue
        location, code = _user_frame(node.meta.get("stack_trace"), library)
        found.append(
            OutsideOperator(
                node.name,
                _operator_name(_op_of(node)),
                location,
                code,
                _submodule(node.meta.get("nn_module_stack")),
                reasons.get(node.name),
            )
        )
    return found


def read_partition(program: Any, call: Any) -> Partition:
    """The delegate ``call`` of the lowered ``program`` (a torch.export.ExportedProgram), when it is the
    whole module: each of its inputs a module input (through a quantize), each module output one of its
    outputs (through a dequantize)."""
    _, quantize, dequantize = _ops()
    payload = bytes(getattr(program.graph_module, call.args[0].target).processed_bytes)
    user_inputs = list(program.graph_signature.user_inputs)
    inputs = []
    for number, arg in enumerate(call.args[1:]):
        qparams, source = (_qparams(arg), arg.args[0]) if _is(arg, quantize) else (None, arg)
        if getattr(source, "op", None) != "placeholder" or source.name not in user_inputs:
            raise Unsupported(f"input {number} of the TOSA program is {source}, not an input of the module")
        inputs.append((user_inputs.index(source.name), qparams))
    (output_node,) = [n for n in program.graph.nodes if n.op == "output"]
    results = list(output_node.args[0])
    outputs: dict[int, tuple[int, dict[str, Any] | None]] = {}
    for item in call.users:
        if _op_of(item) is not operator.getitem:
            raise Unsupported(f"unexpected user {item.name} of the delegated TOSA program")
        reader, qparams = item, None
        if len(item.users) == 1 and _is(next(iter(item.users)), dequantize):
            reader = next(iter(item.users))
            qparams = _qparams(reader)
        positions = [j for j, result in enumerate(results) if result is reader]
        if not positions or any(user.op != "output" for user in reader.users):
            raise Unsupported(f"output {item.args[1]} of the TOSA program is not an output of the module")
        outputs[item.args[1]] = (positions[0], qparams)
    missing = sorted(set(range(len(results))) - {position for position, _ in outputs.values()})
    if missing:
        raise Unsupported(
            f"output(s) {missing} of the module are not computed by the TOSA program "
            "(an input or a constant returned as it is, or one value returned twice)"
        )
    return Partition(payload, tuple(inputs), tuple(outputs[i] for i in sorted(outputs)))


def _qparams(node: Any) -> dict[str, Any]:
    """Scale, zero point, dtype and range of a quantized_decomposed per-tensor (de)quantize node."""
    names = [argument.name for argument in _op_of(node)._schema.arguments]
    bound = dict(zip(names, node.args, strict=False)) | dict(node.kwargs)
    for key in ("scale", "zero_point"):
        if hasattr(bound[key], "op"):
            raise Unsupported(f"{node.name}: its {key} is computed in the graph; a per-tensor constant is supported")
    return {
        "scheme": "per_tensor_affine",
        "scale": float(bound["scale"]),
        "zero_point": int(bound["zero_point"]),
        "dtype": str(bound["dtype"]).removeprefix("torch."),
        "qmin": int(bound["quant_min"]),
        "qmax": int(bound["quant_max"]),
    }


def _operator_name(op: Any) -> str:
    name = getattr(op, "__name__", None) if not hasattr(op, "_schema") else None
    return name or str(op)


def _library_dirs() -> tuple[str, ...]:
    """Where torch, ExecuTorch and torchao live: frames there are not the user's code."""
    import importlib

    found = []
    for name in ("torch", "executorch", "torchao"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for path in getattr(module, "__path__", []):
            found.append(os.path.join(os.path.realpath(path), ""))
    return tuple(found)


def _user_frame(stack_trace: str | None, library: tuple[str, ...]) -> tuple[str | None, str | None]:
    """``file:line`` and the source of the innermost frame of ``stack_trace`` outside torch and ExecuTorch
    (the innermost frame of all when every one is inside them)."""
    frames = []
    lines = (stack_trace or "").splitlines()
    for index, line in enumerate(lines):
        match = FRAME.match(line)
        if match:
            code = lines[index + 1].strip() if index + 1 < len(lines) and not FRAME.match(lines[index + 1]) else ""
            frames.append((match["file"], match["line"], code))
    if not frames:
        return None, None
    user = [f for f in frames if not os.path.realpath(f[0]).startswith(library)] if library else frames
    file, line, code = (user or frames)[-1]
    return f"{file}:{line}", code or None


def _submodule(stack: Any) -> str | None:
    """The innermost submodule of an fx node's nn_module_stack, as ``path (ClassName)``; None at the root."""
    if not stack:
        return None
    path, kind = list(stack.values())[-1]
    path = re.sub(r"^L\['self'\]\.?", "", str(path))
    if not path:
        return None
    kind_name = getattr(kind, "__name__", None) or str(kind).rsplit(".", 1)[-1]
    return f"{path} ({kind_name})"


__all__ = ["Partition", "delegate_calls", "outside_operators", "read_partition"]
