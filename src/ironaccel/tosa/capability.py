"""What a backend can run, and admission of a program against it.

A backend publishes a :class:`CapabilityDescriptor`: the TOSA target it implements, the element types
and operators it supports (each with optional named constraints such as "zero zero-points only"),
and graph limits. :func:`admit` checks a validated program against it and either returns an
:class:`Admission` record or raises :class:`LoweringError` naming the first unsupported thing. There
is no fallback: a program a backend cannot run fails at load, never at submit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .dtypes import DType
from .errors import LoweringError
from .ir import Block, Operator, Program, Tensor
from .operators import TOSA_1_0_OPS, Op


@dataclasses.dataclass(frozen=True)
class Constraint:
    """A named condition an operator must meet on this backend (``check`` returns True when met)."""

    name: str
    check: Callable[[Operator, Sequence[Tensor], Sequence[Tensor]], bool]


@dataclasses.dataclass(frozen=True)
class OperatorSupport:
    """Element types the operator may touch on this backend (None: any the descriptor allows)."""

    dtypes: frozenset[DType] | None = None
    constraints: tuple[Constraint, ...] = ()


@dataclasses.dataclass(frozen=True)
class GraphLimits:
    max_operators: int = 1 << 20
    max_tensors: int = 1 << 20
    max_rank: int = 32
    max_tensor_bytes: int = 1 << 40
    max_constant_bytes: int = 1 << 40


@dataclasses.dataclass(frozen=True)
class CapabilityDescriptor:
    name: str
    target: Any  # tosa.target.Target
    dtypes: frozenset[DType]
    operators: Mapping[Op, OperatorSupport]
    limits: GraphLimits = GraphLimits()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": sorted(self.target.names) if self.target is not None else None,
            "dtypes": sorted(str(d) for d in self.dtypes),
            "operators": {
                op.name: {
                    "dtypes": sorted(str(d) for d in s.dtypes) if s.dtypes is not None else "any",
                    "constraints": [c.name for c in s.constraints],
                }
                for op, s in sorted(self.operators.items())
            },
            "limits": dataclasses.asdict(self.limits),
        }


@dataclasses.dataclass(frozen=True)
class Admission:
    """What admission saw: counts, element types and operators used, constant bytes."""

    operators: int
    tensors: int
    dtypes: frozenset[DType]
    ops: frozenset[Op]
    constant_bytes: int


def _nbytes(t: Tensor) -> int:
    if t.dtype not in (DType.UNKNOWN,) and t.dtype.is_tosa_1_0:
        return max(t.size, 0) * t.dtype.numpy.itemsize
    return 0


def admit(program: Program, descriptor: CapabilityDescriptor) -> Admission:
    """Check every block of ``program`` against ``descriptor``; raise LoweringError at the first miss."""
    who = descriptor.name
    ops_used: set[Op] = set()
    dtypes_used: set[DType] = set()
    n_ops = n_tensors = constant_bytes = 0
    limits = descriptor.limits
    for block in program.blocks():
        n_tensors += len(block.tensors)
        for t in block.tensors:
            where = f"block {block.name!r}: tensor {t.name!r}"
            if t.dtype not in descriptor.dtypes:
                raise LoweringError(
                    f"{where}: dtype {t.dtype} not supported by {who} (supports: {_names(descriptor.dtypes)})"
                )
            if t.rank > limits.max_rank:
                raise LoweringError(f"{where}: rank {t.rank} exceeds {who}'s limit of {limits.max_rank}")
            if _nbytes(t) > limits.max_tensor_bytes:
                raise LoweringError(
                    f"{where}: {_nbytes(t)} bytes exceed {who}'s tensor limit {limits.max_tensor_bytes}"
                )
            if t.data is not None:
                constant_bytes += int(np.asarray(t.data).nbytes)
            dtypes_used.add(t.dtype)
        for index, op in enumerate(block.operators):
            _admit_operator(block, index, op, descriptor)
            ops_used.add(op.op)
        n_ops += len(block.operators)
    if n_ops > limits.max_operators:
        raise LoweringError(f"{n_ops} operators exceed {who}'s limit of {limits.max_operators}")
    if n_tensors > limits.max_tensors:
        raise LoweringError(f"{n_tensors} tensors exceed {who}'s limit of {limits.max_tensors}")
    if constant_bytes > limits.max_constant_bytes:
        raise LoweringError(f"{constant_bytes} constant bytes exceed {who}'s limit of {limits.max_constant_bytes}")
    return Admission(n_ops, n_tensors, frozenset(dtypes_used), frozenset(ops_used), constant_bytes)


def _admit_operator(block: Block, index: int, op: Operator, descriptor: CapabilityDescriptor) -> None:
    who = descriptor.name
    where = f"operator #{index} {op.op.name}"
    support = descriptor.operators.get(op.op)
    if support is None:
        raise LoweringError(f"{where}: operator not supported by {who}")
    tmap = block.tensor_map
    ins = [tmap[n] for n in op.inputs if n in tmap]
    outs = [tmap[n] for n in op.outputs if n in tmap]
    if support.dtypes is not None:
        for role, tensors in (("input", ins), ("output", outs)):
            for t in tensors:
                if t.dtype not in support.dtypes:
                    raise LoweringError(
                        f"{where}: dtype {t.dtype} of {role} {t.name!r} not supported by {who} "
                        f"(supports: {_names(support.dtypes)})"
                    )
    for constraint in support.constraints:
        if not constraint.check(op, ins, outs):
            raise LoweringError(f"{where}: {who} requires {constraint.name}")


def _names(dtypes: frozenset[DType]) -> str:
    return ", ".join(sorted(str(d) for d in dtypes))


TOSA_1_0_DTYPES = frozenset(d for d in DType if d.is_tosa_1_0)


def descriptor_for_all_of_tosa_1_0(name: str = "cpu") -> CapabilityDescriptor:
    """Everything TOSA 1.0 defines: both profiles, every extension, level none, all 75 operators."""
    from .target import Target

    return CapabilityDescriptor(name, Target(), TOSA_1_0_DTYPES, {op: OperatorSupport() for op in TOSA_1_0_OPS})
