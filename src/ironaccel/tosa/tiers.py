"""A capability descriptor seen as tiers (fp32, fp16, fp8, integer), and what an extension asks of one.

A backend here publishes one :class:`~.capability.CapabilityDescriptor` whose target combines profiles and
extensions, so that one program may mix types (an fp32 CAST of an fp16 result, a quantized model with a
float input). virtio-accel's providers publish a list instead, one descriptor per tier, each for one exact
target, and a consumer judges a program against a single entry, never a blend of two. :func:`tiers` derives
that list from the combined descriptor, so nothing is kept twice (ADR 0043):

* ``fp32``: PRO-FP without the type extensions; signatures with no fp16, bf16 or fp8 operand (BOOL and
  integer auxiliaries such as ARGMAX's int32 result, CASTs between fp32 and the integer types included).
* ``fp16``: the same target; the fp32 tier's signatures plus those over binary16, as upstream's fp16 tier
  is the fp32 one widened to binary16 (a program may mix the two).
* ``fp8``: PRO-FP with the FP8 extensions the descriptor has; signatures with an fp8 operand and no bf16
  (fp8 MATMUL's fp16 result, CASTs to and from fp8, fp8 data movement), and the shape-only operators.
* ``integer``: PRO-INT with the extensions of PRO-INT the descriptor has (EXT-INT4, EXT-INT16, the rounding
  modes...); signatures whose operands are all integer or BOOL.

A signature belongs to a tier only when a row of the specification's type-support table that it matches is
enabled by the tier's target, so a tier never claims what its own target does not allow. Each tier keeps the
operator's constraints and the descriptor's limits. A tier is listed when the combined target has its
profile (and, for fp8, an FP8 extension) and some signature of it uses the tier's own type. Signatures in no
tier (bf16, bf16 x fp8 CASTs, int16 x fp CASTs where the profiles part) stay in the combined descriptor only:
:func:`outside_tiers` lists them.

:func:`unmet_rows` answers the other question an advertised target raises: which rows an extension enables
that a table of signatures does not accept (an extension is only claimed when there are none).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from .capability import CapabilityDescriptor, OperatorSupport, Signature
from .dtypes import DType
from .operators import Op
from .spec import operator as spec_of
from .target import Extension, Profile, Target

FP8 = frozenset({DType.FP8E4M3, DType.FP8E5M2})
_NARROW_FLOAT = FP8 | {DType.FP16, DType.BF16}
_INTEGER = frozenset({DType.INT4, DType.INT8, DType.INT16, DType.INT32, DType.INT48})
_FLOAT_TYPE_EXTENSIONS = frozenset({Extension.BF16, Extension.FP8E4M3, Extension.FP8E5M2})


@dataclasses.dataclass(frozen=True)
class Tier:
    """How one tier is cut from a combined descriptor: its profile, the extensions of that profile it leaves
    out, which signatures (by their operand types, shape values aside) it takes, and the types whose presence
    makes it worth listing."""

    name: str
    profile: Profile
    excluded: frozenset[Extension]
    takes: Callable[[frozenset[DType]], bool]
    own: frozenset[DType]
    needs_one_of: frozenset[Extension] = frozenset()

    def target(self, combined: Target) -> Target:
        """The tier's exact target: its profile, and the combined target's extensions of that profile
        that the tier does not leave out."""
        extensions = {e for e in combined.extensions if self.profile in e.profiles and e not in self.excluded}
        return Target(frozenset({self.profile}), frozenset(extensions), combined.level, combined.version)

    def offered(self, combined: Target) -> bool:
        if self.profile not in combined.profiles:
            return False
        return not self.needs_one_of or bool(self.needs_one_of & combined.extensions)


TIERS: tuple[Tier, ...] = (
    Tier("fp32", Profile.FP, _FLOAT_TYPE_EXTENSIONS, lambda t: not t & _NARROW_FLOAT, frozenset({DType.FP32})),
    Tier("fp16", Profile.FP, _FLOAT_TYPE_EXTENSIONS, lambda t: not t & (FP8 | {DType.BF16}), frozenset({DType.FP16})),
    Tier(
        "fp8",
        Profile.FP,
        frozenset({Extension.BF16, Extension.FFT}),
        lambda t: (bool(t & FP8) or not t) and DType.BF16 not in t,
        FP8,
        needs_one_of=frozenset({Extension.FP8E4M3, Extension.FP8E5M2}),
    ),
    Tier("integer", Profile.INT, frozenset(), lambda t: t <= _INTEGER | {DType.BOOL}, _INTEGER),
)


def _operand_types(sig: Signature) -> frozenset[DType]:
    return frozenset(dt for _, dt in sig.types if dt is not DType.SHAPE)


def _enabled_by(op: Op, sig: Signature, target: Target) -> bool:
    spec = spec_of(op)
    rows = spec.typesupport if spec else ()
    enabled = target.enabled
    return any(r.enabled(enabled) and sig.matches(dict(r.types)) for r in rows)


def _cut(descriptor: CapabilityDescriptor, tier: Tier) -> CapabilityDescriptor | None:
    target = tier.target(descriptor.target)
    operators: dict[Op, OperatorSupport] = {}
    for op, support in descriptor.operators.items():
        kept = tuple(
            sig for sig in descriptor.signatures(op) if tier.takes(_operand_types(sig)) and _enabled_by(op, sig, target)
        )
        if kept:
            operators[op] = OperatorSupport(kept, support.constraints)
    dtypes = frozenset(dt for s in operators.values() for sig in s.signatures or () for dt in _operand_types(sig))
    if not dtypes & tier.own:
        return None
    return dataclasses.replace(
        descriptor,
        target=target,
        dtypes=dtypes,
        operators=operators,
        name=f"{descriptor.name}/{tier.name}" if descriptor.name else tier.name,
    )


def tiers(descriptor: CapabilityDescriptor) -> dict[str, CapabilityDescriptor]:
    """The tiers ``descriptor`` offers, in the order fp32, fp16, fp8, integer: each a descriptor of its own
    (one exact target, the signatures of the combined one that the tier takes, the same constraints and
    limits), usable with :func:`~.capability.admit`."""
    found = {}
    for tier in TIERS:
        if tier.offered(descriptor.target):
            cut = _cut(descriptor, tier)
            if cut is not None:
                found[tier.name] = cut
    return found


def _target_record(target: Target) -> dict[str, Any]:
    return {
        "profiles": sorted(p.value for p in target.profiles),
        "extensions": sorted(e.value for e in target.extensions),
        "level": target.level.name,
    }


def summary(descriptor: CapabilityDescriptor) -> dict[str, dict[str, Any]]:
    """Per tier, what upstream's providers list for one: the target, the element types, and each operator
    with the names of its constraints (signatures are in :func:`tiers`' descriptors)."""
    return {
        name: {
            "name": tier.name,
            "target": _target_record(tier.target),
            "dtypes": sorted((str(d) for d in tier.dtypes), key=lambda n: int(DType.parse(n))),
            "operators": {op.name: [c.name for c in s.constraints] for op, s in sorted(tier.operators.items())},
        }
        for name, tier in tiers(descriptor).items()
    }


def outside_tiers(descriptor: CapabilityDescriptor) -> dict[Op, tuple[Signature, ...]]:
    """The signatures of ``descriptor`` that no tier takes (what only the combined descriptor admits)."""
    cut = tiers(descriptor).values()
    left: dict[Op, tuple[Signature, ...]] = {}
    for op in descriptor.operators:
        rest = tuple(
            sig
            for sig in descriptor.signatures(op)
            if not any(op in t.operators and sig in t.signatures(op) for t in cut)
        )
        if rest:
            left[op] = rest
    return left


def unmet_rows(operators: Mapping[Op, OperatorSupport], extension: Extension | str) -> list[str]:
    """The type-support rows that name ``extension`` (in some alternative of their ``enabled_by``) and
    that ``operators`` does not accept, as ``OP(var=type, ...)``; empty when a backend with this table may
    claim the extension. An operator whose signatures are None accepts every row."""
    ext = Extension.parse(extension)
    from .operators import TOSA_1_0_OPS

    unmet = []
    for op in TOSA_1_0_OPS:
        spec = spec_of(op)
        for row in spec.typesupport if spec else ():
            if ext not in row.requirements:
                continue
            support = operators.get(op)
            if support is not None and (
                support.signatures is None or any(s.matches(dict(row.types)) for s in support.signatures)
            ):
                continue
            types = ", ".join(f"{var}={dt}" for var, dt in row.types.items())
            unmet.append(f"{op.name}({types})")
    return unmet


__all__ = ["FP8", "TIERS", "Tier", "outside_tiers", "summary", "tiers", "unmet_rows"]
