"""The reductions along one axis, every form side by side: REDUCE_SUM, REDUCE_MAX, REDUCE_MIN,
REDUCE_PRODUCT of fp32 on ``reduce.comp`` (fp16 and bf16 widened to it), REDUCE_ALL, REDUCE_ANY of BOOL on
``reduce_bool.comp``, and the integer forms on ``reduce_int.comp``. ARGMAX (:mod:`.tensor`) shares the
float and integer kernels.

The input is seen as [outer, axis, inner]. Short axes: one invocation per output walks its axis in
order. Long axes (or few outputs): a workgroup of :data:`SPLIT_WORKGROUP` invocations per output, each
folding every 256th element in order, then a fixed tree in shared memory, so results do not depend on
scheduling. Sums and products accumulate in fp32 (TOSA judges a sum like a dot product of that length
against fp64); MAX, MIN and ARGMAX are exact, follow the NaN mode and keep the first of equal values.

Where the driver caps loop iterations per invocation (lavapipe: 65535, see ``device.Limits``), an axis
too long even for the split form is refused at load rather than cut short.

The integer forms (REDUCE_SUM of int32, REDUCE_MAX / MIN of int8 / int16 / int32, ARGMAX of int8 / int16) take one
invocation per output word, walking the axis in order. Sums are int32 with wrap-around: TOSA REQUIREs
the int32 accumulator not to overflow, and the low 32 bits of a sum do not depend on its order, so
results are the CPU backend's exact sums narrowed to int32, bit for bit.
"""

from __future__ import annotations

import math
import struct

from ....tosa.capability import Signature
from ....tosa.operators import Op
from .common import (
    WORKGROUP,
    Dispatch,
    LoweringContext,
    Place,
    Step,
    check_loops,
    element_bytes,
    groups,
    nan_mode,
    word_groups,
)
from .registry import in_out, lowering

OPCODES = {Op.REDUCE_SUM: 0, Op.REDUCE_MAX: 1, Op.REDUCE_MIN: 2, Op.REDUCE_PRODUCT: 3, Op.ARGMAX: 4}
BOOL_OPCODES = {Op.REDUCE_ALL: 0, Op.REDUCE_ANY: 1}
INTEGER_OPCODES = {Op.REDUCE_SUM: 0, Op.REDUCE_MAX: 1, Op.REDUCE_MIN: 2, Op.ARGMAX: 4}
SPLIT_WORKGROUP = 256
SPLIT_AXIS = 2048  # from this length on, an axis is always shared by a workgroup
FEW_OUTPUTS = 4096  # fewer outputs than this share even shorter axes (down to one workgroup's width)


def _view(ctx: LoweringContext) -> tuple[int, int, int]:
    shape, axis = ctx.inputs[0].shape, ctx.operator.attribute.axis
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def _split(length: int, outputs: int) -> bool:
    return length >= SPLIT_AXIS or (length >= SPLIT_WORKGROUP and outputs < FEW_OUTPUTS)


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
    check_loops(ctx, loops)
    push = struct.pack("<3I", outer, length, inner)
    wg = SPLIT_WORKGROUP if split else WORKGROUP
    if bool_words:
        spec: tuple[int, ...] = (wg, opcode, int(split))
    else:
        spec = (wg, opcode, nan_mode(ctx), int(split))
    reads, writes = (ctx.place(ctx.inputs[0]),), (ctx.place(ctx.outputs[0]),)
    return [Dispatch(shader, spec, reads, writes, push, grid)]


@lowering(
    Op.REDUCE_SUM,
    signatures=(Signature.of(in_out_t="fp32", acc_t="fp32"),),
    widened=(Signature.of(in_out_t="fp16", acc_t="fp16"), Signature.of(in_out_t="bf16", acc_t="fp32")),
)
@lowering(Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_PRODUCT, signatures=in_out("fp32"), widened=in_out("fp16", "bf16"))
def reduce(ctx: LoweringContext) -> list[Step]:
    """REDUCE_SUM / MAX / MIN / PRODUCT, and ARGMAX (:mod:`.tensor`), of fp32."""
    outer, length, inner = _view(ctx)
    if outer * inner == 0 or length == 0:
        return []
    return _steps(ctx, "reduce", OPCODES[ctx.operator.op], bool_words=False)


@lowering(*BOOL_OPCODES, signatures=in_out("bool"))
def reduce_bool(ctx: LoweringContext) -> list[Step]:
    outer, _, inner = _view(ctx)
    if outer * inner == 0:
        return []
    return _steps(ctx, "reduce_bool", BOOL_OPCODES[ctx.operator.op], bool_words=True)


@lowering(Op.REDUCE_SUM, signatures=(Signature.of(in_out_t="int32", acc_t="int32"),))
@lowering(Op.REDUCE_MAX, Op.REDUCE_MIN, signatures=in_out("int8", "int16", "int32"))
def reduce_integer(ctx: LoweringContext) -> list[Step]:
    """``reduce_int.comp`` (and ARGMAX's integer form, :mod:`.tensor`): one invocation per output word,
    walking the axis in order. Where a driver's loop cap is shorter than the axis, SUM / MAX / MIN
    (associative, exact) are cut into S equal slices: a first pass reduces each slice into operator
    scratch, a second the S partial results."""
    outer, length, inner = _view(ctx)
    out = ctx.outputs[0]
    if outer * inner == 0:
        return []
    src, dst = ctx.place(ctx.inputs[0]), ctx.place(out)
    es_in, es_out = element_bytes(ctx.inputs[0]), element_bytes(out)
    limit = ctx.max_loop_iterations
    slices = 1
    if limit is not None and ctx.operator.op is not Op.ARGMAX and length * min(4 // es_out, outer * inner) > limit:
        slices = next((k for k in range(2, limit + 1) if length % k == 0 and length // k * 4 <= limit), 1)
    if slices == 1:
        return [_integer_pass(ctx, src, dst, (outer, length, inner), es_in, es_out)]
    partial = ctx.scratch(outer * slices * inner * es_in)
    return [
        _integer_pass(ctx, src, partial, (outer * slices, length // slices, inner), es_in, es_in),
        _integer_pass(ctx, partial, dst, (outer, slices, inner), es_in, es_out),
    ]


def _integer_pass(
    ctx: LoweringContext, src: Place, dst: Place, view: tuple[int, int, int], es_in: int, es_out: int
) -> Dispatch:
    outer, length, inner = view
    grid = word_groups(outer * inner, es_out, ctx)
    per_word = 4 // es_out
    per_invocation = -(-(outer * inner) // (per_word * grid[0] * WORKGROUP))  # output words
    check_loops(ctx, max(length, 1) * min(per_word, outer * inner) * per_invocation)
    spec = (WORKGROUP, INTEGER_OPCODES[ctx.operator.op], es_in)
    return Dispatch("reduce_int", spec, (src,), (dst,), struct.pack("<3I", outer, length, inner), grid)
