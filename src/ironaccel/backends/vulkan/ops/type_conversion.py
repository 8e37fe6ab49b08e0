"""CAST between fp32 and INT8 / INT16 / INT32 (the PRO-FP casts of the FP32 tier): ``cast.comp``.

int -> fp32 rounds once to nearest even; fp32 -> int rounds to nearest, ties to even, and saturates;
NaN, which the specification leaves unpredictable, gives 0 (as in the CPU backend).
"""

from __future__ import annotations

import struct

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, word_groups

TYPE_CODES = {DType.FP32: 0, DType.INT8: 1, DType.INT16: 2, DType.INT32: 3}


@lowering(Op.CAST)
def cast(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    spec = (WORKGROUP, TYPE_CODES[x.dtype], TYPE_CODES[out.dtype])
    push = struct.pack("<I", out.size)
    groups = word_groups(out.size, element_bytes(out), ctx)
    return [Dispatch("cast", spec, (ctx.place(x),), (ctx.place(out),), push, groups)]
