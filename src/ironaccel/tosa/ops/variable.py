"""Rules of the variable operators: VARIABLE, VARIABLE_WRITE, VARIABLE_READ (EXT-VARIABLE).

How files carry variables (as tosa-opt writes them): a VARIABLE declaration is not an operator but a
block tensor with ``variable=True``, ``variable_name`` = the variable's name, the declared shape and
type, and the initial value as its data. A write is an operator whose input is the value and whose
output is that variable tensor; a read is an operator whose input is the variable tensor. tosa-opt
stamps both with operator code IDENTITY and a VariableWriteAttribute / VariableReadAttribute table;
:mod:`.data_nodes` hands such IDENTITY operators to the rules here.

The declared variable a write / read refers to is taken, in this order, from

1. ``ctx.variable`` when the Context has that attribute (a :class:`TensorType` the engine resolved
   from the variable's name; ``None`` when no declaration exists), else
2. the operand that names the variable tensor (a write's extra output, a read's extra input).

The checks are REQUIREs in the specification (a mismatch makes the result unpredictable), except
that a missing declaration is reported as well when the engine says there is none.
"""

from __future__ import annotations

from ..operators import Op
from .data_layout import UNKNOWN, known
from .rule import Context, TensorType, rule

Shape = tuple[int, ...]
_NO_HOOK = object()


def declared_variable(ctx: Context, operands: object) -> TensorType | None:
    """The variable's declaration (see the module docstring); ``operands`` is where the file names it."""
    hook = getattr(ctx, "variable", _NO_HOOK)
    if hook is not _NO_HOOK:
        ctx.require(hook is not None, "REQUIRE(the variable is declared): no VARIABLE of this name")
        return hook if isinstance(hook, TensorType) else None
    if isinstance(operands, list | tuple) and len(operands) == 1 and isinstance(operands[0], TensorType):
        return operands[0]
    return None


def same_shape(a: Shape, b: Shape) -> bool:
    """Shapes equal where both are known."""
    return len(a) == len(b) and all(not known(x, y) or x == y for x, y in zip(a, b, strict=True))


def check_matches(ctx: Context, variable: TensorType, value: TensorType, role: str) -> None:
    """REQUIRE the variable's shape and type to be the value's."""
    ctx.require(
        same_shape(variable.shape, value.shape),
        f"REQUIRE(variable shape == shape({role})): {list(variable.shape)} != {list(value.shape)}",
        value.name or None,
    )
    ctx.require(
        variable.dtype == value.dtype,
        f"REQUIRE(variable type == type({role})): {variable.dtype} != {value.dtype}",
        value.name or None,
    )


@rule(Op.VARIABLE)
def variable(ctx: Context) -> list[Shape]:
    """A declaration has no operands in the specification. A writer that does give it the variable
    tensor as an output declares shape and type there; an initial value given as an input must then
    have that shape and type (REQUIRE(var_t == in_t), REQUIRE(var_shape == shape))."""
    outputs = list(ctx.outputs or ())
    if outputs and ctx.inputs:
        check_matches(ctx, outputs[0], ctx.inputs[0], "initial_value")
    return [out.shape for out in outputs]


@rule(Op.VARIABLE_WRITE)
def variable_write(ctx: Context) -> list[Shape]:
    """input1 must have the declared shape and type; the only output, if any, is the variable itself."""
    value = ctx.inputs[0]
    var = declared_variable(ctx, ctx.outputs)
    if var is not None:
        check_matches(ctx, var, value, "input1")
    return [value.shape for _ in ctx.outputs or ()]


@rule(Op.VARIABLE_READ)
def variable_read(ctx: Context) -> list[Shape]:
    """output1 has the declared shape and type."""
    var = declared_variable(ctx, list(ctx.inputs))
    if var is None:
        if ctx.outputs:
            return [out.shape for out in ctx.outputs]
        ctx.error_if(True, "VARIABLE_READ: the variable's declaration is unknown, so output1 cannot be inferred")
        return [()]
    for out in ctx.outputs or ():
        check_matches(ctx, var, out, "output1")
    return [tuple(UNKNOWN if d < 0 else d for d in var.shape)]
