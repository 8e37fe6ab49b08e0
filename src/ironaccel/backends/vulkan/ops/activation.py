"""CLAMP, TANH, SIGMOID, ERF on fp32: the same ``unary.comp`` kernel as the unary group.

CLAMP's bounds travel as push constants (the attribute's little-endian fp32 bytes, reinterpreted; an
fp16 operator's two-byte bounds widened exactly), its NaN mode as a specialization constant.
"""

from __future__ import annotations

import struct

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from . import lowering
from .common import LoweringContext, Step, nan_mode
from .elementwise_unary import unary_steps
from .fp16 import stored_type


def _bound(raw: bytes, dtype: DType) -> float:
    if dtype is DType.FP16:  # the attribute holds the input type's bytes (a serializer may pad them)
        return struct.unpack("<e", bytes(raw[:2]))[0]
    if dtype is DType.BF16:  # the top half of the fp32 of the same value
        return struct.unpack("<f", b"\0\0" + bytes(raw[:2]))[0]
    return struct.unpack("<f", bytes(raw[:4]))[0]


@lowering(Op.CLAMP)
def clamp(ctx: LoweringContext) -> list[Step]:
    attr = ctx.operator.attribute
    dtype = stored_type(ctx, 0)
    return unary_steps(ctx, _bound(attr.min_val, dtype), _bound(attr.max_val, dtype), nan_mode(ctx))


@lowering(Op.TANH, Op.SIGMOID, Op.ERF)
def activation(ctx: LoweringContext) -> list[Step]:
    return unary_steps(ctx)
