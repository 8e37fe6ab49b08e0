"""Tensor operators: CONV2D, CONV3D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, MAX_POOL2D, AVG_POOL2D and ARGMAX.

Each runs one thread per result element, which loops over its window, its input channels or its reduced
axis in the thread; nothing is shared between threads. Zero points are constants, read at load.

Convolutions. Input NHWC (NDHWC), weights OHWI (CONV2D, TRANSPOSE_CONV2D), ODHWI (CONV3D) or HWCM
(DEPTHWISE_CONV2D). Every form is lowered as a three-dimensional convolution (a 2D one has depth 1), so one
kernel template serves them: the result is laid out as ``(N, OD, OH, OW, OC)`` in the argument block's
extents and the window geometry takes the sixteen scalar words (:data:`_GEOMETRY`). A tap outside the
input is skipped: it contributes zero, as TOSA's padding after the zero point is subtracted.
TRANSPOSE_CONV2D gathers, per output, the taps that scatter into it (``o = i * stride + out_pad + k``).
The bias is the third operand, its stride over the result's channel axis 0 where one value serves all.

* fp32, fp16 (either accumulator type), bf16, and fp8e4m3 / fp8e5m2 (fp16 accumulator and result)
  multiply and accumulate in fp32 (the narrow types widen exactly) and round once to the result's type:
  at least as accurate as an fp16 accumulator, as the CPU backend computes too.
* int8 x int8 (and int8 x int4 weights, held one per byte) -> int32, and int16 x int8 -> int48: each
  product ``(x - input_zp) * (w - weight_zp)`` is exact in int and the sum is exact in 64 bits; with the
  bias it is wrapped to the result's 32 or 48 bits (an accumulator overflow, which TOSA leaves
  unpredictable, wraps as on the CPU backend).

Pools. Padding is skipped: MAX_POOL2D takes the largest value of the window's valid elements (floats with
the NaN mode: an ignored NaN drops out, an all-NaN window gives NaN); AVG_POOL2D divides the sum of the
valid elements by their count (padding does not count). Floats (fp8 too: fp32 is at least as accurate
as its fp16 accumulator) sum in fp32 and round the quotient once; integers sum ``x - input_zp`` exactly,
then take TOSA's ``reciprocal_scale`` of the count with ``apply_scale_32``'s single rounding, add the
output zero point and saturate.

ARGMAX: the index of the first largest value along the axis; with NaNs propagated the first NaN's, with
NaNs ignored the first largest number's (0 when every value is NaN).
"""

from __future__ import annotations

import functools

import numpy as np

from ....tosa.capability import Constraint, OperatorView, Signature, zero_zero_points
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from ....tosa.spec import operator as spec_of
from ..prelude import PRELUDE
from . import matmul as products
from .common import Kernel, Launch, LoweringContext, Step
from .elementwise import ctype, kernel_name
from .elementwise_binary import nan_mode
from .registry import in_out, lowering

FLOATS = ("fp32", "fp16", "bf16")
FP8 = ("fp8e4m3", "fp8e5m2")


def _zero_point_indexes(op: Op) -> tuple[int, ...]:
    spec = spec_of(op)
    return tuple(i for i, arg in enumerate(spec.inputs if spec else ()) if arg.name.endswith("_zp"))


def _constant_zero_points(view: OperatorView) -> bool:
    return all(i < len(view.consts) and view.consts[i] is not None for i in _zero_point_indexes(view.op))


# The integer forms read their zero points on the host at load, so they must be constants.
CONSTANT_ZERO_POINTS = Constraint("constant zero points only", _constant_zero_points)
# The float forms take none but zero (the specification's float signatures allow nothing else).
ZERO_ZERO_POINTS = zero_zero_points()


def zero_point(ctx: LoweringContext, index: int) -> int:
    """The value of the constant zero-point operand ``index`` (0 when absent)."""
    if index >= len(ctx.inputs):
        return 0
    value = ctx.constant(index)
    flat = np.asarray(value).reshape(-1) if value is not None else np.zeros(0)
    return int(flat[0]) if flat.size else 0


