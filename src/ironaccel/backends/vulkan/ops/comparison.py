"""EQUAL, GREATER, GREATER_EQUAL: fp32 in, BOOL out, with broadcasting: ``compare.comp``.

BOOL results are bytes; each invocation writes one 32-bit word (four results), so the workgroup count
is per word. The arena places every tensor on a 256-byte boundary, so a last partial word writes only
padding.
"""

from __future__ import annotations

from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, groups, indexed_push

OPCODES = {Op.EQUAL: 0, Op.GREATER: 1, Op.GREATER_EQUAL: 2}


@lowering(*OPCODES)
def compare(ctx: LoweringContext) -> list[Step]:
    a, b = ctx.inputs[0], ctx.inputs[1]
    out = ctx.outputs[0]
    n, push = indexed_push(out.shape, [a.shape, b.shape])
    if n == 0:
        return []
    spec = (WORKGROUP, OPCODES[ctx.operator.op])
    reads = (ctx.place(a), ctx.place(b))
    return [Dispatch("compare", spec, reads, (ctx.place(out),), push, groups(-(-n // 4), ctx))]
