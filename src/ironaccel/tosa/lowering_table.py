"""A backend's operator table: per TOSA operator, the lowerings it registers per type signature.

A backend that lowers operators to kernels keeps one :class:`LoweringTable` (ADR 0031, 0036), filled by
its group modules as they are imported (one module per :class:`~.operators.Group`)::

    TABLE = LoweringTable[Lowering]("CUDA")

    @TABLE.lowering(Op.ADD, Op.SUB, signatures=in_out("fp32", "int32"))
    def arithmetic(ctx): ...

The table is the single source of what the backend runs. Its planner asks :meth:`~LoweringTable.lookup`
for the registration whose signature binds an operator's types, bound exactly as admission binds them
(:func:`.capability.bindings`), so the lowering that runs is the one whose signature admitted the
operator. Its capability descriptor takes :meth:`~LoweringTable.operator_support`: every registered
signature, each registration's constraints guarding its own signatures only. The table refuses a
registration that would bind a type combination another registration of the operator binds, so that
choice is never ambiguous; a registration for every type (``signatures=None``, the data nodes whose
types are judged where their values are used) is its operator's only one.

The lowering's own type (what it takes, what it returns) is the backend's: the table only stores it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from ..core.errors import InternalError
from .capability import Constraint, OperatorSupport, OperatorView, Signature, bindings
from .dtypes import DType
from .ir import Operator
from .operators import Op
from .ops.rule import TensorType
from .spec import operator as spec_of

L = TypeVar("L", bound=Callable[..., Any])

# Which signatures a view of the table keeps (a precision tier, say).
Keep = Callable[[Op, Signature], bool]


class Typed(Protocol):
    """An operand as a lowering (a :class:`~.ir.Tensor`) or a constraint (a tensor type) sees it."""

    @property
    def dtype(self) -> DType: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


@dataclasses.dataclass(frozen=True)
class Registration(Generic[L]):
    """One form of one operator: the lowering that runs ``signatures`` (None: every type, for the data
    nodes whose types are judged where their values are used), guarded by ``constraints``."""

    op: Op
    signatures: tuple[Signature, ...] | None
    lower: L
    constraints: tuple[Constraint, ...]
    module: str  # the module that registered it (its operator's group module)

    def binds(self, bound: Mapping[str, DType]) -> bool:
        """Whether one of the signatures binds the operator's types ``bound``."""
        return self.signatures is None or any(s.matches(bound) for s in self.signatures)


def in_out(*types: str) -> tuple[Signature, ...]:
    """``in_out_t=t`` for each of ``types``: the signatures of an operator whose operands and result
    share one type."""
    return tuple(Signature.of(in_out_t=t) for t in types)


def bound_types(operator: Operator, inputs: Sequence[Typed], outputs: Sequence[Typed]) -> dict[str, DType]:
    """The type variables of ``operator`` bound by its operands' types, exactly as admission binds them
    (so the lowering chosen is the registration whose signature admitted the operator)."""
    spec = spec_of(operator.op)
    if spec is None:
        return {}
    ins = [TensorType(tuple(t.shape), t.dtype) for t in inputs]
    outs = [TensorType(tuple(t.shape), t.dtype) for t in outputs]
    return bindings(spec, operator, ins, outs)


def signature_types(operators: Mapping[Op, OperatorSupport]) -> frozenset[DType]:
    """Every type some signature of ``operators`` names: a derived descriptor's ``dtypes``."""
    return frozenset(dt for s in operators.values() for sig in s.signatures or () for _, dt in sig.types)


