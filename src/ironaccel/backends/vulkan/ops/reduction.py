"""REDUCE_SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PRODUCT of fp32 and REDUCE_ALL, REDUCE_ANY of BOOL
along one axis: ``reduce.comp`` / ``reduce_bool.comp``, one invocation per output.

The input is seen as [outer, axis, inner]; each invocation walks its axis in order. Sums and products
accumulate in fp32 (TOSA judges a sum like a dot product of that length against fp64); MAX and MIN
are exact and follow the attribute's NaN mode. A workgroup-per-output tree reduction for long axes is
left for a later step.
"""

from __future__ import annotations

import math
import struct

from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, groups, nan_mode, word_groups

OPCODES = {Op.REDUCE_SUM: 0, Op.REDUCE_MAX: 1, Op.REDUCE_MIN: 2, Op.REDUCE_PRODUCT: 3}
BOOL_OPCODES = {Op.REDUCE_ALL: 0, Op.REDUCE_ANY: 1}


def _view(ctx: LoweringContext) -> tuple[int, int, int]:
    shape, axis = ctx.inputs[0].shape, ctx.operator.attribute.axis
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


@lowering(*OPCODES)
def reduce(ctx: LoweringContext) -> list[Step]:
    outer, length, inner = _view(ctx)
    if outer * inner == 0 or length == 0:
        return []
    push = struct.pack("<3I", outer, length, inner)
    spec = (WORKGROUP, OPCODES[ctx.operator.op], nan_mode(ctx))
    reads, writes = (ctx.place(ctx.inputs[0]),), (ctx.place(ctx.outputs[0]),)
    return [Dispatch("reduce", spec, reads, writes, push, groups(outer * inner, ctx))]


@lowering(*BOOL_OPCODES)
def reduce_bool(ctx: LoweringContext) -> list[Step]:
    outer, length, inner = _view(ctx)
    if outer * inner == 0:
        return []
    push = struct.pack("<3I", outer, length, inner)
    spec = (WORKGROUP, BOOL_OPCODES[ctx.operator.op])
    reads, writes = (ctx.place(ctx.inputs[0]),), (ctx.place(ctx.outputs[0]),)
    return [Dispatch("reduce_bool", spec, reads, writes, push, word_groups(outer * inner, 1, ctx))]
