"""CPU kernels of the type conversion operators: CAST and RESCALE."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....core.errors import InternalError
from ....tosa.attributes import RescaleAttribute, RoundingMode
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .. import numerics
from ..kernel import KernelContext, kernel


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


@kernel(Op.RESCALE)
def rescale(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Inputs: input, multiplier, shift, input_zp, output_zp (spec argument order)."""
    values, multiplier, shift, input_zp, output_zp = inputs[:5]
    attr = ctx.operator.attribute
    if not isinstance(attr, RescaleAttribute):
        raise InternalError(f"RESCALE without a RescaleAttribute: {attr!r}")
    return [
        rescale_values(
            values,
            multiplier,
            shift,
            _scalar(input_zp),
            _scalar(output_zp),
            in_dtype=ctx.inputs[0].dtype,
            out_dtype=ctx.outputs[0].dtype,
            attr=attr,
        )
    ]
