"""``export``: a torch.nn.Module to one TOSA 1.0 program with the metadata IronAccel reads beside it.

The module is captured by torch.export, quantized to int8 with ExecuTorch's Arm quantizer when asked, and
lowered by ExecuTorch's Arm TOSA partitioner (FP profile, or INT for int8). The whole module must become one
delegated TOSA program; an operator left outside is an error naming it and the line of the user's code that
calls it (:class:`~.errors.NotDelegated`), never a silent split.

The program's inputs are renamed after the module's ``forward`` parameters (or ``names=``) and its outputs
``output`` (``output_0``, ``output_1``, ... for several), so ``exe(x=...)`` binds as the module is called.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import InvalidArgument
from ..tosa.codec import read, write
from ..tosa.ir import Program
from .errors import NotDelegated, require_torch
from .graph import Partition, delegate_calls, outside_operators, read_partition
from .lower import FP_PROFILE, INT_PROFILE, capture, lower
from .program import rename_io

QUANTIZE_MODES = {None: FP_PROFILE, "int8": INT_PROFILE}


@dataclasses.dataclass(frozen=True)
class TosaExport:
    """A module exported to one TOSA 1.0 program.

    ``tosa``: the flatbuffer's bytes (``Device.compile`` takes them, or the export itself). ``metadata``: the
    sidecar form of :mod:`ironaccel.runtime.metadata` (description, the profile, each input's and output's
    name, shape and dtype, and for int8 ``quantization``). ``quantized_module``: for int8, the converted PT2E
    module, float in and float out: what ExecuTorch computes end to end, to compare with."""

    tosa: bytes
    metadata: dict[str, Any]
    quantized_module: Any = None

    @functools.cached_property
    def program(self) -> Program:
        return read(self.tosa)

    @property
    def profile(self) -> str:
        return str(self.metadata["profile"])

    @property
    def input_names(self) -> list[str]:
        return [t["name"] for t in self.metadata["inputs"]]

    @property
    def output_names(self) -> list[str]:
        return [t["name"] for t in self.metadata["outputs"]]

    def save(self, path: str | os.PathLike) -> tuple[Path, Path]:
        """Write the program to ``path`` and its metadata beside it (``model.tosa`` -> ``model.json``, where
        ``Device.compile(path)`` finds it). Returns both paths."""
        program_path = Path(path)
        sidecar = program_path.with_suffix(".json")
        if sidecar == program_path:
            raise InvalidArgument(f"{program_path}: the program's file must not end in .json")
        program_path.write_bytes(self.tosa)
        sidecar.write_text(json.dumps(self.metadata, indent=1) + "\n")
        return program_path, sidecar


def export(
    module: Any,
    example_inputs: Any,
    quantize: str | None = None,
    *,
    names: Sequence[str] | None = None,
    calibration: Iterable[Sequence[Any]] | None = None,
    description: str | None = None,
    device: Any = None,
) -> TosaExport:
    """``module`` (a torch.nn.Module, exported as in eval mode) as one TOSA 1.0 program.

    ``example_inputs``: a tensor or a tuple of tensors, one per ``forward`` parameter; the program has their
    shapes and dtypes. ``quantize``: None (float, TOSA-1.0+FP) or ``"int8"`` (per-tensor symmetric int8,
    TOSA-1.0+INT), calibrated on each input tuple of ``calibration`` (default: the example inputs alone).
    ``names``: the inputs' names (default: ``forward``'s parameters). ``device``: named in the error when
    the module does not lower whole (``Device.compile`` passes itself)."""
    torch = require_torch()
    inputs = example_tuple(example_inputs)
    _profile(quantize)  # a wrong mode is refused before the capture's cost
    with eval_mode(module), torch.no_grad():
        captured = capture(module, inputs)
    return export_captured(module, captured, inputs, quantize, names, calibration, description, device)


def export_captured(
    module: Any,
    captured: Any,
    inputs: tuple[Any, ...],
    quantize: str | None,
    names: Sequence[str] | None,
    calibration: Iterable[Sequence[Any]] | None,
    description: str | None,
    device: Any,
) -> TosaExport:
    """``export`` from a torch.export capture of ``module`` taking ``inputs``."""
    profile = _profile(quantize)
    input_names = _input_names(module, len(inputs), names)
    batches = None
    if quantize is not None:
        batches = [inputs] if calibration is None else [example_tuple(batch) for batch in calibration]
    lowered = lower(captured, inputs, profile, batches)
    graph = lowered.program.graph
    calls = delegate_calls(graph)
    outside = outside_operators(graph, lowered.reasons)
    what = type(module).__name__
    if outside or len(calls) != 1:
        raise NotDelegated(what, profile, outside, len(calls), device)
    partition = read_partition(lowered.program, calls[0])
    program, payload = _renamed(partition, input_names)
    metadata = _metadata(program, partition, profile, description or f"{what} exported from PyTorch ({profile})")
    made = TosaExport(payload, metadata, lowered.quantized_module)
    made.__dict__["program"] = program  # the cached_property, already read
    return made


def example_tuple(example_inputs: Any) -> tuple[Any, ...]:
    """The example inputs as a tuple of tensors (one tensor alone is one input)."""
    import torch

    inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else example_inputs
    if not isinstance(inputs, tuple | list) or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise InvalidArgument(
            "example_inputs must be a tensor or a tuple of tensors, one per forward parameter; "
            f"got {type(example_inputs).__name__}"
        )
    if not inputs:
        raise InvalidArgument("example_inputs is empty: the module needs at least one input tensor")
    return tuple(inputs)


@contextlib.contextmanager
def eval_mode(module: Any) -> Iterator[None]:
    """``module`` in eval mode for the duration (dropout off, batch norm on its running statistics), each
    submodule's own mode restored after."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for submodule, training in modes:
            submodule.training = training


