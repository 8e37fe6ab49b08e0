"""Rule of CUSTOM.

A custom operator's behaviour is implementation defined, so the specification has no rule to apply
beyond the generic ones (argument lists and their level limit, checked by the engine). Its outputs are
whatever the program declares; nothing can be inferred, so a builder must declare them.
"""

from __future__ import annotations

from ..operators import Op
from .data_nodes import declared_shapes
from .rule import Context, rule

Shape = tuple[int, ...]


@rule(Op.CUSTOM)
def custom(ctx: Context) -> list[Shape]:
    """Accept any operands; the outputs are as declared."""
    return declared_shapes(ctx, "a CUSTOM operator's outputs cannot be inferred")
