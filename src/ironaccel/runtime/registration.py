"""How an execution backend makes itself known: a :class:`BackendRegistration` named by an entry point.

Every backend, bundled or installed from another distribution, declares an entry point in the group
``ironaccel.backends`` whose value names a ``BackendRegistration`` (``cpu = "ironaccel.backends.cpu.
registration:REGISTRATION"``). The registration says, in plain strings, where the backend's factory is and
how ``open`` and ``auto`` treat it; reading it never imports the backend itself, so the module that holds
it must import nothing heavy (the runtime imports it to list the backends or to open one).

:class:`Registry` reads the entry points once, when first asked (never at ``import ironaccel``): the
names and values come from the installed metadata without importing anything; a registration is imported
only when a backend is opened by name or the whole list is wanted (``auto``, ``ironaccel devices``). A
registration that cannot be read (its module fails to import, it names something else, its name is taken)
is kept as an :class:`Entry` with the reason, never raised: one broken distribution must not stop the
others from opening. A package run from its source checkout without being installed has no metadata: its
own entry points are then read from the checkout's pyproject.toml.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..core.errors import InvalidArgument
from ..core.kinds import BackendKind

GROUP = "ironaccel.backends"

# What follows ``name:`` in a device spec is the selector; "auto" is the session's own choice.
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_RESERVED = frozenset({"auto"})
# "package.module:attribute", the form of an entry point's value.
_TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_FAMILIES = frozenset(kind.value for kind in BackendKind)
_REASON_SHOWN = 400  # characters of a plugin's own error message kept in a reason


@dataclasses.dataclass(frozen=True)
class BackendRegistration:
    """What one execution backend declares. Every field is data: nothing here imports the backend.

    - ``name``: what users write (``ironaccel.open("name")``, ``"name:selector"``); lower case, at most 32
      characters of ``a-z 0-9 _ -``, starting with a letter; the entry point carries the same name.
    - ``open``: ``"module:function"``, the factory: called with the selector (a string) to open a chosen
      device, with no argument for the backend's default one; returns a ``runtime.Accelerator``.
    - ``family``: the discovery family (``core.BackendKind`` value: ``"vulkan"``, ``"cuda"``) whose devices it
      runs, or None; a descriptor from ``ironaccel.devices()`` of that family opens on this backend.
    - ``auto_rank``: where ``ironaccel.open("auto")`` tries it, lower first (the bundled Vulkan backend has 10,
      the CPU 100); None: never tried by ``auto``.
    - ``why_not``: ``"module:function"`` returning why the backend cannot open a device here (a string), or
      None when it can, without opening one; None when it always can. ``ironaccel devices`` shows it.
    - ``one_device``: the backend has one device, opened as ``name`` or ``name:0``; its factory takes no
      selector.
    - ``runs_programs``: False for a device that admits no program (the null device of the backend kit):
      it is still opened by name, but never offered as a place to run programs.
    - ``summary``: one line for listings.
    """

    name: str
    open: str
    family: str | None = None
    auto_rank: int | None = None
    why_not: str | None = None
    one_device: bool = False
    runs_programs: bool = True
    summary: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name) or self.name in _RESERVED:
            raise InvalidArgument(
                f"backend registration name {self.name!r}: expected 1-32 characters of a-z 0-9 _ -, starting with"
                " a letter, and not 'auto'"
            )
        for field in ("open", "why_not"):
            value = getattr(self, field)
            if value is None and field == "why_not":
                continue
            if not isinstance(value, str) or not _TARGET.fullmatch(value):
                what = f"backend registration {self.name!r}: {field}={value!r}"
                raise InvalidArgument(f"{what} is not 'module:attribute'")
        if self.family is not None and self.family not in _FAMILIES:
            raise InvalidArgument(
                f"backend registration {self.name!r}: family {self.family!r} is no discovery family; known:"
                f" {', '.join(sorted(_FAMILIES))}"
            )
        rank = self.auto_rank
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
            raise InvalidArgument(f"backend registration {self.name!r}: auto_rank={rank!r} is not an int or None")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One entry point of the group: where it points, the distribution that declares it, and either the
    registration read from it or ``error``, why it could not be read (then ``registration`` is None)."""

    name: str
    value: str
    distribution: str
    registration: BackendRegistration | None = None
    error: str | None = None

    def __str__(self) -> str:
        return f"{self.name} = {self.value} ({self.distribution})"


def load_target(target: str) -> Any:
    """The object ``"module:attribute"`` names (the module imported now). ImportError, AttributeError and
    whatever the module raises while it imports propagate."""
    if not isinstance(target, str) or not _TARGET.fullmatch(target):
        raise InvalidArgument(f"{target!r} is not 'module:attribute'")
    module_name, _, attribute = target.partition(":")
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found


