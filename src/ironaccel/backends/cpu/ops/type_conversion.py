"""CPU kernels of the type conversion operators: CAST and RESCALE."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ....core.errors import InternalError
from ....tosa.attributes import RescaleAttribute, RoundingMode
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .. import numerics
from ..kernel import KernelContext, constants, kernel, prepared


def cast_values(values: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """CAST ``values`` (storage of ``src``) to ``dst``, for every pair the spec allows (and more).

    * to BOOL: ``value != 0``; from BOOL: 1 / 0 (1.0 / 0.0).
    * integer -> integer: sign extension when widening, truncation to the low bits when narrowing.
    * integer -> float: rounded once to nearest-even (float64 holds every int32 / int48 exactly).
    * float -> integer: round to nearest, ties to even, saturated to the output range; NaN, which the
      spec leaves unpredictable, gives 0.
    * float -> float: one round-to-nearest-even from the exact value; overflow gives an infinity, except
      FP8E4M3 (no infinity), where overflow and infinities give NaN (OCP OFP8 non-saturating mode);
      subnormals are kept; NaN stays NaN.
    """
    x = np.asarray(values)
    if dst is DType.BOOL:
        return np.asarray(x.astype(np.float64) != 0 if src.is_float else x != 0, dtype=np.bool_)
    if src is DType.BOOL:
        x = x.astype(np.int64)
    if dst.is_float:
        return numerics.round_to_float(numerics.to_float64(x), dst)
    if src.is_float:
        return numerics.float_to_int(x, dst)
    return numerics.wrap(x.astype(np.int64), dst)


@kernel(Op.CAST)
def cast(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [cast_values(inputs[0], ctx.inputs[0].dtype, ctx.outputs[0].dtype)]


def _scalar(values: np.ndarray) -> int:
    return int(np.asarray(values).reshape(-1)[0])


def rescale_values(
    values: np.ndarray,
    multiplier: np.ndarray,
    shift: np.ndarray,
    input_zp: int,
    output_zp: int,
    *,
    in_dtype: DType,
    out_dtype: DType,
    attr: RescaleAttribute,
) -> np.ndarray:
    """RESCALE as the spec's pseudocode, vectorised; returns ``out_dtype`` storage.

    ``multiplier`` / ``shift`` hold one value (per-tensor) or one per channel of the last axis
    (per-channel). Unsigned input / output reinterpret the storage bits (int8 -1 is uint8 255) and
    zero-extend the matching zero point. INEXACT_ROUND is computed as SINGLE_ROUND, which meets its
    error bound exactly (the spec notes a single-round result always does). Only DOUBLE_ROUND with
    scale32 adds the second rounding stage.
    """
    if attr.input_unsigned:
        value = numerics.zero_extend(values, in_dtype)
        zp_in = input_zp & ((1 << in_dtype.bits) - 1)
    else:
        value = np.asarray(values).astype(np.int64)
        zp_in = input_zp
    value = value - zp_in
    m = np.asarray(multiplier).astype(np.int64).reshape(-1)
    s = np.asarray(shift).astype(np.int64).reshape(-1)
    if not attr.per_channel:
        m, s = m[:1], s[:1]
    # per-channel values index the last axis, which is exactly how a [C] array broadcasts
    if attr.scale32:
        double = attr.rounding_mode == RoundingMode.DOUBLE_ROUND
        result = numerics.apply_scale_32(value, m, s, double_round=double)
    else:
        result = numerics.apply_scale_16(value, m, s)
    if not attr.per_channel:
        result = result.reshape(np.shape(values))
    if attr.output_unsigned:
        zp_out = output_zp & ((1 << out_dtype.bits) - 1)
    else:
        zp_out = output_zp
    return numerics.saturate(result + zp_out, out_dtype, unsigned=attr.output_unsigned)


# -- RESCALE in float64 where that is exact ---------------------------------------------------------------
# Per channel c the spec computes floor(N / 2**s) with N = (x - zp_in) * m + r, narrows it to int32, adds
# zp_out and saturates to [lo, hi]. With K = r - zp_in * m + (zp_out - base) * 2**s, where base is lo or 0,
# that is clip(floor((x * m + K) / 2**s) + base, lo, hi). In float64, y = x * (m * 2**-s) + K * 2**-s is
# computed without any rounding while |x| * |m| + |K| < 2**53: m * 2**-s and K * 2**-s are exact (integers
# below 2**53 scaled by a power of two), x * m * 2**-s is an integer below 2**53 times a power of two, and
# so is the sum; floor(y) is then the exact quotient. The int32 narrowing changes nothing while
# |N| <= (2**31 - 1) * 2**s. The bound on |x| under which both hold is worked out once from the constants;
# the input's own range is checked against it on each run (from the type for 8 / 16-bit inputs, by a
# min / max scan for wider ones). Outside it, the int64 pseudocode above runs.
#
# With base = lo, y is the result minus lo: once clipped to [0, hi - lo] it is non-negative, so the
# truncating cast to the unsigned type of the output's width is the floor, and flipping the top bit
# (lo = -2**(bits-1)) turns that store into the result's two's complement bits: no separate floor pass.
# Where K with base = lo does not fit 2**53 (large shifts into int32), base = 0 and an explicit floor.
_EXACT53 = 1 << 53
_FULL_TILE = 1 << 18  # per-channel factors are expanded to the input's shape (contiguous passes) up to this


@dataclasses.dataclass(frozen=True)
class _RescalePlan:
    limit: int  # the largest |x| for which the float64 path is exact; -1: never
    type_bound: int | None  # max |x| the input type allows (None: 32 / 48-bit, scan the values)
    unsigned_view: np.dtype | None  # read the input's bits as this unsigned type
    scale: np.ndarray | float  # m * 2**-s, per channel or one
    offset: np.ndarray | float  # K * 2**-s, per channel or one
    based: bool  # K includes -lo * 2**s (truncating store and bit flip); else floor, clip to [lo, hi]
    lo: float
    hi: float
    flip: int  # based: the XOR that turns the unsigned store of (result - lo) into the result's bits
    store: np.dtype  # based: the unsigned type of the output's width


def _channel_terms(m: list[int], raw: list[int], zp_in: int, shift_zp: int) -> tuple[list[float], list[float], int]:
    """Per channel m * 2**-s and K * 2**-s (K as above with zp_out - base = ``shift_zp``), and the largest
    |x| keeping every channel exact and inside int32 (-1 if none)."""
    scales, offsets, limit = [], [], _EXACT53
    for mc, sc in zip(m, raw, strict=True):
        s = min(max(sc, 0), 63)  # as numerics.multiply_round_shift clips it
        r = 1 << min(max(sc - 1, 0), 62) if sc > 0 else 0  # numerics._round_term
        k = r - zp_in * mc + shift_zp * (1 << s)
        room_exact = _EXACT53 - 1 - abs(k)
        room_int32 = (2**31 - 1) * (1 << s) - abs(zp_in * mc) - r
        if room_exact < 0 or room_int32 < 0:
            return [], [], -1
        if mc:
            limit = min(limit, room_exact // abs(mc), room_int32 // abs(mc))
        scales.append(math.ldexp(float(mc), -s))
        offsets.append(math.ldexp(float(k), -s))
    return scales, offsets, limit


def _rescale_plan(
    multiplier: np.ndarray, shift: np.ndarray, input_zp: int, output_zp: int, in_dtype: DType, out_dtype: DType, attr
) -> _RescalePlan:
    m = [int(v) for v in np.asarray(multiplier).astype(np.int64).reshape(-1)]
    raw = [int(v) for v in np.asarray(shift).astype(np.int64).reshape(-1)]
    if not attr.per_channel:
        m, raw = m[:1], raw[:1]
    zp_in = input_zp & ((1 << in_dtype.bits) - 1) if attr.input_unsigned else input_zp
    lo, hi = numerics.int_range(out_dtype, attr.output_unsigned)
    zp_out = output_zp & ((1 << out_dtype.bits) - 1) if attr.output_unsigned else output_zp
    possible = (
        len(m) == len(raw) > 0
        and out_dtype.numpy.itemsize * 8 == out_dtype.bits
        and not (attr.input_unsigned and in_dtype.numpy.itemsize * 8 != in_dtype.bits)
        # the second rounding term of DOUBLE_ROUND depends on the sign of x - zp_in
        and not (attr.scale32 and attr.rounding_mode == RoundingMode.DOUBLE_ROUND and max(raw) > 31)
    )
    based = True
    scales, offsets, limit = _channel_terms(m, raw, zp_in, zp_out - lo) if possible else ([], [], -1)
    if possible and limit < 0:
        based = False
        scales, offsets, limit = _channel_terms(m, raw, zp_in, zp_out)
    if attr.input_unsigned:
        type_bound, view = (1 << in_dtype.bits) - 1, np.dtype(f"u{in_dtype.numpy.itemsize}")
    else:
        type_bound, view = 1 << (in_dtype.bits - 1), None
    scale: np.ndarray | float = scales[0] if scales else 0.0
    offset: np.ndarray | float = offsets[0] if offsets else 0.0
    if attr.per_channel and scales:
        scale = np.array(scales)
        if any(o != offsets[0] for o in offsets):
            offset = np.array(offsets)
    return _RescalePlan(
        limit,
        type_bound if in_dtype.bits <= 16 else None,
        view,
        scale,
        offset,
        based,
        float(lo),
        float(hi),
        -lo,  # 0, or 2**(bits-1): flipping the top bit subtracts it modulo 2**bits
        np.dtype(f"u{out_dtype.numpy.itemsize}"),
    )


def _full(
    ctx: KernelContext | None, key: str, factor: np.ndarray | float, shape: tuple[int, ...]
) -> np.ndarray | float:
    """A constant per-channel factor expanded to ``shape`` (contiguous passes beat a one-row broadcast), kept
    per shape with the operator; as it is without ``ctx`` (factors that are not constants)."""
    if ctx is None or not isinstance(factor, np.ndarray) or math.prod(shape) > _FULL_TILE:
        return factor
    return prepared(ctx, (key, shape), lambda: np.ascontiguousarray(np.broadcast_to(factor, shape)))


def _rescale_float(
    ctx: KernelContext | None, plan: _RescalePlan, values: np.ndarray, out_dtype: DType
) -> np.ndarray | None:
    """RESCALE through float64 (see above), or None when the input's range is outside the exact bound."""
    bound = plan.type_bound
    if bound is None:
        if not values.size:
            return None
        bound = max(-int(values.min()), int(values.max()))
    if bound > plan.limit:
        return None
    x = values if plan.unsigned_view is None else values.view(plan.unsigned_view)
    y = x.astype(np.float64)
    np.multiply(y, _full(ctx, "scale", plan.scale, y.shape), out=y)
    np.add(y, _full(ctx, "offset", plan.offset, y.shape), out=y)
    if plan.based:
        np.clip(y, 0.0, plan.hi - plan.lo, out=y)
        stored = y.astype(plan.store)
        if plan.flip:
            np.bitwise_xor(stored, stored.dtype.type(plan.flip), out=stored)
        return stored.view(out_dtype.numpy)
    np.floor(y, out=y)
    np.clip(y, plan.lo, plan.hi, out=y)
    return y.astype(plan.store).view(out_dtype.numpy) if plan.lo == 0 else y.astype(out_dtype.numpy)


