"""The Vulkan backend's one operator table: a lowering per (operator, type signature).

Each group module (named after the specification's operator group, :class:`~ironaccel.tosa.operators.Group`)
registers, next to the code it runs, every form of its operators: the fp32 kernel, the same kernel run
between conversions for fp16 / bf16 / fp8 operands (``widened=``, :mod:`.widening`), the integer kernel,
each with the signatures it takes and the constraints that guard it::

    @lowering(Op.ADD, Op.SUB, signatures=in_out("fp32"), widened=in_out("fp16", "bf16"))
    def binary(ctx): ...

    @lowering(Op.ADD, Op.SUB, signatures=in_out("int32"))
    def integer(ctx): ...

The table is :data:`TABLE`, a :class:`~ironaccel.tosa.lowering_table.LoweringTable` (what every backend's
table does: the overlap refusal, the lookup by bound types, the derived operator support). What is the
Vulkan backend's own is the ``widened=`` forms and :func:`lowerings`, which gives the planner, per
operator, a lowering that runs the registration whose signature binds the operator's types.
``..capability`` derives the advertised descriptor from the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ....core.errors import InternalError
from ....tosa.capability import Constraint, Signature
from ....tosa.lowering_table import LoweringTable, Registration, Typed, bound_types, in_out
from ....tosa.operators import Op
from .common import Lowering, LoweringContext, Step
from .widening import widening

TABLE: LoweringTable[Lowering] = LoweringTable[Lowering]("Vulkan")

registrations = TABLE.registrations
chosen = TABLE.chosen


def lowering(
    *ops: Op,
    signatures: Iterable[Signature] | None,
    widened: Iterable[Signature] = (),
    constraints: Sequence[Constraint] = (),
) -> Callable[[Lowering], Lowering]:
    """Decorator: register the decorated lowering for ``ops`` with ``signatures`` as it is, and with
    ``widened`` (fp16, bf16, fp8 forms) as an fp32 kernel between conversions (:func:`.widening.widening`);
    ``constraints`` guard both. Returns the lowering unchanged, so registrations stack."""

    def register(lower: Lowering) -> Lowering:
        forms: list[tuple[tuple[Signature, ...] | None, Lowering]] = [
            (None if signatures is None else tuple(signatures), lower)
        ]
        if widened:
            forms.append((tuple(widened), widening(lower)))
        for op in ops:
            for sigs, form in forms:
                TABLE.add(Registration(op, sigs, form, tuple(constraints), lower.__module__))
        return lower

    return register


def lowerings() -> dict[Op, Lowering]:
    """Per operator, the lowering the planner calls: it runs the registration whose signature binds
    the operator's types."""
    return {op: _dispatcher(op) for op in TABLE.operators()}


def _dispatcher(op: Op) -> Lowering:
    only = TABLE.only(op)
    if only is not None:
        return only.lower

    def lower(ctx: LoweringContext) -> list[Step]:
        bound = bound_types(ctx.operator, ctx.inputs, ctx.outputs)
        found = TABLE.chosen(op, bound)
        if found is None:  # admission takes only registered signatures; reaching here is a bug
            types = ", ".join(f"{var}={dt}" for var, dt in bound.items()) or "no types"
            raise InternalError(f"{op.name}: no Vulkan lowering takes {types}")
        return found.lower(ctx)

    return lower


__all__ = [
    "TABLE",
    "Registration",
    "Typed",
    "bound_types",
    "chosen",
    "in_out",
    "lowering",
    "lowerings",
    "registrations",
]
