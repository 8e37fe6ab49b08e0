"""RESIZE of NHWC images, NEAREST and BILINEAR, as the specification's pseudocode and the CPU backend.

One thread per result element [n, oy, ox, c]. Along each axis the sampling position ``o * scale_d +
offset`` is floored by ``scale_n`` in integers, the remainder kept in units of ``1 / scale_n``, and the two
source indices clamped into the image, so the choice of source pixels is exact for every type.

* Integers (int8, int16; resize_t int16): NEAREST takes the far pixel where ``2 * remainder >= scale_n``;
  BILINEAR's weights are the remainders' integers and the weighted sum is exact in 64 bits (int8 -> int32,
  int16 -> int48), narrowed to the result's type.
* fp32, fp16, bf16 (resize_t the input's type): the fraction ``dy = ry / scale_n`` and the weight
  ``1 - dy`` are rounded to resize_t as the pseudocode's arithmetic in that type does (which decides
  NEAREST's ``dy >= 0.5``); BILINEAR's four products are summed in fp64 and rounded once to the result's
  type, which the specification's error bound comfortably allows.

The scale, offset and border shape operands are read at load (border only fixes the result's size).
scalars: 0 IH, 1 IW, 2 OH, 3 OW, 4 C, 5 scale_y_n, 6 scale_y_d, 7 scale_x_n, 8 scale_x_d, 9 offset_y,
10 offset_x.
"""

from __future__ import annotations

import functools

from ....tosa.attributes import ResizeMode
from ....tosa.capability import Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from ..prelude import PRELUDE
from .common import Kernel, Launch, LoweringContext, Step
from .data_layout import shape_operand
from .elementwise import ctype, kernel_name
from .registry import lowering

SIGNATURES = (
    Signature.of(resize_t="int16", in_t="int8", out_t="int8"),
    Signature.of(resize_t="int16", in_t="int8", out_t="int32"),
    Signature.of(resize_t="int16", in_t="int16", out_t="int16"),
    Signature.of(resize_t="int16", in_t="int16", out_t="int48"),
    *(Signature.of(resize_t=t, in_t=t, out_t=t) for t in ("fp32", "fp16", "bf16")),
)

# The source indices along one axis (clamped into the image) and the remainder in units of 1 / numerator.
_AXIS = """\
IA_FN void ia_resize_axis(long long o, long long extent, long long numerator, long long denominator,
                          long long offset, long long* lo, long long* hi, long long* rest) {
    const long long p = o * denominator + offset;
    const long long q = p >= 0 ? p / numerator : -((numerator - 1 - p) / numerator);
    *rest = p - q * numerator;
    *lo = q < 0 ? 0 : (q > extent - 1 ? extent - 1 : q);
    *hi = q + 1 < 0 ? 0 : (q + 1 > extent - 1 ? extent - 1 : q + 1);
}
"""

_KERNEL = """\
extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{
    const long long ih = a.scalars[0], iw = a.scalars[1], oh = a.scalars[2], ow = a.scalars[3], ch = a.scalars[4];
    const long long ny = a.scalars[5], nx = a.scalars[7];
    const {x}* in = (const {x}*)a.in[0];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {{
        const long long c = i % ch;
        long long rest = i / ch;
        const long long ox = rest % ow;
        rest /= ow;
        const long long oy = rest % oh;
        const long long n = rest / oh;
        long long y0, y1, ry, x0, x1, rx;
        ia_resize_axis(oy, ih, ny, a.scalars[6], a.scalars[9], &y0, &y1, &ry);
        ia_resize_axis(ox, iw, nx, a.scalars[8], a.scalars[10], &x0, &x1, &rx);
        const long long p00 = ((n * ih + y0) * iw + x0) * ch + c, p01 = ((n * ih + y0) * iw + x1) * ch + c;
        const long long p10 = ((n * ih + y1) * iw + x0) * ch + c, p11 = ((n * ih + y1) * iw + x1) * ch + c;
{body}
    }}
}}
"""

