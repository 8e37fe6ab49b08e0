"""What the CUDA backend admits: exactly the (operator, type signature) pairs :mod:`.ops` registers.

The descriptor is derived from the registrations (:mod:`.ops.registry`), never kept beside them: an
operator is advertised with the union of its registrations' signatures, and each registration's
constraints (constant MUL shifts, zero NEGATE zero points) guard its own signatures only. What stays here
is what no registration says: the target (profiles PRO-FP and PRO-INT, the BF16 extension, level 8K) and
the kernels' rank limit (the argument block holds six dimensions). Every device advertises the same
table. Everything else is refused at load by :func:`ironaccel.tosa.capability.admit` with a LoweringError
that names the operator, tensor and type.
"""

from __future__ import annotations

import functools

from ...tosa.capability import CapabilityDescriptor, Constraint, OperatorSupport, OperatorView
from ...tosa.operators import Op
from ...tosa.target import Target
from .ops import registrations
from .ops.registry import Registration, bound_types, chosen
from .prelude import MAX_RANK

TARGET = Target.of(profiles=["pro-fp", "pro-int"], extensions=["bf16"], level="8k")
NAME = "cuda-elementwise"


def _scoped(op: Op, constraint: Constraint) -> Constraint:
    """``constraint`` checked only where the registration that runs the operator's types carries it."""

    def check(view: OperatorView) -> bool:
        found = chosen(op, bound_types(view.operator, view.inputs, view.outputs))  # type: ignore[arg-type]
        return found is None or constraint not in found.constraints or constraint(view)

    return Constraint(constraint.name, check)


def _constraints(op: Op, regs: tuple[Registration, ...]) -> tuple[Constraint, ...]:
    found: dict[str, Constraint] = {}
    for reg in regs:
        for c in reg.constraints:
            if c.name not in found:
                shared = all(c in other.constraints for other in regs)
                found[c.name] = c if shared else _scoped(op, c)
    return tuple(found.values())


def operator_table() -> dict[Op, OperatorSupport]:
    """Per registered operator, its signatures (None for CONST and CONST_SHAPE: every type) and the
    constraints of its registrations."""
    table: dict[Op, OperatorSupport] = {}
    for op in dict.fromkeys(r.op for r in registrations()):
        regs = registrations(op)
        if any(r.signatures is None for r in regs):
            table[op] = OperatorSupport(None, _constraints(op, regs))
        else:
            sigs = tuple(s for r in regs for s in r.signatures or ())
            table[op] = OperatorSupport(sigs, _constraints(op, regs))
    return table


@functools.cache
def descriptor() -> CapabilityDescriptor:
    """What every CUDA device advertises (one per process: it depends on no device)."""
    operators = operator_table()
    dtypes = frozenset(dt for s in operators.values() for sig in s.signatures or () for _, dt in sig.types)
    return CapabilityDescriptor(target=TARGET, dtypes=dtypes, operators=operators, max_rank=MAX_RANK, name=NAME)


__all__ = ["NAME", "TARGET", "descriptor", "operator_table"]
