"""CAST between fp32, fp16, bf16 and INT8 / INT16 / INT32 (the PRO-FP casts and the BF16 extension's):
``cast.comp``.

int -> float rounds once to nearest even; float -> int rounds to nearest, ties to even, and saturates;
NaN, which the specification leaves unpredictable, gives 0 (as in the CPU backend). fp16 -> fp32 is
exact and fp32 -> fp16 rounds once (shaders/include/fp16.glsl, integer code on the bit patterns); a
NaN keeps its sign and (the top of) its payload, as numpy's conversions do, where the CPU backend
gives the plain quiet NaN of that sign. bf16 -> fp32 is exact; fp32 and int32 -> bf16 round once
(shaders/include/bf16.glsl), a NaN giving the plain quiet NaN of its sign, as in the CPU backend.
fp8 (E4M3, E5M2) -> fp32 / fp16 is exact; fp32 / fp16 -> fp8 rounds once with CAST's overflow rule
(shaders/include/fp8.glsl: E5M2 to infinity, E4M3 to NaN), NaN to the format's plain NaN.
"""

from __future__ import annotations

import struct

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, word_groups

TYPE_CODES = {
    **{DType.FP32: 0, DType.INT8: 1, DType.INT16: 2, DType.INT32: 3},
    **{DType.FP16: 4, DType.BF16: 5, DType.FP8E4M3: 6, DType.FP8E5M2: 7},
}


@lowering(Op.CAST)
def cast(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    spec = (WORKGROUP, TYPE_CODES[x.dtype], TYPE_CODES[out.dtype])
    push = struct.pack("<I", out.size)
    groups = word_groups(out.size, element_bytes(out), ctx)
    return [Dispatch("cast", spec, (ctx.place(x),), (ctx.place(out),), push, groups)]
