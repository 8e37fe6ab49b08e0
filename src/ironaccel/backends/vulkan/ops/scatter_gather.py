"""GATHER and SCATTER along K ([N, K, C] values, int32 [N, W] indices): ``gather.comp``, moving fp32,
int32, int16 or int8 elements as they are (the fp16, bf16 and fp8 forms are widened around it,
:mod:`.widening`).

SCATTER copies values_in into the output, then writes each input row where its index points. An index
outside [0, K), or (for SCATTER) two writes to one position, is a REQUIRE violation: the result is
unpredictable, and the kernel keeps it harmless (GATHER reads 0, SCATTER skips the write).
"""

from __future__ import annotations

import struct

from ....tosa.capability import Signature
from ....tosa.operators import Op
from .common import WORKGROUP, Copy, Dispatch, LoweringContext, Step, element_bytes, groups, word_groups
from .registry import lowering


def _values(*types: str) -> tuple[Signature, ...]:
    return tuple(Signature.of(index_t="int32", in_out_t=t) for t in types)


MOVED = _values("fp32", "int8", "int16", "int32")
WIDENED = _values("fp16", "bf16", "fp8e4m3", "fp8e5m2")


@lowering(Op.GATHER, signatures=MOVED, widened=WIDENED)
def gather(ctx: LoweringContext) -> list[Step]:
    values, indices = ctx.inputs
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    _, k, c = values.shape
    w = indices.shape[1]
    push = struct.pack("<4I", out.size, k, w, c)
    reads = (ctx.place(values), ctx.place(indices))
    es = element_bytes(out)
    spec = (WORKGROUP, 0, es)
    return [Dispatch("gather", spec, reads, (ctx.place(out),), push, word_groups(out.size, es, ctx))]


@lowering(Op.SCATTER, signatures=MOVED, widened=WIDENED)
def scatter(ctx: LoweringContext) -> list[Step]:
    values_in, indices, updates = ctx.inputs
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    steps: list[Step] = []
    src, dst = ctx.place(values_in), ctx.place(out)
    if src != dst:
        steps.append(Copy(src, dst))
    if updates.size:
        _, k, c = values_in.shape
        w = indices.shape[1]
        push = struct.pack("<4I", updates.size, k, w, c)
        reads = (ctx.place(indices), ctx.place(updates))
        spec = (WORKGROUP, 1, element_bytes(out))
        steps.append(Dispatch("gather", spec, reads, (dst,), push, groups(updates.size, ctx)))
    return steps
