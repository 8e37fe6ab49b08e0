"""EQUAL, GREATER, GREATER_EQUAL with TOSA broadcasting, a bool result, on fp32, fp16, bf16 and int32.

fp16 and bf16 widen exactly to fp32, so comparing there is comparing the stored values; IEEE comparisons
give what the specification asks: false when either operand is NaN, and +0 equal to -0.
"""

from __future__ import annotations

from ....tosa.capability import Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import LoweringContext, Step, elementwise_launch
from .elementwise import kernel, kernel_name
from .registry import lowering

EXPRESSIONS = {Op.EQUAL: "x0 == x1", Op.GREATER: "x0 > x1", Op.GREATER_EQUAL: "x0 >= x1"}


@lowering(*EXPRESSIONS, signatures=tuple(Signature.of(in_t=t, out_t="bool") for t in ("fp32", "fp16", "bf16", "int32")))
def compare(ctx: LoweringContext) -> list[Step]:
    a, b = ctx.inputs[0], ctx.inputs[1]
    op = ctx.operator.op
    k = kernel(kernel_name(op.name, a.dtype), (a.dtype, b.dtype), DType.BOOL, EXPRESSIONS[op])
    return elementwise_launch(ctx, k, (a, b))
