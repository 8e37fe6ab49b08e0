"""What is known about a compiled program beyond its tensors: a description and, for quantized programs,
how each input and output maps to real numbers.

A TOSA flatbuffer carries names, dtypes and shapes, not quantization parameters: those live where the
program was exported. IronAccel's exports write them beside the program as ``<program>.json``
(``examples/export_models.py``), which ``Device.compile(path)`` reads when it exists, or a caller passes
them as ``compile(..., metadata={...})``. The form::

    {"description": "...",
     "quantization": {"inputs":  [{"scale": 0.03, "zero_point": 7, "dtype": "int8", "qmin": -128, "qmax": 127}],
                      "outputs": [{...}]}}

An entry per input and output in order (``null`` for one that is not quantized). With them an INT8
program is fed and read as floats::

    q = exe.metadata.inputs[0].quantization
    y, = exe(q.quantize(x))
    real = exe.metadata.outputs[0].quantization.dequantize(y)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import InvalidArgument
from .spec import TensorSpec

SIDECAR_BYTES = 1 << 20  # a description and a few numbers per tensor


@dataclasses.dataclass(frozen=True)
class Quantization:
    """Per-tensor affine quantization: ``real = scale * (q - zero_point)``, ``q`` in ``[qmin, qmax]``."""

    scale: float
    zero_point: int
    dtype: str = "int8"
    qmin: int = -128
    qmax: int = 127

    def __post_init__(self) -> None:
        if not (isinstance(self.scale, float | int) and self.scale > 0 and np.isfinite(self.scale)):
            raise InvalidArgument(f"quantization scale must be a positive finite number, got {self.scale!r}")
        if not self.qmin <= self.zero_point <= self.qmax:
            raise InvalidArgument(f"zero point {self.zero_point} outside [{self.qmin}, {self.qmax}]")

    def quantize(self, real: Any) -> np.ndarray:
        """Real values to the integer storage dtype: divided by the scale, rounded half to even (as
        PyTorch's quantize_per_tensor does), shifted by the zero point, clamped to [qmin, qmax]."""
        q = np.rint(np.asarray(real, np.float64) / self.scale) + self.zero_point
        return np.clip(q, self.qmin, self.qmax).astype(np.dtype(self.dtype))

    def dequantize(self, q: Any) -> np.ndarray:
        """Integer values back to float32 reals."""
        return (self.scale * (np.asarray(q, np.float64) - self.zero_point)).astype(np.float32)

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Quantization:
        scheme = entry.get("scheme", "per_tensor_affine")
        if scheme != "per_tensor_affine":
            raise InvalidArgument(f"quantization scheme {scheme!r} is not supported (per_tensor_affine is)")
        try:
            return cls(
                float(entry["scale"]),
                int(entry["zero_point"]),
                str(entry.get("dtype", "int8")),
                int(entry.get("qmin", -128)),
                int(entry.get("qmax", 127)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"malformed quantization entry {dict(entry)!r}: {exc}") from None


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One input or output: its name, dtype and shape, and its quantization when it is quantized."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    quantization: Quantization | None = None


@dataclasses.dataclass(frozen=True)
class Metadata:
    description: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    source: str | None = None  # where the metadata came from (a sidecar file), if anywhere

    @property
    def quantized(self) -> bool:
        return any(t.quantization is not None for t in (*self.inputs, *self.outputs))

    @classmethod
    def of(
        cls,
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
        data: Mapping[str, Any] | None = None,
        source: str | None = None,
    ) -> Metadata:
        """Metadata of a program with ``inputs`` / ``outputs``, completed by ``data`` (the sidecar form)."""
        data = data or {}
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"program metadata must be a JSON object, got {type(data).__name__}")
        quant = data.get("quantization") or {}
        return cls(
            str(data.get("description", "")),
            _infos(inputs, quant.get("inputs"), "inputs"),
            _infos(outputs, quant.get("outputs"), "outputs"),
            source,
        )


def _infos(specs: Sequence[TensorSpec], entries: Any, role: str) -> tuple[TensorInfo, ...]:
    if entries is None:
        entries = [None] * len(specs)
    if not isinstance(entries, list) or len(entries) != len(specs):
        raise InvalidArgument(f"metadata gives quantization for {len(entries)} {role}, the program has {len(specs)}")
    return tuple(
        TensorInfo(s.name, str(s.dtype), tuple(s.shape), None if e is None else Quantization.of(e))
        for s, e in zip(specs, entries, strict=True)
    )


def read_sidecar(program_path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The metadata written beside a program file (``model.tosa`` -> ``model.json``), if there is one."""
    from ..core.files import read_limited

    sidecar = program_path.with_suffix(".json")
    if sidecar == program_path or not sidecar.is_file():
        return None, None
    try:
        data = json.loads(read_limited(sidecar, SIDECAR_BYTES, "program metadata"))
    except ValueError as exc:
        raise InvalidArgument(f"{sidecar}: not valid JSON metadata: {exc}") from None
    return data, str(sidecar)


__all__ = ["Metadata", "Quantization", "TensorInfo", "read_sidecar"]
