"""CAST and RESCALE.

CAST between fp32 and int32, and between fp32 and fp16 / bf16: fp32 -> int32 rounds to nearest, ties to
even, and saturates; NaN, which the specification leaves unpredictable, gives 0 (as in the CPU backend).
int32 -> fp32 rounds to nearest even. fp16 and bf16 -> fp32 are exact; fp32 -> fp16 / bf16 round once to
nearest even (``..prelude`` conversions): the kernels' loads and stores do the narrow conversions, so
those casts are plain copies between compute types. The fp8 casts (fp8e4m3 and fp8e5m2 to and from fp32,
fp16 and bf16) are such copies too: fp8 widens exactly, and a value reaches fp8 through fp32, which holds
every fp16 and bf16 value, so it is rounded once, with fp8e4m3's overflow to NaN and fp8e5m2's to infinity.

RESCALE (int8 / int16 / int32 / int48 in, int8 / int16 / int32 out) follows the specification's
``apply_scale_32`` / ``apply_scale_16`` bit for bit, as the CPU backend does: the input (zero-extended
when ``input_unsigned``) less its zero point, times the multiplier, plus the rounding term (and, for
DOUBLE_ROUND with scale32, the second stage's +-2^30 when the shift exceeds 31), floored by the shift,
narrowed to int32, plus the output zero point, saturated to the result's signed or unsigned range. The
product of a 48-bit value and a 32-bit multiplier needs 80 bits; it is never formed: the value is split
at bit 24 so that each partial product fits 64 bits, and the shift is distributed over the parts.
INEXACT_ROUND is computed as SINGLE_ROUND (which meets its bound). Multiplier and shift are read by the
kernel from their tensors (per tensor: element 0; per channel: the last axis's index); the zero points are
read at load, so they must be constants.
"""

from __future__ import annotations

import functools

import numpy as np

from ....core.errors import InternalError
from ....tosa.attributes import RescaleAttribute, RoundingMode
from ....tosa.capability import Constraint, OperatorView, Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from ....tosa.spec import operator as spec_of
from ..prelude import PRELUDE
from .common import Kernel, Launch, LoweringContext, Step, elementwise_launch
from .elementwise import ctype, kernel, kernel_name
from .registry import lowering

# The types CAST converts between here: every pair of them the specification lists.
HELD = (
    DType.FP32,
    DType.FP16,
    DType.BF16,
    DType.FP8E4M3,
    DType.FP8E5M2,
    DType.INT8,
    DType.INT16,
    DType.INT32,
    DType.BOOL,
)
CASTS = tuple(
    (row.types["in_t"], row.types["out_t"])
    for row in spec_of(Op.CAST).typesupport
    if row.types["in_t"] in HELD and row.types["out_t"] in HELD
)

# int32 -> fp32 rounded to odd: where bits below fp32's 24 are dropped, the last kept one is set, so that
# the store's one rounding to bf16 (8 bits, far fewer than 24 - 2) is the integer's correctly rounded
# value, which rounding to nearest twice (to fp32, then to bf16) is not.
_ODD = """\
IA_FN float ia_i32_to_f32_odd(int x) {
    unsigned m = x < 0 ? 0u - (unsigned)x : (unsigned)x;
    const int drop = 8 - __clz((int)m);
    if (drop > 0) {
        const unsigned mask = (1u << drop) - 1u;
        if ((m & mask) != 0u) m = (m & ~mask) | (1u << drop);
    }
    return x < 0 ? -(float)m : (float)m;
}
"""


def cast_expression(src: DType, dst: DType) -> str:
    """CAST's C expression over ``x0`` (``src``'s compute type), giving ``dst``'s compute type; the
    kernel's store does the rest (to bool: nonzero; to a narrower integer: its low bits; to fp16 / bf16:
    one rounding to nearest even)."""
    if src.is_float and not dst.is_float and dst is not DType.BOOL:
        if dst is DType.INT32:
            return "ia_f32_to_i32(x0)"
        lo, hi = -(1 << (dst.bits - 1)), (1 << (dst.bits - 1)) - 1
        # clamping to integral bounds before rounding gives the rounded value clamped; NaN gives 0
        return f"(x0 != x0 ? 0 : ia_f32_to_i32(fminf(fmaxf(x0, {lo}.0f), {hi}.0f)))"
    if dst.is_float and not src.is_float:
        # int8 and int16 are exact in fp32, and an int32 that is not rounds to infinity in fp16 either way
        return "ia_i32_to_f32_odd(x0)" if (src, dst) == (DType.INT32, DType.BF16) else "__int2float_rn(x0)"
    return "x0"


@functools.cache
def cast_kernel(src: DType, dst: DType) -> Kernel:
    expression = cast_expression(src, dst)
    found = kernel(kernel_name("cast", src, dst), (src,), dst, expression)
    if "ia_i32_to_f32_odd" not in expression:
        return found
    return Kernel(found.name, PRELUDE + "\n" + _ODD + found.source[len(PRELUDE) :])