def _c(dtype: DType) -> tuple[str, str]:
    """(storage type, load expression of ``{}``) of ``dtype``."""
    t = ctype(dtype)
    return t.storage, t.load


# ---- convolutions ---------------------------------------------------------------------------------------

# The convolutions' scalar words: input extents, kernel extents, leading pads (out_pad for TRANSPOSE_CONV2D,
# which may be negative), per axis its stride in the low and its dilation in the high 32 bits, the zero
# points, and DEPTHWISE_CONV2D's channel multiplier.
_GEOMETRY = """\
    const long long ID = a.scalars[0], IH = a.scalars[1], IW = a.scalars[2], IC = a.scalars[3];
    const long long KD = a.scalars[4], KH = a.scalars[5], KW = a.scalars[6];
    const long long PD = a.scalars[7], PT = a.scalars[8], PL = a.scalars[9];
    const long long SD = a.scalars[10] & 0xFFFFFFFFll, DD = a.scalars[10] >> 32;
    const long long SY = a.scalars[11] & 0xFFFFFFFFll, DY = a.scalars[11] >> 32;
    const long long SX = a.scalars[12] & 0xFFFFFFFFll, DX = a.scalars[12] >> 32;
    const int XZ = (int)a.scalars[13], WZ = (int)a.scalars[14];
    const long long M = a.scalars[15];
    const long long OD = a.dims[1], OH = a.dims[2], OW = a.dims[3], OC = a.dims[4];
    (void)DD; (void)DY; (void)DX; (void)M; (void)XZ; (void)WZ;
"""

# Per spatial axis: (output / input coordinate letter, input and kernel extent letter, stride and dilation
# letter, leading pad).
_AXES = (("z", "D", "D", "PD"), ("y", "H", "Y", "PT"), ("x", "W", "X", "PL"))


def _tap_loop(axis: tuple[str, str, str, str], transposed: bool, indent: str) -> list[str]:
    """The loop over one axis's kernel taps, giving the input coordinate ``i<c>`` or skipping the tap."""
    c, extent, step, pad = axis
    lines = [f"for (long long k{c} = 0; k{c} < K{extent}; ++k{c}) {{"]
    if transposed:  # output o receives input i through tap k where o = i * stride + out_pad + k
        lines += [
            f"    const long long t{c} = o{c} - {pad} - k{c};",
            f"    if (t{c} < 0 || t{c} % S{step} != 0) continue;",
            f"    const long long i{c} = t{c} / S{step};",
            f"    if (i{c} >= I{extent}) continue;",
        ]
    else:
        lines += [
            f"    const long long i{c} = o{c} * S{step} + k{c} * D{step} - {pad};",
            f"    if (i{c} < 0 || i{c} >= I{extent}) continue;",
        ]
    return [indent + line for line in lines]


_WRAP48 = """\
/* An int48 result: the low 48 bits of the exact sum, sign-extended (computed unsigned: no overflow). */
IA_FN long long ia_wrap48(long long v) {
    const unsigned long long half = 1ull << 47;
    return (long long)((((unsigned long long)v + half) & ((half << 1) - 1ull))) - (long long)half;
}
"""


