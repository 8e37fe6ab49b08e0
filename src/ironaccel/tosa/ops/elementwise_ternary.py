"""Rule of SELECT (spec chapter "Elementwise Ternary Operators"): all three inputs broadcast."""

from __future__ import annotations

from ..operators import Op
from .elementwise_binary import broadcast_shape
from .rule import Context, rule


@rule(Op.SELECT)
def select(ctx: Context) -> list[tuple[int, ...]]:
    return [broadcast_shape(ctx, ctx.inputs[:3])]
