"""RESHAPE, IDENTITY (fp32, BOOL) and TRANSPOSE (fp32).

RESHAPE and IDENTITY move no data when the planner made the result a view (the analysis's views share
their source's arena bytes; a reshaped constant shares the constant's bytes); otherwise, where a graph
input or output is involved, they are one buffer copy. TRANSPOSE gathers through permuted strides
(``transpose.comp``), after merging dimensions that stay adjacent.
"""

from __future__ import annotations

import struct

from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Copy, Dispatch, LoweringContext, Step, coalesce, contiguous_strides, groups, pad


@lowering(Op.RESHAPE, Op.IDENTITY)
def reshape(ctx: LoweringContext) -> list[Step]:
    src, dst = ctx.place(ctx.inputs[0]), ctx.place(ctx.outputs[0])
    if src == dst or dst.size == 0:
        return []
    return [Copy(src, dst)]


@lowering(Op.TRANSPOSE)
def transpose(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    n = out.size
    if n == 0:
        return []
    perms = ctx.operator.attribute.perms
    in_strides = contiguous_strides(x.shape)
    dims, (strides,) = coalesce(out.shape, [[in_strides[p] for p in perms]])
    if not dims:
        dims, strides = [1], [0]
    words = [n, len(dims), *pad(dims), *pad(strides)]
    push = struct.pack(f"<{len(words)}I", *words)
    return [Dispatch("transpose", (WORKGROUP,), (ctx.place(x),), (ctx.place(out),), push, groups(n, ctx))]
