"""The discovery contract: what every accelerator family's probe answers.

Discovery only says what exists and what it can do; choosing where to run belongs to the runtime.
Absence is a fact, not a failure: a missing runtime library makes a backend unavailable with a reason,
never an exception.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from .descriptor import DeviceDescriptor
from .errors import InvalidArgument
from .flags import CapabilityFlags
from .kinds import BackendKind


@runtime_checkable
class Backend(Protocol):
    """A discovery backend for one accelerator family."""

    @property
    def kind(self) -> BackendKind: ...

    def is_available(self) -> bool:
        """True when the family's runtime loaded and reported at least one device."""
        ...

    def enumerate(self) -> list[DeviceDescriptor]:
        """Every device, ordinal order; empty when unavailable."""
        ...

    def capabilities(self, ordinal: int) -> CapabilityFlags:
        """``enumerate()[ordinal].capability.flags``; an unknown ordinal raises InvalidArgument."""
        ...


class Unavailable(Exception):
    """Raised inside a probe to say why the family is absent; caught by :class:`ProbedBackend`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProbedBackend:
    """A Backend whose devices come from one probe function, run once, on first use.

    The probe returns the devices or raises :class:`Unavailable` with the reason. Any other exception
    is a defect in the probe; it is kept (type and message) as the reason rather than propagated, so
    one broken family never hides the others.
    """

    def __init__(self, kind: BackendKind, probe: Callable[[], list[DeviceDescriptor]]) -> None:
        self._kind = kind
        self._probe = probe
        self._lock = threading.Lock()
        self._done = False
        self._devices: list[DeviceDescriptor] = []
        self._reason: str | None = None
        self._error: BaseException | None = None

    @property
    def kind(self) -> BackendKind:
        return self._kind

    def _ensure(self) -> None:
        with self._lock:
            if self._done:
                return
            try:
                devices = list(self._probe())
                if not devices:
                    raise Unavailable("runtime loaded but reported no devices")
                for index, dev in enumerate(devices):
                    if dev.id.kind is not self._kind or dev.id.ordinal != index:
                        raise AssertionError(f"probe returned {dev.id} at position {index}")
                self._devices = devices
            except Unavailable as exc:
                self._reason = exc.reason
            except Exception as exc:  # noqa: BLE001 - kept as the reason, see class docstring
                self._error = exc
                self._reason = f"probe failed: {type(exc).__name__}: {exc}"
            self._done = True

    def is_available(self) -> bool:
        self._ensure()
        return bool(self._devices)

    @property
    def reason(self) -> str | None:
        """Why the family is unavailable (``None`` when it is available)."""
        self._ensure()
        return self._reason

    @property
    def error(self) -> BaseException | None:
        """The unexpected exception a broken probe raised, for diagnostics."""
        self._ensure()
        return self._error

    def enumerate(self) -> list[DeviceDescriptor]:
        self._ensure()
        return list(self._devices)

    def capabilities(self, ordinal: int) -> CapabilityFlags:
        devices = self.enumerate()
        if not isinstance(ordinal, int) or not 0 <= ordinal < len(devices):
            raise InvalidArgument(
                f"{self._kind.value} has no device {ordinal!r} ({len(devices)} device(s) found)"
            )
        return devices[ordinal].capability.flags
