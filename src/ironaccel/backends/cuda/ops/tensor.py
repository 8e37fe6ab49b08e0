"""Tensor operators: the convolutions (CONV2D, DEPTHWISE_CONV2D).

Each runs one thread per result element, which loops over its window (and, for CONV2D, the input
channels) in the thread; there is nothing shared between threads.

Convolutions. Input NHWC, weights OHWI (CONV2D) or HWCM (DEPTHWISE_CONV2D). Every form is lowered as a
three-dimensional convolution (a 2D one has depth 1), so one kernel template serves them: the result is
laid out as ``(N, OD, OH, OW, OC)`` in the argument block's extents, and the window geometry takes the
sixteen scalar words (:data:`_GEOMETRY`). A tap outside the input is skipped: it contributes zero, as
TOSA's padding after the zero point is subtracted. The bias is the third operand, its stride over the
result's channel axis 0 where one value serves every channel.

* fp32, fp16 (either accumulator type) and bf16 multiply and accumulate in fp32 (fp16 and bf16 widen
  exactly) and round once to the result's type: at least as accurate as an fp16 accumulator, as the
  CPU backend computes too.
* int8 x int8 (and int8 x int4 weights, held one per byte) -> int32, and int16 x int8 -> int48: each
  product ``(x - input_zp) * (w - weight_zp)`` is exact in int and the sum is exact in 64 bits; with the
  bias it is wrapped to the result's 32 or 48 bits (an accumulator overflow, which TOSA leaves
  unpredictable, wraps as on the CPU backend). The zero points are constants, read at load.
"""

from __future__ import annotations

import functools

import numpy as np

from ....tosa.capability import Constraint, OperatorView, Signature, zero_zero_points
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from ....tosa.spec import operator as spec_of
from ..prelude import PRELUDE
from .common import Kernel, Launch, LoweringContext, Step
from .elementwise import ctype, kernel_name
from .registry import lowering

FLOATS = ("fp32", "fp16", "bf16")


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


FLOAT_CONV = (
    _conv("fp32", "fp32", "fp32", "fp32"),
    _conv("fp16", "fp16", "fp16", "fp16"),
    _conv("fp16", "fp16", "fp16", "fp32"),
    _conv("bf16", "bf16", "bf16", "fp32"),
)
INT_CONV = (_conv("int8", "int8", "int32", "int32"),)


@lowering(Op.CONV2D, Op.DEPTHWISE_CONV2D, signatures=FLOAT_CONV, constraints=(ZERO_ZERO_POINTS,))
@lowering(Op.CONV2D, Op.DEPTHWISE_CONV2D, signatures=INT_CONV, constraints=(CONSTANT_ZERO_POINTS,))
def convolution(ctx: LoweringContext) -> list[Step]:
    return convolution_steps(ctx)


# ---- MATMUL ---------------------------------------------------------------------------------------------
# MATMUL is registered below this line, by its own lowering (not the kernels above).
