"""Data layout: CONCAT, PAD, RESHAPE, REVERSE, SLICE, TILE, TRANSPOSE.

These only move elements, so every dtype is handled alike and results are exact. Kernels return views
where numpy can (REVERSE, SLICE, TRANSPOSE, RESHAPE): the interpreter never hands a view of an operand
back to the caller without copying it, and kernels never write into their operands.
SHAPE operands (PAD's padding, RESHAPE's shape, SLICE's start and size, TILE's multiples) arrive as
int64 arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....tosa.operators import Op
from ..kernel import KernelContext, constants, kernel, prepared


def _ints(value: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _constant_ints(ctx: KernelContext, index: int, value: np.ndarray) -> tuple[int, ...] | None:
    """The SHAPE operand ``index`` as a tuple, converted once when it is a program constant; else None."""
    return prepared(ctx, ("ints", index), lambda: tuple(_ints(value)) if constants(ctx, index) else None)


@kernel(Op.CONCAT)
def concat(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    axis = ctx.operator.attribute.axis
    if inputs[0].ndim == 0:  # rank 0 has nothing to join along; the only valid case is one input
        return [np.array(inputs[0])]
    return [np.concatenate(inputs, axis=axis)]


@kernel(Op.PAD)
def pad(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    value, padding, pad_const = inputs
    amounts = _ints(padding)
    before, after = amounts[0::2], amounts[1::2]
    shape = tuple(b + d + a for b, d, a in zip(before, value.shape, after, strict=True))
    out = np.empty(shape, value.dtype)
    out[...] = pad_const.reshape(-1)[0]
    out[tuple(slice(b, b + d) for b, d in zip(before, value.shape, strict=True))] = value
    return [out]


@kernel(Op.RESHAPE)
def reshape(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    value, shape = inputs
    fixed = _constant_ints(ctx, 1, shape)
    return [value.reshape(fixed if fixed is not None else _ints(shape))]


@kernel(Op.REVERSE)
def reverse(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.flip(inputs[0], axis=ctx.operator.attribute.axis)]


@kernel(Op.SLICE)
def slice_(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    value, start, size = inputs

    def window() -> tuple[slice, ...]:
        return tuple(slice(s, s + n) for s, n in zip(_ints(start), _ints(size), strict=True))

    index = prepared(ctx, "slice", lambda: window() if constants(ctx, 1, 2) else None)
    return [value[index if index is not None else window()]]


@kernel(Op.TILE)
def tile(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    value, multiples = inputs
    return [np.tile(value, _ints(multiples))]


@kernel(Op.TRANSPOSE)
def transpose(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(inputs[0]).transpose(ctx.operator.attribute.perms)]
