"""CAST and RESCALE, every form side by side.

CAST between fp32, fp16, bf16, fp8 and INT8 / INT16 / INT32 (the PRO-FP casts and the BF16 and FP8
extensions'): ``cast.comp``.

int -> float rounds once to nearest even; float -> int rounds to nearest, ties to even, and saturates;
NaN, which the specification leaves unpredictable, gives 0 (as in the CPU backend). fp16 -> fp32 is
exact and fp32 -> fp16 rounds once (shaders/include/fp16.glsl, integer code on the bit patterns); a
NaN keeps its sign and (the top of) its payload, as numpy's conversions do, where the CPU backend
gives the plain quiet NaN of that sign. bf16 -> fp32 is exact; fp32 and int32 -> bf16 round once
(shaders/include/bf16.glsl), a NaN giving the plain quiet NaN of its sign, as in the CPU backend.
fp8 (E4M3, E5M2) -> fp32 / fp16 is exact; fp32 / fp16 -> fp8 rounds once with CAST's overflow rule
(shaders/include/fp8.glsl: E5M2 to infinity, E4M3 to NaN), NaN to the format's plain NaN.

CAST between BOOL and the integer types (PRO-INT): ``int_unary.comp``, exact (to BOOL: nonzero).

RESCALE: ``rescale.comp``, exact for every width it takes (int8 / int16 / int32 in and out, signed or
unsigned views, per tensor or per channel, single or double rounding). The 64-bit intermediate of TOSA's
``apply_scale_32`` / ``apply_scale_16`` (a 32 x 32-bit product plus a rounding term, shifted right by up
to 63) is carried in two 32-bit words (``imulExtended``, ``uaddCarry``; shaders/include/integer.glsl), so
no device needs ``shaderInt64`` and every device gives the CPU backend's bits. Multiplier, shift and zero
points are read by the kernel from their tensors (constants or not); INEXACT_ROUND is computed as
SINGLE_ROUND, as in the CPU backend (a single-rounded result always meets its bound).
"""

from __future__ import annotations

import struct

from ....tosa.attributes import RoundingMode
from ....tosa.capability import Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, word_groups
from .elementwise import int_unary_steps
from .registry import lowering

TYPE_CODES = {
    **{DType.FP32: 0, DType.INT8: 1, DType.INT16: 2, DType.INT32: 3},
    **{DType.FP16: 4, DType.BF16: 5, DType.FP8E4M3: 6, DType.FP8E5M2: 7},
}


INTEGERS = ("int8", "int16", "int32")
FP8 = ("fp8e4m3", "fp8e5m2")
INPUT_UNSIGNED, OUTPUT_UNSIGNED, DOUBLE_ROUND, PER_CHANNEL = 1, 2, 4, 8  # rescale.comp's flags


def _both_ways(a: str, others: tuple[str, ...]) -> tuple[Signature, ...]:
    """CAST from ``a`` to each of ``others`` and back."""
    return (
        *(Signature.of(in_t=o, out_t=a) for o in others),
        *(Signature.of(in_t=a, out_t=o) for o in others),
    )


FLOAT_CASTS = (
    *_both_ways("fp32", INTEGERS),
    *_both_ways("fp16", (*INTEGERS, "fp32")),
    *_both_ways("bf16", (*INTEGERS, "fp32")),
    *(s for t in FP8 for s in _both_ways(t, ("fp16", "fp32", "bf16"))),
)
INTEGER_CASTS = tuple(Signature.of(in_t=i, out_t=o) for i in ("bool", *INTEGERS) for o in ("bool", *INTEGERS) if i != o)


@lowering(Op.CAST, signatures=FLOAT_CASTS)
def cast(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    spec = (WORKGROUP, TYPE_CODES[x.dtype], TYPE_CODES[out.dtype])
    push = struct.pack("<I", out.size)
    groups = word_groups(out.size, element_bytes(out), ctx)
    return [Dispatch("cast", spec, (ctx.place(x),), (ctx.place(out),), push, groups)]


@lowering(Op.CAST, signatures=INTEGER_CASTS)
def cast_integer(ctx: LoweringContext) -> list[Step]:
    return int_unary_steps(ctx, int(ctx.outputs[0].dtype is DType.BOOL))


@lowering(Op.RESCALE, signatures=tuple(Signature.of(in_t=i, out_t=o) for i in INTEGERS for o in INTEGERS))
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