def _installed() -> Iterable[tuple[str, str, str]]:
    """(name, value, distribution) of every entry point of the group in the installed metadata (read, not
    imported), in the order the distributions come on sys.path; then, when no installed distribution named
    ironaccel declares any, the package's own from its source checkout (:func:`_checkout_points`)."""
    from importlib.metadata import entry_points

    own = False
    for point in entry_points(group=GROUP):
        dist = getattr(point, "dist", None)
        dist_name = (getattr(dist, "name", None) or "") if dist is not None else ""
        where = f"{dist_name} {dist.version}" if dist is not None and dist_name else "an unnamed distribution"
        own = own or _normalized(dist_name) == "ironaccel"
        yield point.name, point.value, where
    if not own:
        yield from _checkout_points()


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _checkout_points() -> Iterable[tuple[str, str, str]]:
    """The entry points the checkout's pyproject.toml declares, for a package that runs from its source tree
    without being installed (``PYTHONPATH=src``, as on a machine without network, or the package alone
    linked into the conformance runner's environment): it has no metadata, and its bundled backends must
    still open. Nothing when the package does not sit in an ironaccel checkout."""
    import tomllib
    from pathlib import Path

    here = Path(__file__).resolve().parents  # <checkout>/src/ironaccel/runtime/registration.py
    if len(here) < 4:
        return
    project = here[3] / "pyproject.toml"
    try:
        declared = tomllib.loads(project.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return
    if declared.get("name") != "ironaccel":
        return
    points = declared.get("entry-points", {}).get(GROUP, {})
    for name, value in points.items() if isinstance(points, dict) else ():
        if isinstance(name, str) and isinstance(value, str):
            yield name, value, f"ironaccel {declared.get('version', '')} (source checkout, {project})"


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= _REASON_SHOWN else text[:_REASON_SHOWN] + "..."


class Registry:
    """The backends the installed entry points declare. Thread-safe; every read is cached until
    :meth:`rescan`. ``scan`` yields (name, value, distribution) triples (the installed metadata's by
    default; tests pass their own)."""

    def __init__(self, scan: Callable[[], Iterable[tuple[str, str, str]]] = _installed) -> None:
        self._scan = scan
        self._lock = threading.RLock()
        self._points: dict[str, Entry] | None = None  # by name: the first of each name, unread
        self._clashes: list[Entry] = []  # later entry points of a name already taken
        self._read: dict[str, Entry] = {}

    def names(self) -> dict[str, str]:
        """Backend name -> the ``"module:attribute"`` of its registration, from the metadata alone (nothing is
        imported), in scan order."""
        return {name: entry.value for name, entry in self._entries().items()}

    def entry(self, name: str) -> Entry | None:
        """The entry point ``name`` with its registration read (imported now, once), or None when no
        installed distribution declares that name."""
        points = self._entries()
        if name not in points:
            return None
        with self._lock:
            done = self._read.get(name)
        if done is None:
            # Imported outside the lock: a registration module that asks the registry while it imports (or
            # another thread importing it) must not wait on a lock held across its import.
            done = _read(points[name])
            with self._lock:
                done = self._read.setdefault(name, done)
        return done

    def entries(self) -> list[Entry]:
        """Every entry point with its registration read (or the reason it could not be), in scan order; a
        name declared twice appears twice, the later one with the clash as its error."""
        found = [self.entry(name) for name in self._entries()]
        with self._lock:
            return [e for e in found if e is not None] + list(self._clashes)

    def rescan(self) -> None:
        """Forget what was read: the next question reads the installed metadata again (after a backend was
        installed into the running process's environment, or a test changed sys.path)."""
        with self._lock:
            self._points = None
            self._clashes = []
            self._read = {}

    def _entries(self) -> dict[str, Entry]:
        with self._lock:
            if self._points is None:
                points: dict[str, Entry] = {}
                clashes: list[Entry] = []
                for name, value, distribution in self._scan():
                    entry = Entry(name, value, distribution)
                    first = points.get(name)
                    if first is None:
                        points[name] = entry
                    elif (first.value, first.distribution) != (value, distribution):
                        why = f"the name {name!r} is taken by {first}; this one is ignored"
                        clashes.append(dataclasses.replace(entry, error=why))
                self._points, self._clashes = points, clashes
            return self._points


def _read(entry: Entry) -> Entry:
    """``entry`` with its registration imported and checked, or with the reason it is unusable."""
    try:
        found = load_target(entry.value)
    except Exception as exc:  # noqa: BLE001 - a broken distribution is reported, never fatal to the others
        return dataclasses.replace(entry, error=f"its registration {entry.value} cannot be read: {_reason(exc)}")
    if not isinstance(found, BackendRegistration):
        kind = type(found).__name__
        return dataclasses.replace(entry, error=f"{entry.value} is a {kind}, not a BackendRegistration")
    if found.name != entry.name:
        why = f"{entry.value} registers the name {found.name!r} under the entry point {entry.name!r}"
        return dataclasses.replace(entry, error=why)
    return dataclasses.replace(entry, registration=found)


def unavailable(registration: BackendRegistration) -> str | None:
    """Why ``registration``'s backend cannot open a device here (its ``why_not`` check, imported and run
    now), or None when it can; a check that fails is itself the reason."""
    if registration.why_not is None:
        return None
    try:
        check = load_target(registration.why_not)
        why = check()
    except Exception as exc:  # noqa: BLE001 - a failing check is the answer, not a crash of the listing
        return f"its why_not check {registration.why_not} failed: {_reason(exc)}"
    return None if why is None else str(why)


__all__ = ["GROUP", "BackendRegistration", "Entry", "Registry", "load_target", "unavailable"]