class LoweringTable(Generic[L]):
    """Per operator, the registrations of one backend, in registration order. ``backend`` names it in
    the refusals ("Vulkan", "CUDA")."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self._table: dict[Op, list[Registration[L]]] = {}

    # -- filling ----------------------------------------------------------------------------------------
    def lowering(
        self, *ops: Op, signatures: Iterable[Signature] | None, constraints: Sequence[Constraint] = ()
    ) -> Callable[[L], L]:
        """Decorator: register the decorated lowering for ``ops`` with ``signatures``, guarded by
        ``constraints``. Returns the lowering unchanged, so registrations stack."""

        def register(lower: L) -> L:
            sigs = None if signatures is None else tuple(signatures)
            for op in ops:
                self.add(Registration(op, sigs, lower, tuple(constraints), lower.__module__))
            return lower

        return register

    def add(self, registration: Registration[L]) -> None:
        """Append ``registration``, refusing a type combination that another registration of its operator
        also binds (the planner could not tell which lowering to run)."""
        op, backend = registration.op, self.backend
        if registration.signatures == ():
            raise InternalError(f"a {backend} lowering of {op.name} is registered with no signature")
        for other in self._table.get(op, []):
            if registration.signatures is None or other.signatures is None:
                raise InternalError(f"{op.name}: a {backend} lowering for every type shares the operator with another")
            shared = _shared(registration, other)
            if shared is not None:
                raise InternalError(
                    f"{op.name}: {shared} is bound by two {backend} lowerings"
                    f" (from {other.module} and {registration.module})"
                )
        self._table.setdefault(op, []).append(registration)

    # -- reading ----------------------------------------------------------------------------------------
    def operators(self) -> tuple[Op, ...]:
        """The registered operators, in the order of their first registration."""
        return tuple(self._table)

    def registrations(self, op: Op | None = None) -> tuple[Registration[L], ...]:
        """Every registration, in registration order (of ``op`` only, when given)."""
        if op is not None:
            return tuple(self._table.get(op, ()))
        return tuple(r for regs in self._table.values() for r in regs)

    def chosen(self, op: Op, bound: Mapping[str, DType]) -> Registration[L] | None:
        """The registration of ``op`` that runs the types ``bound`` (None: the backend has none)."""
        return next((r for r in self._table.get(op, ()) if r.binds(bound)), None)

    def only(self, op: Op) -> Registration[L] | None:
        """``op``'s registration for every type, when that is how it is registered (no types to bind)."""
        regs = self._table.get(op, ())
        return regs[0] if len(regs) == 1 and regs[0].signatures is None else None

    def lookup(self, operator: Operator, inputs: Sequence[Typed], outputs: Sequence[Typed]) -> Registration[L] | None:
        """The registration that runs ``operator`` with these operands (None: no registration takes them)."""
        found = self.only(operator.op)
        if found is not None:
            return found
        return self.chosen(operator.op, bound_types(operator, inputs, outputs))

    def misplaced(self, package: str) -> list[tuple[str, str]]:
        """(operator, module) of each registration made outside ``package``'s module of its operator's
        group (``<package>.<group>``), where every registration of a backend belongs."""
        return [(r.op.name, r.module) for r in self.registrations() if r.module != f"{package}.{r.op.group.value}"]

    # -- the descriptor ---------------------------------------------------------------------------------
    def operator_support(self, keep: Keep | None = None) -> dict[Op, OperatorSupport]:
        """Per registered operator, its signatures (those ``keep`` accepts, when given; operators left with
        none are left out) and the constraints of the registrations they come from. Operators registered
        for every type (CONST, CONST_SHAPE) are in every table, with ``signatures`` None."""
        table: dict[Op, OperatorSupport] = {}
        for op, regs in self._table.items():
            if any(r.signatures is None for r in regs):
                table[op] = OperatorSupport(None, self._constraints(op, tuple(regs)))
                continue
            kept = [(r, s) for r in regs for s in r.signatures or () if keep is None or keep(op, s)]
            if kept:
                used = tuple(dict.fromkeys(r for r, _ in kept))
                table[op] = OperatorSupport(tuple(s for _, s in kept), self._constraints(op, used))
        return table

    def _constraints(self, op: Op, regs: tuple[Registration[L], ...]) -> tuple[Constraint, ...]:
        """Every constraint of ``regs`` once, by name in registration order: as it is where every
        registration of the operator carries the same one, else scoped to the registrations that do."""
        every = self._table.get(op, [])
        found: dict[str, Constraint] = {}
        for reg in regs:
            for c in reg.constraints:
                if c.name in found:
                    continue
                shared = all(c in other.constraints for other in every)
                found[c.name] = c if shared else self._scoped(op, c.name)
        return tuple(found.values())

    def _scoped(self, op: Op, name: str) -> Constraint:
        """Constraint ``name`` of ``op``'s registrations, checked for the registration that runs the
        operator's types and passed for the others (they do not carry it)."""

        def check(view: OperatorView) -> bool:
            found = self.chosen(op, bound_types(view.operator, view.inputs, view.outputs))
            own = None if found is None else next((c for c in found.constraints if c.name == name), None)
            return own is None or own(view)

        return Constraint(name, check)


def _shared(a: Registration[Any], b: Registration[Any]) -> Signature | None:
    """A signature of either registration that the other binds too, if any."""
    for mine, theirs in ((a, b), (b, a)):
        for sig in mine.signatures or ():
            if theirs.binds(dict(sig.types)):
                return sig
    return None


__all__ = [
    "Keep",
    "LoweringTable",
    "Registration",
    "Typed",
    "bound_types",
    "in_out",
    "signature_types",
]
