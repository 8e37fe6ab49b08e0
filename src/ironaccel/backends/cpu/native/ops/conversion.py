"""Native code for CAST, RESCALE and TABLE: elementwise loops (see :mod:`.elementwise`) with the integer
rules of ``backends/cpu/ops/type_conversion.py`` and ``numerics.py``.

RESCALE follows :func:`numerics.apply_scale_32` / ``apply_scale_16`` step for step in 64-bit integers
(``ia_mul_round_shift``), so its results equal the numpy kernel's bit for bit, REQUIRE violations
included. Its multiplier and shift must be constants: per channel, the multiplier, the clipped shift,
the rounding term and the double-rounding term are prepared at load as int64 rows that broadcast along
the last axis, like the numpy kernel's.
"""

from __future__ import annotations

import numpy as np

from .....tosa.attributes import RoundingMode
from .....tosa.dtypes import DType
from .....tosa.operators import Op
from .. import lowering as lw
from ..lowering import Kernel, NotNative, OpView, c_int, c_type, lowering, size
from .elementwise import elementwise, map_loops

_INTS = (DType.INT8, DType.INT16, DType.INT32)
_CASTABLE = (DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.FP32)


@lowering(Op.CAST)
def cast(view: OpView) -> Kernel:
    src, dst = view.dtype(), view.out_dtype()
    if src not in _CASTABLE or dst not in _CASTABLE:
        raise NotNative(f"CAST {src} -> {dst}")
    if dst is DType.BOOL:
        return elementwise(view, "v0 != 0", operands=(0,))
    if src is DType.BOOL:
        return elementwise(view, "v0 != 0 ? 1 : 0", operands=(0,))
    if dst is DType.FP32:
        return elementwise(view, "(float)v0", operands=(0,))  # round to nearest even, as float64 -> float32
    if src is DType.FP32:
        # Round half to even in double, saturate, NaN (unpredictable) to 0: numerics.float_to_int.
        lo, hi = -(1 << (dst.bits - 1)), (1 << (dst.bits - 1)) - 1
        value = f"v0 != v0 ? 0.0 : fmin(fmax(rint((double)v0), {lo}.0), {hi}.0)"
        return elementwise(view, f"(int64_t)({value})", operands=(0,))
    return elementwise(view, "(uint64_t)(int64_t)v0", operands=(0,))  # wrap to the narrower type


def _round_term(shift: np.ndarray) -> np.ndarray:
    return np.where(shift > 0, np.left_shift(np.int64(1), np.clip(shift - 1, 0, 62)), 0).astype(np.int64)


