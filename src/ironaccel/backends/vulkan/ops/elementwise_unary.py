"""Elementwise unary operators, every form side by side.

* ABS, NEGATE (zero zero-points), FLOOR, CEIL, EXP, LOG, RECIPROCAL, RSQRT, SIN, COS on fp32:
  ``unary.comp`` (:func:`.elementwise.unary_steps`); their fp16 and bf16 forms are the same kernel between
  conversions.
* ABS (int32), NEGATE (int8 / int16 / int32, with constant zero points of any value), BITWISE_NOT, CLZ:
  ``int_unary.comp``, exact.
* LOGICAL_NOT on BOOL: ``integer.comp``.
"""

from __future__ import annotations

from ....tosa.capability import Signature, constant_operand
from ....tosa.operators import Op
from .common import FLOAT_ZERO_POINTS, LoweringContext, Step
from .elementwise import constant_int, int_unary_steps, integer_steps, unary_steps
from .registry import in_out, lowering

FUNCTIONS = (Op.FLOOR, Op.CEIL, Op.EXP, Op.LOG, Op.RECIPROCAL, Op.RSQRT, Op.SIN, Op.COS)


@lowering(Op.ABS, *FUNCTIONS, signatures=in_out("fp32"), widened=in_out("fp16", "bf16"))
@lowering(
    Op.NEGATE,
    signatures=(Signature.of(in_out_t="fp32", acc_t="fp32"),),
    widened=tuple(Signature.of(in_out_t=t, acc_t=t) for t in ("fp16", "bf16")),
    constraints=(FLOAT_ZERO_POINTS,),
)
def unary(ctx: LoweringContext) -> list[Step]:
    return unary_steps(ctx)  # NEGATE's zero points are 0 (FLOAT_ZERO_POINTS), so it is -x


@lowering(Op.ABS, Op.CLZ, signatures=in_out("int32"))
@lowering(Op.BITWISE_NOT, signatures=in_out("int8", "int16", "int32"))
def unary_integer(ctx: LoweringContext) -> list[Step]:
    return int_unary_steps(ctx)


@lowering(
    Op.NEGATE,
    signatures=tuple(Signature.of(in_out_t=t, acc_t="int32") for t in ("int8", "int16", "int32")),
    # the zero points are read on the host (:func:`.elementwise.constant_int`)
    constraints=(constant_operand(1, "input zero point"), constant_operand(2, "output zero point")),
)
def negate_integer(ctx: LoweringContext) -> list[Step]:
    return int_unary_steps(ctx, constant_int(ctx, 1), constant_int(ctx, 2))


@lowering(Op.LOGICAL_NOT, signatures=in_out("bool"))
def logical_not(ctx: LoweringContext) -> list[Step]:
    return integer_steps(ctx, 0, 0)
