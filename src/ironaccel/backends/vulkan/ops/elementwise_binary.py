"""Elementwise binary operators with TOSA broadcasting, every form side by side.

* fp32 ADD, SUB, MUL (shift 0), MAXIMUM, MINIMUM, POW: ``binary.comp``, moving vec4s where no operand
  broadcasts and the count is a multiple of 4 (the places are aligned to 256 bytes, the caller's ranges of
  direct recordings to 16: :mod:`..direct`). Its arithmetic is IEEE single precision: +, - and * are
  correctly rounded in Vulkan, so they match the CPU oracle bit for bit; MAXIMUM / MINIMUM pick an operand
  (exact) with the attribute's NaN mode; POW is e^(b ln a) with ln a carried in two floats
  (shaders/include/math.glsl). Their fp16 and bf16 forms are the same kernel between conversions.
* INT32 ADD, SUB, MUL (with its constant shift; int8 / int16 MUL into int32), INTDIV, MAXIMUM, MINIMUM;
  BOOL LOGICAL_AND / OR / XOR; INT8 / INT16 / INT32 LOGICAL_LEFT_SHIFT / LOGICAL_RIGHT_SHIFT,
  ARITHMETIC_RIGHT_SHIFT (with its round attribute), BITWISE_AND / OR / XOR: ``integer.comp``
  (:func:`.elementwise.integer_steps`).
* TABLE, int8 and int16 (interpolated): ``int_unary.comp``.
"""

from __future__ import annotations

import numpy as np

from ....tosa.capability import Constraint, OperatorView, Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import WORKGROUP, Dispatch, LoweringContext, Step, groups, indexed_push, nan_mode
from .elementwise import TABLE16, int_unary_steps, integer_steps
from .registry import in_out, lowering

OPCODES = {Op.ADD: 0, Op.SUB: 1, Op.MUL: 2, Op.MAXIMUM: 3, Op.MINIMUM: 4, Op.POW: 5}
ARITHMETIC = (Op.ADD, Op.SUB, Op.MAXIMUM, Op.MINIMUM)
SHIFTS_AND_BITWISE = (
    *(Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT, Op.ARITHMETIC_RIGHT_SHIFT),
    *(Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR),
)


def _constant_shift(view: OperatorView) -> bool:
    return len(view.consts) > 2 and view.consts[2] is not None


# MUL's shift is read on the host, so it must be a constant (the float forms' is 0: validation checks it).
CONSTANT_SHIFT = Constraint("constant MUL shift only", _constant_shift)


@lowering(*ARITHMETIC, Op.POW, signatures=in_out("fp32"), widened=in_out("fp16", "bf16"))
@lowering(
    Op.MUL,
    signatures=(Signature.of(in_t="fp32", out_t="fp32"),),
    widened=tuple(Signature.of(in_t=t, out_t=t) for t in ("fp16", "bf16")),
    constraints=(CONSTANT_SHIFT,),
)
def binary(ctx: LoweringContext) -> list[Step]:
    a, b = ctx.inputs[0], ctx.inputs[1]  # MUL's third operand, the shift, is 0
    out = ctx.outputs[0]
    n, push = indexed_push(out.shape, [a.shape, b.shape])
    if n == 0:
        return []
    vec4 = int(a.shape == b.shape == out.shape and n % 4 == 0)  # places are 16-byte aligned (plan.py)
    spec = (WORKGROUP, OPCODES[ctx.operator.op], nan_mode(ctx), vec4)
    reads = (ctx.place(a), ctx.place(b))
    return [Dispatch("binary", spec, reads, (ctx.place(out),), push, groups(n // 4 if vec4 else n, ctx))]


@lowering(
    Op.MUL,
    signatures=tuple(Signature.of(in_t=t, out_t="int32") for t in ("int8", "int16", "int32")),
    constraints=(CONSTANT_SHIFT,),
)
def mul_integer(ctx: LoweringContext) -> list[Step]:
    value = ctx.constant(2) if len(ctx.inputs) > 2 else None  # a constant (CONSTANT_SHIFT)
    return integer_steps(ctx, shift=int(np.asarray(value).reshape(-1)[0]) if value is not None else 0)


@lowering(*ARITHMETIC, Op.INTDIV, signatures=in_out("int32"))
@lowering(Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR, signatures=in_out("bool"))
@lowering(*SHIFTS_AND_BITWISE, signatures=in_out("int8", "int16", "int32"))
def integer(ctx: LoweringContext) -> list[Step]:
    return integer_steps(ctx, shift=int(getattr(ctx.operator.attribute, "round", False)))


@lowering(
    Op.TABLE,
    signatures=(
        Signature.of(in_t="int8", table_t="int8", out_t="int8"),
        Signature.of(in_t="int16", table_t="int16", out_t="int32"),
    ),
)
def table(ctx: LoweringContext) -> list[Step]:
    return int_unary_steps(ctx, opcode=TABLE16 if ctx.inputs[0].dtype is DType.INT16 else None)
