"""Elementwise unary operators: ABS, NEGATE, EXP, LOG, RECIPROCAL, RSQRT, CEIL, FLOOR, SIN, COS on fp32,
fp16 and bf16; ABS, CLZ, BITWISE_NOT and NEGATE of the integer types; LOGICAL_NOT of bool.

fp32, fp16 and bf16 compute in fp32 with CUDA's math library (expf, logf, sinf, cosf: within 2 units in
the last place; RECIPROCAL is IEEE division, correctly rounded; RSQRT is rsqrtf, within 2 units; ABS,
NEGATE, CEIL and FLOOR are exact), rounded once to the result's type. int32 ABS wraps (|-2^31|, which TOSA
leaves unpredictable, gives -2^31). Integer NEGATE is ``output_zp - (x - input_zp)`` computed in 64 bits
and saturated to the type, as the CPU backend does; its zero points are read at load, so they must be
constants. The float NEGATE's zero points must be constant zeros, all the specification allows. CLZ
counts the leading zeros of the 32-bit pattern (32 for 0); BITWISE_NOT complements the stored bits.
"""

from __future__ import annotations

import numpy as np

from ....core.errors import InternalError
from ....tosa.capability import Signature, constant_operand, zero_zero_points
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
    Op.CEIL: "ceilf(x0)",
    Op.FLOOR: "floorf(x0)",
    Op.SIN: "sinf(x0)",
    Op.COS: "cosf(x0)",
}
INT_EXPRESSIONS = {
    Op.ABS: "(int)(x0 < 0 ? 0u - (unsigned)x0 : (unsigned)x0)",
    Op.CLZ: "__clz(x0)",
    Op.BITWISE_NOT: "~x0",
    Op.LOGICAL_NOT: "x0 == 0",
}
# scalars: the input and output zero points, then the type's least and greatest values
_NEGATED = "((long long)a.scalars[1] - ((long long)x0 - a.scalars[0]))"
_LOWERED = f"({_NEGATED} > a.scalars[3] ? a.scalars[3] : {_NEGATED})"
NEGATE_INT = f"(int)({_NEGATED} < a.scalars[2] ? a.scalars[2] : {_LOWERED})"
INT_RANGES = {DType.INT8: (-(2**7), 2**7 - 1), DType.INT16: (-(2**15), 2**15 - 1), DType.INT32: (-(2**31), 2**31 - 1)}


def unary_steps(ctx: LoweringContext, expression: str, scalars: tuple[int, ...] = ()) -> list[Step]:
    """The launch computing ``expression`` over ``x0`` (the first operand) into the one result."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    k = kernel(kernel_name(ctx.operator.op.name, out.dtype), (x.dtype,), out.dtype, expression)
    return elementwise_launch(ctx, k, (x,), scalars)


def constant_int(ctx: LoweringContext, index: int) -> int:
    """The one integer of constant operand ``index`` (a zero point its registration requires constant)."""
    value = ctx.constant(index)
    if value is None:  # the registration's constraint refuses this at admission
        raise InternalError(f"{ctx.operator.op.name}: operand {index} is not a constant")
    return int(np.asarray(value).astype(np.int64).reshape(-1)[0])


@lowering(Op.ABS, signatures=in_out(*FLOATS))
@lowering(Op.EXP, Op.LOG, Op.RECIPROCAL, Op.RSQRT, Op.CEIL, Op.FLOOR, Op.SIN, Op.COS, signatures=in_out(*FLOATS))
@lowering(
    Op.NEGATE,
    signatures=tuple(Signature.of(in_out_t=t, acc_t=t) for t in FLOATS),
    constraints=(zero_zero_points(),),
)
def unary(ctx: LoweringContext) -> list[Step]:
    return unary_steps(ctx, FLOAT_EXPRESSIONS[ctx.operator.op])


@lowering(Op.ABS, Op.CLZ, signatures=in_out("int32"))
@lowering(Op.BITWISE_NOT, signatures=in_out("int8", "int16", "int32"))
@lowering(Op.LOGICAL_NOT, signatures=in_out("bool"))
def unary_integer(ctx: LoweringContext) -> list[Step]:
    return unary_steps(ctx, INT_EXPRESSIONS[ctx.operator.op])


@lowering(
    Op.NEGATE,
    signatures=tuple(Signature.of(in_out_t=t, acc_t="int32") for t in ("int8", "int16", "int32")),
    constraints=(constant_operand(1, "input zero point"), constant_operand(2, "output zero point")),
)
def negate_integer(ctx: LoweringContext) -> list[Step]:
    lo, hi = INT_RANGES[ctx.outputs[0].dtype]
    return unary_steps(ctx, NEGATE_INT, (constant_int(ctx, 1), constant_int(ctx, 2), lo, hi))
