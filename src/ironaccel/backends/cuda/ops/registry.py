"""The CUDA backend's one operator table: a lowering per (operator, type signature).

Each group module (named after the specification's operator group) registers, next to the code it runs,
the signatures each lowering takes and the constraints that guard it::

    @lowering(Op.ADD, Op.SUB, signatures=in_out("fp32", "fp16", "bf16", "int32"))
    def arithmetic(ctx): ...

The table is :data:`TABLE`, a :class:`~ironaccel.tosa.lowering_table.LoweringTable`, the single source of
what the backend runs: ``..capability`` derives the advertised descriptor from it, and
:func:`lowering_for` gives the planner the lowering whose signature binds an operator's types. No two
registrations of an operator may bind one type combination, so that choice is never ambiguous; a
registration for every type (``signatures=None``) is its operator's only one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....tosa.ir import Operator, Tensor
from ....tosa.lowering_table import LoweringTable, Registration, bound_types, in_out
from .common import Lowering

TABLE: LoweringTable[Lowering] = LoweringTable[Lowering]("CUDA")

lowering = TABLE.lowering
registrations = TABLE.registrations
chosen = TABLE.chosen


def lowering_for(operator: Operator, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Lowering | None:
    """The lowering that runs ``operator`` with these operands, or None when no registration takes them."""
    found = TABLE.lookup(operator, inputs, outputs)
    return None if found is None else found.lower


__all__ = ["TABLE", "Registration", "bound_types", "chosen", "in_out", "lowering", "lowering_for", "registrations"]
