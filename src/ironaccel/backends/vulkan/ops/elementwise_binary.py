"""Elementwise binary operators with TOSA broadcasting.

fp32 ADD, SUB, MUL (shift 0), MAXIMUM, MINIMUM, POW: ``binary.comp``, moving vec4s where no operand
broadcasts and the count is a multiple of 4 (the places are aligned to 256 bytes, the caller's ranges of
direct recordings to 16: :mod:`..direct`). Its arithmetic is IEEE single
precision: +, - and * are correctly rounded in Vulkan, so they match the CPU oracle bit for bit;
MAXIMUM / MINIMUM pick an operand (exact) with the attribute's NaN mode; POW is e^(b ln a) with ln a
carried in two floats (shaders/include/math.glsl).

INT32 ADD, SUB, MUL (with its constant shift; int8 / int16 MUL into int32), INTDIV, MAXIMUM, MINIMUM,
comparisons; BOOL LOGICAL_AND / OR / XOR; INT8 / INT16 / INT32 LOGICAL_LEFT_SHIFT /
LOGICAL_RIGHT_SHIFT, ARITHMETIC_RIGHT_SHIFT (with its round attribute), BITWISE_AND / OR / XOR:
``integer.comp``, exact two's complement arithmetic (where the specification REQUIREs no overflow, the
result wraps, as in the CPU backend).
"""

from __future__ import annotations

import numpy as np

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from . import lowering
from .common import (
    WORKGROUP,
    Dispatch,
    LoweringContext,
    Step,
    element_bytes,
    groups,
    indexed_push,
    nan_mode,
    word_groups,
    words,
)

OPCODES = {Op.ADD: 0, Op.SUB: 1, Op.MUL: 2, Op.MAXIMUM: 3, Op.MINIMUM: 4, Op.POW: 5}
INTEGER_OPCODES = {
    Op.ADD: 0,
    Op.SUB: 1,
    Op.MUL: 2,
    Op.INTDIV: 3,
    Op.LOGICAL_AND: 4,
    Op.LOGICAL_OR: 5,
    Op.LOGICAL_XOR: 6,
    Op.LOGICAL_NOT: 7,
    Op.LOGICAL_LEFT_SHIFT: 8,
    Op.LOGICAL_RIGHT_SHIFT: 9,
    Op.BITWISE_AND: 10,
    Op.BITWISE_OR: 11,
    Op.BITWISE_XOR: 12,
    Op.ARITHMETIC_RIGHT_SHIFT: 13,
    Op.MAXIMUM: 14,
    Op.MINIMUM: 15,
    Op.EQUAL: 16,
    Op.GREATER: 17,
    Op.GREATER_EQUAL: 18,
}


def integer_steps(ctx: LoweringContext, a_index: int = 0, b_index: int = 1, shift: int = 0) -> list[Step]:
    """One ``integer.comp`` dispatch (LOGICAL_NOT passes its operand as both); ``shift`` is MUL's shift
    or ARITHMETIC_RIGHT_SHIFT's round flag."""
    a, b = ctx.inputs[a_index], ctx.inputs[b_index]
    out = ctx.outputs[0]
    n, push = indexed_push(out.shape, [a.shape, b.shape])
    if n == 0:
        return []
    es, out_es = element_bytes(a), element_bytes(out)
    spec = (WORKGROUP, es, INTEGER_OPCODES[ctx.operator.op], out_es)
    reads = (ctx.place(a), ctx.place(b))
    return [Dispatch("integer", spec, reads, (ctx.place(out),), push + words(shift), word_groups(n, out_es, ctx))]


def _shift(ctx: LoweringContext) -> int:
    value = ctx.constant(2) if len(ctx.inputs) > 2 else None  # a constant (admission checks it)
    return int(np.asarray(value).reshape(-1)[0]) if value is not None else 0


@lowering(*OPCODES)
def binary(ctx: LoweringContext) -> list[Step]:
    if ctx.outputs[0].dtype is not DType.FP32:
        return integer_steps(ctx, shift=_shift(ctx) if ctx.operator.op is Op.MUL else 0)
    a, b = ctx.inputs[0], ctx.inputs[1]  # MUL's third operand, the shift, is 0 (admission checks it)
    out = ctx.outputs[0]
    n, push = indexed_push(out.shape, [a.shape, b.shape])
    if n == 0:
        return []
    vec4 = int(a.shape == b.shape == out.shape and n % 4 == 0)  # places are 16-byte aligned (plan.py)
    spec = (WORKGROUP, OPCODES[ctx.operator.op], nan_mode(ctx), vec4)
    reads = (ctx.place(a), ctx.place(b))
    return [Dispatch("binary", spec, reads, (ctx.place(out),), push, groups(n // 4 if vec4 else n, ctx))]


@lowering(
    *(Op.INTDIV, Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT),
    *(Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR, Op.ARITHMETIC_RIGHT_SHIFT),
)
def integer(ctx: LoweringContext) -> list[Step]:
    return integer_steps(ctx, shift=int(getattr(ctx.operator.attribute, "round", False)))
