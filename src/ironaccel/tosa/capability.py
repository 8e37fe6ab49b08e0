"""What a backend can run, and the admission check of a program against it.

A backend publishes a :class:`CapabilityDescriptor`: the TOSA target it implements, the element
types it handles, per operator the type signatures it accepts (or "whatever the target allows") and
named constraints (small predicates such as "zero zero-points only"), and graph limits. :func:`admit`
walks a program in order and raises :class:`LoweringError` naming the first thing the backend cannot
do, with the block, operator index, operator, tensor and type, so a user sees *why* a model falls
back rather than a generic refusal. A program that passes gets an :class:`Admission` summary.

Shape values (``shape_t``, DType.SHAPE) and compile-time-constant operands of a fixed type (MUL's and
RESCALE's int8 shift, RESCALE's multiplier) are parameters a backend reads on the host when it lowers
the operator, not tensors it computes on, so they are not subject to ``dtypes``: a float-only backend
can run MUL. Tensor sizes for limits are counted as stored (INT4 packed two per byte, INT48 six
bytes), the measure of the level limits.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from .dtypes import DType, storage_bytes
from .errors import LoweringError
from .ir import Block, Operator, Program, Tensor
from .operators import TOSA_1_0_OPS, Op
from .ops.rule import TensorType
from .spec import OperatorSpec
from .spec import operator as spec_of
from .target import Target

_CONST_OPS = (Op.CONST, Op.CONST_SHAPE)


@dataclasses.dataclass(frozen=True)
class Signature:
    """One accepted binding of an operator's type variables, e.g. in_t=int8, weight_t=int8, out_t=int32,
    acc_t=int32. Variables a signature does not name match anything."""

    types: tuple[tuple[str, DType], ...]

    @classmethod
    def of(cls, **types: str | DType) -> Signature:
        return cls(tuple((var, DType.parse(dt)) for var, dt in types.items()))

    def matches(self, bound: Mapping[str, DType]) -> bool:
        return all(bound.get(var, dt) == dt for var, dt in self.types)

    def __str__(self) -> str:
        return ", ".join(f"{var}={dt}" for var, dt in self.types) or "any types"


@dataclasses.dataclass(frozen=True)
class OperatorView:
    """What a constraint sees of one operator: its record, operand types in specification order and
    the values of constant operands (None where not constant)."""

    index: int
    block: str
    operator: Operator
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]
    consts: tuple[np.ndarray | None, ...]

    @property
    def op(self) -> Op:
        return self.operator.op


@dataclasses.dataclass(frozen=True)
class Constraint:
    """A named predicate over one operator; the name is what an admission error quotes."""

    name: str
    check: Callable[[OperatorView], bool]

    def __call__(self, view: OperatorView) -> bool:
        return bool(self.check(view))


def zero_zero_points() -> Constraint:
    """Every zero-point operand (``*_zp``) is a constant 0: a float-only or symmetric-int backend."""

    def check(view: OperatorView) -> bool:
        spec = spec_of(view.op)
        names = [a.name for a in spec.inputs] if spec else []
        for i, arg in enumerate(names[: len(view.consts)]):
            if arg.endswith("_zp"):
                value = view.consts[i]
                if value is None or np.any(value.astype(np.int64) != 0):
                    return False
        return True

    return Constraint("zero zero-points only", check)


def max_rank(limit: int) -> Constraint:
    """No operand or result has rank above ``limit``."""
    return Constraint(f"rank <= {limit}", lambda v: all(t.rank <= limit for t in (*v.inputs, *v.outputs)))


def per_tensor_rescale() -> Constraint:
    """RESCALE with one multiplier and shift for the whole tensor (``per_channel`` false)."""
    return Constraint("per-tensor RESCALE only", lambda v: not getattr(v.operator.attribute, "per_channel", False))


def constant_operand(position: int, what: str = "") -> Constraint:
    """Operand ``position`` is a compile-time constant (weights baked into a pipeline, say)."""
    label = what or f"operand {position}"
    return Constraint(f"constant {label} only", lambda v: position < len(v.consts) and v.consts[position] is not None)


@dataclasses.dataclass(frozen=True)
class OperatorSupport:
    """How a backend supports one operator. ``signatures`` None means every type combination of the
    specification's table that the descriptor's target enables."""

    signatures: tuple[Signature, ...] | None = None
    constraints: tuple[Constraint, ...] = ()


@dataclasses.dataclass(frozen=True)
class CapabilityDescriptor:
    """A backend's published capabilities. Limits of None are unlimited; ``max_bindings`` counts the
    entry block's inputs plus outputs (the buffers a caller binds)."""

    target: Target
    dtypes: frozenset[DType]
    operators: Mapping[Op, OperatorSupport]
    max_operators: int | None = None
    max_tensors: int | None = None
    max_rank: int | None = None
    max_tensor_bytes: int | None = None
    max_constant_bytes: int | None = None
    max_bindings: int | None = None
    name: str = ""
    # Why operators the backend leaves out on purpose are refused (shown in the refusal instead of the
    # generic message), e.g. control flow where the backend records a program as one straight-line graph.
    refusals: Mapping[Op, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtypes", frozenset(DType.parse(d) for d in self.dtypes))
        ops = {Op.parse(op): support for op, support in self.operators.items()}
        object.__setattr__(self, "operators", MappingProxyType(ops))
        reasons = {Op.parse(op): why for op, why in self.refusals.items()}
        object.__setattr__(self, "refusals", MappingProxyType(reasons))

    def signatures(self, op: Op) -> tuple[Signature, ...]:
        """The accepted signatures of ``op`` (the target-enabled table rows when not listed)."""
        support = self.operators[op]
        if support.signatures is not None:
            return support.signatures
        spec = spec_of(op)
        enabled = self.target.enabled
        rows = [r for r in (spec.typesupport if spec else ()) if r.enabled(enabled)]
        return tuple(Signature(tuple(r.types.items())) for r in rows)

    def as_dict(self) -> dict[str, Any]:
        limits = ("max_operators", "max_tensors", "max_rank", "max_tensor_bytes", "max_constant_bytes", "max_bindings")
        return {
            "name": self.name,
            "target": {
                "profiles": sorted(p.value for p in self.target.profiles),
                "extensions": sorted(e.value for e in self.target.extensions),
                "level": self.target.level.name,
            },
            "dtypes": sorted(str(d) for d in self.dtypes),
            "operators": {
                op.name: {
                    "signatures": "any"
                    if s.signatures is None
                    else [{var: str(dt) for var, dt in sig.types} for sig in s.signatures],
                    "constraints": [c.name for c in s.constraints],
                }
                for op, s in sorted(self.operators.items())
            },
            "limits": {name: getattr(self, name) for name in limits},
        }

    def to_json(self, indent: int | None = None) -> str:
        """The descriptor as JSON (constraints by name: their code is the backend's)."""
        return json.dumps(self.as_dict(), indent=indent, sort_keys=True)


TOSA_1_0_DTYPES = frozenset(d for d in DType if d.is_tosa_1_0)


def descriptor_for_all_of_tosa_1_0(name: str = "cpu", target: Target | None = None) -> CapabilityDescriptor:
    """What a backend implementing the whole specification advertises (the CPU reference backend):
    every 1.0 operator and type, every profile and extension, no limits."""
    operators = {op: OperatorSupport() for op in TOSA_1_0_OPS}
    return CapabilityDescriptor(target or Target(), TOSA_1_0_DTYPES, operators, name=name)


@dataclasses.dataclass(frozen=True)
class Admission:
    """What an admitted program uses (for logs, scheduling and the backend's own planning)."""

    operators: int
    tensors: int
    blocks: int
    bindings: int
    max_rank: int
    max_tensor_bytes: int
    constant_bytes: int
    dtypes: frozenset[DType]
    operators_used: Mapping[Op, int]


def _tensor_bytes(t: Tensor) -> int:
    return 0 if t.unranked or any(d < 0 for d in t.shape) else storage_bytes(t.dtype, t.size)


def bindings(spec: OperatorSpec, op: Operator, types: Sequence[TensorType], outs: Sequence[TensorType]) -> dict:
    """Type variable -> DType from the operands, in specification order (acc_t from acc_type)."""
    bound: dict[str, DType] = {}
    for args, values in ((spec.inputs, types), (spec.outputs, outs)):
        fixed = sum(1 for a in args if not a.is_list)
        pos = 0
        for arg in args:
            n = max(len(values) - fixed, 0) if arg.is_list else 1
            for t in values[pos : pos + n]:
                if arg.element in spec.type_variables and t.dtype is not DType.SHAPE:
                    bound.setdefault(arg.element, t.dtype)
            pos += n
    acc = getattr(op.attribute, "acc_type", None)
    if acc is not None and "acc_t" in spec.type_variables and acc != DType.UNKNOWN:
        bound["acc_t"] = DType(acc)
    return bound


class _Admitter:
    """Admission of one program. ``problems`` None: the first refusal raises; a list: every refusal is
    appended to it instead (one per operator, its first fault) and the check goes on."""

    def __init__(self, program: Program, descriptor: CapabilityDescriptor, problems: list[str] | None = None) -> None:
        self.program, self.d = program, descriptor
        self.problems = problems
        self.tensors: dict[str, Tensor] = {}
        for block in program.blocks():
            for t in block.tensors:
                self.tensors.setdefault(t.name, t)
        self.constants = {n for b in program.blocks() for o in b.operators if o.op in _CONST_OPS for n in o.outputs}

    def fail(self, block: Block, index: int | None, op: Operator | None, message: str) -> LoweringError:
        where = [] if block.name == self.program.main.name else [f"block {block.name!r}"]
        if index is not None and op is not None:
            where.append(f"operator #{index} {op.op.name}")
        return LoweringError(f"{' '.join(where)}: {message}" if where else message)

    def tensor(self, block: Block, name: str) -> Tensor:
        found = block.tensor_map.get(name) or self.tensors.get(name)
        if found is None:
            raise self.fail(block, None, None, f"tensor {name!r} is not declared (validate the program first)")
        return found

    def operator(self, block: Block, index: int, op: Operator) -> None:
        d = self.d
        if op.op not in d.operators or not op.op.is_tosa_1_0:
            why = d.refusals.get(op.op)
            raise self.fail(block, index, op, "operator not supported by this backend" + (f": {why}" if why else ""))
        ins = [self.tensor(block, n) for n in op.inputs]
        outs = [self.tensor(block, n) for n in op.outputs]
        for kind, needed in (("read", Op.VARIABLE_READ), ("write", Op.VARIABLE_WRITE)):
            var = next((t for t in (ins if kind == "read" else outs) if t.variable), None)
            missing = [o.name for o in (Op.VARIABLE, needed) if o not in d.operators]
            if var is not None and missing:
                msg = f"{kind}s variable {var.variable_name or var.name!r}; this backend does not support {missing[0]}"
                raise self.fail(block, index, op, msg)
        spec = spec_of(op.op)
        sigs = d.signatures(op.op)
        for role, tensors in (("input", ins), ("output", outs)):
            for k, t in enumerate(tensors):
                self.limits(block, index, op, t)
                arg = _argument(spec, role, k, len(tensors)) if spec else None
                fixed_parameter = (
                    spec is not None and arg is not None and arg.ctc and arg.element not in spec.type_variables
                )
                if t.dtype is DType.SHAPE or op.op in _CONST_OPS or fixed_parameter:
                    continue  # host-side values; a constant's type is judged where it is used
                allowed = {dt for s in sigs for v, dt in s.types if arg is not None and v == arg.element}
                allowed = (allowed or set(d.dtypes)) & d.dtypes
                if t.dtype not in allowed:
                    label = arg.name if arg is not None else role
                    supports = ", ".join(sorted(map(str, allowed), key=_dtype_order)) or "nothing"
                    msg = f"dtype {t.dtype} of {label} {t.name!r} not supported by this backend (supports: {supports})"
                    raise self.fail(block, index, op, msg)
        types = [TensorType(t.shape, t.dtype, t.name) for t in ins]
        otypes = [TensorType(t.shape, t.dtype, t.name) for t in outs]
        bound = bindings(spec, op, types, otypes) if spec else {}
        if op.op not in _CONST_OPS and bound and not any(s.matches(bound) for s in sigs):
            combo = ", ".join(f"{v}={dt}" for v, dt in bound.items())
            supports = "; ".join(map(str, sigs)) or "none"
            raise self.fail(block, index, op, f"type combination {combo} not supported (supports: {supports})")
        consts = tuple(self.tensor(block, n).data if n in self.constants else None for n in op.inputs)
        view = OperatorView(index, block.name, op, tuple(types), tuple(otypes), consts)
        for constraint in d.operators[op.op].constraints:
            if not constraint(view):
                raise self.fail(block, index, op, f"not supported by this backend: {constraint.name}")

    def limits(self, block: Block, index: int, op: Operator, t: Tensor) -> None:
        d = self.d
        if d.max_rank is not None and t.rank > d.max_rank:
            raise self.fail(block, index, op, f"{t.name!r} has rank {t.rank} > {d.max_rank}, the backend's max")
        if d.max_tensor_bytes is not None and _tensor_bytes(t) > d.max_tensor_bytes:
            msg = f"{t.name!r} takes {_tensor_bytes(t)} bytes > {d.max_tensor_bytes}, the backend's max"
            raise self.fail(block, index, op, msg)

    def refuse(self, error: LoweringError) -> None:
        if self.problems is None:
            raise error
        self.problems.append(str(error))

    def run(self) -> Admission:
        d, blocks = self.d, list(self.program.blocks())
        used: Counter[Op] = Counter()
        for block in blocks:
            for index, op in enumerate(block.operators):
                try:
                    self.operator(block, index, op)
                except LoweringError as exc:
                    self.refuse(exc)
                used[op.op] += 1
        tensors = [t for b in blocks for t in b.tensors]
        main = self.program.main
        held = [*main.input_tensors, *main.output_tensors, *(t for t in tensors if t.variable)]
        seen: set[str] = set()
        for t in held:  # what the backend keeps in its own buffers, whatever operators touch it
            if t.dtype not in d.dtypes and t.name not in seen:
                seen.add(t.name)
                kind = "variable" if t.variable else "graph input" if t.name in main.inputs else "graph output"
                self.refuse(LoweringError(f"dtype {t.dtype} of {kind} {t.name!r} not supported by this backend"))
        const_bytes = sum(_tensor_bytes(t) for t in tensors if t.data is not None and not t.variable)
        bindings = len(main.inputs) + len(main.outputs)
        for what, value, limit in (
            ("operators", sum(used.values()), d.max_operators),
            ("tensors", len(tensors), d.max_tensors),
            ("constant bytes", const_bytes, d.max_constant_bytes),
            ("bindings (entry inputs + outputs)", bindings, d.max_bindings),
        ):
            if limit is not None and value > limit:
                self.refuse(LoweringError(f"program has {value} {what}; this backend takes at most {limit}"))
        return Admission(
            operators=sum(used.values()),
            tensors=len(tensors),
            blocks=len(blocks),
            bindings=bindings,
            max_rank=max((t.rank for t in tensors), default=0),
            max_tensor_bytes=max((_tensor_bytes(t) for t in tensors), default=0),
            constant_bytes=const_bytes,
            dtypes=frozenset(t.dtype for t in tensors),
            operators_used=MappingProxyType(dict(used)),
        )


def _argument(spec: OperatorSpec, role: str, k: int, count: int) -> Any:
    """The specification argument the ``k``-th input / output of ``count`` stands for."""
    args = spec.inputs if role == "input" else spec.outputs
    fixed = sum(1 for a in args if not a.is_list)
    pos = 0
    for arg in args:
        n = max(count - fixed, 0) if arg.is_list else 1
        if pos <= k < pos + n:
            return arg
        pos += n
    return None


def _dtype_order(name: str) -> int:
    return int(DType.parse(name))


def admit(program: Program, descriptor: CapabilityDescriptor) -> Admission:
    """Check ``program`` against ``descriptor``; raises LoweringError naming the first unsupported
    operator, type, constraint or limit. Validity is not checked here (run the validator first)."""
    return _Admitter(program, descriptor).run()


def problems(program: Program, descriptor: CapabilityDescriptor) -> list[str]:
    """Every reason ``descriptor``'s backend would refuse ``program`` (a valid one), in program order: one
    per refused operator (its first fault), then each graph input / output / variable of a type the
    backend lacks, then each limit exceeded. Empty: :func:`admit` admits it."""
    found: list[str] = []
    _Admitter(program, descriptor, found).run()
    return found


def straight_line_refusals(backend: str, recorded_as: str) -> dict[Op, str]:
    """The ``refusals`` of a backend that records a program as ``recorded_as`` (straight-line work with no
    control flow) and offers neither FFT nor variables: each reason names ``backend`` and where to run it."""
    control_flow = f"control flow is not run on {backend}: a program is recorded as {recorded_as}; run it on cpu"
    fft = f"FFT is not offered on {backend} (EXT-FFT is not in this backend's target); run it on cpu"
    return {
        Op.COND_IF: control_flow,
        Op.WHILE_LOOP: control_flow,
        Op.FFT2D: fft,
        Op.RFFT2D: fft,
        Op.VARIABLE: f"variables are not offered on {backend} (EXT-VARIABLE); run the program on cpu",
        Op.CUSTOM: "CUSTOM operators have no agreed meaning, so no backend but a vendor's own can run them",
    }


def supported(ops: Iterable[Op | str], **support: Any) -> dict[Op, OperatorSupport]:
    """``{op: OperatorSupport(**support)}`` for several operators (descriptor building shorthand)."""
    return {Op.parse(op): OperatorSupport(**support) for op in ops}


__all__ = [
    "Admission",
    "CapabilityDescriptor",
    "Constraint",
    "OperatorSupport",
    "OperatorView",
    "Signature",
    "TOSA_1_0_DTYPES",
    "admit",
    "bindings",
    "constant_operand",
    "descriptor_for_all_of_tosa_1_0",
    "max_rank",
    "per_tensor_rescale",
    "problems",
    "straight_line_refusals",
    "supported",
    "zero_zero_points",
]