@functools.cache
def conv_kernel(op: Op, in_t: DType, weight_t: DType, out_t: DType) -> Kernel:
    """The kernel of convolution ``op`` (CONV2D, CONV3D, DEPTHWISE_CONV2D or TRANSPOSE_CONV2D) for these
    types: one thread per result element, the 3D window loop inside it."""
    name = kernel_name(op.name, in_t, weight_t, out_t)
    xs, load_x = _c(in_t)
    ws, load_w = _c(weight_t)
    bs, load_b = _c(out_t)
    os = ctype(out_t).storage
    integer = in_t.is_integer
    transposed = op is Op.TRANSPOSE_CONV2D
    taps = [line for d, axis in enumerate(_AXES) for line in _tap_loop(axis, transposed, "    " * (d + 2))]
    inner = "                    "
    product = "({x} - XZ) * ({w} - WZ)" if integer else "{x} * {w}"
    acc_type = "long long" if integer else "float"
    if op is Op.DEPTHWISE_CONV2D:
        body = [
            f"{inner}const {xs} xv = x[(((n * ID + iz) * IH + iy) * IW + ix) * IC + c0];",
            f"{inner}const {ws} wv = w[((ky * KW + kx) * IC + c0) * M + m0];",
            f"{inner}acc += {product.format(x=load_x.format('xv'), w=load_w.format('wv'))};",
        ]
    else:
        body = [
            f"{inner}const {xs}* xp = x + (((n * ID + iz) * IH + iy) * IW + ix) * IC;",
            f"{inner}const {ws}* wp = w + (((oc * KD + kz) * KH + ky) * KW + kx) * IC;",
            f"{inner}for (long long c = 0; c < IC; ++c) {{",
            f"{inner}    acc += {product.format(x=load_x.format('xp[c]'), w=load_w.format('wp[c]'))};",
            f"{inner}}}",
        ]
    bias = load_b.format("bias[ia_offset(a, 2, i)]")
    if out_t is DType.INT48:
        store = f"ia_wrap48(acc + {bias})"
    elif integer:  # int32: the low 32 bits of the exact sum
        store = f"(int)(unsigned)(unsigned long long)(acc + {bias})"
    else:
        store = ctype(out_t).store.format(f"acc + {bias}")
    lines = [
        f'extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{',
        _GEOMETRY.rstrip("\n"),
        f"    const {xs}* x = (const {xs}*)a.in[0];",
        f"    const {ws}* w = (const {ws}*)a.in[1];",
        f"    const {bs}* bias = (const {bs}*)a.in[2];",
        f"    {os}* out = ({os}*)a.out;",
        "    const long long step = (long long)gridDim.x * blockDim.x;",
        "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {",
        "        long long r = i;",
        "        const long long oc = r % OC;",
        "        r /= OC;",
        "        const long long ox = r % OW;",
        "        r /= OW;",
        "        const long long oy = r % OH;",
        "        r /= OH;",
        "        const long long oz = r % OD;",
        "        const long long n = r / OD;",
        "        const long long c0 = oc / M, m0 = oc % M;",
        "        (void)c0; (void)m0;",
        f"        {acc_type} acc = 0;",
        *taps,
        *body,
        "                }",
        "            }",
        "        }",
        f"        out[i] = {store};",
        "    }",
        "}",
        "",
    ]
    helpers = _WRAP48 if out_t is DType.INT48 else ""
    return Kernel(name, PRELUDE + helpers + "\n" + "\n".join(lines))


def _pair(stride: int, dilation: int) -> int:
    return int(stride) | (int(dilation) << 32)


