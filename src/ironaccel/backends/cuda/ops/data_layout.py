"""Data layout: RESHAPE, TRANSPOSE, SLICE, REVERSE, TILE, PAD and CONCAT, for every type TOSA 1.0 moves
(bool, int8, int16, int32, fp16, bf16, fp32, fp8e4m3, fp8e5m2).

These only move elements, so the kernels move bits: a type is handled as the integer of its width
(``ia_copy_b16`` serves int16, fp16 and bf16 alike, ``ia_copy_b8`` int8, bool and both fp8 formats),
which keeps every value exactly, NaN payloads included, and lets one compiled kernel serve several types.

* RESHAPE moves nothing when the planner made the result a view; otherwise, where a graph input or output
  is involved, it is one copy (:func:`.common.view_or_copy`).
* TRANSPOSE, SLICE and REVERSE are the elementwise copy with the operand's strides rearranged: TRANSPOSE
  permutes them, SLICE reads from a place narrowed to the window's first element, REVERSE negates the
  axis's stride and starts from its last element.
* TILE and PAD need a coordinate that the strides cannot give (a remainder, a test against the source's
  bounds): one layout kernel does both, per result dimension the source's extent and its offset in the
  result in the scalars (the pad value's bits after them).
* CONCAT is one launch per input, writing it through the result's strides into its slab of the result.

Shape operands (SLICE's start, PAD's padding, TILE's multiples) are read on the host at load; TILE's
multiples are implied by the shapes. PAD's value is read at load as well, so it must be a constant.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from ....core.errors import InternalError
from ....tosa.capability import constant_operand
from ....tosa.dtypes import DType
from ....tosa.ir import Tensor
from ....tosa.operators import Op
from ....tosa.strides import contiguous_strides
from ..prelude import MAX_RANK, PRELUDE
from .common import Kernel, Launch, LoweringContext, Place, Step, coalesce, view_or_copy
from .elementwise import ctype, kernel, kernel_name
from .registry import in_out, lowering

MOVED_TYPES = ("fp32", "fp16", "bf16", "fp8e4m3", "fp8e5m2", "int8", "int16", "int32", "bool")
MOVED = in_out(*MOVED_TYPES)
# The integer type each storage width moves as.
_AS_BITS = {1: DType.INT8, 2: DType.INT16, 4: DType.INT32, 8: DType.INT48}


def element_bytes(tensor: Tensor) -> int:
    """Bytes one element of ``tensor`` takes in device memory."""
    return np.dtype(tensor.dtype.numpy).itemsize


def bits_type(tensor: Tensor) -> DType:
    """The integer type ``tensor``'s elements move as."""
    found = _AS_BITS.get(element_bytes(tensor))
    if found is None:
        raise InternalError(f"no CUDA layout kernel moves {tensor.dtype}")
    return found


def width(bits: DType) -> int:
    """Bits of one element of ``bits``'s storage."""
    return 8 * np.dtype(bits.numpy).itemsize


def copy_kernel(tensor: Tensor) -> Kernel:
    """The elementwise copy of ``tensor``'s elements as bits."""
    bits = bits_type(tensor)
    return kernel(kernel_name("copy", f"b{width(bits)}"), (bits,), bits, "x0")


def shape_operand(ctx: LoweringContext, index: int) -> list[int]:
    """Shape operand ``index``'s values (shape operands are constants: validation refuses others)."""
    value = ctx.constant(index)
    if value is None:
        raise InternalError(f"{ctx.operator.op.name}: operand {index} is not a constant shape")
    return [int(v) for v in np.asarray(value).reshape(-1)]


def narrowed(place: Place, element_offset: int, size: int) -> Place:
    """The part of ``place`` starting ``element_offset`` elements of ``size`` bytes in."""
    return Place(place.buffer, place.offset + element_offset * size, place.size - element_offset * size)


