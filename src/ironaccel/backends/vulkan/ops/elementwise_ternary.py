"""SELECT: BOOL condition, values of any type the backend stores, with broadcasting of all three
operands: ``select.comp`` (values move as bits, so fp16 and bf16 need no conversion; each invocation
writes a whole 32-bit word)."""

from __future__ import annotations

from ....tosa.operators import Op
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, indexed_push, word_groups
from .registry import in_out, lowering


@lowering(Op.SELECT, signatures=in_out("fp32", "bool", "fp16", "bf16", "int8", "int16", "int32"))
def select(ctx: LoweringContext) -> list[Step]:
    cond, a, b = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    out = ctx.outputs[0]
    n, push = indexed_push(out.shape, [cond.shape, a.shape, b.shape])
    if n == 0:
        return []
    es = element_bytes(out)
    reads = (ctx.place(cond), ctx.place(a), ctx.place(b))
    return [Dispatch("select", (WORKGROUP, es), reads, (ctx.place(out),), push, word_groups(n, es, ctx))]
