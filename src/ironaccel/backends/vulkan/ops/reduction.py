"""REDUCE_SUM and REDUCE_MAX of fp32 along one axis: ``reduce.comp``, one invocation per output.

The input is seen as [outer, axis, inner]; each invocation walks its axis in order. The sum accumulates
in fp32 (TOSA judges it like a dot product of that length against fp64); MAX is exact and follows the
attribute's NaN mode. A workgroup-per-output tree reduction for long axes is left for a later step.
"""

from __future__ import annotations

import math
import struct

from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, groups, nan_mode

OPCODES = {Op.REDUCE_SUM: 0, Op.REDUCE_MAX: 1}


@lowering(*OPCODES)
def reduce(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    axis = ctx.operator.attribute.axis
    outer = math.prod(x.shape[:axis])
    inner = math.prod(x.shape[axis + 1 :])
    length = x.shape[axis]
    if out.size == 0:
        return []
    push = struct.pack("<3I", outer, length, inner)
    spec = (WORKGROUP, OPCODES[ctx.operator.op], nan_mode(ctx))
    return [Dispatch("reduce", spec, (ctx.place(x),), (ctx.place(out),), push, groups(outer * inner, ctx))]
