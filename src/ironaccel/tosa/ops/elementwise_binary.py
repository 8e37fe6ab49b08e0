"""Rules of the element-wise binary operators (spec chapter "Elementwise Binary Operators").

``broadcast_shape`` is the specification's helper: ranks must be equal and each dimension pair equal
or 1. REQUIRE conditions on values (shift amounts, divisors) are checked when the value is a constant
known before execution; otherwise they are left to run time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dtypes import DType
from ..operators import Op
from .rule import Context, TensorType, rule
from .tensor import check_nan_mode

_SHIFT_LIMIT = {DType.INT8: 7, DType.INT16: 15, DType.INT32: 31}
_TABLE_SIZE = {DType.INT8: 256, DType.INT16: 513}


def _dim(a: int, b: int) -> int | None:
    """One broadcast dimension; None when the pair cannot broadcast. -1 is unknown."""
    if a == 1:
        return b
    if b == 1 or a == b:
        return a
    if a == -1:
        return b
    if b == -1:
        return a
    return None


def broadcast_shape(ctx: Context, tensors: Sequence[TensorType]) -> tuple[int, ...]:
    """The shape all ``tensors`` broadcast to (ERROR_IF ranks differ or a pair is neither equal nor 1)."""
    shape = tensors[0].shape
    for t in tensors[1:]:
        ctx.error_if(
            len(t.shape) != len(shape),
            f"ranks differ: {len(shape)} and {len(t.shape)} (no implicit rank broadcast)",
            t.name,
        )
        dims = [_dim(a, b) for a, b in zip(shape, t.shape, strict=True)]
        bad = [i for i, d in enumerate(dims) if d is None]
        ctx.error_if(
            bool(bad),
            f"shapes {list(shape)} and {list(t.shape)} do not broadcast (dimension {bad[0] if bad else ''})",
            t.name,
        )
        shape = tuple(int(d) for d in dims)  # type: ignore[arg-type]
    return shape


@rule(
    Op.ADD,
    Op.BITWISE_AND,
    Op.BITWISE_OR,
    Op.BITWISE_XOR,
    Op.LOGICAL_AND,
    Op.LOGICAL_OR,
    Op.LOGICAL_XOR,
    Op.POW,
    Op.SUB,
)
def binary(ctx: Context) -> list[tuple[int, ...]]:
    return [broadcast_shape(ctx, ctx.inputs[:2])]


@rule(Op.MAXIMUM, Op.MINIMUM)
def min_max(ctx: Context) -> list[tuple[int, ...]]:
    check_nan_mode(ctx)
    return [broadcast_shape(ctx, ctx.inputs[:2])]


@rule(Op.ARITHMETIC_RIGHT_SHIFT, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT)
def shift(ctx: Context) -> list[tuple[int, ...]]:
    shape = broadcast_shape(ctx, ctx.inputs[:2])
    amounts, limit = ctx.const(1), _SHIFT_LIMIT.get(ctx.inputs[0].dtype)
    if amounts is not None and limit is not None and np.size(amounts):
        values = np.asarray(amounts).astype(np.int64)
        ok = bool(values.min() >= 0 and values.max() <= limit)
        ctx.require(ok, f"shift amounts must be in [0, {limit}] for {ctx.inputs[0].dtype}", ctx.inputs[1].name)
    return [shape]


@rule(Op.INTDIV)
def intdiv(ctx: Context) -> list[tuple[int, ...]]:
    shape = broadcast_shape(ctx, ctx.inputs[:2])
    divisor = ctx.const(1)
    if divisor is not None:
        ctx.require(bool(np.all(np.asarray(divisor) != 0)), "division by zero", ctx.inputs[1].name)
    return [shape]


@rule(Op.MUL)
def mul(ctx: Context) -> list[tuple[int, ...]]:
    shape = broadcast_shape(ctx, ctx.inputs[:2])
    amount = ctx.const(2)
    if amount is not None and np.size(amount):
        value = int(np.asarray(amount).reshape(-1)[0])
        ctx.require(0 <= value <= 63, f"shift {value} is outside [0, 63]", ctx.inputs[2].name)
        ctx.require(ctx.inputs[0].dtype is DType.INT32 or value == 0, "shift must be 0 unless the inputs are int32")
    return [shape]


@rule(Op.TABLE)
def table(ctx: Context) -> list[tuple[int, ...]]:
    x, values = ctx.inputs[0], ctx.inputs[1]
    size = _TABLE_SIZE.get(x.dtype)
    if size is not None and values.shape and values.shape[0] != -1:
        ctx.require(
            values.shape[0] == size, f"a {x.dtype} table has {size} entries, got {values.shape[0]}", values.name
        )
    return [x.shape]
