"""Elementwise binary operators with TOSA broadcasting: ADD, SUB, MUL, MAXIMUM, MINIMUM, POW, INTDIV, the
bitwise, logical and shift operators; and TABLE, which the specification files with them.

fp32, fp16 and bf16 compute in fp32 (``.elementwise``), so +, - and * are IEEE operations rounded once to
the result's type (NVRTC's default keeps denormals and IEEE rounding: no fast-math flag is given); POW is
CUDA's powf (a few units in the last place). MAXIMUM / MINIMUM pick an operand, with the attribute's NaN
mode. int32 ADD, SUB and MUL wrap in two's complement (where TOSA requires no overflow, what overflows is
unpredictable), computed unsigned so the C has no undefined behaviour; int32 MUL takes TOSA's shift, a
constant read at load: the exact 64-bit product rounded half up at the shift (``ia_mul_i32``). int8 and
int16 MUL give the exact product in int32 (their shift is 0). The float forms' shift is 0 (validation
checks it). INTDIV truncates towards zero; a zero divisor (a REQUIRE violation) gives 0, as in the CPU
backend.

Shifts take their amount clamped to [0, 63] (what lies outside is a REQUIRE violation) and work in 64
bits, so no C shift is undefined: LOGICAL_LEFT_SHIFT keeps the type's low bits, LOGICAL_RIGHT_SHIFT shifts
the type's own unsigned bit pattern (zeros enter from the top), ARITHMETIC_RIGHT_SHIFT shifts the signed
value and, with its ``round`` attribute, adds the last bit shifted out.

TABLE reads its table as a second operand that is not broadcast (a constant is uploaded once at load):
int8 looks ``table[x + 128]`` up in 256 entries; int16 reads ``x`` as a 9.7 fixed-point index into 513
entries and interpolates linearly, giving the 16.7 fixed-point value in int32.
"""

from __future__ import annotations

import numpy as np

from ....tosa.attributes import NanPropagationMode
from ....tosa.capability import Constraint, OperatorView, Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from ....tosa.strides import broadcast_strides, coalesce
from .common import Launch, LoweringContext, Step, elementwise_launch
from .elementwise import kernel, kernel_name
from .registry import in_out, lowering

FLOATS = ("fp32", "fp16", "bf16")
INTS = ("int8", "int16", "int32")
FLOAT_EXPRESSIONS = {
    Op.ADD: "x0 + x1",
    Op.SUB: "x0 - x1",
    Op.MUL: "x0 * x1",
    Op.MAXIMUM: "ia_max_f32(x0, x1, a.scalars[0])",
    Op.MINIMUM: "ia_min_f32(x0, x1, a.scalars[0])",
    Op.POW: "powf(x0, x1)",
}
INT_EXPRESSIONS = {
    Op.ADD: "(int)((unsigned)x0 + (unsigned)x1)",
    Op.SUB: "(int)((unsigned)x0 - (unsigned)x1)",
    Op.MUL: "ia_mul_i32(x0, x1, a.scalars[0])",
    Op.MAXIMUM: "(x0 >= x1 ? x0 : x1)",
    Op.MINIMUM: "(x0 < x1 ? x0 : x1)",
    Op.INTDIV: "(x1 == 0 ? 0 : (int)(unsigned)(unsigned long long)((long long)x0 / (long long)x1))",
    Op.BITWISE_AND: "x0 & x1",
    Op.BITWISE_OR: "x0 | x1",
    Op.BITWISE_XOR: "x0 ^ x1",
    Op.LOGICAL_AND: "(x0 != 0) & (x1 != 0)",
    Op.LOGICAL_OR: "(x0 != 0) | (x1 != 0)",
    Op.LOGICAL_XOR: "(x0 != 0) ^ (x1 != 0)",
}
_AMOUNT = "(x1 < 0 ? 0 : (x1 > 63 ? 63 : x1))"
# The arithmetic shift's scalar: 1 to round.
_ROUNDING = f"(a.scalars[0] != 0 && {_AMOUNT} > 0 ? (((long long)x0 >> ({_AMOUNT} - 1)) & 1) : 0)"
SHIFT_EXPRESSIONS = {
    Op.LOGICAL_LEFT_SHIFT: f"(int)(unsigned)((unsigned long long)(long long)x0 << {_AMOUNT})",
    Op.ARITHMETIC_RIGHT_SHIFT: f"(int)(unsigned)(unsigned long long)(((long long)x0 >> {_AMOUNT}) + {_ROUNDING})",
}
# LOGICAL_RIGHT_SHIFT's bit pattern of each type, zero-extended
PATTERN_MASKS = {DType.INT8: "0xFFull", DType.INT16: "0xFFFFull", DType.INT32: "0xFFFFFFFFull"}
TABLE8 = "(int)((const signed char*)a.in[1])[x0 + 128]"
_T16 = "((const short*)a.in[1])"
_INDEX = "((x0 + 32768) >> 7)"
TABLE16 = f"((int){_T16}[{_INDEX}] * 128 + ((int){_T16}[{_INDEX} + 1] - (int){_T16}[{_INDEX}]) * (x0 & 0x7F))"


