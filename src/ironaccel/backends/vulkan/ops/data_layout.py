"""RESHAPE, TRANSPOSE, SLICE, PAD, TILE, REVERSE and CONCAT, for every type the backend stores: each
moves elements as bits (BOOL, the integer types and fp8 as bytes, fp16 and bf16 as halves, fp32 as words),
so every type is one registration of the same lowering.

RESHAPE moves no data when the planner made the result a view (the analysis's views share their source's
arena bytes; a reshaped constant shares the constant's bytes); otherwise, where a graph input or output
is involved, it is one buffer copy (:func:`.common.view_or_copy`, IDENTITY's lowering too).

TRANSPOSE, SLICE, PAD, TILE and REVERSE are one ``layout.comp`` dispatch each: every output element
finds its source through per-dimension extents, strides and offsets (or reads the pad value), after
dimensions that the operator leaves adjacent are merged. CONCAT is one ``concat.comp`` dispatch per
input, placing it into its slab of the output.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import numpy as np

from ....core.errors import InternalError
from ....tosa.operators import Op
from .common import (
    MAX_RANK,
    WORKGROUP,
    Dispatch,
    LoweringContext,
    Step,
    contiguous_strides,
    element_bytes,
    groups,
    pad,
    view_or_copy,
    word_groups,
    words,
)
from .registry import in_out, lowering

# Every type the backend stores: the layout kernels move each as its bits.
MOVED = in_out("fp32", "bool", "fp16", "bf16", "fp8e4m3", "fp8e5m2", "int8", "int16", "int32")


@lowering(Op.RESHAPE, signatures=MOVED)
def reshape(ctx: LoweringContext) -> list[Step]:
    return view_or_copy(ctx)


def _shape_operand(ctx: LoweringContext, index: int) -> list[int]:
    value = ctx.constant(index)
    if value is None:  # shape operands are compile-time constants (validation refuses others)
        raise InternalError(f"{ctx.operator.op.name}: operand {index} is not a constant shape")
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _layout(
    ctx: LoweringContext,
    extent: Sequence[int],
    stride: Sequence[int],
    lo: Sequence[int] = (),
    flip: Sequence[bool] = (),
    tile: bool = False,
    pad_bits: int = 0,
) -> list[Step]:
    """One ``layout.comp`` dispatch: per output dimension the source's extent and stride, the offset
    ``lo`` (source = output - lo) and whether it is reversed. Dimensions are merged where the source
    walks them as one (no offset, flip or tiling, full extent, contiguous strides)."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    n = out.size
    if n == 0:
        return []
    lo = list(lo) or [0] * out.rank
    flip = list(flip) or [False] * out.rank
    dims: list[list[int]] = []  # [shape, extent, stride, lo, flip]
    for d, size in enumerate(out.shape):
        plain = lo[d] == 0 and not flip[d] and extent[d] == size
        if size == 1 and plain:
            continue
        if dims and plain:
            prev = dims[-1]
            if prev[3] == 0 and not prev[4] and prev[0] == prev[1] and prev[2] == stride[d] * size:
                prev[0] *= size
                prev[1] *= size
                prev[2] = stride[d]
                continue
        dims.append([size, extent[d], stride[d], lo[d], int(flip[d])])
    if not dims:
        dims = [[1, 1, 0, 0, 0]]
    if len(dims) > MAX_RANK:
        raise InternalError(f"{len(dims)} dimensions after merging; the kernel takes {MAX_RANK}")
    es = element_bytes(x)
    cols = list(zip(*dims, strict=True))
    mask = sum(1 << d for d, f in enumerate(cols[4]) if f)
    push = words(n, len(dims), pad_bits, mask, *pad(cols[0]), *pad(cols[1]), *pad(cols[2]), *pad(cols[3]))
    spec = (WORKGROUP, es, int(tile))
    return [Dispatch("layout", spec, (ctx.place(x),), (ctx.place(out),), push, word_groups(n, es, ctx))]


@lowering(Op.TRANSPOSE, signatures=MOVED)
def transpose(ctx: LoweringContext) -> list[Step]:
    x = ctx.inputs[0]
    perms = ctx.operator.attribute.perms
    strides = contiguous_strides(x.shape)
    return _layout(ctx, [x.shape[p] for p in perms], [strides[p] for p in perms])


@lowering(Op.SLICE, signatures=MOVED)
def slice_(ctx: LoweringContext) -> list[Step]:
    x = ctx.inputs[0]
    start = _shape_operand(ctx, 1)
    return _layout(ctx, x.shape, contiguous_strides(x.shape), lo=[-s for s in start])


def _pad_bits(ctx: LoweringContext, index: int) -> int:
    value = ctx.constant(index)
    if value is None:
        raise InternalError("PAD: pad_const is not a constant")
    raw = np.ascontiguousarray(np.asarray(value).reshape(-1)[:1]).tobytes()
    return int.from_bytes(raw, "little") if raw else 0


@lowering(Op.PAD, signatures=MOVED)
def pad_(ctx: LoweringContext) -> list[Step]:
    x = ctx.inputs[0]
    padding = _shape_operand(ctx, 1)  # [before_0, after_0, before_1, ...]
    return _layout(ctx, x.shape, contiguous_strides(x.shape), lo=padding[0::2], pad_bits=_pad_bits(ctx, 2))


@lowering(Op.TILE, signatures=MOVED)
def tile(ctx: LoweringContext) -> list[Step]:
    x = ctx.inputs[0]
    return _layout(ctx, x.shape, contiguous_strides(x.shape), tile=True)


@lowering(Op.REVERSE, signatures=MOVED)
def reverse(ctx: LoweringContext) -> list[Step]:
    x = ctx.inputs[0]
    axis = ctx.operator.attribute.axis
    return _layout(ctx, x.shape, contiguous_strides(x.shape), flip=[d == axis for d in range(x.rank)])


@lowering(Op.CONCAT, signatures=MOVED)
def concat(ctx: LoweringContext) -> list[Step]:
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    axis = ctx.operator.attribute.axis
    inner = math.prod(out.shape[axis + 1 :])
    row = out.shape[axis] * inner
    es = element_bytes(out)
    steps: list[Step] = []
    offset = 0
    for x in ctx.inputs:
        chunk = x.shape[axis] * inner
        if x.size:
            push = struct.pack("<4I", x.size, chunk, row, offset)
            reads, writes = (ctx.place(x),), (ctx.place(out),)
            steps.append(Dispatch("concat", (WORKGROUP, es), reads, writes, push, groups(x.size, ctx)))
        offset += chunk
    return steps
