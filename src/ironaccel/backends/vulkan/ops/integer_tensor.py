"""The tensor and reduction operators on integers (the integer tier).

* CONV2D, CONV3D and TRANSPOSE_CONV2D, int8 x int8 -> int32 with zero points: ``conv_int.comp``,
  chosen in :mod:`.tensor` (the integer twin of the fp32 implicit GEMM, same tiling).
* DEPTHWISE_CONV2D and MATMUL of int8 with zero points: ``depthwise_int.comp``, ``matmul_int.comp``,
  one invocation per output; MATMUL on int8 cooperative matrices (``matmul_int_coop.comp``) where
  the device lists them.
* AVG_POOL2D (with zero points and TOSA's integer division by the count) and MAX_POOL2D of int8 /
  int16: ``pool_int.comp``; REDUCE_SUM (int32), REDUCE_MAX / MIN and ARGMAX of int8 / int16 / int32:
  ``reduce_int.comp``, each axis walked in order.
* Comparisons, MAXIMUM and MINIMUM of int32: ``integer.comp`` (:mod:`.elementwise_binary`).
 Sums are int32 with wrap-around: TOSA REQUIREs the int32
accumulator not to overflow, and the low 32 bits of a sum do not depend on its order, so results are
the CPU backend's exact sums narrowed to int32, bit for bit. Zero points are read by the kernels from
their tensors.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from ....core.errors import ResourceLimit
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import WORKGROUP, Dispatch, LoweringContext, Place, Step, element_bytes, groups, word_groups, words
from .elementwise_binary import integer_steps

INTEGER_TYPES = frozenset({DType.INT8, DType.INT16, DType.INT32})
COOP_INT8 = "int8:16x16x32:int32"  # the cooperative-matrix configuration matmul_int_coop.comp is written for
COOP_TILE = (128, 128)  # rows and columns of output per matmul_int_coop.comp workgroup


def matmul(ctx: LoweringContext) -> list[Step]:
    """``matmul_int_coop.comp`` where the device has int8 cooperative matrices, the rows of both
    operands are whole 16-byte words and the zero points are constants; else ``matmul_int.comp``,
    one invocation per output walking C."""
    a, b, a_zp, b_zp = ctx.inputs
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    n, h, c = a.shape
    w = b.shape[2]
    zps = ctx.constant(2), ctx.constant(3)
    if COOP_INT8 in ctx.matrix_tiles and c % 16 == 0 and w % 16 == 0 and all(z is not None for z in zps):
        za, zb = (int(np.asarray(z).reshape(-1)[0]) for z in zps)
        return _coop(ctx, n, h, c, w, (ctx.place(a), ctx.place(b)), ctx.place(out), za, zb)
    reads = tuple(ctx.place(t) for t in (a, b, a_zp, b_zp))
    limit = ctx.max_loop_iterations
    if limit is None or c * -(-out.size // (groups(out.size, ctx)[0] * WORKGROUP)) <= limit:
        push = words(out.size, h, c, w, c, 1)
        return [Dispatch("matmul_int", (WORKGROUP,), reads, (ctx.place(out),), push, groups(out.size, ctx))]
    # Split-k under a driver's loop cap: slices of at most half the cap, their int32 sums added after
    # (wrapping addition is associative, so the result is the same exact sum narrowed to int32).
    length = limit // 2
    slices = -(-c // length)
    count = out.size * slices
    _check_loops(ctx, length * -(-count // (groups(count, ctx)[0] * WORKGROUP)))
    partial = ctx.scratch(4 * count)
    reduce_grid = word_groups(out.size, 4, ctx)
    _check_loops(ctx, slices * -(-out.size // (reduce_grid[0] * WORKGROUP)))
    return [
        Dispatch(
            "matmul_int", (WORKGROUP,), reads, (partial,), words(out.size, h, c, w, length, slices), groups(count, ctx)
        ),
        Dispatch(
            "reduce_int",
            (WORKGROUP, REDUCE_OPCODES[Op.REDUCE_SUM], 4),
            (partial,),
            (ctx.place(out),),
            struct.pack("<3I", 1, slices, out.size),
            reduce_grid,
        ),
    ]


def _coop(
    ctx: LoweringContext, n: int, h: int, c: int, w: int, reads: tuple[Place, Place], target: Place, za: int, zb: int
) -> list[Step]:
    rows, cols = COOP_TILE
    gx, gy = -(-w // cols), -(-h // rows)
    limit_x, limit_y, limit_z = ctx.max_groups
    if gx > limit_x or gy > limit_y:
        raise ResourceLimit(f"MATMUL output {h}x{w} needs {gy}x{gx} tiles; the device dispatches {limit_y}x{limit_x}")
    steps: list[Step] = []
    for base in range(0, n, limit_z):
        push = struct.pack("<4I2i", base, h, c, w, za, zb)
        steps.append(Dispatch("matmul_int_coop", (), reads, (target,), push, (gx, gy, min(limit_z, n - base))))
    return steps


def depthwise_conv2d(ctx: LoweringContext) -> list[Step]:
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    attr = ctx.operator.attribute
    _, ih, iw, c = x.shape
    kh, kw, _, m = w.shape
    _, oh, ow, oc = out.shape
    top, _, left, _ = attr.pad
    push = words(out.size, ih, iw, c, m, oh, ow, kh, kw, *attr.stride, *attr.dilation, top, left)
    push += words(int(bias.shape[0] == 1 and oc != 1))
    reads = tuple(ctx.place(t) for t in ctx.inputs[:5])
    return [Dispatch("depthwise_int", (WORKGROUP,), reads, (ctx.place(out),), push, groups(out.size, ctx))]


def pool2d(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    attr = ctx.operator.attribute
    _, ih, iw, c = x.shape
    _, oh, ow, _ = out.shape
    top, _, left, _ = attr.pad
    push = words(out.size, ih, iw, c, oh, ow, *attr.kernel, *attr.stride, top, left)
    is_max = ctx.operator.op is Op.MAX_POOL2D
    es = element_bytes(x)
    zps = (x, x) if is_max else (ctx.inputs[1], ctx.inputs[2])
    reads = (ctx.place(x), *(ctx.place(t) for t in zps))
    spec = (WORKGROUP, int(is_max), es)
    return [Dispatch("pool_int", spec, reads, (ctx.place(out),), push, word_groups(out.size, es, ctx))]


REDUCE_OPCODES = {Op.REDUCE_SUM: 0, Op.REDUCE_MAX: 1, Op.REDUCE_MIN: 2, Op.ARGMAX: 4}


def reduce(ctx: LoweringContext) -> list[Step]:
    """``reduce_int.comp``: one invocation per output word, walking the axis in order. Where a driver's
    loop cap is shorter than the axis, SUM / MAX / MIN (associative, exact) are cut into S equal
    slices: a first pass reduces each slice into operator scratch, a second the S partial results."""
    shape, axis = ctx.inputs[0].shape, ctx.operator.attribute.axis
    outer, length, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
    out = ctx.outputs[0]
    if outer * inner == 0:
        return []
    src, dst = ctx.place(ctx.inputs[0]), ctx.place(out)
    es_in, es_out = element_bytes(ctx.inputs[0]), element_bytes(out)
    limit = ctx.max_loop_iterations
    slices = 1
    if limit is not None and ctx.operator.op is not Op.ARGMAX and length * min(4 // es_out, outer * inner) > limit:
        slices = next((k for k in range(2, limit + 1) if length % k == 0 and length // k * 4 <= limit), 1)
    if slices == 1:
        return [_reduce_pass(ctx, src, dst, (outer, length, inner), es_in, es_out)]
    partial = ctx.scratch(outer * slices * inner * es_in)
    return [
        _reduce_pass(ctx, src, partial, (outer * slices, length // slices, inner), es_in, es_in),
        _reduce_pass(ctx, partial, dst, (outer, slices, inner), es_in, es_out),
    ]


def _reduce_pass(ctx: LoweringContext, src, dst, view: tuple[int, int, int], es_in: int, es_out: int) -> Dispatch:
    outer, length, inner = view
    grid = word_groups(outer * inner, es_out, ctx)
    per_word = 4 // es_out
    per_invocation = -(-(outer * inner) // (per_word * grid[0] * WORKGROUP))  # output words
    _check_loops(ctx, max(length, 1) * min(per_word, outer * inner) * per_invocation)
    spec = (WORKGROUP, REDUCE_OPCODES[ctx.operator.op], es_in)
    return Dispatch("reduce_int", spec, (src,), (dst,), struct.pack("<3I", outer, length, inner), grid)


def _check_loops(ctx: LoweringContext, iterations: int) -> None:
    limit = ctx.max_loop_iterations
    if limit is not None and iterations > limit:
        raise ResourceLimit(
            f"{ctx.operator.op.name} over {ctx.inputs[0].shape} would loop {iterations} times in one invocation; "
            f"this driver stops every invocation after {limit} loop iterations"
        )


def binary(ctx: LoweringContext) -> list[Step]:
    return integer_steps(ctx)
