"""Rules of the activation functions (spec chapter "Activation Functions").

CLAMP's bounds are attributes stored as raw little-endian bytes of the input's element type (the
serializer pads them to 8 bytes); they are decoded here so the ERROR_IFs on their order and on NaN
can be checked before anything runs.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import DType
from ..operators import Op
from .rule import Context, rule
from .tensor import check_nan_mode


def decode_scalar(ctx: Context, name: str, raw: bytes, dtype: DType) -> float | int | None:
    """The value of a raw-bytes attribute in ``dtype``; None for types without a storage form."""
    if dtype not in (DType.INT8, DType.INT16, DType.INT32, DType.FP16, DType.BF16, DType.FP32):
        if dtype not in (DType.FP8E4M3, DType.FP8E5M2):
            return None
    size = dtype.numpy.itemsize
    ctx.error_if(len(raw) < size, f"{name} is {len(raw)} bytes; a {dtype} value needs {size}")
    value = np.frombuffer(bytes(raw[:size]), dtype.numpy)[0]
    return int(value) if dtype.is_integer else float(np.float64(value))


@rule(Op.CLAMP)
def clamp(ctx: Context) -> list[tuple[int, ...]]:
    x = ctx.inputs[0]
    low = decode_scalar(ctx, "min_val", ctx.attribute.min_val, x.dtype)
    high = decode_scalar(ctx, "max_val", ctx.attribute.max_val, x.dtype)
    if low is not None and high is not None:
        ctx.error_if(math.isnan(low) or math.isnan(high), "min_val and max_val must not be NaN")
        ctx.error_if(high < low, f"max_val {high} is smaller than min_val {low}")
    check_nan_mode(ctx)
    return [x.shape]


@rule(Op.ERF, Op.SIGMOID, Op.TANH)
def same_shape(ctx: Context) -> list[tuple[int, ...]]:
    return [ctx.inputs[0].shape]
