"""EQUAL, GREATER, GREATER_EQUAL with broadcasting, BOOL out: fp32 in on ``compare.comp`` (fp16 and bf16
widened to it), int32 in on ``integer.comp``.

BOOL results are bytes; each invocation writes one 32-bit word (four results), so the workgroup count
is per word. The arena places every tensor on a 256-byte boundary, so a last partial word writes only
padding.
"""

from __future__ import annotations

from ....tosa.capability import Signature
from ....tosa.operators import Op
from .common import WORKGROUP, Dispatch, LoweringContext, Step, groups, indexed_push
from .elementwise import integer_steps
from .registry import lowering

OPCODES = {Op.EQUAL: 0, Op.GREATER: 1, Op.GREATER_EQUAL: 2}


def _to_bool(*types: str) -> tuple[Signature, ...]:
    return tuple(Signature.of(in_t=t, out_t="bool") for t in types)


@lowering(*OPCODES, signatures=_to_bool("fp32"), widened=_to_bool("fp16", "bf16"))
def compare(ctx: LoweringContext) -> list[Step]:
    a, b = ctx.inputs[0], ctx.inputs[1]
    out = ctx.outputs[0]
    n, push = indexed_push(out.shape, [a.shape, b.shape])
    if n == 0:
        return []
    spec = (WORKGROUP, OPCODES[ctx.operator.op])
    reads = (ctx.place(a), ctx.place(b))
    return [Dispatch("compare", spec, reads, (ctx.place(out),), push, groups(-(-n // 4), ctx))]


@lowering(*OPCODES, signatures=_to_bool("int32"))
def compare_integer(ctx: LoweringContext) -> list[Step]:
    return integer_steps(ctx)
