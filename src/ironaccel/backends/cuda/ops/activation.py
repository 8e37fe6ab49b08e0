"""CLAMP, TANH, SIGMOID and ERF on fp32, fp16 and bf16 (computed in fp32, rounded once to the result's
type), and CLAMP of int8 and int16.

CLAMP is TOSA's ``apply_clip_s``: the maximum with the lower bound, then the minimum with the upper one,
each with the attribute's NaN mode (so an ignored NaN comes out as the lower bound). The bounds are the
attribute's bytes in the input's type, widened exactly to fp32 at load and passed as fp32 bits in the
argument block's scalars. The integer CLAMP's bounds are the attribute's bytes as a signed integer of the
input's type, and it is the same max-then-min (exact). SIGMOID is 1 / (1 + e^-x), which saturates to 0 and
1 without a NaN; ERF is CUDA's erff (within 2 units in the last place).
"""

from __future__ import annotations

import struct

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import LoweringContext, Step
from .elementwise_binary import nan_mode
from .elementwise_unary import unary_steps
from .registry import in_out, lowering

FLOATS = ("fp32", "fp16", "bf16")
# scalars: the lower and upper bounds as fp32 bits, then the NaN mode
CLAMP = (
    "ia_min_f32(ia_max_f32(x0, ia_float((unsigned)a.scalars[0]), a.scalars[2]),"
    " ia_float((unsigned)a.scalars[1]), a.scalars[2])"
)
# scalars: the lower and upper bounds
_RAISED = "(x0 < (int)a.scalars[0] ? (int)a.scalars[0] : x0)"
CLAMP_INT = f"({_RAISED} > (int)a.scalars[1] ? (int)a.scalars[1] : {_RAISED})"
INT_BYTES = {DType.INT8: 1, DType.INT16: 2}


def bound_bits(raw: bytes, dtype: DType) -> int:
    """The fp32 bits of a CLAMP bound stored as ``dtype``'s little-endian bytes (a serializer may pad them)."""
    if dtype is DType.FP16:
        value = struct.unpack("<e", bytes(raw[:2]))[0]
        return struct.unpack("<I", struct.pack("<f", value))[0]
    if dtype is DType.BF16:  # the top half of the fp32 of the same value
        return struct.unpack("<I", b"\0\0" + bytes(raw[:2]))[0]
    return struct.unpack("<I", bytes(raw[:4]))[0]


@lowering(Op.CLAMP, signatures=in_out(*FLOATS))
def clamp(ctx: LoweringContext) -> list[Step]:
    attr, dtype = ctx.operator.attribute, ctx.inputs[0].dtype
    scalars = (bound_bits(attr.min_val, dtype), bound_bits(attr.max_val, dtype), nan_mode(ctx))
    return unary_steps(ctx, CLAMP, scalars)


@lowering(Op.CLAMP, signatures=in_out("int8", "int16"))
def clamp_integer(ctx: LoweringContext) -> list[Step]:
    attr, size = ctx.operator.attribute, INT_BYTES[ctx.inputs[0].dtype]
    bounds = (int.from_bytes(bytes(raw[:size]), "little", signed=True) for raw in (attr.min_val, attr.max_val))
    return unary_steps(ctx, CLAMP_INT, tuple(bounds))


@lowering(Op.TANH, signatures=in_out(*FLOATS))
def tanh(ctx: LoweringContext) -> list[Step]:
    return unary_steps(ctx, "tanhf(x0)")


@lowering(Op.SIGMOID, signatures=in_out(*FLOATS))
def sigmoid(ctx: LoweringContext) -> list[Step]:
    return unary_steps(ctx, "1.0f / (1.0f + expf(-x0))")


@lowering(Op.ERF, signatures=in_out(*FLOATS))
def erf(ctx: LoweringContext) -> list[Step]:
    return unary_steps(ctx, "erff(x0)")