def _conv_geometry(ctx: LoweringContext) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(result extents as (N, OD, OH, OW, OC), the first fifteen scalar words but the zero points)."""
    op, attr = ctx.operator.op, ctx.operator.attribute
    x, w, out = ctx.inputs[0].shape, ctx.inputs[1].shape, ctx.outputs[0].shape
    if op is Op.CONV3D:
        _, id_, ih, iw, ic = x
        _, kd, kh, kw, _ = w
        front, _, top, _, left, _ = attr.pad
        axes = [_pair(s, d) for s, d in zip(attr.stride, attr.dilation, strict=True)]
        return tuple(out), (id_, ih, iw, ic, kd, kh, kw, front, top, left, *axes)
    _, ih, iw, ic = x
    n, oh, ow, oc = out
    if op is Op.DEPTHWISE_CONV2D:
        kh, kw = w[0], w[1]
    else:
        kh, kw = w[1], w[2]
    if op is Op.TRANSPOSE_CONV2D:
        (sy, sx), (dy, dx) = attr.stride, (1, 1)
        top, _, left, _ = attr.out_pad
    else:
        (sy, sx), (dy, dx) = attr.stride, attr.dilation
        top, _, left, _ = attr.pad
    scalars = (1, ih, iw, ic, 1, kh, kw, 0, top, left, _pair(1, 1), _pair(sy, dy), _pair(sx, dx))
    return (n, 1, oh, ow, oc), scalars


def convolution_steps(ctx: LoweringContext) -> list[Step]:
    """The one launch of a convolution: operands input, weights and bias; the zero points as scalars."""
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    out = ctx.outputs[0]
    dims, geometry = _conv_geometry(ctx)
    count = int(np.prod(dims, dtype=np.int64))
    if count == 0:
        return []
    multiplier = w.shape[3] if ctx.operator.op is Op.DEPTHWISE_CONV2D else 1
    scalars = (*geometry, zero_point(ctx, 3), zero_point(ctx, 4), multiplier)
    bias_stride = 1 if int(np.prod(bias.shape)) > 1 else 0
    strides = ((0,) * 5, (0,) * 5, (0, 0, 0, 0, bias_stride))
    k = conv_kernel(ctx.operator.op, x.dtype, w.dtype, out.dtype)
    reads = (ctx.place(x), ctx.place(w), ctx.place(bias))
    return [Launch(k, reads, ctx.place(out), count, dims, strides, scalars)]


def _conv(in_t: str, weight_t: str, out_t: str, acc_t: str) -> Signature:
    return Signature.of(in_t=in_t, weight_t=weight_t, out_t=out_t, acc_t=acc_t)


CONVOLUTIONS = (Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D)
FLOAT_CONV = (
    _conv("fp32", "fp32", "fp32", "fp32"),
    _conv("fp16", "fp16", "fp16", "fp16"),
    _conv("fp16", "fp16", "fp16", "fp32"),
    _conv("bf16", "bf16", "bf16", "fp32"),
    *(_conv(t, t, "fp16", "fp16") for t in FP8),
)
INT_CONV = (
    _conv("int8", "int8", "int32", "int32"),
    _conv("int8", "int4", "int32", "int32"),  # int4 weights are held one value per byte
    _conv("int16", "int8", "int48", "int48"),
)


@lowering(*CONVOLUTIONS, signatures=FLOAT_CONV, constraints=(ZERO_ZERO_POINTS,))
@lowering(*CONVOLUTIONS, signatures=INT_CONV, constraints=(CONSTANT_ZERO_POINTS,))
def convolution(ctx: LoweringContext) -> list[Step]:
    return convolution_steps(ctx)


# ---- pooling --------------------------------------------------------------------------------------------

# The pools' scalar words: input height and width, kernel, stride and leading pads (two each), then
# MAX_POOL2D's NaN mode or AVG_POOL2D's input and output zero points. The result is (N, OH, OW, C).
_POOL_GEOMETRY = """\
    const long long IH = a.scalars[0], IW = a.scalars[1], KH = a.scalars[2], KW = a.scalars[3];
    const long long SY = a.scalars[4], SX = a.scalars[5], PT = a.scalars[6], PL = a.scalars[7];
    const long long OH = a.dims[1], OW = a.dims[2], C = a.dims[3];
"""

_AVERAGE = """\
/* AVG_POOL2D's integer result: TOSA's reciprocal_scale(count) applied to the sum with apply_scale_32's
   single rounding (a floor shift), plus the output zero point, saturated to [lo, hi]. */
