"""CPU kernels of the elementwise unary operators.

Float results are computed in float64 and rounded once to the output type; numpy's float64 functions
meet the spec's bounds (a few ulp of fp32 at most) with a wide margin, and produce the spec's special
values (LOG(-0) = -inf, LOG(x<0) = NaN, RSQRT(-0) = -inf, RECIPROCAL(+-0) = +-inf) by IEEE rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ....tosa.operators import Op
from .. import numerics
from ..kernel import KernelContext, kernel


def _float_unary(fn: Callable[[np.ndarray], np.ndarray], doc: str):
    def run(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [numerics.float_compute(fn, inputs[0], dtype=ctx.outputs[0].dtype)]

    run.__doc__ = doc
    return run


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)  # sqrt of a negative is NaN; sqrt(-0) = -0 gives -inf, as the spec's table


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return 1.0 / x


kernel(Op.CEIL)(_float_unary(np.ceil, "Round up to an integer; exact, sign of zero kept."))
kernel(Op.FLOOR)(_float_unary(np.floor, "Round down to an integer; exact, sign of zero kept."))
kernel(Op.COS)(_float_unary(np.cos, "Cosine of radians, float64 then one rounding."))
kernel(Op.SIN)(_float_unary(np.sin, "Sine of radians, float64 then one rounding."))
kernel(Op.EXP)(_float_unary(np.exp, "e**x, float64 then one rounding; overflow gives +inf."))
kernel(Op.LOG)(_float_unary(np.log, "Natural log; -inf at +-0, NaN below zero."))
kernel(Op.RECIPROCAL)(_float_unary(_reciprocal, "1/x, correctly rounded."))
kernel(Op.RSQRT)(_float_unary(_rsqrt, "1/sqrt(x); NaN below zero, -inf at -0."))


@kernel(Op.ABS)
def abs_(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """|x|; -0 becomes +0. The int32 minimum has no positive counterpart (a REQUIRE violation): it
    wraps to itself."""
    dtype = ctx.outputs[0].dtype
    if dtype.is_float:
        return [numerics.float_compute(np.abs, inputs[0], dtype=dtype)]
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
        return [numerics.float_compute(np.negative, x, dtype=dtype)]
    zp_in = int(np.asarray(inputs[1]).reshape(-1)[0]) if len(inputs) > 1 else 0
    zp_out = int(np.asarray(inputs[2]).reshape(-1)[0]) if len(inputs) > 2 else 0
    value = zp_out - (np.asarray(x).astype(np.int64) - zp_in)
    return [numerics.saturate(value, dtype)]
