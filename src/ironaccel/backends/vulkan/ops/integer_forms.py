"""Which lowering an operator of both tiers takes: its integer form (:mod:`.integer_tensor`,
:mod:`.integer_elementwise`) when its first operand and its result are integers or BOOL, else the float
one. Operators only the integer tier has (RESCALE, TABLE, the bitwise operators, ...) register
themselves directly.
"""

from __future__ import annotations

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from . import integer_elementwise as elementwise
from . import integer_tensor as tensor
from .common import Lowering, LoweringContext, Step

INTEGER_OR_BOOL = frozenset({DType.BOOL, DType.INT8, DType.INT16, DType.INT32})

FORMS: dict[Op, Lowering] = {
    Op.ABS: elementwise.abs_,
    Op.NEGATE: elementwise.negate,
    Op.CLAMP: elementwise.clamp,
    Op.CAST: elementwise.cast,
    Op.MATMUL: tensor.matmul,
    Op.DEPTHWISE_CONV2D: tensor.depthwise_conv2d,
    Op.AVG_POOL2D: tensor.pool2d,
    Op.MAX_POOL2D: tensor.pool2d,
    **{op: tensor.reduce for op in tensor.REDUCE_OPCODES},
    **{op: tensor.binary for op in (Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL)},
}


def is_integer(ctx: LoweringContext) -> bool:
    return ctx.inputs[0].dtype in INTEGER_OR_BOOL and ctx.outputs[0].dtype in INTEGER_OR_BOOL


def integer_first(integer: Lowering, other: Lowering) -> Lowering:
    """``integer`` for integer operands and results, ``other`` for the rest."""

    def lower(ctx: LoweringContext) -> list[Step]:
        return integer(ctx) if is_integer(ctx) else other(ctx)

    return lower