@lowering(Op.RESCALE)
def rescale(view: OpView) -> Kernel:
    attr = view.attribute
    src, dst = view.dtype(), view.out_dtype()
    if src not in (*_INTS, DType.INT48) or dst not in _INTS:
        raise NotNative(f"RESCALE {src} -> {dst}")
    multiplier = np.asarray(view.constant(1, "the multiplier")).astype(np.int64).reshape(-1)
    shift = np.asarray(view.constant(2, "the shift")).astype(np.int64).reshape(-1)
    zp_in, zp_out = view.scalar(3, "input_zp"), view.scalar(4, "output_zp")
    channels = view.inputs[0].shape[-1] if attr.per_channel and view.inputs[0].shape else 1
    if not attr.per_channel:
        multiplier, shift = multiplier[:1], shift[:1]
    if multiplier.shape[0] != channels or shift.shape[0] != channels:
        raise NotNative("RESCALE multiplier / shift do not match the channels")
    double = attr.scale32 and attr.rounding_mode == RoundingMode.DOUBLE_ROUND
    terms = {
        "m": multiplier,
        "s": np.clip(shift, 0, 63),
        "r": _round_term(shift),
        "d": np.where(double & (shift > 31), np.int64(1 << 30), np.int64(0)).astype(np.int64),
    }
    terms["h"] = terms["s"] - 32  # the shift left after taking a product's high word (see below)
    mask = (1 << src.bits) - 1
    if attr.input_unsigned:
        value, zp_in, low, high = f"((int64_t)v0 & {c_int(mask)})", zp_in & mask, 0, mask
    else:
        value = "(int64_t)v0"
        low, high = -(1 << (src.bits - 1)), (1 << (src.bits - 1)) - 1
    if attr.output_unsigned:
        lo, hi, zp_out = 0, (1 << dst.bits) - 1, zp_out & ((1 << dst.bits) - 1)
    else:
        lo, hi = -(1 << (dst.bits - 1)), (1 << (dst.bits - 1)) - 1
    # One per-tensor value is written into the code; per-channel values are int64 rows read along the
    # last axis (operands v1, v2, ... of the loop).
    rank = len(view.inputs[0].shape)
    row = (1,) * (rank - 1) + (channels,) if rank else ()
    operands = [("X0", c_type(src), view.inputs[0].shape)]
    arrays: dict[str, np.ndarray] = {}

    # x = value - zp and the multiplier fit int32 whenever the input is at most 32 bits wide: the
    # product is then a widening 32 x 32 -> 64-bit multiply, which vectorises on every x86-64 vector
    # unit (a 64 x 64-bit multiply has no AVX2 instruction and runs as a scalar loop there).
    int32 = (-(1 << 31), (1 << 31) - 1)
    narrow = int32[0] <= low - zp_in and high - zp_in <= int32[1]
    narrow = narrow and bool(np.all((multiplier >= int32[0]) & (multiplier <= int32[1])))

    def term(name: str) -> str:
        values = terms[name]
        if channels == 1 or np.all(values == values[0]):
            return c_int(int(values[0]))
        as_int32 = narrow and name in ("m", "h")
        arrays[name] = values.astype(np.int32) if as_int32 else values
        operands.append((f"K_{name}", "int32_t" if as_int32 else "int64_t", row))
        return f"v{len(operands) - 1}"

    m, r, d = term("m"), term("r"), term("d")
    if narrow:
        value32 = f"((int32_t)v0 & {c_int(mask)})" if attr.input_unsigned else "(int32_t)v0"
        x = f"(int64_t)(int32_t)({value32} - (int32_t){c_int(zp_in)})"
        m = f"(int64_t)(int32_t){m}"
    else:
        x = f"({value} - {c_int(zp_in)})"
    rounding = r if not terms["d"].any() else f"{r} + ({x} >= 0 ? {d} : -{d})"
    # While |x * m| + |round| stays below 2**63, the plain 64-bit product, shifted, is the exact floor
    # (and vectorises well); otherwise ia_mul_round_shift's split product, as numerics computes it.
    reach = max(abs(low - zp_in), abs(high - zp_in)) * int(np.abs(multiplier).max(initial=0))
    exact64 = reach + int(terms["r"].max(initial=0)) + int(terms["d"].max(initial=0)) < (1 << 63) - 1
    low_bound, high_bound = lo - zp_out, hi - zp_out
    if exact64 and narrow and int(terms["s"].min()) >= 32 and int32[0] <= low_bound and high_bound <= int32[1]:
        # AVX2 has no 64-bit arithmetic shift, so the shift is split: the sum's high 32-bit word is
        # floor(sum / 2**32) (it fits int32 as |sum| < 2**63), then an int32 shift by s - 32 floors the
        # rest, as floor(floor(p / a) / b) = floor(p / (a * b)); the clip is done in int32 around the
        # zero point, as clip(v + zp, lo, hi) = clip(v, lo - zp, hi - zp) + zp. Every step vectorises
        # (scale32 multipliers of int8 and int16 networks come with shifts of 32 or more).
        high = f"(int32_t)(uint32_t)((uint64_t)({x} * {m} + ({rounding})) >> 32)"
        clipped = f"ia_clip32({high} >> (int32_t){term('h')}, {c_int(low_bound)}, {c_int(high_bound)})"
        expression = f"(uint32_t)((uint32_t){clipped} + (uint32_t){c_int(zp_out)})"
    else:
        if exact64:
            scaled = f"ia_wrap32(({x} * {m} + ({rounding})) >> {term('s')})"
        else:
            scaled = f"ia_wrap32(ia_mul_round_shift({x}, {m}, {term('s')}, {rounding}))"
        expression = f"(uint64_t)ia_clip64({scaled} + {c_int(zp_out)}, {c_int(lo)}, {c_int(hi)})"
    out = view.outputs[0]
    body = map_loops(out.shape, operands, ("Y0", c_type(dst)), expression)
    return Kernel(body, arrays=arrays, macs=size(out.shape))


@lowering(Op.TABLE)
def table(view: OpView) -> Kernel:
    """int8: table[v + 128] (v + 128 is in [0, 255] by the type); int16: the interpolated lookup of
    numerics.table_lookup_16, whose index (v + 32768) >> 7 is in [0, 511] and reads entries up to 512."""
    src = view.dtype()
    entries = lw.size(view.inputs[1].shape)
    if src is DType.INT8 and view.dtype(1) is DType.INT8 and entries == 256:
        return _table(view, "X1[(int64_t)v0 + 128]")
    if src is DType.INT16 and view.dtype(1) is DType.INT16 and entries == 513:
        index = "(((int64_t)v0 + 32768) >> 7)"
        base = f"(int64_t)X1[{index}]"
        slope = f"((int64_t)X1[{index} + 1] - {base})"
        return _table(view, f"{base} * 128 + {slope} * ((int64_t)v0 & 0x7F)")
    raise NotNative(f"TABLE on {src} with {entries} entries")


def _table(view: OpView, expression: str) -> Kernel:
    out = view.outputs[0]
    operands = [("X0", c_type(view.dtype()), view.inputs[0].shape)]
    return Kernel(map_loops(out.shape, operands, ("Y0", c_type(out.dtype)), expression), macs=size(out.shape))
