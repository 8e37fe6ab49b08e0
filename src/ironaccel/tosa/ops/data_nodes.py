"""Rules of the data nodes: CONST and IDENTITY.

CONST's shape is the shape of its constant values, which the file records on the output tensor; there
is nothing to infer it from, so a builder must declare it. IDENTITY passes its input through.

tosa-opt writes VARIABLE_WRITE / VARIABLE_READ as operator code IDENTITY with the variable operator's
attribute table; such an IDENTITY is checked by the variable rule its attribute names (see
:mod:`.variable`).
"""

from __future__ import annotations

from ..operators import Op
from .rule import Context, rule

Shape = tuple[int, ...]


def declared_shapes(ctx: Context, what: str) -> list[Shape]:
    """The declared output shapes; without declared outputs (inference mode) that is an error."""
    if ctx.outputs is None:
        ctx.error_if(True, f"{ctx.op.name}: the output shape must be declared ({what})")
        return []
    return [out.shape for out in ctx.outputs]


@rule(Op.CONST)
def const(ctx: Context) -> list[Shape]:
    """output = values: the output has the shape of the constant, as declared."""
    return declared_shapes(ctx, "it is the shape of the constant values")


@rule(Op.IDENTITY)
def identity(ctx: Context) -> list[Shape]:
    """output = input1; an IDENTITY carrying a variable operator's attribute is that operator."""
    attribute_op = getattr(ctx.attribute, "op", Op.IDENTITY)
    if attribute_op in (Op.VARIABLE_WRITE, Op.VARIABLE_READ):
        from . import variable

        return (variable.variable_write if attribute_op is Op.VARIABLE_WRITE else variable.variable_read)(ctx)
    return [ctx.inputs[0].shape]
