"""Which conformance tests apply to a device: the ones its capability descriptor advertises.

A device judged by the suite is judged on what it claims. A test does not apply (and is reported as
*not applicable*, never run, never a failure) when:

* it needs an extension the descriptor's target does not include (``extensions_required``), or it is
  for profiles the target has none of (``profiles_supported``);
* it is a positive test whose program the descriptor does not admit: an operator, a type signature, a
  constraint (such as "zero zero-points only") or a limit the device does not offer. Admission is the
  same :func:`~ironaccel.tosa.capability.admit` that ``load_program`` runs, so a test is skipped for
  exactly the reason the device would refuse its program, and that reason is recorded;
* it is a negative test of an operator the descriptor does not list at all.

Negative tests of an operator the device offers always apply, whatever their types: rejecting an
invalid program is every implementation's duty, and validation runs before admission. A test whose
files cannot be read applies (it then fails, visibly).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.errors import IronAccelError
from ..runtime.session import open_device
from ..tosa.capability import TOSA_1_0_DTYPES, CapabilityDescriptor, admit
from ..tosa.codec import read
from ..tosa.errors import FormatError, LoweringError
from ..tosa.operators import TOSA_1_0_OPS, Op
from ..tosa.target import Extension, Profile
from .case import read_desc
from .runner import CaseInfo, Outcome

NOT_APPLICABLE = "not applicable"


def _covers_everything(descriptor: CapabilityDescriptor) -> bool:
    """The whole specification, every type, no constraint or limit (the CPU reference backend)."""
    limits = (
        descriptor.max_operators,
        descriptor.max_tensors,
        descriptor.max_rank,
        descriptor.max_tensor_bytes,
        descriptor.max_constant_bytes,
        descriptor.max_bindings,
    )
    return (
        all(limit is None for limit in limits)
        and TOSA_1_0_DTYPES <= descriptor.dtypes
        and all(
            op in descriptor.operators
            and descriptor.operators[op].signatures is None
            and not descriptor.operators[op].constraints
            for op in TOSA_1_0_OPS
        )
    )


def _requirements(desc: dict[str, Any], descriptor: CapabilityDescriptor) -> str | None:
    needs = desc.get("test_requirements", {})
    target = descriptor.target
    try:
        extensions = {Extension.parse(e) for e in needs.get("extensions_required", [])}
        profiles = {Profile.parse(p) for p in needs.get("profiles_supported", [])}
    except ValueError as exc:
        return f"unknown requirement: {exc}"
    missing = sorted(e.value for e in extensions - target.extensions)
    if missing:
        return f"needs {', '.join(missing)}"
    if profiles and not profiles & target.profiles:
        return f"for {', '.join(sorted(p.value for p in profiles))} only"
    return None


def reason(test: Path, descriptor: CapabilityDescriptor, desc: dict[str, Any] | None = None) -> str | None:
    """Why the test in directory ``test`` does not apply to a device with ``descriptor``, or None."""
    try:
        desc = desc if desc is not None else read_desc(test)
    except (OSError, ValueError):
        return None
    why = _requirements(desc, descriptor)
    if why is not None or _covers_everything(descriptor):
        return why
    operator = str(desc.get("test_details", {}).get("operator", ""))
    try:
        op = Op.parse(operator)
    except (KeyError, ValueError):
        op = None
    if op is not None and op not in descriptor.operators:
        return f"{op.name} not offered"
    if desc.get("expected_failure"):
        return None
    try:
        program = read(test / desc["tosa_file"])
    except (OSError, KeyError, FormatError, IronAccelError):
        return None
    try:
        admit(program, descriptor)
    except LoweringError as exc:
        return f"not offered: {exc}"
    return None


def device_capabilities(spec: str) -> CapabilityDescriptor:
    """The capability descriptor of the device ``spec`` names (``ironaccel.open``'s forms), which is
    opened for the purpose and closed again. Raises the backend's error when it cannot be opened."""
    device = open_device(spec)
    try:
        return device.accelerator.capabilities()
    finally:
        device.close()
        close = getattr(device.accelerator, "close", None)
        if close is not None:
            close()


def split(tests: Sequence[CaseInfo], descriptor: CapabilityDescriptor) -> tuple[list[CaseInfo], list[Outcome]]:
    """``tests`` divided into those that apply and skipped outcomes (with their reasons) for the rest."""
    applicable: list[CaseInfo] = []
    skipped: list[Outcome] = []
    for info in tests:
        why = reason(info.path, descriptor)
        if why is None:
            applicable.append(info)
        else:
            skipped.append(Outcome(info, False, skipped=True, message=f"{NOT_APPLICABLE}: {why}"))
    return applicable, skipped


def is_not_applicable(outcome: Outcome) -> bool:
    return outcome.skipped and outcome.message.startswith(NOT_APPLICABLE)


__all__ = ["NOT_APPLICABLE", "device_capabilities", "is_not_applicable", "reason", "split"]
