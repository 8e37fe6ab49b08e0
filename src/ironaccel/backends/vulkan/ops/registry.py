"""The Vulkan backend's one operator table: a lowering per (operator, type signature).

Each group module (named after the specification's operator group, :class:`~ironaccel.tosa.operators.Group`)
registers, next to the code it runs, every form of its operators: the fp32 kernel, the same kernel run
between conversions for fp16 / bf16 / fp8 operands (``widened=``, :mod:`.widening`), the integer kernel,
each with the signatures it takes and the constraints that guard it::

    @lowering(Op.ADD, Op.SUB, signatures=in_out("fp32"), widened=in_out("fp16", "bf16"))
    def binary(ctx): ...

    @lowering(Op.ADD, Op.SUB, signatures=in_out("int32"))
    def integer(ctx): ...

The table is the single source of what the backend runs: ``..capability`` derives the advertised
descriptor from it (every registered signature; a registration's constraints apply to its own
signatures only), and :func:`lowerings` gives the planner, per operator, the lowering whose signature
binds the operator's types. A signature is registered once per operator, and no two registrations of
an operator may both bind one type combination, so that choice is never ambiguous.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from ....core.errors import InternalError
from ....tosa.capability import Constraint, Signature
from ....tosa.capability import bindings as _admission_bindings  # admission's own, so both bind alike
from ....tosa.dtypes import DType
from ....tosa.ir import Operator
from ....tosa.operators import Op
from ....tosa.ops.rule import TensorType
from ....tosa.spec import operator as spec_of
from .common import Lowering, LoweringContext, Step
from .widening import widening


class Typed(Protocol):
    """An operand as a lowering (:class:`~ironaccel.tosa.ir.Tensor`) or a constraint (a tensor type) sees it."""

    @property
    def dtype(self) -> DType: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


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
    """``in_out_t=t`` for each of ``types``: the signatures of an operator whose operands and result
    share one type."""
    return tuple(Signature.of(in_out_t=t) for t in types)


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
                _add(Registration(op, sigs, form, tuple(constraints), lower.__module__))
        return lower

    return register


def _add(registration: Registration) -> None:
    """Append ``registration``, refusing a type combination that another registration of its operator
    also binds (the planner could not tell which lowering to run)."""
    op = registration.op
    if registration.signatures == ():
        raise InternalError(f"a Vulkan lowering of {op.name} is registered with no signature")
    for other in _TABLE.get(op, []):
        if registration.signatures is None or other.signatures is None:
            raise InternalError(f"{op.name}: a Vulkan lowering for every type shares the operator with another")
        shared = _shared(registration, other)
        if shared is not None:
            raise InternalError(
                f"{op.name}: {shared} is bound by two Vulkan lowerings (from {other.module} and {registration.module})"
            )
    _TABLE.setdefault(op, []).append(registration)


def _shared(a: Registration, b: Registration) -> Signature | None:
    """A signature of either registration that the other binds too, if any."""
    for mine, theirs in ((a, b), (b, a)):
        for sig in mine.signatures or ():
            if theirs.binds(dict(sig.types)):
                return sig
    return None


def registrations(op: Op | None = None) -> tuple[Registration, ...]:
    """Every registration, in registration order (of ``op`` only, when given)."""
    if op is not None:
        return tuple(_TABLE.get(op, ()))
    return tuple(r for regs in _TABLE.values() for r in regs)


def bound_types(operator: Operator, inputs: Sequence[Typed], outputs: Sequence[Typed]) -> dict[str, DType]:
    """The type variables of ``operator`` bound by its operands' types, exactly as admission binds them
    (so the lowering chosen is the registration whose signature admitted the operator)."""
    spec = spec_of(operator.op)
    if spec is None:
        return {}
    ins = [TensorType(tuple(t.shape), t.dtype) for t in inputs]
    outs = [TensorType(tuple(t.shape), t.dtype) for t in outputs]
    return _admission_bindings(spec, operator, ins, outs)


def chosen(op: Op, bound: Mapping[str, DType]) -> Registration | None:
    """The registration of ``op`` that runs the types ``bound`` (None: the backend has none)."""
    return next((r for r in _TABLE.get(op, ()) if r.binds(bound)), None)


def lowerings() -> dict[Op, Lowering]:
    """Per operator, the lowering the planner calls: it runs the registration whose signature binds
    the operator's types."""
    return {op: _dispatcher(op, regs) for op, regs in _TABLE.items()}


def _dispatcher(op: Op, regs: list[Registration]) -> Lowering:
    if len(regs) == 1 and regs[0].signatures is None:
        return regs[0].lower

    def lower(ctx: LoweringContext) -> list[Step]:
        bound = bound_types(ctx.operator, ctx.inputs, ctx.outputs)
        found = chosen(op, bound)
        if found is None:  # admission takes only registered signatures; reaching here is a bug
            types = ", ".join(f"{var}={dt}" for var, dt in bound.items()) or "no types"
            raise InternalError(f"{op.name}: no Vulkan lowering takes {types}")
        return found.lower(ctx)

    return lower
