"""What a lowering produces and the helpers lowerings of several groups share.

A lowering turns one TOSA operator into :class:`Dispatch` and :class:`~ironaccel.tosa.arena.Copy` steps
over :class:`~ironaccel.tosa.arena.Place`\\ s (byte ranges of the program's arena or constants buffer;
RESHAPE and IDENTITY are :func:`~ironaccel.tosa.arena.view_or_copy`). Steps name the ranges they read and
write, which is all the planner needs to place barriers. Descriptor bindings are a dispatch's reads, in
order, then its writes: every shader declares its buffers in that order.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from ....core.errors import InternalError, ResourceLimit
from ....tosa.arena import Copy, Place, view_or_copy
from ....tosa.attributes import NanPropagationMode
from ....tosa.capability import Constraint, zero_zero_points
from ....tosa.dtypes import DType
from ....tosa.ir import Operator, Tensor
from ....tosa.strides import broadcast_strides, coalesce, contiguous_strides

MAX_RANK = 6  # the kernels' push constants hold six dimensions (TOSA level 8K's rank limit)
WORKGROUP = 64  # invocations per workgroup of the elementwise kernels (specialization constant 0)
# Bytes per element as the kernels address them (numpy's storage): BOOL and INT8 bytes, INT16 and FP16
# halves (data movement treats an fp16 or bf16 as its 16 bits, an fp8 as its byte). INT4 is held one value
# per byte, as the runtime's arrays hold it (DType.INT4.numpy), not packed as in a .tosa constant.
ELEMENT_BYTES = {
    DType.BOOL: 1,
    DType.INT4: 1,
    DType.INT8: 1,
    DType.INT16: 2,
    DType.FP16: 2,
    DType.BF16: 2,
    DType.FP8E4M3: 1,
    DType.FP8E5M2: 1,
    DType.INT32: 4,
    DType.FP32: 4,
}


@dataclasses.dataclass(frozen=True)
class Dispatch:
    shader: str
    spec: tuple[int, ...]  # specialization constants 0, 1, ... (uint32 each)
    reads: tuple[Place, ...]
    writes: tuple[Place, ...]
    push: bytes
    groups: tuple[int, int, int]

    @property
    def bindings(self) -> tuple[Place, ...]:
        return (*self.reads, *self.writes)


Step = Dispatch | Copy


class LoweringContext(Protocol):
    operator: Operator
    inputs: tuple[Tensor, ...]  # declarations, specification order
    outputs: tuple[Tensor, ...]
    max_groups: tuple[int, int, int]
    max_loop_iterations: int | None  # per invocation, where the driver caps them (see device.Limits)
    max_shared_memory: int  # bytes of shared memory a workgroup may use
    # Cooperative-matrix configurations the device offers (subgroup scope), as "fp16:16x16x16:fp32"
    # (ops.matmul.COOP_FP16).
    matrix_tiles: frozenset[str]

    def place(self, tensor: Tensor) -> Place:
        """Where ``tensor`` lives (constants are uploaded on first request)."""
        ...

    def constant(self, index: int) -> np.ndarray | None:
        """Operand ``index``'s value when it is a program constant (a host-side parameter)."""
        ...

    def scratch(self, size: int) -> Place:
        """``size`` arena bytes for this operator's steps alone (reused by later operators)."""
        ...

    def constant_place(self, key: str, data: np.ndarray) -> Place:
        """``data`` uploaded once at load into the constants buffer (``key`` names it)."""
        ...


Lowering = Callable[[LoweringContext], list[Step]]

# The float kernels read no zero points: their registrations take constant zeros only (the integer forms
# of the same operators read any, so the rule is scoped to the float signatures).
FLOAT_ZERO_POINTS = Constraint("zero zero-points for float operands", zero_zero_points().check)


def nan_mode(ctx: LoweringContext) -> int:
    """The operator's NaN mode as the kernels take it: 1 propagate (also for UNKNOWN), 2 ignore."""
    mode = getattr(ctx.operator.attribute, "nan_mode", NanPropagationMode.PROPAGATE)
    return 2 if mode == NanPropagationMode.IGNORE else 1


def pad(values: Sequence[int]) -> list[int]:
    if len(values) > MAX_RANK:
        raise InternalError(f"{len(values)} dimensions after coalescing; the kernels take {MAX_RANK}")
    return [*values, *([0] * (MAX_RANK - len(values)))]


def groups(count: int, ctx: LoweringContext) -> tuple[int, int, int]:
    """Workgroups for ``count`` invocations; the kernels loop (grid stride) past the device's limit."""
    return (max(1, min(-(-count // WORKGROUP), ctx.max_groups[0])), 1, 1)


def word_groups(count: int, element_bytes: int, ctx: LoweringContext) -> tuple[int, int, int]:
    """Workgroups for a kernel that writes whole 32-bit words: one invocation per word of ``count``
    elements of ``element_bytes`` each."""
    per_word = 4 // element_bytes
    return groups(-(-count // per_word), ctx)


def element_bytes(tensor: Tensor) -> int:
    found = ELEMENT_BYTES.get(tensor.dtype)
    if found is None:  # admission lists only these types
        raise InternalError(f"no Vulkan kernel moves {tensor.dtype} elements ({tensor.name!r})")
    return found


def words(*values: int) -> bytes:
    """Push constants: 32-bit words, each an unsigned value or a negative one in two's complement."""
    return struct.pack(f"<{len(values)}I", *(v & 0xFFFFFFFF for v in values))


def indexed_push(out_shape: Sequence[int], in_shapes: Sequence[Sequence[int]]) -> tuple[int, bytes]:
    """(element count, push constants) of a broadcasting kernel: n, rank, shape[6], one stride[6] per
    input. Rank 0 tells the kernel every input has the output's shape."""
    n = int(np.prod(out_shape, dtype=np.int64)) if out_shape else 1
    dims: Sequence[int]
    strides: Sequence[Sequence[int]]
    if all(tuple(s) == tuple(out_shape) for s in in_shapes):
        dims, strides = [], [[] for _ in in_shapes]
    else:
        dims, strides = coalesce(out_shape, [broadcast_strides(s, out_shape) for s in in_shapes])
        if not dims:  # everything is one element
            dims, strides = [1], [[0] for _ in in_shapes]
    words = [n, len(dims), *pad(dims)]
    for s in strides:
        words += pad(s)
    return n, struct.pack(f"<{len(words)}I", *words)


def check_loops(ctx: LoweringContext, iterations: int) -> None:
    """ResourceLimit when one invocation would loop ``iterations`` times past the driver's cap."""
    limit = ctx.max_loop_iterations
    if limit is not None and iterations > limit:
        raise ResourceLimit(
            f"{ctx.operator.op.name} over {ctx.inputs[0].shape} would loop {iterations} times in one invocation; "
            f"this driver stops every invocation after {limit} loop iterations"
        )


__all__ = [
    "ELEMENT_BYTES",
    "FLOAT_ZERO_POINTS",
    "MAX_RANK",
    "WORKGROUP",
    "Copy",
    "Dispatch",
    "Lowering",
    "LoweringContext",
    "Place",
    "Step",
    "check_loops",
    "contiguous_strides",
    "element_bytes",
    "groups",
    "indexed_push",
    "nan_mode",
    "pad",
    "view_or_copy",
    "word_groups",
    "words",
]
