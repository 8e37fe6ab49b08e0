"""SELECT: BOOL condition, fp32 values, with broadcasting of all three operands: ``select.comp``."""

from __future__ import annotations

from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, groups, indexed_push


@lowering(Op.SELECT)
def select(ctx: LoweringContext) -> list[Step]:
    cond, a, b = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    out = ctx.outputs[0]
    n, push = indexed_push(out.shape, [cond.shape, a.shape, b.shape])
    if n == 0:
        return []
    reads = (ctx.place(cond), ctx.place(a), ctx.place(b))
    return [Dispatch("select", (WORKGROUP,), reads, (ctx.place(out),), push, groups(n, ctx))]
