"""Rules of the comparison operators (spec chapter "Comparison Operators"): broadcast to a bool output."""

from __future__ import annotations

from ..operators import Op
from .elementwise_binary import broadcast_shape
from .rule import Context, rule


@rule(Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL)
def compare(ctx: Context) -> list[tuple[int, ...]]:
    return [broadcast_shape(ctx, ctx.inputs[:2])]
