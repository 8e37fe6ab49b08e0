"""The tensor operators, every form side by side: CONV2D, CONV3D, TRANSPOSE_CONV2D, DEPTHWISE_CONV2D,
AVG_POOL2D, MAX_POOL2D, ARGMAX and MATMUL, each in fp32 (fp16, bf16 and fp8 widened to it) and int8 / int16
(zero points of any value; the float forms take constant zeros); the convolutions also with int4 weights.

* CONV2D / CONV3D / TRANSPOSE_CONV2D: ``conv.comp`` and its integer twin ``conv_int.comp`` (int8 x int8 ->
  int32 with the zero points), an implicit GEMM (output positions x output channels, reduced over kernel
  taps x input channels) in shared-memory tiles of 64 x 64, 64 x 16 or 16 x 16 outputs, the widths chosen
  by the channel count and the number of positions; see the shader and ADR 0008. Each operator's geometry
  is worked out once (:func:`_conv_geometry`); only the kernel differs between the forms.
* DEPTHWISE_CONV2D: ``depthwise.comp`` / ``depthwise_int.comp``, one invocation per output (a tap count of
  products each: nothing to share between invocations that would pay for staging).
* Pools: ``pool.comp`` / ``pool_int.comp`` (AVG_POOL2D with zero points and TOSA's integer division by
  the count). ARGMAX runs on the reductions' kernels (:mod:`.reduction`).
* MATMUL: the kernels of :mod:`.matmul`.
"""

from __future__ import annotations

import math

from ....core.errors import ResourceLimit
from ....tosa.capability import Signature
from ....tosa.operators import Op
from . import matmul as mm
from .common import (
    FLOAT_ZERO_POINTS,
    WORKGROUP,
    Dispatch,
    LoweringContext,
    Step,
    element_bytes,
    groups,
    nan_mode,
    word_groups,
    words,
)
from .reduction import reduce, reduce_integer
from .registry import in_out, lowering

CONVOLUTIONS = (Op.CONV2D, Op.CONV3D, Op.TRANSPOSE_CONV2D, Op.DEPTHWISE_CONV2D)
FP8 = ("fp8e4m3", "fp8e5m2")


def _conv(t: str, out: str, acc: str) -> Signature:
    return Signature.of(in_t=t, weight_t=t, out_t=out, acc_t=acc)


FLOAT_CONV = (_conv("fp32", "fp32", "fp32"),)
WIDENED_CONV = (
    *(_conv("fp16", "fp16", acc) for acc in ("fp16", "fp32")),
    _conv("bf16", "bf16", "fp32"),
    *(_conv(t, "fp16", "fp16") for t in FP8),
)
INT8_CONV = (
    Signature.of(in_t="int8", weight_t="int8", out_t="int32", acc_t="int32"),
    # int4 weights (EXT-INT4) are held one value per byte, as int8 (DType.INT4.numpy): the int8 kernels read them
    Signature.of(in_t="int8", weight_t="int4", out_t="int32", acc_t="int32"),
)


def _tiles(rows: int, channels: int) -> tuple[int, int]:
    """Outputs per invocation (TM along positions, TN along channels): 4 where there is enough work
    for a 64-wide tile, else 1 (a 16-wide tile), so narrow layers waste no lanes on padding."""
    tn = 4 if channels > 32 else (2 if channels > 16 else 1)
    tm = 4 if rows >= 256 else (2 if rows > 16 else 1)
    return tm, tn


def _conv_geometry(ctx: LoweringContext) -> tuple[int, tuple, tuple, tuple]:
    """(mode, spatial (ID, IH, IW, OD, OH, OW), kernel (KH, KW), conv (strides, dilations and leading pads,
    three each)) of CONV2D, CONV3D or TRANSPOSE_CONV2D (mode 1)."""
    attr, op = ctx.operator.attribute, ctx.operator.op
    if op is Op.CONV3D:
        (_, id_, ih, iw, _), (_, od, oh, ow, _) = ctx.inputs[0].shape, ctx.outputs[0].shape
        _, _, kh, kw, _ = ctx.inputs[1].shape
        front, _, top, _, left, _ = attr.pad
        return 0, (id_, ih, iw, od, oh, ow), (kh, kw), (*attr.stride, *attr.dilation, front, top, left)
    (_, ih, iw, _), (_, oh, ow, _) = ctx.inputs[0].shape, ctx.outputs[0].shape
    _, kh, kw, _ = ctx.inputs[1].shape
    sy, sx = attr.stride
    if op is Op.TRANSPOSE_CONV2D:
        top, _, left, _ = attr.out_pad
        return 1, (1, ih, iw, 1, oh, ow), (kh, kw), (1, sy, sx, 1, 1, 1, 0, top, left)
    dy, dx = attr.dilation
    top, _, left, _ = attr.pad
    return 0, (1, ih, iw, 1, oh, ow), (kh, kw), (1, sy, sx, 1, dy, dx, 0, top, left)


def _conv_steps(ctx: LoweringContext, integer: bool) -> list[Step]:
    """One ``conv.comp`` dispatch, or ``conv_int.comp`` (``integer``: int8 with the zero points, operands
    3 and 4, and the element size as a fourth specialization constant)."""
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    mode, spatial, kernel, conv = _conv_geometry(ctx)
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
    if integer:
        reads = tuple(ctx.place(t) for t in ctx.inputs[:5])
        return [Dispatch("conv_int", (mode, tm, tn, element_bytes(x)), reads, (ctx.place(out),), push, (gx, gy, 1))]
    reads = (ctx.place(x), ctx.place(w), ctx.place(bias))
    return [Dispatch("conv", (mode, tm, tn), reads, (ctx.place(out),), push, (gx, gy, 1))]


