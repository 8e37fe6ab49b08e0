"""Elementwise unary operators: ABS, NEGATE, EXP, LOG, RECIPROCAL, RSQRT.

fp32, fp16 and bf16 compute in fp32 with CUDA's math library (expf, logf: within 2 units in the last place;
RECIPROCAL is IEEE division, correctly rounded; RSQRT is rsqrtf, within 2 units), rounded once to the
result's type. int32 ABS and NEGATE wrap (|-2^31| and -(-2^31), which TOSA leaves unpredictable, give
-2^31). NEGATE's zero points must be constant zeros: the specification's float signatures allow nothing
else, and int32 takes none but 0.
"""

from __future__ import annotations

from ....tosa.capability import Signature, zero_zero_points
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import LoweringContext, Step, elementwise_launch
from .elementwise import kernel, kernel_name
from .registry import in_out, lowering

FLOATS = ("fp32", "fp16", "bf16")
FLOAT_EXPRESSIONS = {
    Op.ABS: "fabsf(x0)",
    Op.NEGATE: "-x0",
    Op.EXP: "expf(x0)",
    Op.LOG: "logf(x0)",
    Op.RECIPROCAL: "1.0f / x0",
    Op.RSQRT: "rsqrtf(x0)",
}
INT_EXPRESSIONS = {
    Op.ABS: "(int)(x0 < 0 ? 0u - (unsigned)x0 : (unsigned)x0)",
    Op.NEGATE: "(int)(0u - (unsigned)x0)",
}


def unary_steps(ctx: LoweringContext, expression: str, scalars: tuple[int, ...] = ()) -> list[Step]:
    """The launch computing ``expression`` over ``x0`` (the first operand) into the one result."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    k = kernel(kernel_name(ctx.operator.op.name, out.dtype), (x.dtype,), out.dtype, expression)
    return elementwise_launch(ctx, k, (x,), scalars)


@lowering(Op.ABS, signatures=in_out(*FLOATS, "int32"))
@lowering(Op.EXP, Op.LOG, Op.RECIPROCAL, Op.RSQRT, signatures=in_out(*FLOATS))
@lowering(
    Op.NEGATE,
    signatures=tuple(Signature.of(in_out_t=t, acc_t=t) for t in (*FLOATS, "int32")),
    constraints=(zero_zero_points(),),
)
def unary(ctx: LoweringContext) -> list[Step]:
    table = INT_EXPRESSIONS if ctx.outputs[0].dtype is DType.INT32 else FLOAT_EXPRESSIONS
    return unary_steps(ctx, table[ctx.operator.op])
