"""The CUDA backend's one operator table: a lowering per (operator, type signature).

Each group module (named after the specification's operator group) registers, next to the code it runs,
the signatures each lowering takes and the constraints that guard it::

    @lowering(Op.ADD, Op.SUB, signatures=in_out("fp32", "fp16", "bf16", "int32"))
    def arithmetic(ctx): ...

The table is the single source of what the backend runs: ``..capability`` derives the advertised
descriptor from it, and :func:`lowering_for` gives the planner the lowering whose signature binds an
operator's types. No two registrations of an operator may bind one type combination, so that choice is
never ambiguous; a registration for every type (``signatures=None``) is its operator's only one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from ....core.errors import InternalError
from ....tosa.capability import Constraint, Signature
from ....tosa.capability import bindings as _admission_bindings  # admission's own, so both bind alike
from ....tosa.dtypes import DType
from ....tosa.ir import Operator, Tensor
from ....tosa.operators import Op
from ....tosa.ops.rule import TensorType
from ....tosa.spec import operator as spec_of
from .common import Lowering


@dataclasses.dataclass(frozen=True)
class Registration:
    """One form of one operator: the lowering that runs ``signatures`` (None: every type, for the data
    nodes whose types are judged where their values are used), guarded by ``constraints``."""

    op: Op
    signatures: tuple[Signature, ...] | None
    lower: Lowering
    constraints: tuple[Constraint, ...]
    module: str  # the module that registered it (its operator's group module)

    def binds(self, bound: Mapping[str, DType]) -> bool:
        """Whether one of the signatures binds the operator's types ``bound``."""
        return self.signatures is None or any(s.matches(bound) for s in self.signatures)


_TABLE: dict[Op, list[Registration]] = {}


def in_out(*types: str) -> tuple[Signature, ...]:
    """``in_out_t=t`` for each of ``types``: operators whose operands and result share one type."""
    return tuple(Signature.of(in_out_t=t) for t in types)


def lowering(
    *ops: Op, signatures: Iterable[Signature] | None, constraints: Sequence[Constraint] = ()
) -> Callable[[Lowering], Lowering]:
    """Decorator: register the decorated lowering for ``ops`` with ``signatures``, guarded by
    ``constraints``. Returns the lowering unchanged, so registrations stack."""

    def register(lower: Lowering) -> Lowering:
        sigs = None if signatures is None else tuple(signatures)
        for op in ops:
            _add(Registration(op, sigs, lower, tuple(constraints), lower.__module__))
        return lower

    return register


def _add(registration: Registration) -> None:
    op = registration.op
    if registration.signatures == ():
        raise InternalError(f"a CUDA lowering of {op.name} is registered with no signature")
    for other in _TABLE.get(op, []):
        if registration.signatures is None or other.signatures is None:
            raise InternalError(f"{op.name}: a CUDA lowering for every type shares the operator with another")
        for sig in registration.signatures:
            if other.binds(dict(sig.types)):
                raise InternalError(
                    f"{op.name}: {sig} is bound by two CUDA lowerings (from {other.module} and {registration.module})"
                )
    _TABLE.setdefault(op, []).append(registration)


def registrations(op: Op | None = None) -> tuple[Registration, ...]:
    """Every registration, in registration order (of ``op`` only, when given)."""
    if op is not None:
        return tuple(_TABLE.get(op, ()))
    return tuple(r for regs in _TABLE.values() for r in regs)


def bound_types(operator: Operator, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> dict[str, DType]:
    """The type variables of ``operator`` bound by its operands' types, exactly as admission binds them."""
    spec = spec_of(operator.op)
    if spec is None:
        return {}
    ins = [TensorType(tuple(t.shape), t.dtype) for t in inputs]
    outs = [TensorType(tuple(t.shape), t.dtype) for t in outputs]
    return _admission_bindings(spec, operator, ins, outs)


def chosen(op: Op, bound: Mapping[str, DType]) -> Registration | None:
    """The registration of ``op`` that runs the types ``bound`` (None: the backend has none)."""
    return next((r for r in _TABLE.get(op, ()) if r.binds(bound)), None)


def lowering_for(operator: Operator, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> Lowering | None:
    """The lowering that runs ``operator`` with these operands, or None when no registration takes them."""
    regs = _TABLE.get(operator.op, ())
    if len(regs) == 1 and regs[0].signatures is None:
        return regs[0].lower
    found = chosen(operator.op, bound_types(operator, inputs, outputs))
    return None if found is None else found.lower