def _profile(quantize: str | None) -> str:
    try:
        return QUANTIZE_MODES[quantize]
    except (KeyError, TypeError):
        raise InvalidArgument(f"quantize must be None or 'int8', got {quantize!r}") from None


def _input_names(module: Any, count: int, names: Sequence[str] | None) -> list[str]:
    if names is not None:
        names = list(names)
        if len(names) != count or not all(isinstance(n, str) and n for n in names) or len(set(names)) != count:
            raise InvalidArgument(f"names must be {count} distinct non-empty strings, one per input; got {names!r}")
        return names
    try:
        signature = inspect.signature(module.forward)
    except (TypeError, ValueError):
        signature = None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    found = [p.name for p in signature.parameters.values() if p.kind in positional] if signature else []
    return found[:count] + [f"input_{i}" for i in range(len(found), count)]


def _renamed(partition: Partition, input_names: list[str]) -> tuple[Program, bytes]:
    """The program with its inputs named after the module's and its outputs ``output`` / ``output_J`` (J the
    position in what ``forward`` returns), and its bytes (ExecuTorch's own when nothing changed)."""
    program = read(partition.payload)
    outputs = [j for j, _ in partition.outputs]
    several = len(outputs) > 1 or max(outputs, default=0) > 0
    wanted_in = [input_names[i] for i, _ in partition.inputs]
    wanted_out = [f"output_{j}" if several else "output" for j in outputs]
    wanted_out = [_unique(n, set(wanted_in)) for n in wanted_out]
    renamed = rename_io(program, wanted_in, wanted_out)
    return renamed, (partition.payload if renamed is program else write(renamed))


def _unique(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _metadata(program: Program, partition: Partition, profile: str, description: str) -> dict[str, Any]:
    main = program.main

    def tensors(specs: list[Any]) -> list[dict[str, Any]]:
        return [{"name": t.name, "shape": list(t.shape), "dtype": str(t.dtype)} for t in specs]

    metadata: dict[str, Any] = {
        "description": description,
        "profile": profile,
        "quantized": profile == INT_PROFILE,
        "inputs": tensors(main.input_tensors),
        "outputs": tensors(main.output_tensors),
    }
    if profile == INT_PROFILE:
        metadata["quantization"] = {
            "inputs": [q for _, q in partition.inputs],
            "outputs": [q for _, q in partition.outputs],
        }
    return metadata


__all__ = ["QUANTIZE_MODES", "TosaExport", "eval_mode", "example_tuple", "export", "export_captured"]