def _depthwise_steps(ctx: LoweringContext, integer: bool) -> list[Step]:
    """One ``depthwise.comp`` dispatch, or ``depthwise_int.comp`` reading the zero points too."""
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
    if integer:
        reads = tuple(ctx.place(t) for t in ctx.inputs[:5])
        return [Dispatch("depthwise_int", (WORKGROUP,), reads, (ctx.place(out),), push, groups(out.size, ctx))]
    reads = (ctx.place(x), ctx.place(w), ctx.place(bias))
    return [Dispatch("depthwise", (WORKGROUP,), reads, (ctx.place(out),), push, groups(out.size, ctx))]


@lowering(*CONVOLUTIONS, signatures=FLOAT_CONV, widened=WIDENED_CONV, constraints=(FLOAT_ZERO_POINTS,))
def convolution(ctx: LoweringContext) -> list[Step]:
    if ctx.operator.op is Op.DEPTHWISE_CONV2D:
        return _depthwise_steps(ctx, integer=False)
    return _conv_steps(ctx, integer=False)


@lowering(*CONVOLUTIONS, signatures=INT8_CONV)
def convolution_integer(ctx: LoweringContext) -> list[Step]:
    if ctx.operator.op is Op.DEPTHWISE_CONV2D:
        return _depthwise_steps(ctx, integer=True)
    return _conv_steps(ctx, integer=True)


def _pool_push(ctx: LoweringContext) -> bytes:
    x, out = ctx.inputs[0], ctx.outputs[0]
    attr = ctx.operator.attribute
    _, ih, iw, c = x.shape
    _, oh, ow, _ = out.shape
    top, _, left, _ = attr.pad
    return words(out.size, ih, iw, c, oh, ow, *attr.kernel, *attr.stride, top, left)


@lowering(
    Op.AVG_POOL2D,
    signatures=(Signature.of(in_out_t="fp32", acc_t="fp32"),),
    widened=(
        *(Signature.of(in_out_t="fp16", acc_t=acc) for acc in ("fp16", "fp32")),
        Signature.of(in_out_t="bf16", acc_t="fp32"),
        *(Signature.of(in_out_t=t, acc_t="fp16") for t in FP8),
    ),
    constraints=(FLOAT_ZERO_POINTS,),
)
@lowering(Op.MAX_POOL2D, signatures=in_out("fp32"), widened=in_out("fp16", "bf16", *FP8))
def pool2d(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    is_max = ctx.operator.op is Op.MAX_POOL2D
    spec = (WORKGROUP, int(is_max), nan_mode(ctx) if is_max else 1)
    return [Dispatch("pool", spec, (ctx.place(x),), (ctx.place(out),), _pool_push(ctx), groups(out.size, ctx))]


@lowering(Op.AVG_POOL2D, signatures=tuple(Signature.of(in_out_t=t, acc_t="int32") for t in ("int8", "int16")))
@lowering(Op.MAX_POOL2D, signatures=in_out("int8", "int16"))
def pool2d_integer(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    is_max = ctx.operator.op is Op.MAX_POOL2D
    es = element_bytes(x)
    zps = (x, x) if is_max else (ctx.inputs[1], ctx.inputs[2])
    reads = (ctx.place(x), *(ctx.place(t) for t in zps))
    spec = (WORKGROUP, int(is_max), es)
    return [Dispatch("pool_int", spec, reads, (ctx.place(out),), _pool_push(ctx), word_groups(out.size, es, ctx))]


def _argmax(*types: str) -> tuple[Signature, ...]:
    return tuple(Signature.of(in_t=t, out_t="int32") for t in types)


@lowering(Op.ARGMAX, signatures=_argmax("fp32"), widened=_argmax("fp16", "bf16", *FP8))
def argmax(ctx: LoweringContext) -> list[Step]:
    return reduce(ctx)


@lowering(Op.ARGMAX, signatures=_argmax("int8", "int16"))
def argmax_integer(ctx: LoweringContext) -> list[Step]:
    return reduce_integer(ctx)


@lowering(
    Op.MATMUL,
    signatures=tuple(Signature.of(in_t=i, out_t=o) for i, o in (("fp32", "fp32"), ("fp16", "fp16"), ("fp16", "fp32"))),
    constraints=(FLOAT_ZERO_POINTS,),
)
def matmul(ctx: LoweringContext) -> list[Step]:
    return mm.float_steps(ctx)


@lowering(
    Op.MATMUL,
    signatures=tuple(Signature.of(in_t=i, out_t=o) for i, o in (("bf16", "fp32"), *((t, "fp16") for t in FP8))),
    constraints=(FLOAT_ZERO_POINTS,),
)
def matmul_widened(ctx: LoweringContext) -> list[Step]:
    return mm.widened_steps(ctx)  # the operands widened, the result rounded by the fp16 path


@lowering(Op.MATMUL, signatures=(Signature.of(in_t="int8", out_t="int32"),))
def matmul_integer(ctx: LoweringContext) -> list[Step]:
    return mm.int8_steps(ctx)