def _strided_copy(ctx: LoweringContext, strides: Sequence[int], first: int = 0) -> list[Step]:
    """The result, in order, read from the operand at element ``first`` plus each coordinate times
    ``strides`` (one per result dimension)."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    dims, merged = coalesce(out.shape, [strides])
    read = narrowed(ctx.place(x), first, element_bytes(x))
    return [Launch(copy_kernel(x), (read,), ctx.place(out), out.size, dims, merged)]


@lowering(Op.RESHAPE, signatures=MOVED)
def reshape(ctx: LoweringContext) -> list[Step]:
    return view_or_copy(ctx)


@lowering(Op.TRANSPOSE, signatures=MOVED)
def transpose(ctx: LoweringContext) -> list[Step]:
    strides = contiguous_strides(ctx.inputs[0].shape)
    return _strided_copy(ctx, [strides[p] for p in ctx.operator.attribute.perms])


@lowering(Op.SLICE, signatures=MOVED)
def slice_(ctx: LoweringContext) -> list[Step]:
    strides = contiguous_strides(ctx.inputs[0].shape)
    start = shape_operand(ctx, 1)
    return _strided_copy(ctx, strides, sum(s * t for s, t in zip(start, strides, strict=True)))


@lowering(Op.REVERSE, signatures=MOVED)
def reverse(ctx: LoweringContext) -> list[Step]:
    x = ctx.inputs[0]
    axis = ctx.operator.attribute.axis
    strides = contiguous_strides(x.shape)
    last = (x.shape[axis] - 1) * strides[axis] if x.shape[axis] else 0
    strides[axis] = -strides[axis]
    return _strided_copy(ctx, strides, last)


# ---- TILE and PAD -----------------------------------------------------------------------------------------

# scalars: [0, 6) the source's extent per result dimension, [6, 12) the source's offset in the result,
# 12 the pad value's bits, 13 whether the source repeats along every dimension (TILE)
_LAYOUT = """\
extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {{
        long long rest = i;
        long long offset = 0;
        int inside = 1;
        for (int d = (int)a.rank - 1; d >= 0; --d) {{
            const long long extent = a.dims[d];
            const long long source = a.scalars[d];
            long long c = rest % extent - a.scalars[IA_MAX_RANK + d];
            rest /= extent;
            if (a.scalars[2 * IA_MAX_RANK + 1] != 0) c %= source;
            if (c < 0 || c >= source) inside = 0;
            offset += c * a.strides[0][d];
        }}
        (({t}*)a.out)[i] = inside ? ((const {t}*)a.in[0])[offset] : ({t})a.scalars[2 * IA_MAX_RANK];
    }}
}}
"""


@functools.cache
def _layout_kernel(bits: DType) -> Kernel:
    name = kernel_name("layout", f"b{width(bits)}")
    return Kernel(name, PRELUDE + "\n" + _LAYOUT.format(name=name, t=ctype(bits).storage))


def _layout(ctx: LoweringContext, lo: Sequence[int], pad_bits: int = 0, tile: bool = False) -> list[Step]:
    """The layout kernel's launch: result coordinate c reads the source at c - lo (modulo its extent when
    ``tile``), or is the pad value where that falls outside the source."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    rows: list[list[int]] = []  # per kept dimension: result extent, source extent, stride, offset
    for extent, source, stride, low in zip(out.shape, x.shape, contiguous_strides(x.shape), lo, strict=True):
        plain = low == 0 and source == extent
        if plain and extent == 1:
            continue
        if plain and rows and rows[-1][3] == 0 and rows[-1][0] == rows[-1][1] and rows[-1][2] == stride * extent:
            rows[-1] = [rows[-1][0] * extent, rows[-1][1] * extent, stride, 0]
            continue
        rows.append([extent, source, stride, low])
    if len(rows) > MAX_RANK:
        raise InternalError(f"{ctx.operator.op.name}: {len(rows)} dimensions; the kernels take {MAX_RANK}")
    fill = [0] * (MAX_RANK - len(rows))
    scalars = (*[r[1] for r in rows], *fill, *[r[3] for r in rows], *fill, pad_bits, int(tile))
    dims, strides = tuple(r[0] for r in rows), (tuple(r[2] for r in rows),)
    k = _layout_kernel(bits_type(x))
    return [Launch(k, (ctx.place(x),), ctx.place(out), out.size, dims, strides, scalars)]


@lowering(Op.TILE, signatures=MOVED)
def tile(ctx: LoweringContext) -> list[Step]:
    return _layout(ctx, [0] * ctx.inputs[0].rank, tile=True)


def pad_bits(ctx: LoweringContext, index: int) -> int:
    """The first element of constant operand ``index`` as the signed integer of its bits."""
    value = ctx.constant(index)
    if value is None:
        raise InternalError(f"{ctx.operator.op.name}: operand {index} is not a constant")
    size = element_bytes(ctx.inputs[index])
    raw = np.ascontiguousarray(np.asarray(value).reshape(-1)[:1]).tobytes()[:size]
    return int.from_bytes(raw, "little", signed=True) if raw else 0


@lowering(Op.PAD, signatures=MOVED, constraints=(constant_operand(2, "PAD value"),))
def pad(ctx: LoweringContext) -> list[Step]:
    padding = shape_operand(ctx, 1)  # before_0, after_0, before_1, ...
    return _layout(ctx, padding[0::2], pad_bits(ctx, 2))


# ---- CONCAT -----------------------------------------------------------------------------------------------

_PLACE = """\
extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {{
        (({t}*)a.out)[ia_offset(a, 1, i)] = ((const {t}*)a.in[0])[ia_offset(a, 0, i)];
    }}
}}
"""


@functools.cache
def _place_kernel(bits: DType) -> Kernel:
    """Operand 0 in order, written where the strides of operand 1 (which is not read) put each element."""
    name = kernel_name("place", f"b{width(bits)}")
    return Kernel(name, PRELUDE + "\n" + _PLACE.format(name=name, t=ctype(bits).storage))


@lowering(Op.CONCAT, signatures=MOVED)
def concat(ctx: LoweringContext) -> list[Step]:
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    axis = ctx.operator.attribute.axis
    size = element_bytes(out)
    written = contiguous_strides(out.shape)
    steps: list[Step] = []
    start = 0  # the slab's first element in the result
    for x in ctx.inputs:
        if x.size:
            dims, strides = coalesce(x.shape, [contiguous_strides(x.shape), written])
            write = narrowed(ctx.place(out), start, size)
            steps.append(Launch(_place_kernel(bits_type(x)), (ctx.place(x),), write, x.size, dims, strides))
        start += x.shape[axis] * written[axis]
    return steps
