"""CLAMP, TANH, SIGMOID, ERF: the fp32 ``unary.comp`` kernel of the unary group (fp16 and bf16 between
conversions); CLAMP of int8 / int16 on ``int_unary.comp``.

CLAMP's bounds travel as push constants (the attribute's little-endian bytes of the input type: fp32
reinterpreted, an fp16 or bf16 operator's two-byte bounds widened exactly, integers sign-extended), its
NaN mode as a specialization constant.
"""

from __future__ import annotations

import struct

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import LoweringContext, Step, nan_mode
from .elementwise import int_unary_steps, integer_bound, unary_steps
from .registry import in_out, lowering
from .widening import stored_type


def _bound(raw: bytes, dtype: DType) -> float:
    if dtype is DType.FP16:  # the attribute holds the input type's bytes (a serializer may pad them)
        return struct.unpack("<e", bytes(raw[:2]))[0]
    if dtype is DType.BF16:  # the top half of the fp32 of the same value
        return struct.unpack("<f", b"\0\0" + bytes(raw[:2]))[0]
    return struct.unpack("<f", bytes(raw[:4]))[0]


@lowering(Op.CLAMP, signatures=in_out("fp32"), widened=in_out("fp16", "bf16"))
def clamp(ctx: LoweringContext) -> list[Step]:
    attr = ctx.operator.attribute
    dtype = stored_type(ctx, 0)
    return unary_steps(ctx, _bound(attr.min_val, dtype), _bound(attr.max_val, dtype), nan_mode(ctx))


@lowering(Op.CLAMP, signatures=in_out("int8", "int16"))
def clamp_integer(ctx: LoweringContext) -> list[Step]:
    attr, dtype = ctx.operator.attribute, ctx.inputs[0].dtype
    return int_unary_steps(ctx, integer_bound(attr.min_val, dtype), integer_bound(attr.max_val, dtype))


@lowering(Op.TANH, Op.SIGMOID, Op.ERF, signatures=in_out("fp32"), widened=in_out("fp16", "bf16"))
def activation(ctx: LoweringContext) -> list[Step]:
    return unary_steps(ctx)
