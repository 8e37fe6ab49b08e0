"""CPU kernels of the elementwise unary operators.

Float results are computed in float64 and rounded once to the output type; numpy's float64 functions
meet the spec's bounds (a few ulp of fp32 at most) with a wide margin, and produce the spec's special
values (LOG(-0) = -inf, LOG(x<0) = NaN, RSQRT(-0) = -inf, RECIPROCAL(+-0) = +-inf) by IEEE rules.
Single exact or correctly rounded IEEE operations (ABS, NEGATE, CEIL, FLOOR, RECIPROCAL's one division)
give those same bits in float32 directly, so fp32 takes that path (see :mod:`..numerics`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .. import numerics
from ..kernel import KernelContext, kernel, muted

_F32 = np.dtype(np.float32)


def _in_float32(
    ctx: KernelContext, fn: Callable[[np.ndarray], np.ndarray] | None, dtype: DType, x: np.ndarray
) -> np.ndarray | None:
    """``fn`` applied in float32 when it is one IEEE operation on fp32 values, else None (also when the
    result holds a NaN, whose bits the float64 path defines)."""
    if fn is None or dtype is not DType.FP32 or x.dtype != _F32:
        return None
    with muted(ctx):
        result = fn(x)
    if type(result) is not np.ndarray:  # rank 0 gives a numpy scalar
        result = np.asarray(result)
    return None if numerics.has_nan(result) else result


def _float_unary(fn: Callable[[np.ndarray], np.ndarray], doc: str, fp32: Callable | None = None):
    """A float kernel evaluating ``fn`` in float64; ``fp32``, when given, is the same single IEEE operation
    done in float32, used for fp32 values."""

    def run(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        dtype = ctx.outputs[0].dtype
        direct = _in_float32(ctx, fp32, dtype, inputs[0])
        if direct is not None:
            return [direct]
        return [numerics.float_compute(fn, inputs[0], dtype=dtype)]

    run.__doc__ = doc
    return run


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)  # sqrt of a negative is NaN; sqrt(-0) = -0 gives -inf, as the spec's table


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return 1.0 / x


def _reciprocal32(x: np.ndarray) -> np.ndarray:
    return np.divide(np.float32(1.0), x)  # one correctly rounded float32 division


kernel(Op.CEIL)(_float_unary(np.ceil, "Round up to an integer; exact, sign of zero kept.", np.ceil))
kernel(Op.FLOOR)(_float_unary(np.floor, "Round down to an integer; exact, sign of zero kept.", np.floor))
kernel(Op.COS)(_float_unary(np.cos, "Cosine of radians, float64 then one rounding."))
kernel(Op.SIN)(_float_unary(np.sin, "Sine of radians, float64 then one rounding."))
kernel(Op.EXP)(_float_unary(np.exp, "e**x, float64 then one rounding; overflow gives +inf."))
kernel(Op.LOG)(_float_unary(np.log, "Natural log; -inf at +-0, NaN below zero."))
kernel(Op.RECIPROCAL)(_float_unary(_reciprocal, "1/x, correctly rounded.", _reciprocal32))
kernel(Op.RSQRT)(_float_unary(_rsqrt, "1/sqrt(x); NaN below zero, -inf at -0."))


@kernel(Op.ABS)
def abs_(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """|x|; -0 becomes +0. The int32 minimum has no positive counterpart (a REQUIRE violation): it
    wraps to itself."""
    dtype = ctx.outputs[0].dtype
    if dtype.is_float:
        direct = _in_float32(ctx, np.abs, dtype, inputs[0])
        return [direct if direct is not None else numerics.float_compute(np.abs, inputs[0], dtype=dtype)]
    return [numerics.wrap(np.abs(np.asarray(inputs[0]).astype(np.int64)), dtype)]


@kernel(Op.BITWISE_NOT)
def bitwise_not(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    dtype = ctx.outputs[0].dtype.numpy
    return [np.asarray(np.invert(np.asarray(inputs[0], dtype)), dtype=dtype)]


@kernel(Op.CLZ)
def clz(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [numerics.count_leading_zeros(inputs[0])]


@kernel(Op.LOGICAL_NOT)
def logical_not(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(np.logical_not(inputs[0]), dtype=np.bool_)]


@kernel(Op.NEGATE)
def negate(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Inputs: input1, input1_zp, output_zp. Integers: ``zp_out - (x - zp_in)`` saturated to the type
    (computed in int64, so only the final clip narrows it). Floats: the sign flips, so +0 gives -0 as
    the spec's behaviour table says (the zero points are 0 for floats)."""
    dtype = ctx.outputs[0].dtype
    x = inputs[0]
    if dtype.is_float:
        direct = _in_float32(ctx, np.negative, dtype, x)
        return [direct if direct is not None else numerics.float_compute(np.negative, x, dtype=dtype)]
    zp_in = int(np.asarray(inputs[1]).reshape(-1)[0]) if len(inputs) > 1 else 0
    zp_out = int(np.asarray(inputs[2]).reshape(-1)[0]) if len(inputs) > 2 else 0
    value = zp_out - (np.asarray(x).astype(np.int64) - zp_in)
    return [numerics.saturate(value, dtype)]
