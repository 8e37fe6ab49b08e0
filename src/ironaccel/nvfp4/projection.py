"""What ``Device.compile`` takes for NVFP4 weights: a projection's shape, form and activation.

Three forms (``y = act(x @ w_hat.T)`` with ``w_hat`` the exact decode of the NVFP4 weights):

* :class:`Projection` ``(m, n, k)``: ``exe(x, packed, scales, tensor_scale)``, x (m, k) float32,
  packed (n, k/2) uint8, scales (n, k/16) float8_e4m3fn, tensor_scale a float32 scalar -> y (m, n).
* :class:`BatchedProjection` ``(batch, n, k)``: ``batch`` independent (1, k) x (n, k) products, each
  row with its own weights (a routed mixture-of-experts layer after gathering each token's expert):
  ``exe(x, packed, scales, tensor_scale)``, x (batch, k), packed (batch, n, k/2), scales
  (batch, n, k/16), tensor_scale (batch,) float32 -> y (batch, n), ``y[b] = act(x[b] @ w_hat[b].T)``.
  ``quantize`` of a (batch, n, k) stack gives exactly these operands.
* :class:`ExpertProjection` ``(experts, m, n, k)``: each expert's weights are their own bindings, so
  resident expert weights are passed as they are, never stacked: ``exe(x, *q0.operands, *q1.operands,
  ...)``, x (experts, m, k) with m rows routed to each expert, then (packed, scales, tensor_scale) of
  each expert in order -> y (experts, m, n), ``y[e] = act(x[e] @ w_hat_e.T)``.

Activations: ``"none"``, ``"silu"`` (v * sigmoid(v)), ``"sigmoid"``, ``"squared_relu"`` (max(v, 0)^2).
Each projection checks its fields against :mod:`.bounds` on construction and serializes to the header
of :mod:`.format` (``to_bytes`` / :func:`from_bytes`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .bounds import BLOCK, Form, check_activation, check_name, check_shape
from .quantize import E4M3_DTYPE

_F32 = np.dtype(np.float32)
_U8 = np.dtype(np.uint8)


@dataclasses.dataclass(frozen=True)
class Operand:
    """One input or output slot: name, shape and the numpy dtype its array must have."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        size = 1
        for d in self.shape:
            size *= d
        return size * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{list(self.shape)}"


def _weights(prefix: str, lead: tuple[int, ...], n: int, k: int) -> tuple[Operand, ...]:
    return (
        Operand(f"{prefix}packed", (*lead, n, k // 2), _U8),
        Operand(f"{prefix}scales", (*lead, n, k // BLOCK), E4M3_DTYPE),
        Operand(f"{prefix}tensor_scale", lead, _F32),
    )


class ProjectionArtifact:
    """Common behaviour of the three forms (fields: m, n, k, count, activation, name)."""

    form: ClassVar[Form]
    m: int
    n: int
    k: int
    activation: str
    name: str

    @property
    def count(self) -> int:
        raise NotImplementedError

    def _check(self) -> None:
        check_shape(self.form, self.m, self.n, self.k, self.count)
        check_activation(self.activation)
        check_name(self.name)

    @property
    def inputs(self) -> tuple[Operand, ...]:
        raise NotImplementedError

    @property
    def outputs(self) -> tuple[Operand, ...]:
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        from .format import write

        return write(self)

    def __str__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"NVFP4 {type(self).__name__}{label} ({self._dims()}, activation {self.activation})"

    def _dims(self) -> str:
        return f"m={self.m}, n={self.n}, k={self.k}"


@dataclasses.dataclass(frozen=True)
class Projection(ProjectionArtifact):
    """y (m, n) = act(x (m, k) @ w_hat (n, k).T) for one NVFP4 weight matrix."""

    m: int
    n: int
    k: int
    activation: str = "none"
    name: str = ""
    form: ClassVar[Form] = Form.SINGLE

    def __post_init__(self) -> None:
        self._check()

    @property
    def count(self) -> int:
        return 1

    @property
    def inputs(self) -> tuple[Operand, ...]:
        return (Operand("x", (self.m, self.k), _F32), *_weights("", (), self.n, self.k))

    @property
    def outputs(self) -> tuple[Operand, ...]:
        return (Operand("y", (self.m, self.n), _F32),)


@dataclasses.dataclass(frozen=True)
class BatchedProjection(ProjectionArtifact):
    """y[b] (n,) = act(x[b] (k,) @ w_hat[b] (n, k).T) for ``batch`` rows, each with its own weights."""

    batch: int
    n: int
    k: int
    activation: str = "none"
    name: str = ""
    form: ClassVar[Form] = Form.BATCHED

    def __post_init__(self) -> None:
        self._check()

    @property
    def m(self) -> int:  # type: ignore[override]
        return 1

    @property
    def count(self) -> int:
        return self.batch

    @property
    def inputs(self) -> tuple[Operand, ...]:
        return (Operand("x", (self.batch, self.k), _F32), *_weights("", (self.batch,), self.n, self.k))

    @property
    def outputs(self) -> tuple[Operand, ...]:
        return (Operand("y", (self.batch, self.n), _F32),)

    def _dims(self) -> str:
        return f"batch={self.batch}, n={self.n}, k={self.k}"


@dataclasses.dataclass(frozen=True)
class ExpertProjection(ProjectionArtifact):
    """y[e] (m, n) = act(x[e] (m, k) @ w_hat_e (n, k).T); each expert's three weight operands are bindings."""

    experts: int
    m: int
    n: int
    k: int
    activation: str = "none"
    name: str = ""
    form: ClassVar[Form] = Form.EXPERTS

    def __post_init__(self) -> None:
        self._check()

    @property
    def count(self) -> int:
        return self.experts

    @property
    def inputs(self) -> tuple[Operand, ...]:
        weights = [op for e in range(self.experts) for op in _weights(f"expert{e}.", (), self.n, self.k)]
        return (Operand("x", (self.experts, self.m, self.k), _F32), *weights)

    @property
    def outputs(self) -> tuple[Operand, ...]:
        return (Operand("y", (self.experts, self.m, self.n), _F32),)

    def _dims(self) -> str:
        return f"experts={self.experts}, m={self.m}, n={self.n}, k={self.k}"


def from_bytes(data: bytes | bytearray | memoryview) -> ProjectionArtifact:
    """The projection a serialized header describes, ours (NVF4, :mod:`.format`) or upstream's (VKNVFP4
    or VKNVMOE, :mod:`.upstream`), told by its magic (validated as hostile input)."""
    from . import upstream
    from .format import read

    return upstream.read(data) if upstream.recognises(data) else read(data)