IA_FN long long ia_average(long long sum, long long count, long long out_zp, long long lo, long long hi) {
    const int k = count > 1 ? 32 - __clz((int)(count - 1)) : 0; /* the bit length of count - 1 */
    const long long multiplier = (((1ll << 30) + 1ll) << k) / count;
    const int shift = 30 + k;
    const unsigned long long product = (unsigned long long)sum * (unsigned long long)multiplier;
    const long long scaled = (long long)(product + (1ull << (shift - 1))) >> shift;
    const long long r = scaled + out_zp;
    return r < lo ? lo : (r > hi ? hi : r);
}
"""


def _int_range(dtype: DType) -> tuple[int, int]:
    info = np.iinfo(dtype.numpy)
    return int(info.min), int(info.max)


@functools.cache
def pool_kernel(op: Op, dtype: DType) -> Kernel:
    """MAX_POOL2D or AVG_POOL2D of ``dtype``: one thread per result element, its window inside it."""
    name = kernel_name(op.name, dtype)
    xs, load = _c(dtype)
    t = ctype(dtype)
    integer = dtype.is_integer
    helpers = ""
    if op is Op.MAX_POOL2D:
        if integer:
            lo, _ = _int_range(dtype)
            start = f"int best = {lo};"
            update = "best = v > best ? v : best;"
        else:  # a NaN start is dropped at the first number when NaNs are ignored, and kept by an all-NaN window
            start = "float best = a.scalars[8] == 2 ? ia_float(0x7FC00000u) : ia_float(0xFF800000u);"
            update = "best = ia_max_f32(best, v, a.scalars[8]);"
        store = t.store.format("best")
    elif integer:
        lo, hi = _int_range(dtype)
        helpers = _AVERAGE
        start = "long long sum = 0, count = 0;"
        update = "sum += v - a.scalars[8];\n                ++count;"
        store = t.store.format(f"ia_average(sum, count, a.scalars[9], {lo}ll, {hi}ll)")
    else:
        start = "float sum = 0.0f;\n        long long count = 0;"
        update = "sum += v;\n                ++count;"
        store = t.store.format("sum / (float)count")
    lines = [
        f'extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{',
        _POOL_GEOMETRY.rstrip("\n"),
        f"    const {xs}* x = (const {xs}*)a.in[0];",
        f"    {t.storage}* out = ({t.storage}*)a.out;",
        "    const long long step = (long long)gridDim.x * blockDim.x;",
        "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {",
        "        const long long c = i % C, ox = (i / C) % OW, oy = (i / C / OW) % OH, n = i / C / OW / OH;",
        f"        {start}",
        "        for (long long ky = 0; ky < KH; ++ky) {",
        "            const long long iy = oy * SY + ky - PT;",
        "            if (iy < 0 || iy >= IH) continue;",
        "            for (long long kx = 0; kx < KW; ++kx) {",
        "                const long long ix = ox * SX + kx - PL;",
        "                if (ix < 0 || ix >= IW) continue;",
        f"                const {t.compute} v = {load.format('x[((n * IH + iy) * IW + ix) * C + c]')};",
        f"                {update}",
        "            }",
        "        }",
        f"        out[i] = {store};",
        "    }",
        "}",
        "",
    ]
    return Kernel(name, PRELUDE + helpers + "\n" + "\n".join(lines))


def _pool_steps(ctx: LoweringContext, last: tuple[int, ...]) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    count = int(np.prod(out.shape, dtype=np.int64))
    if count == 0:
        return []
    attr = ctx.operator.attribute
    _, ih, iw, _ = x.shape
    top, _, left, _ = attr.pad
    scalars = (ih, iw, *attr.kernel, *attr.stride, top, left, *last)
    k = pool_kernel(ctx.operator.op, x.dtype)
    return [Launch(k, (ctx.place(x),), ctx.place(out), count, tuple(out.shape), (), scalars)]


@lowering(Op.MAX_POOL2D, signatures=in_out(*FLOATS, *FP8, "int8", "int16"))
def max_pool2d(ctx: LoweringContext) -> list[Step]:
    return _pool_steps(ctx, (nan_mode(ctx),))


@lowering(
    Op.AVG_POOL2D,
    signatures=(
        Signature.of(in_out_t="fp32", acc_t="fp32"),
        Signature.of(in_out_t="fp16", acc_t="fp16"),
        Signature.of(in_out_t="fp16", acc_t="fp32"),
        Signature.of(in_out_t="bf16", acc_t="fp32"),
        *(Signature.of(in_out_t=t, acc_t="fp16") for t in FP8),
    ),
    constraints=(ZERO_ZERO_POINTS,),
)
@lowering(
    Op.AVG_POOL2D,
    signatures=tuple(Signature.of(in_out_t=t, acc_t="int32") for t in ("int8", "int16")),
    constraints=(CONSTANT_ZERO_POINTS,),
)
def avg_pool2d(ctx: LoweringContext) -> list[Step]:
    return _pool_steps(ctx, (zero_point(ctx, 1), zero_point(ctx, 2)))


# ---- ARGMAX ---------------------------------------------------------------------------------------------


@functools.cache
def argmax_kernel(dtype: DType) -> Kernel:
    """ARGMAX of ``dtype``: one thread per result element walking the reduced axis (length ``scalars[0]``,
    ``scalars[1]`` elements apart); the first of equal maxima wins."""
    name = kernel_name("argmax", dtype)
    xs, load = _c(dtype)
    value = load.format("x[base + k * inner]")
    if dtype.is_integer:
        search = [
            f"int best = {load.format('x[base]')};",
            "for (long long k = 1; k < length; ++k) {",
            f"    const int v = {value};",
            "    if (v > best) { best = v; found = k; }",
            "}",
        ]
    else:
        search = [
            "if (a.scalars[2] == 2) { /* ignore NaNs: the first largest number, index 0 when all are NaN */",
            "    float best = 0.0f;",
            "    int any = 0;",
            "    for (long long k = 0; k < length; ++k) {",
            f"        const float v = {value};",
            "        if (v != v) continue;",
            "        if (!any || v > best) { best = v; found = k; any = 1; }",
            "    }",
            "} else { /* propagate: the first NaN, or the first largest number */",
            f"    float best = {load.format('x[base]')};",
            "    for (long long k = 1; k < length && best == best; ++k) {",
            f"        const float v = {value};",
            "        if (v != v || v > best) { best = v; found = k; }",
            "    }",
            "}",
        ]
    lines = [
        f'extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{',
        "    const long long length = a.scalars[0], inner = a.scalars[1];",
        f"    const {xs}* x = (const {xs}*)a.in[0];",
        "    const long long step = (long long)gridDim.x * blockDim.x;",
        "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {",
        "        const long long base = (i / inner) * length * inner + i % inner;",
        "        long long found = 0;",
        *("        " + line for line in search),
        "        ((int*)a.out)[i] = (int)found;",
        "    }",
        "}",
        "",
    ]
    return Kernel(name, PRELUDE + "\n" + "\n".join(lines))


@lowering(Op.ARGMAX, signatures=tuple(Signature.of(in_t=t, out_t="int32") for t in (*FLOATS, *FP8, "int8", "int16")))
def argmax(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    count = int(np.prod(out.shape, dtype=np.int64))
    if count == 0:
        return []
    axis = ctx.operator.attribute.axis
    inner = int(np.prod(x.shape[axis + 1 :], dtype=np.int64))
    scalars = (x.shape[axis], inner, nan_mode(ctx))
    return [Launch(argmax_kernel(x.dtype), (ctx.place(x),), ctx.place(out), count, (count,), (), scalars)]


# ---- MATMUL: cuBLASLt products (.matmul); the correction for int8 zero points is computed at load ------------
@lowering(
    Op.MATMUL,
    signatures=tuple(
        Signature.of(in_t=i, out_t=o)
        for i, o in (("fp32", "fp32"), ("fp16", "fp16"), ("fp16", "fp32"), ("bf16", "fp32"))
    ),
    constraints=(ZERO_ZERO_POINTS,),
)
def matmul(ctx: LoweringContext) -> list[Step]:
    return products.float_steps(ctx)


@lowering(
    Op.MATMUL,
    signatures=(Signature.of(in_t="fp8e4m3", out_t="fp16"), Signature.of(in_t="fp8e5m2", out_t="fp16")),
    constraints=(ZERO_ZERO_POINTS,),
)
def matmul_fp8(ctx: LoweringContext) -> list[Step]:
    return products.fp8_steps(ctx)


@lowering(Op.MATMUL, signatures=(Signature.of(in_t="int8", out_t="int32"),), constraints=(CONSTANT_ZERO_POINTS,))
def matmul_integer(ctx: LoweringContext) -> list[Step]:
    return products.int8_steps(ctx)


@lowering(Op.MATMUL, signatures=(Signature.of(in_t="int16", out_t="int48"),), constraints=(CONSTANT_ZERO_POINTS,))
def matmul_int16(ctx: LoweringContext) -> list[Step]:
    return products.int16_steps(ctx)
