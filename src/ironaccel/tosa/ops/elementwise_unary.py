"""Rules of the element-wise unary operators (spec chapter "Elementwise Unary Operators").

The output shape is the input shape; NEGATE adds the zero-point rule (zero points only for int8).
"""

from __future__ import annotations

from ..operators import Op
from .rule import Context, rule
from .tensor import check_zero_point


@rule(
    Op.ABS,
    Op.BITWISE_NOT,
    Op.CEIL,
    Op.CLZ,
    Op.COS,
    Op.EXP,
    Op.FLOOR,
    Op.LOG,
    Op.LOGICAL_NOT,
    Op.RECIPROCAL,
    Op.RSQRT,
    Op.SIN,
)
def unary(ctx: Context) -> list[tuple[int, ...]]:
    return [ctx.inputs[0].shape]


@rule(Op.NEGATE)
def negate(ctx: Context) -> list[tuple[int, ...]]:
    dtype = ctx.inputs[0].dtype
    check_zero_point(ctx, 1, dtype, "input1_zp")
    check_zero_point(ctx, 2, dtype, "output_zp")
    return [ctx.inputs[0].shape]
