"""Rule of CONST_SHAPE.

A CONST_SHAPE output is a SHAPE value whose own shape is ``[length]`` (the rank of the shape it
describes), recorded on the output in the file. As for CONST there is nothing to infer it from.
"""

from __future__ import annotations

from ..operators import Op
from .data_nodes import declared_shapes
from .rule import Context, rule

Shape = tuple[int, ...]


@rule(Op.CONST_SHAPE)
def const_shape(ctx: Context) -> list[Shape]:
    """output = values, with the declared length."""
    return declared_shapes(ctx, "it is the length of the constant shape value")
