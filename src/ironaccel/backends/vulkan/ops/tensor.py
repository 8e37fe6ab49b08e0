"""The tensor operators on fp32: CONV2D, CONV3D, TRANSPOSE_CONV2D, DEPTHWISE_CONV2D, AVG_POOL2D,
MAX_POOL2D and ARGMAX (zero points are constant zeros; admission checks it). MATMUL has its own module
(:mod:`.matmul`); the integer forms are in :mod:`.integer_tensor`, except the convolutions' choice of
``conv_int.comp``, which shares everything but the kernel with the fp32 one.
* CONV2D / CONV3D / TRANSPOSE_CONV2D: ``conv.comp``, an implicit GEMM (output positions x output
  channels, reduced over kernel taps x input channels) in shared-memory tiles of 64 x 64, 64 x 16 or
  16 x 16 outputs, the widths chosen by the channel count and the number of positions; see the shader
  and ADR 0008.
* DEPTHWISE_CONV2D: ``depthwise.comp``, one invocation per output (a tap count of products each:
  nothing to share between invocations that would pay for staging).
* Pools: ``pool.comp``. ARGMAX is lowered with the reductions (:mod:`.reduction`), whose kernel it shares.
"""

from __future__ import annotations

import math

from ....core.errors import ResourceLimit
from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, groups, nan_mode, words
from .integer_tensor import INTEGER_TYPES


def _tiles(rows: int, channels: int) -> tuple[int, int]:
    """Outputs per invocation (TM along positions, TN along channels): 4 where there is enough work
    for a 64-wide tile, else 1 (a 16-wide tile), so narrow layers waste no lanes on padding."""
    tn = 4 if channels > 32 else (2 if channels > 16 else 1)
    tm = 4 if rows >= 256 else (2 if rows > 16 else 1)
    return tm, tn


def _conv_steps(ctx: LoweringContext, mode: int, spatial: tuple, kernel: tuple, conv: tuple) -> list[Step]:
    """``spatial`` (ID, IH, IW, OD, OH, OW), ``kernel`` (KH, KW), ``conv`` (strides, dilations and
    leading pads, three each)."""
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    n, oc, ic = x.shape[0], out.shape[-1], x.shape[-1]
    od, oh, ow = spatial[3:]
    rows = n * od * oh * ow
    k = math.prod(w.shape[1:])
    tm, tn = _tiles(rows, oc)
    gx = -(-oc // (16 * tn))
    gy = min(-(-rows // (16 * tm)), ctx.max_groups[1])
    if gx > ctx.max_groups[0]:
        raise ResourceLimit(f"{ctx.operator.op.name} with {oc} output channels needs {gx} workgroups across")
    push = words(rows, k, oc, ic, *spatial, *kernel, *conv, int(bias.shape[0] == 1 and oc != 1))
    if x.dtype in INTEGER_TYPES:  # int8 x int8 -> int32 with the zero points (operands 3 and 4)
        reads = tuple(ctx.place(t) for t in ctx.inputs[:5])
        return [Dispatch("conv_int", (mode, tm, tn, element_bytes(x)), reads, (ctx.place(out),), push, (gx, gy, 1))]
    reads = (ctx.place(x), ctx.place(w), ctx.place(bias))
    return [Dispatch("conv", (mode, tm, tn), reads, (ctx.place(out),), push, (gx, gy, 1))]


@lowering(Op.CONV2D)
def conv2d(ctx: LoweringContext) -> list[Step]:
    attr = ctx.operator.attribute
    (_, ih, iw, _), (_, oh, ow, _) = ctx.inputs[0].shape, ctx.outputs[0].shape
    _, kh, kw, _ = ctx.inputs[1].shape
    (sy, sx), (dy, dx) = attr.stride, attr.dilation
    top, _, left, _ = attr.pad
    return _conv_steps(ctx, 0, (1, ih, iw, 1, oh, ow), (kh, kw), (1, sy, sx, 1, dy, dx, 0, top, left))


@lowering(Op.CONV3D)
def conv3d(ctx: LoweringContext) -> list[Step]:
    attr = ctx.operator.attribute
    (_, id_, ih, iw, _), (_, od, oh, ow, _) = ctx.inputs[0].shape, ctx.outputs[0].shape
    _, _, kh, kw, _ = ctx.inputs[1].shape
    front, _, top, _, left, _ = attr.pad
    return _conv_steps(ctx, 0, (id_, ih, iw, od, oh, ow), (kh, kw), (*attr.stride, *attr.dilation, front, top, left))


@lowering(Op.TRANSPOSE_CONV2D)
def transpose_conv2d(ctx: LoweringContext) -> list[Step]:
    attr = ctx.operator.attribute
    (_, ih, iw, _), (_, oh, ow, _) = ctx.inputs[0].shape, ctx.outputs[0].shape
    _, kh, kw, _ = ctx.inputs[1].shape
    sy, sx = attr.stride
    top, _, left, _ = attr.out_pad
    return _conv_steps(ctx, 1, (1, ih, iw, 1, oh, ow), (kh, kw), (1, sy, sx, 1, 1, 1, 0, top, left))


@lowering(Op.DEPTHWISE_CONV2D)
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
    reads = (ctx.place(x), ctx.place(w), ctx.place(bias))
    return [Dispatch("depthwise", (WORKGROUP,), reads, (ctx.place(out),), push, groups(out.size, ctx))]


@lowering(Op.AVG_POOL2D, Op.MAX_POOL2D)
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
    spec = (WORKGROUP, int(is_max), nan_mode(ctx) if is_max else 1)
    return [Dispatch("pool", spec, (ctx.place(x),), (ctx.place(out),), push, groups(out.size, ctx))]
