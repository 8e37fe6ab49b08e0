"""REDUCE_SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PRODUCT of fp32 and REDUCE_ALL, REDUCE_ANY of BOOL
along one axis: ``reduce.comp`` / ``reduce_bool.comp`` (ARGMAX, in :mod:`.tensor`, shares the first).

The input is seen as [outer, axis, inner]. Short axes: one invocation per output walks its axis in
order. Long axes (or few outputs): a workgroup of :data:`SPLIT_WORKGROUP` invocations per output, each
folding every 256th element in order, then a fixed tree in shared memory, so results do not depend on
scheduling. Sums and products accumulate in fp32 (TOSA judges a sum like a dot product of that length
against fp64); MAX, MIN and ARGMAX are exact, follow the NaN mode and keep the first of equal values.

Where the driver caps loop iterations per invocation (lavapipe: 65535, see ``device.Limits``), an axis
too long even for the split form is refused at load rather than cut short.
"""

from __future__ import annotations

import math
import struct

from ....core.errors import ResourceLimit
from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, groups, nan_mode

OPCODES = {Op.REDUCE_SUM: 0, Op.REDUCE_MAX: 1, Op.REDUCE_MIN: 2, Op.REDUCE_PRODUCT: 3, Op.ARGMAX: 4}
BOOL_OPCODES = {Op.REDUCE_ALL: 0, Op.REDUCE_ANY: 1}
SPLIT_WORKGROUP = 256
SPLIT_AXIS = 2048  # from this length on, an axis is always shared by a workgroup
FEW_OUTPUTS = 4096  # fewer outputs than this share even shorter axes (down to one workgroup's width)


def _view(ctx: LoweringContext) -> tuple[int, int, int]:
    shape, axis = ctx.inputs[0].shape, ctx.operator.attribute.axis
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def _split(length: int, outputs: int) -> bool:
    return length >= SPLIT_AXIS or (length >= SPLIT_WORKGROUP and outputs < FEW_OUTPUTS)


def _check_loops(ctx: LoweringContext, iterations: int) -> None:
    limit = ctx.max_loop_iterations
    if limit is not None and iterations > limit:
        raise ResourceLimit(
            f"{ctx.operator.op.name} over {ctx.inputs[0].shape} would loop {iterations} times in one invocation; "
            f"this driver stops every invocation after {limit} loop iterations"
        )


def _steps(ctx: LoweringContext, shader: str, opcode: int, bool_words: bool) -> list[Step]:
    outer, length, inner = _view(ctx)
    outputs = outer * inner
    units = -(-outputs // 4) if bool_words else outputs  # BOOL results are written a word at a time
    per_output = 4 if bool_words else 1
    split = _split(length, outputs)
    if split:
        count = min(units, ctx.max_groups[0])
        loops = -(-units // count) * per_output * -(-length // SPLIT_WORKGROUP)
        grid = (count, 1, 1)
    else:
        grid = groups(units, ctx)
        loops = -(-units // (grid[0] * WORKGROUP)) * per_output * length
    _check_loops(ctx, loops)
    push = struct.pack("<3I", outer, length, inner)
    wg = SPLIT_WORKGROUP if split else WORKGROUP
    if bool_words:
        spec: tuple[int, ...] = (wg, opcode, int(split))
    else:
        spec = (wg, opcode, nan_mode(ctx), int(split))
    reads, writes = (ctx.place(ctx.inputs[0]),), (ctx.place(ctx.outputs[0]),)
    return [Dispatch(shader, spec, reads, writes, push, grid)]


@lowering(*OPCODES)
def reduce(ctx: LoweringContext) -> list[Step]:
    outer, length, inner = _view(ctx)
    if outer * inner == 0 or length == 0:
        return []
    return _steps(ctx, "reduce", OPCODES[ctx.operator.op], bool_words=False)


@lowering(*BOOL_OPCODES)
def reduce_bool(ctx: LoweringContext) -> list[Step]:
    outer, _, inner = _view(ctx)
    if outer * inner == 0:
        return []
    return _steps(ctx, "reduce_bool", BOOL_OPCODES[ctx.operator.op], bool_words=True)
