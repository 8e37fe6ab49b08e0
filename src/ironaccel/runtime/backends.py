"""Execution backends: where each lives (one static table, imported only when that backend is opened), and
which one a device spec names (:func:`resolve`).

Discovery knows twelve accelerator families; three execution backends run programs (cpu, vulkan, virtio).
:func:`resolve` turns what a user writes (``"cpu:0"``, ``"vulkan:lavapipe"``, a descriptor from
``ironaccel.devices()``) into the backend and selector to open, and refuses the rest with a message that
lists the accepted forms or, for a family no backend runs, names the execution device of the same hardware.
Nothing here imports a backend or runs discovery at import; discovery runs only on that error path.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Sequence
from typing import Any

from ..core.descriptor import DeviceDescriptor
from ..core.errors import InvalidArgument, Unsupported
from ..core.kinds import BackendKind
from ..core.registry import BackendReport
from .same_hardware import counterparts, uuid_key

# name -> "module:factory"; the factory takes the device selector (or None) and returns an Accelerator.
EXECUTION_BACKENDS: dict[str, str] = {
    "cpu": "ironaccel.backends.cpu.accelerator:CpuAccelerator",
    "vulkan": "ironaccel.backends.vulkan:open_accelerator",
    "virtio": "ironaccel.virtio.guest:open_accelerator",  # "virtio:PATH": a daemon's socket
}

# The order "auto" tries them in: hardware GPUs first, the CPU last.
AUTO_ORDER = ("vulkan", "cpu")
AUTO = "auto"
# Backends whose factory takes no selector (one device each).
_NO_SELECTOR = frozenset({"cpu"})

ACCEPTED_FORMS = (
    "accepted: 'auto'; 'cpu' or 'cpu:0'; 'vulkan' or 'vulkan:N' (an index, a UUID or part of the name,"
    " 'lavapipe'); 'virtio' or 'virtio:PATH' (a daemon's socket); or a DeviceDescriptor from ironaccel.devices()"
)
_SPEC_SHOWN = 80  # characters of a refused spec quoted back


@dataclasses.dataclass(frozen=True)
class Resolved:
    """What to open: ``backend`` (a key of EXECUTION_BACKENDS, or ``"auto"``: the session tries AUTO_ORDER),
    the ``selector`` its factory takes (None: the backend's default device), and ``label``, the device as
    the user should see it in names and messages ("cpu:0", "vulkan:0", "vulkan:lavapipe")."""

    backend: str
    selector: str | None
    label: str

    def __str__(self) -> str:
        return self.label


def resolve(spec: str | DeviceDescriptor, reports: Sequence[BackendReport] | None = None) -> Resolved:
    """The execution backend and selector ``spec`` names.

    Raises InvalidArgument for a malformed or unknown spec (the message lists the accepted forms), and
    Unsupported for a device of a family that discovery knows but no execution backend runs (cuda, rocm,
    opengl, ...): the message names the execution device of the same hardware when there is one. Only that
    message needs discovery: ``reports`` (``ironaccel.describe()``'s) when given, else the process's
    registry is asked then (``ironaccel.init()``, probes cached after the first time).
    """
    if isinstance(spec, DeviceDescriptor):
        return _resolve_descriptor(spec, reports)
    if not isinstance(spec, str):
        raise InvalidArgument(
            f"a device spec is a string or a DeviceDescriptor, got {type(spec).__name__}; {ACCEPTED_FORMS}"
        )
    family, colon, raw = spec.partition(":")
    name = family.strip().lower()
    selector = raw.strip()
    if not name:
        raise InvalidArgument(f"empty device spec {_shown(spec)}; {ACCEPTED_FORMS}")
    if colon and not selector:
        raise InvalidArgument(
            f"device spec {_shown(spec)} has an empty selector after ':'; write {name!r} for its default device;"
            f" {ACCEPTED_FORMS}"
        )
    if name == AUTO:
        if colon:
            raise InvalidArgument(f"auto takes no selector, got {_shown(spec)}; {ACCEPTED_FORMS}")
        return Resolved(AUTO, None, AUTO)
    if name == "cpu":
        if colon and _ordinal(selector) != 0:
            raise InvalidArgument(f"the CPU backend has one device, cpu:0; got {_shown(spec)}; {ACCEPTED_FORMS}")
        return Resolved("cpu", None, "cpu:0" if colon else "cpu")
    if name == "virtio":
        # A socket path is taken as written (only an all-blank one is refused above).
        return Resolved("virtio", raw or None, f"virtio:{raw}" if colon else "virtio")
    if name in EXECUTION_BACKENDS:
        return Resolved(name, selector or None, f"{name}:{selector}" if colon else name)
    try:
        kind = BackendKind.parse(name)
    except ValueError:
        hint = " (for the best GPU write 'auto' or 'vulkan')" if name == "gpu" else ""
        raise InvalidArgument(
            f"no execution backend {_shown(name)} and no accelerator family of that name{hint}; {ACCEPTED_FORMS}"
        ) from None
    raise Unsupported(_foreign(kind, _ordinal(selector), None, _reports(reports)))


def open_resolved(resolved: Resolved) -> Any:
    """The Accelerator ``resolved`` names (its backend imported now). ``"auto"`` is the session's to pick."""
    if resolved.backend == AUTO:
        raise InvalidArgument("'auto' is not one backend: the session tries AUTO_ORDER in turn")
    make = factory(resolved.backend)
    if resolved.selector is None or resolved.backend in _NO_SELECTOR:
        return make()
    return make(resolved.selector)


def factory(name: str) -> Any:
    """The factory of the execution backend ``name`` (its module imported now)."""
    try:
        target = EXECUTION_BACKENDS[name]
    except KeyError:
        known = ", ".join(sorted(EXECUTION_BACKENDS))
        raise InvalidArgument(f"no execution backend {name!r}; known: {known}, or 'auto'") from None
    module_name, attr = target.split(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr)


def execution_counterparts(
    device: DeviceDescriptor, reports: Sequence[BackendReport]
) -> tuple[str, list[DeviceDescriptor]]:
    """The Vulkan devices (of ``reports``) that are ``device``'s hardware, and the evidence (see
    :func:`.same_hardware.counterparts`); for a device of a family no execution backend runs."""
    vulkan = [d for r in reports if r.kind is BackendKind.VULKAN for d in r.devices]
    return counterparts(device, vulkan)


def _resolve_descriptor(device: DeviceDescriptor, reports: Sequence[BackendReport] | None) -> Resolved:
    label = str(device.id)
    if device.kind is BackendKind.CPU:
        if device.ordinal != 0:
            raise InvalidArgument(f"the CPU backend has one device, cpu:0; got a descriptor of {label}")
        return Resolved("cpu", None, label)
    if device.kind is BackendKind.VULKAN:
        # The UUID survives a change in the loader's order; without one, the ordinal is the loader's index.
        selector = device.uuid.strip() if uuid_key(device.uuid) else str(device.ordinal)
        return Resolved("vulkan", selector, label)
    raise Unsupported(_foreign(device.kind, device.ordinal, device, _reports(reports)))


def _reports(reports: Sequence[BackendReport] | None) -> Sequence[BackendReport]:
    if reports is not None:
        return reports
    from .. import init

    return init().describe_all()


def _foreign(
    kind: BackendKind, ordinal: int | None, given: DeviceDescriptor | None, reports: Sequence[BackendReport]
) -> str:
    """Why a device of ``kind`` cannot be opened, and which execution device runs the same hardware."""
    family = kind.value
    head = f"no execution backend runs {family!r} devices"
    available = "available execution backends: " + ", ".join(EXECUTION_BACKENDS)
    report = next((r for r in reports if r.kind is kind), None)
    if given is not None:
        devices = [given]
    else:
        found = list(report.devices) if report is not None else []
        devices = [d for d in found if ordinal is None or d.ordinal == ordinal]
        if not devices:
            if ordinal is not None and found:
                seen = f"discovery found no {family}:{ordinal} ({len(found)} {family} device(s))"
            else:
                why = report.reason if report is not None and report.reason else "no devices"
                seen = f"discovery found no {family} device: {why}"
            return f"{head} ({seen}); {available}"
    notes, matched = [], False
    for device in devices:
        evidence, same = execution_counterparts(device, reports)
        who = f"{device.id} ({device.name})"
        if len(same) == 1:
            target = str(same[0].id)
            notes.append(f"{who} runs as {target}: open({target!r})")
            matched = True
        elif same:
            ids = " or ".join(str(d.id) for d in same)
            notes.append(f"{who} is one of {ids} (same {evidence}; a UUID would tell them apart)")
            matched = True
        else:
            notes.append(f"{who} has no Vulkan counterpart here")
    return "; ".join([head, *notes, *([] if matched else [available])])


def _ordinal(text: str) -> int | None:
    """``text`` as a device ordinal (ASCII digits, at most 9 of them: never a huge int), else None."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut short: a spec can be anything a caller passed."""
    return repr(text if len(text) <= _SPEC_SHOWN else text[:_SPEC_SHOWN] + "...")
