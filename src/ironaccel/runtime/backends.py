"""Execution backends: which are installed (entry points of the group ``ironaccel.backends``, each naming a
:class:`~.registration.BackendRegistration`), which one a device spec names (:func:`resolve`), and opening
it (:func:`open_resolved`).

Discovery knows twelve accelerator families; the installed execution backends run programs (bundled: cpu,
vulkan, virtio, and the kit's ``null`` device). :func:`resolve` turns what a user writes (``"cpu:0"``,
``"vulkan:lavapipe"``, a descriptor from ``ironaccel.devices()``) into the backend and selector to open, and
refuses the rest with a message that lists the accepted forms or, for a family no backend runs, names the
execution device of the same hardware. A descriptor's family is linked to the backend registered with that
family (by the family's name).

Cost: nothing here is read at import. Resolving a spec reads the installed metadata once (which backend
names exist; nothing is imported); opening a backend imports its registration and then its factory;
``auto`` and the error messages import every registration. Discovery runs only on the error path of a family
no backend runs. The spellings of the bundled backends' specs (``cpu`` has one device, ``virtio:PATH`` is a
path taken as written) stay here, because a spec resolves without importing any backend; an installed
backend is ``name`` or ``name:selector``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..core.descriptor import DeviceDescriptor
from ..core.errors import InvalidArgument, Unsupported
from ..core.kinds import BackendKind
from ..core.registry import BackendReport
from .registration import GROUP, BackendRegistration, Entry, Registry, load_target
from .same_hardware import counterparts, uuid_key

# The installed backends, read from the entry points when first needed (ADR 0030).
INSTALLED = Registry()
AUTO = "auto"

ACCEPTED_FORMS = (
    "accepted: 'auto'; 'cpu' or 'cpu:0'; 'vulkan' or 'vulkan:N' (an index, a UUID or part of the name,"
    " 'lavapipe'); 'virtio' or 'virtio:PATH' (a daemon's socket); or a DeviceDescriptor from ironaccel.devices()"
)
_SPELLED_OUT = frozenset({"cpu", "vulkan", "virtio"})  # the backends ACCEPTED_FORMS describes
_SPEC_SHOWN = 80  # characters of a refused spec quoted back


class _Installed(Mapping[str, str]):
    """Backend name -> the ``"module:attribute"`` of its registration, as the installed entry points declare
    (read on first use; nothing is imported)."""

    def __getitem__(self, name: str) -> str:
        return INSTALLED.names()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(INSTALLED.names())

    def __len__(self) -> int:
        return len(INSTALLED.names())

    def __repr__(self) -> str:
        return f"EXECUTION_BACKENDS({INSTALLED.names()!r})"


class _AutoOrder(Sequence[str]):
    """The names ``auto`` tries, in turn: :func:`auto_order`, worked out when first iterated."""

    def __getitem__(self, index: Any) -> Any:
        return auto_order()[index]

    def __len__(self) -> int:
        return len(auto_order())

    def __iter__(self) -> Iterator[str]:
        return iter(auto_order())

    def __repr__(self) -> str:
        return f"AUTO_ORDER{auto_order()!r}"


EXECUTION_BACKENDS: Mapping[str, str] = _Installed()
AUTO_ORDER: Sequence[str] = _AutoOrder()


@dataclasses.dataclass(frozen=True)
class Resolved:
    """What to open: ``backend`` (an installed backend's name, or ``"auto"``: the session tries AUTO_ORDER),
    the ``selector`` its factory takes (None: the backend's default device), and ``label``, the device as
    the user should see it in names and messages ("cpu:0", "vulkan:0", "vulkan:lavapipe")."""

    backend: str
    selector: str | None
    label: str

    def __str__(self) -> str:
        return self.label


def registrations() -> list[Entry]:
    """Every installed backend's entry point with its registration, or why it cannot be read (imports every
    registration; for listings such as ``ironaccel devices``)."""
    return INSTALLED.entries()


def rescan() -> None:
    """Read the installed entry points again on next use (after installing a backend into this process's
    environment)."""
    INSTALLED.rescan()


def auto_order() -> tuple[str, ...]:
    """What ``auto`` tries, in turn: first every backend whose registration cannot be read (its attempt fails
    at once with the reason, so the choice says why that backend was passed over), then the backends with an
    ``auto_rank``, lowest first (ties by name)."""
    entries = [e for e in (INSTALLED.entry(name) for name in INSTALLED.names()) if e is not None]
    unreadable = [e.name for e in entries if e.registration is None]
    ranked = sorted((r.auto_rank, r.name) for e in entries if (r := e.registration) and r.auto_rank is not None)
    return (*unreadable, *(name for _, name in ranked))


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
            f"a device spec is a string or a DeviceDescriptor, got {type(spec).__name__}; {_accepted()}"
        )
    family, colon, raw = spec.partition(":")
    name = family.strip().lower()
    selector = raw.strip()
    if not name:
        raise InvalidArgument(f"empty device spec {_shown(spec)}; {_accepted()}")
    if colon and not selector:
        raise InvalidArgument(
            f"device spec {_shown(spec)} has an empty selector after ':'; write {name!r} for its default device;"
            f" {_accepted()}"
        )
    if name == AUTO:
        if colon:
            raise InvalidArgument(f"auto takes no selector, got {_shown(spec)}; {_accepted()}")
        return Resolved(AUTO, None, AUTO)
    if name in INSTALLED.names():
        if name == "cpu":
            if colon and _ordinal(selector) != 0:
                raise InvalidArgument(f"the CPU backend has one device, cpu:0; got {_shown(spec)}; {_accepted()}")
            return Resolved("cpu", None, "cpu:0" if colon else "cpu")
        if name == "virtio":
            # A socket path is taken as written (only an all-blank one is refused above).
            return Resolved("virtio", raw or None, f"virtio:{raw}" if colon else "virtio")
        return Resolved(name, selector or None, f"{name}:{selector}" if colon else name)
    try:
        kind = BackendKind.parse(name)
    except ValueError:
        hint = " (for the best GPU write 'auto' or 'vulkan')" if name == "gpu" else ""
        raise InvalidArgument(
            f"no execution backend {_shown(name)} and no accelerator family of that name{hint}; {_accepted()}"
        ) from None
    runner = backend_for(kind)
    if runner is None:
        raise Unsupported(_foreign(kind, _ordinal(selector), None, _reports(reports)))
    # A family whose backend has another name: "cuda:1" opens what that backend calls its device 1.
    if runner.one_device:
        if colon and _ordinal(selector) != 0:
            raise InvalidArgument(f"the {runner.name} backend has one device, {runner.name}:0; got {_shown(spec)}")
        return Resolved(runner.name, None, f"{runner.name}:0" if colon else runner.name)
    return Resolved(runner.name, selector or None, f"{runner.name}:{selector}" if colon else runner.name)


def open_resolved(resolved: Resolved) -> Any:
    """The Accelerator ``resolved`` names (its registration and factory imported now). ``"auto"`` is the
    session's to pick. Raises InvalidArgument for a backend that is not installed or a one-device backend's
    selector other than 0, Unsupported for one that cannot be imported, and what the factory raises."""
    if resolved.backend == AUTO:
        raise InvalidArgument("'auto' is not one backend: the session tries AUTO_ORDER in turn")
    registration = _registration(resolved.backend)
    make = factory(resolved.backend)
    if registration.one_device:
        if resolved.selector is not None and _ordinal(resolved.selector) != 0:
            name = registration.name
            raise InvalidArgument(f"the {name} backend has one device, {name}:0; got {_shown(resolved.label)}")
        return make()
    if resolved.selector is None:
        return make()
    return make(resolved.selector)


def factory(name: str) -> Any:
    """The factory of the execution backend ``name`` (its registration and module imported now).
    InvalidArgument when no installed distribution declares ``name``; Unsupported, with the reason, when
    its registration or its factory cannot be imported."""
    registration = _registration(name)
    try:
        return load_target(registration.open)
    except (ImportError, AttributeError) as exc:
        raise Unsupported(
            f"execution backend {name!r}: its factory {registration.open} cannot be imported:"
            f" {type(exc).__name__}: {exc}"
        ) from exc


def execution_counterparts(
    device: DeviceDescriptor, reports: Sequence[BackendReport]
) -> tuple[str, list[DeviceDescriptor]]:
    """The Vulkan devices (of ``reports``) that are ``device``'s hardware, and the evidence (see
    :func:`.same_hardware.counterparts`); for a device of a family no execution backend runs."""
    vulkan = [d for r in reports if r.kind is BackendKind.VULKAN for d in r.devices]
    return counterparts(device, vulkan)


def _registration(name: str) -> BackendRegistration:
    entry = INSTALLED.entry(name)
    if entry is None:
        raise InvalidArgument(f"no execution backend {_shown(name)}; installed: {_installed_names()}, or 'auto'")
    if entry.registration is None:
        raise Unsupported(f"execution backend {name!r} ({entry.distribution}) cannot be used: {entry.error}")
    return entry.registration


def _installed_names() -> str:
    names = ", ".join(sorted(INSTALLED.names()))
    # No entry point at all: the package's own metadata predates them (an old editable install).
    return names or f"none (no distribution declares an entry point in the group {GROUP!r}: reinstall ironaccel)"


def backend_for(kind: BackendKind) -> BackendRegistration | None:
    """The installed backend that runs devices of the discovery family ``kind`` (its registration's
    ``family``), or None: the backend of the family's own name when it declares that family (only its
    registration is imported), else the first in scan order that does."""
    family = kind.value
    own = INSTALLED.entry(family)
    if own is not None and own.registration is not None and own.registration.family == family:
        return own.registration
    for entry in INSTALLED.entries():
        if entry.registration is not None and entry.registration.family == family:
            return entry.registration
    return None


def _resolve_descriptor(device: DeviceDescriptor, reports: Sequence[BackendReport] | None) -> Resolved:
    label = str(device.id)
    runner = backend_for(device.kind)
    if runner is None:
        raise Unsupported(_foreign(device.kind, device.ordinal, device, _reports(reports)))
    if runner.one_device:
        if device.ordinal != 0:
            what = "the CPU backend" if runner.name == "cpu" else f"the {runner.name} backend"
            raise InvalidArgument(f"{what} has one device, {runner.name}:0; got a descriptor of {label}")
        return Resolved(runner.name, None, label)
    # The UUID survives a change in the driver's order; without one, the ordinal is the driver's index.
    selector = device.uuid.strip() if uuid_key(device.uuid) else str(device.ordinal)
    return Resolved(runner.name, selector, label)


def _reports(reports: Sequence[BackendReport] | None) -> Sequence[BackendReport]:
    if reports is not None:
        return reports
    from .. import init

    return init().describe_all()


def _runnable() -> str:
    """The installed backends that run programs: those of a discovery family in the families' order, then
    the rest (virtio) by name."""
    order = {kind.value: index for index, kind in enumerate(BackendKind)}
    found = [e.registration for e in INSTALLED.entries() if e.registration is not None]
    found = [r for r in found if r.runs_programs]
    found.sort(key=lambda r: (order.get(r.family or "", len(order)), r.name))
    return ", ".join(r.name for r in found) or ("none" if INSTALLED.names() else _installed_names())


def _foreign(
    kind: BackendKind, ordinal: int | None, given: DeviceDescriptor | None, reports: Sequence[BackendReport]
) -> str:
    """Why a device of ``kind`` cannot be opened, and which execution device runs the same hardware."""
    family = kind.value
    head = f"no execution backend runs {family!r} devices"
    available = "available execution backends: " + _runnable()
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


def _accepted() -> str:
    """ACCEPTED_FORMS, and the installed backends it does not spell out (from the metadata alone)."""
    others = [repr(name) for name in INSTALLED.names() if name not in _SPELLED_OUT]
    return ACCEPTED_FORMS + (f"; installed besides: {', '.join(others)}" if others else "")


def _ordinal(text: str) -> int | None:
    """``text`` as a device ordinal (ASCII digits, at most 9 of them: never a huge int), else None."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut short: a spec can be anything a caller passed."""
    return repr(text if len(text) <= _SPEC_SHOWN else text[:_SPEC_SHOWN] + "...")
