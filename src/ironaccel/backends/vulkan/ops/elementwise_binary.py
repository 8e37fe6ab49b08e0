"""ADD, SUB, MUL (shift 0), MAXIMUM, MINIMUM, POW on fp32 with TOSA broadcasting: ``binary.comp``.

The kernel's arithmetic is IEEE single precision: +, - and * are correctly rounded in Vulkan, so they
match the CPU oracle bit for bit; MAXIMUM / MINIMUM pick an operand (exact) with the attribute's NaN
mode; POW is e^(b ln a) with ln a carried in two floats (shaders/include/math.glsl).
"""

from __future__ import annotations

from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, groups, indexed_push, nan_mode

OPCODES = {Op.ADD: 0, Op.SUB: 1, Op.MUL: 2, Op.MAXIMUM: 3, Op.MINIMUM: 4, Op.POW: 5}


@lowering(*OPCODES)
def binary(ctx: LoweringContext) -> list[Step]:
    a, b = ctx.inputs[0], ctx.inputs[1]  # MUL's third operand, the shift, is 0 (admission checks it)
    out = ctx.outputs[0]
    n, push = indexed_push(out.shape, [a.shape, b.shape])
    if n == 0:
        return []
    spec = (WORKGROUP, OPCODES[ctx.operator.op], nan_mode(ctx))
    reads = (ctx.place(a), ctx.place(b))
    return [Dispatch("binary", spec, reads, (ctx.place(out),), push, groups(n, ctx))]
