"""MATMUL fp32 x fp32 -> fp32 (zero zero-points): ``matmul.comp``, a 16 x 16 shared-memory tile kernel
accumulating with fma. Batches beyond the device's z group limit become further dispatches."""

from __future__ import annotations

import struct

from ....core.errors import ResourceLimit
from ....tosa.operators import Op
from . import lowering
from .common import Dispatch, LoweringContext, Step

TILE = 16


@lowering(Op.MATMUL)
def matmul(ctx: LoweringContext) -> list[Step]:
    a, b = ctx.inputs[0], ctx.inputs[1]
    out = ctx.outputs[0]
    n, h, c = a.shape
    w = b.shape[2]
    if out.size == 0:
        return []
    gx, gy = -(-w // TILE), -(-h // TILE)
    limit_x, limit_y, limit_z = ctx.max_groups
    if gx > limit_x or gy > limit_y:
        raise ResourceLimit(f"MATMUL output {h}x{w} needs {gy}x{gx} tiles; the device dispatches {limit_y}x{limit_x}")
    reads, writes = (ctx.place(a), ctx.place(b)), (ctx.place(out),)
    steps: list[Step] = []
    for base in range(0, n, limit_z):
        count = min(limit_z, n - base)
        push = struct.pack("<4I", base, h, c, w)
        steps.append(Dispatch("matmul", (), reads, writes, push, (gx, gy, count)))
    return steps