_INT_NEAREST = """\
        const long long p = 2 * ry >= ny ? (2 * rx >= nx ? p11 : p10) : (2 * rx >= nx ? p01 : p00);
        (({o}*)a.out)[i] = ({o})in[p];"""

_INT_BILINEAR = """\
        const long long acc = (long long)in[p00] * (ny - ry) * (nx - rx) + (long long)in[p01] * (ny - ry) * rx
                            + (long long)in[p10] * ry * (nx - rx) + (long long)in[p11] * ry * rx;
        (({o}*)a.out)[i] = ({o})acc;"""

_FLOAT_FRACTIONS = """\
        const float dy = {r_dy};
        const float dx = {r_dx};"""

_FLOAT_NEAREST = """\
        (({o}*)a.out)[i] = in[dy >= 0.5f ? (dx >= 0.5f ? p11 : p10) : (dx >= 0.5f ? p01 : p00)];"""

_FLOAT_BILINEAR = """\
        const double wy0 = {r_wy}, wy1 = dy, wx0 = {r_wx}, wx1 = dx;
        const double acc = (double){v00} * wy0 * wx0 + (double){v01} * wy0 * wx1
                         + (double){v10} * wy1 * wx0 + (double){v11} * wy1 * wx1;
        (({o}*)a.out)[i] = {store};"""


def _rounded(dtype: DType, value: str) -> str:
    """``value`` (an fp32 expression) rounded to ``dtype``, as fp32: one operation in resize_t."""
    if dtype is DType.FP32:
        return f"({value})"
    t = ctype(dtype)
    return t.load.format(t.store.format(value))


def _fraction(dtype: DType, rest: str, numerator: str) -> str:
    """The pseudocode's ``(resize_t)rest / (resize_t)numerator`` in resize_t."""
    return _rounded(dtype, f"{_rounded(dtype, f'(float){rest}')} / {_rounded(dtype, f'(float){numerator}')}")


@functools.cache
def resize_kernel(mode: str, x: DType, out: DType) -> Kernel:
    name = kernel_name("resize", mode, x, out)
    xs, os_ = ctype(x).storage, ctype(out).storage
    if not x.is_float:
        body = (_INT_NEAREST if mode == "nearest" else _INT_BILINEAR).format(o=os_)
    else:
        fractions = _FLOAT_FRACTIONS.format(r_dy=_fraction(x, "ry", "ny"), r_dx=_fraction(x, "rx", "nx"))
        if mode == "nearest":
            body = fractions + "\n" + _FLOAT_NEAREST.format(o=os_)
        else:
            load = ctype(x).load
            values = {f"v{p}": load.format(f"in[p{p}]") for p in ("00", "01", "10", "11")}
            weights = {"r_wy": _rounded(x, "1.0f - dy"), "r_wx": _rounded(x, "1.0f - dx")}
            store = ctype(out).store.format("(float)acc")
            body = fractions + "\n" + _FLOAT_BILINEAR.format(o=os_, store=store, **values, **weights)
    return Kernel(name, PRELUDE + "\n" + _AXIS + "\n" + _KERNEL.format(name=name, x=xs, body=body))


@lowering(Op.RESIZE, signatures=SIGNATURES)
def resize(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    scale_y_n, scale_y_d, scale_x_n, scale_x_d = shape_operand(ctx, 1)
    offset_y, offset_x = shape_operand(ctx, 2)
    _, ih, iw, channels = x.shape
    _, oh, ow, _ = out.shape
    mode = "nearest" if ctx.operator.attribute.mode == ResizeMode.NEAREST else "bilinear"
    scalars = (ih, iw, oh, ow, channels, scale_y_n, scale_y_d, scale_x_n, scale_x_d, offset_y, offset_x)
    k = resize_kernel(mode, x.dtype, out.dtype)
    return [Launch(k, (ctx.place(x),), ctx.place(out), out.size, (out.size,), ((1,),), scalars)]