@lowering(Op.CAST, signatures=tuple(Signature.of(in_t=i, out_t=o) for i, o in CASTS))
def cast(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    return elementwise_launch(ctx, cast_kernel(x.dtype, out.dtype), (x,))


# ---- RESCALE ----------------------------------------------------------------------------------------------

RESCALE_IN = ("int8", "int16", "int32", "int48")
RESCALE_OUT = ("int8", "int16", "int32")

# floor((v * m + r) / 2^s), exact for |v| <= 2^48, |m| <= 2^31, 0 <= r < 2^62 + 2^31 and 0 <= s <= 63:
# v = hi * 2^24 + lo with 0 <= lo < 2^24 keeps hi * m and lo * m + r within 64 bits. A result that does
# not fit 64 bits (only where it would not fit int32 either, which the specification forbids) wraps, as
# the unsigned arithmetic gives it.
_SCALE = """\
IA_FN long long ia_scale(long long v, long long m, long long s, long long r) {
    const long long hi = v >> 24;
    const long long lo = v & 0xFFFFFFll;
    const long long high = hi * m;
    const long long low = lo * m + r;
    if (s >= 24) return (high + (low >> 24)) >> (s - 24);
    return (long long)(((unsigned long long)high << (24 - s)) + (unsigned long long)(low >> s));
}
"""

# scalars: 0 the input zero point, 1 the output zero point (both as the kernel uses them), 2 and 3 the
# result's range, 4 the input's zero-extension mask (0: signed), 5 DOUBLE_ROUND, 6 the channels (1: per
# tensor)
_RESCALE = """\
extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {{
        long long v = (long long)((const {x}*)a.in[0])[i];
        if (a.scalars[4] != 0) v &= a.scalars[4];
        v -= a.scalars[0];
        const long long c = a.scalars[6] > 1 ? i % a.scalars[6] : 0;
        const long long m = (long long)((const {m}*)a.in[1])[c];
        long long s = (long long)((const signed char*)a.in[2])[c];
        s = s < 0 ? 0 : (s > 63 ? 63 : s);
        long long r = s > 0 ? (1ll << (s - 1)) : 0;
        if (a.scalars[5] != 0 && s > 31) r += v >= 0 ? (1ll << 30) : -(1ll << 30);
        long long result = (long long)(int)(unsigned)(unsigned long long)ia_scale(v, m, s, r);
        result += a.scalars[1];
        result = result < a.scalars[2] ? a.scalars[2] : (result > a.scalars[3] ? a.scalars[3] : result);
        (({y}*)a.out)[i] = ({y})result;
    }}
}}
"""


@functools.cache
def rescale_kernel(x: DType, multiplier: DType, out: DType) -> Kernel:
    name = kernel_name("rescale", x, multiplier, out)
    source = _RESCALE.format(name=name, x=ctype(x).storage, m=ctype(multiplier).storage, y=ctype(out).storage)
    return Kernel(name, PRELUDE + "\n" + _SCALE + "\n" + source)


def _constant_zero_points(view: OperatorView) -> bool:
    return len(view.consts) > 4 and view.consts[3] is not None and view.consts[4] is not None


# The zero points are read on the host at load.
CONSTANT_ZERO_POINTS = Constraint("constant RESCALE zero points only", _constant_zero_points)


def _zero_point(ctx: LoweringContext, index: int) -> int:
    value = ctx.constant(index)
    if value is None:
        raise InternalError(f"RESCALE: zero point operand {index} is not a constant")
    flat = np.asarray(value).reshape(-1)
    return int(flat[0]) if flat.size else 0


@lowering(
    Op.RESCALE,
    signatures=tuple(Signature.of(in_t=i, out_t=o) for i in RESCALE_IN for o in RESCALE_OUT),
    constraints=(CONSTANT_ZERO_POINTS,),
)
def rescale(ctx: LoweringContext) -> list[Step]:
    x, multiplier, shift = ctx.inputs[:3]
    out = ctx.outputs[0]
    attr = ctx.operator.attribute
    if not isinstance(attr, RescaleAttribute):
        raise InternalError(f"RESCALE without a RescaleAttribute: {attr!r}")
    if out.size == 0:
        return []
    in_mask = (1 << x.dtype.bits) - 1
    zp_in, zp_out = _zero_point(ctx, 3), _zero_point(ctx, 4)
    if attr.input_unsigned:
        zp_in &= in_mask
    bits = out.dtype.bits
    if attr.output_unsigned:
        zp_out &= (1 << bits) - 1
        lo, hi = 0, (1 << bits) - 1
    else:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    double = attr.scale32 and attr.rounding_mode == RoundingMode.DOUBLE_ROUND
    channels = x.shape[-1] if attr.per_channel and x.rank else 1
    scalars = (zp_in, zp_out, lo, hi, in_mask if attr.input_unsigned else 0, int(double), channels)
    k = rescale_kernel(x.dtype, multiplier.dtype, out.dtype)
    reads = (ctx.place(x), ctx.place(multiplier), ctx.place(shift))
    return [Launch(k, reads, ctx.place(out), out.size, (out.size,), ((1,),), scalars)]
