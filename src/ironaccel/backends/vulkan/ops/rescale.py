"""RESCALE: ``rescale.comp``, exact for every width the integer tier takes (int8 / int16 / int32 in
and out, signed or unsigned views, per tensor or per channel, single or double rounding).

The 64-bit intermediate of TOSA's ``apply_scale_32`` / ``apply_scale_16`` (a 32 x 32-bit product plus
a rounding term, shifted right by up to 63) is carried in two 32-bit words (``imulExtended``,
``uaddCarry``; shaders/include/integer.glsl), so no device needs ``shaderInt64`` and every device gives
the CPU backend's bits. Multiplier, shift and zero points are read by the kernel from their tensors
(constants or not); INEXACT_ROUND is computed as SINGLE_ROUND, as in the CPU backend (a single-rounded
result always meets its bound).
"""

from __future__ import annotations

import struct

from ....tosa.attributes import RoundingMode
from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, word_groups

INPUT_UNSIGNED, OUTPUT_UNSIGNED, DOUBLE_ROUND, PER_CHANNEL = 1, 2, 4, 8


@lowering(Op.RESCALE)
def rescale(ctx: LoweringContext) -> list[Step]:
    x, multiplier, shift, input_zp, output_zp = ctx.inputs
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    attr = ctx.operator.attribute
    flags = (
        INPUT_UNSIGNED * attr.input_unsigned
        + OUTPUT_UNSIGNED * attr.output_unsigned
        + DOUBLE_ROUND * (attr.scale32 and attr.rounding_mode == RoundingMode.DOUBLE_ROUND)
        + PER_CHANNEL * attr.per_channel
    )
    channels = x.shape[-1] if attr.per_channel and x.rank else 1
    es_out = element_bytes(out)
    spec = (WORKGROUP, element_bytes(x), es_out, element_bytes(multiplier), flags)
    reads = tuple(ctx.place(t) for t in (x, multiplier, shift, input_zp, output_zp))
    push = struct.pack("<2I", out.size, channels)
    return [Dispatch("rescale", spec, reads, (ctx.place(out),), push, word_groups(out.size, es_out, ctx))]
