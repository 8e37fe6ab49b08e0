"""Rules of GATHER and SCATTER.

Both operators index the K axis of a [N, K, C] tensor with an [N, W] tensor of indices. The
specification states the relations between the operands through shared shape symbols (N, K, W, C),
which the engine unifies; the rules read the output dims off them. Index values are only checked when the indices are
compile-time constants: an out-of-range index (or, for SCATTER, a position written twice) is a
REQUIRE, so it makes the result unpredictable rather than the program invalid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..operators import Op
from .data_layout import UNKNOWN, known
from .rule import Context, TensorType, rule

Shape = tuple[int, ...]


def bind(uses: Sequence[tuple[TensorType, int]]) -> int:
    """The value of a shape symbol from its ``(tensor, axis)`` uses: the first known one, else -1.

    The engine unifies the shape symbols of the argument table and reports operands that disagree, so
    this only has to pick a value (an unknown dim in one operand may be known in another).
    """
    for tensor, axis in uses:
        if tensor.rank > axis and known(tensor.shape[axis]):
            return tensor.shape[axis]
    return UNKNOWN


def check_indices(ctx: Context, index: int, k: int, unique: bool) -> None:
    """REQUIRE(0 <= k < K) for constant indices; with ``unique`` also no repeated index within a batch."""
    indices = ctx.const(index)
    if indices is None or indices.ndim != 2 or indices.size == 0:
        return
    name = ctx.inputs[index].name or None
    if known(k):
        low, high = int(indices.min()), int(indices.max())
        ctx.require(low >= 0 and high < k, f"REQUIRE(0 <= indices[n,w] < K={k}): found {low}..{high}", name)
    if unique:
        rows = np.sort(indices, axis=1)
        repeated = bool((rows[:, 1:] == rows[:, :-1]).any())
        ctx.require(not repeated, "REQUIRE(each output position written at most once): an index repeats", name)


@rule(Op.GATHER)
def gather(ctx: Context) -> list[Shape]:
    """values [N,K,C] and indices [N,W] give output [N,W,C]."""
    values, indices = ctx.inputs[0], ctx.inputs[1]
    n = bind([(values, 0), (indices, 0)])
    k = bind([(values, 1)])
    w = bind([(indices, 1)])
    c = bind([(values, 2)])
    check_indices(ctx, 1, k, unique=False)
    return [(n, w, c)]


@rule(Op.SCATTER)
def scatter(ctx: Context) -> list[Shape]:
    """values_in [N,K,C], indices [N,W] and input [N,W,C] give values_out [N,K,C]."""
    values_in, indices, input_ = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    n = bind([(values_in, 0), (indices, 0), (input_, 0)])
    k = bind([(values_in, 1)])
    c = bind([(values_in, 2), (input_, 2)])
    check_indices(ctx, 1, k, unique=True)
    return [(n, k, c)]
