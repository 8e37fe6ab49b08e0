"""What a lowering produces, and what lowerings of several groups share.

A lowering turns one TOSA operator into steps over :class:`~ironaccel.tosa.arena.Place`\\ s (byte ranges of
the program's arena or constants): a :class:`Launch` of a kernel, or a :class:`~ironaccel.tosa.arena.Copy`
(RESHAPE and IDENTITY's, :func:`~ironaccel.tosa.arena.view_or_copy`). Steps are plain data: the planner
(``..plan``) lays them out without the driver, and ``..program`` resolves places to device addresses at
load, packing each launch's argument block once (:func:`pack`).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from ....core.errors import InternalError
from ....tosa.arena import Copy, Place, view_or_copy
from ....tosa.dtypes import DType
from ....tosa.ir import Operator, Tensor
from ....tosa.strides import broadcast_strides, coalesce
from ..prelude import ARG_WORDS, MAX_OPERANDS, MAX_RANK, SCALARS

BLOCK = 256  # threads per block of the elementwise kernels
MAX_BLOCKS = 1 << 20  # a grid-stride loop covers what lies past this many blocks


@dataclasses.dataclass(frozen=True)
class Elementwise:
    """What a kernel of the elementwise template (:mod:`.elementwise`) computes, so that a plan pass can
    compose kernels: the C ``expression`` over ``x0``, ``x1``... (operand ``k`` read as ``inputs[k]`` and
    converted to its compute type) and the argument block's ``a.scalars[n]`` only, stored as ``output``;
    ``body`` holds statements evaluated before it (the temporaries of a fused kernel)."""

    inputs: tuple[DType, ...]
    output: DType
    expression: str
    body: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One kernel: the entry point ``name`` of the CUDA C translation unit ``source``. Kernels are
    specialised by operator and types in their text, so equal sources are one compiled module.
    ``elementwise`` describes a pure per-element kernel (None for any other); ``per_thread`` is how many
    consecutive results a thread computes per step of its grid-stride loop."""

    name: str
    source: str
    elementwise: Elementwise | None = None
    per_thread: int = 1


@dataclasses.dataclass(frozen=True)
class Launch:
    """One elementwise kernel over ``count`` result elements: ``reads`` are its operands, ``write`` its
    result; ``dims`` the result's (coalesced) extents and ``strides`` each operand's element strides over
    them; ``scalars`` the argument block's scalar words."""

    kernel: Kernel
    reads: tuple[Place, ...]
    write: Place
    count: int
    dims: tuple[int, ...]
    strides: tuple[tuple[int, ...], ...]
    scalars: tuple[int, ...] = ()

    @property
    def writes(self) -> tuple[Place, ...]:
        return (self.write,)

    @property
    def grid(self) -> int:
        return max(1, min(-(-self.count // (BLOCK * self.kernel.per_thread)), MAX_BLOCKS))


@dataclasses.dataclass(frozen=True)
class Gemm:
    """One library matrix product ``out[batch, m, n] = a[batch, m, k] b[batch, k, n]`` (all row-major; with
    ``b_transposed``, ``b`` holds ``[batch, n, k]``), run by cuBLASLt (``..blas``) over the operand and
    result types ``operands`` / ``result``."""

    a: Place
    b: Place
    out: Place
    batch: int
    m: int
    n: int
    k: int
    operands: DType
    result: DType
    b_transposed: bool = False

    @property
    def reads(self) -> tuple[Place, ...]:
        return (self.a, self.b)

    @property
    def writes(self) -> tuple[Place, ...]:
        return (self.out,)


Step = Launch | Copy | Gemm


class LoweringContext(Protocol):
    """What a lowering sees of its operator and the program around it."""

    operator: Operator
    inputs: tuple[Tensor, ...]  # declarations, in the specification's order
    outputs: tuple[Tensor, ...]
    native_fp8: bool  # whether the device's cuBLASLt multiplies fp8 operands (compute capability 8.9 and up)

    def place(self, tensor: Tensor) -> Place:
        """Where ``tensor`` lives (a constant is uploaded when first asked for)."""
        ...

    def constant(self, index: int) -> np.ndarray | None:
        """Operand ``index``'s value when it is a program constant (a host-side parameter)."""
        ...

    def upload(self, key: str, data: np.ndarray) -> Place:
        """A constant the lowering made (a transposed weight, a vector of ones) uploaded once at load
        under ``key`` (equal keys are one constant)."""
        ...

    def scratch(self, size: int) -> Place:
        """``size`` bytes of device memory of the program's own, for this operator's steps only (what a
        lowering stages between its steps: a transposed operand, partial sums)."""
        ...


Lowering = Callable[[LoweringContext], list[Step]]


def elementwise_launch(
    ctx: LoweringContext, kernel: Kernel, operands: Sequence[Tensor], scalars: Sequence[int] = ()
) -> list[Step]:
    """The launch of ``kernel`` computing ``ctx``'s one result from ``operands`` (broadcast to it)."""
    out = ctx.outputs[0]
    count = int(np.prod(out.shape, dtype=np.int64))
    if count == 0:
        return []
    dims, strides = coalesce(out.shape, [broadcast_strides(t.shape, out.shape) for t in operands])
    reads = tuple(ctx.place(t) for t in operands)
    return [Launch(kernel, reads, ctx.place(out), count, dims, strides, tuple(int(s) for s in scalars))]


_ARGS = struct.Struct(f"<{MAX_OPERANDS + 1}Q{ARG_WORDS - MAX_OPERANDS - 1}q")


def pack(launch: Launch, address: Callable[[Place], int]) -> bytes:
    """``launch``'s argument block (``IaArgs`` of :mod:`..prelude`), its places at ``address``."""
    rank = len(launch.dims)
    if len(launch.reads) > MAX_OPERANDS or rank > MAX_RANK or len(launch.scalars) > SCALARS:
        raise InternalError(f"{launch.kernel.name}: {len(launch.reads)} operands, rank {rank} exceed the kernels'")
    ins = [address(p) for p in launch.reads] + [0] * (MAX_OPERANDS - len(launch.reads))
    dims = list(launch.dims) + [1] * (MAX_RANK - rank)
    strides: list[int] = []
    for k in range(MAX_OPERANDS):
        own = list(launch.strides[k]) if k < len(launch.strides) else []
        strides += own + [0] * (MAX_RANK - len(own))
    scalars = list(launch.scalars) + [0] * (SCALARS - len(launch.scalars))
    return _ARGS.pack(*ins, address(launch.write), launch.count, rank, *dims, *strides, *scalars)


__all__ = [
    "BLOCK",
    "MAX_BLOCKS",
    "Copy",
    "Elementwise",
    "Gemm",
    "Kernel",
    "Launch",
    "Lowering",
    "LoweringContext",
    "Place",
    "Step",
    "coalesce",
    "elementwise_launch",
    "pack",
    "view_or_copy",
]