def nan_mode(ctx: LoweringContext) -> int:
    """The operator's NaN mode as the kernels take it: 2 ignore, 1 propagate (also for UNKNOWN)."""
    mode = getattr(ctx.operator.attribute, "nan_mode", NanPropagationMode.PROPAGATE)
    return 2 if mode == NanPropagationMode.IGNORE else 1


def _constant_shift(view: OperatorView) -> bool:
    return len(view.consts) > 2 and view.consts[2] is not None


# MUL's shift is read on the host at load, so it must be a constant.
CONSTANT_SHIFT = Constraint("constant MUL shift only", _constant_shift)


def _binary(ctx: LoweringContext, expression: str, scalars: tuple[int, ...] = ()) -> list[Step]:
    a, b = ctx.inputs[0], ctx.inputs[1]
    out = ctx.outputs[0]
    # the input type names the kernel too where it differs (int8 MUL into int32 is not int32 MUL)
    types = (out.dtype,) if a.dtype is out.dtype else (a.dtype, out.dtype)
    k = kernel(kernel_name(ctx.operator.op.name, *types), (a.dtype, b.dtype), out.dtype, expression)
    return elementwise_launch(ctx, k, (a, b), scalars)


def _expression(ctx: LoweringContext) -> str:
    table = FLOAT_EXPRESSIONS if ctx.outputs[0].dtype.is_float else INT_EXPRESSIONS
    return table[ctx.operator.op]


@lowering(Op.ADD, Op.SUB, Op.MAXIMUM, Op.MINIMUM, signatures=in_out(*FLOATS, "int32"))
@lowering(Op.POW, signatures=in_out(*FLOATS))
def binary(ctx: LoweringContext) -> list[Step]:
    return _binary(ctx, _expression(ctx), (nan_mode(ctx),))


@lowering(
    Op.MUL,
    signatures=(
        *(Signature.of(in_t=t, out_t=t) for t in (*FLOATS, "int32")),
        *(Signature.of(in_t=t, out_t="int32") for t in ("int8", "int16")),
    ),
    constraints=(CONSTANT_SHIFT,),
)
def mul(ctx: LoweringContext) -> list[Step]:
    value = ctx.constant(2) if len(ctx.inputs) > 2 else None
    shift = int(np.asarray(value).reshape(-1)[0]) if value is not None and np.asarray(value).size else 0
    return _binary(ctx, _expression(ctx), (min(max(shift, 0), 63),))


@lowering(Op.INTDIV, signatures=in_out("int32"))
@lowering(Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR, signatures=in_out(*INTS))
@lowering(Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR, signatures=in_out("bool"))
def integer(ctx: LoweringContext) -> list[Step]:
    return _binary(ctx, INT_EXPRESSIONS[ctx.operator.op])


@lowering(Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT, Op.ARITHMETIC_RIGHT_SHIFT, signatures=in_out(*INTS))
def shift(ctx: LoweringContext) -> list[Step]:
    op = ctx.operator.op
    if op is Op.LOGICAL_RIGHT_SHIFT:
        pattern = f"((unsigned long long)(long long)x0 & {PATTERN_MASKS[ctx.outputs[0].dtype]})"
        expression = f"(int)(unsigned)({pattern} >> {_AMOUNT})"
    else:
        expression = SHIFT_EXPRESSIONS[op]
    return _binary(ctx, expression, (int(bool(getattr(ctx.operator.attribute, "round", False))),))


@lowering(
    Op.TABLE,
    signatures=(
        Signature.of(in_t="int8", table_t="int8", out_t="int8"),
        Signature.of(in_t="int16", table_t="int16", out_t="int32"),
    ),
)
def table(ctx: LoweringContext) -> list[Step]:
    x, lookup, out = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    count = int(np.prod(out.shape, dtype=np.int64))
    if count == 0:
        return []
    expression = TABLE8 if x.dtype is DType.INT8 else TABLE16
    k = kernel(kernel_name("table", x.dtype), (x.dtype,), out.dtype, expression)
    # only the input is walked elementwise; the kernel indexes the table operand itself
    dims, strides = coalesce(out.shape, [broadcast_strides(x.shape, out.shape)])
    reads = (ctx.place(x), ctx.place(lookup))
    return [Launch(k, reads, ctx.place(out), count, dims, strides, ())]