@kernel(Op.RESCALE)
def rescale(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Inputs: input, multiplier, shift, input_zp, output_zp (spec argument order). Exact in float64 when
    the bounds above allow it, else the int64 pseudocode (:func:`rescale_values`)."""
    values, multiplier, shift, input_zp, output_zp = inputs[:5]
    attr = ctx.operator.attribute
    if not isinstance(attr, RescaleAttribute):
        raise InternalError(f"RESCALE without a RescaleAttribute: {attr!r}")
    in_dtype, out_dtype = ctx.inputs[0].dtype, ctx.outputs[0].dtype
    values = np.asarray(values)
    if values.dtype == in_dtype.numpy and values.ndim:

        def make() -> _RescalePlan:
            zps = _scalar(input_zp), _scalar(output_zp)
            return _rescale_plan(multiplier, shift, *zps, in_dtype, out_dtype, attr)

        constant = constants(ctx, 1, 2, 3, 4)
        plan = prepared(ctx, "rescale", make) if constant else make()
        if plan.limit >= 0:
            result = _rescale_float(ctx if constant else None, plan, values, out_dtype)
            if result is not None:
                return [result]
    return [
        rescale_values(
            values,
            multiplier,
            shift,
            _scalar(input_zp),
            _scalar(output_zp),
            in_dtype=in_dtype,
            out_dtype=out_dtype,
            attr=attr,
        )
    ]
