"""ABS, NEGATE (zero zero-points), FLOOR, CEIL, EXP, LOG, RECIPROCAL, RSQRT, SIN, COS on fp32: ``unary.comp``;
LOGICAL_NOT on BOOL: ``integer.comp``.

ABS, NEGATE, FLOOR and CEIL are exact; the others are written out in shaders/include/math.glsl
because Vulkan's built-ins are looser than TOSA's bounds.
"""

from __future__ import annotations

import struct

from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, groups
from .elementwise_binary import integer_steps

OPCODES = {
    Op.ABS: 0,
    Op.NEGATE: 1,
    Op.FLOOR: 2,
    Op.CEIL: 3,
    Op.EXP: 4,
    Op.LOG: 5,
    Op.RECIPROCAL: 6,
    Op.RSQRT: 7,
    Op.SIN: 8,
    Op.COS: 9,
    Op.TANH: 10,
    Op.SIGMOID: 11,
    Op.ERF: 12,
    Op.CLAMP: 13,
}


def unary_steps(ctx: LoweringContext, lo: float = 0.0, hi: float = 0.0, nan: int = 1) -> list[Step]:
    """One ``unary.comp`` dispatch for the operator; ``lo`` / ``hi`` / ``nan`` only matter to CLAMP."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    n = out.size
    if n == 0:
        return []
    push = struct.pack("<Iff", n, lo, hi)
    spec = (WORKGROUP, OPCODES[ctx.operator.op], nan)
    return [Dispatch("unary", spec, (ctx.place(x),), (ctx.place(out),), push, groups(n, ctx))]


@lowering(Op.ABS, Op.NEGATE, Op.FLOOR, Op.CEIL, Op.EXP, Op.LOG, Op.RECIPROCAL, Op.RSQRT, Op.SIN, Op.COS)
def unary(ctx: LoweringContext) -> list[Step]:
    return unary_steps(ctx)  # NEGATE's zero points are 0 (admission checks it), so it is -x


@lowering(Op.LOGICAL_NOT)
def logical_not(ctx: LoweringContext) -> list[Step]:
    return integer_steps(ctx, 0, 0)
