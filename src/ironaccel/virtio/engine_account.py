"""The daemon-wide byte account: what all guests of one engine hold at once, under one cap.

Each guest has its own byte budgets (:class:`~.engine_policy.GuestQuota`), but 64 guests each within
theirs could together ask the host for far more memory than it has. :class:`HostAccount` is the second
check: every byte charged to a guest (a buffer's backing, a program's declared resident bytes) is
charged here too, before the runtime is called, and refused with RESOURCE_LIMIT when the sum of all
guests would pass ``cap``. Every release gives the bytes back (a guest's own release, its reset or
close, and the engine's later reclamation of what a closed guest left running), so ``held`` is always
the sum of what live objects are charged and never more than ``cap``.

The cap's default is :data:`HOST_MEMORY_FRACTION` of the host's available memory when the engine is
made (``MemAvailable`` in /proc/meminfo); where that cannot be read there is no daemon-wide cap.
"""

from __future__ import annotations

import logging
import threading

from ..core.errors import InvalidArgument
from .engine_policy import Refused
from .wire_constants import Status

log = logging.getLogger("ironaccel.virtio.engine")

HOST_MEMORY_FRACTION = 0.5  # of MemAvailable: what all guests together may hold by default
MEMINFO = "/proc/meminfo"


def available_memory(meminfo: str = MEMINFO) -> int | None:
    """The host's MemAvailable in bytes, or None where it cannot be read."""
    try:
        with open(meminfo, encoding="ascii") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name == "MemAvailable":
                    number, _, unit = value.strip().partition(" ")
                    return int(number) * (1024 if unit.strip().lower() == "kb" else 1)
    except (OSError, ValueError):
        return None
    return None


def default_max_bytes(meminfo: str = MEMINFO) -> int | None:
    """HOST_MEMORY_FRACTION of MemAvailable, or None (no cap) where it cannot be read."""
    available = available_memory(meminfo)
    return None if available is None else int(available * HOST_MEMORY_FRACTION)


class HostAccount:
    """Bytes held by every guest of an engine together. Thread-safe. ``cap`` None: counted, not capped."""

    def __init__(self, cap: int | None) -> None:
        if cap is not None and (not isinstance(cap, int) or cap < 1):
            raise InvalidArgument(f"the daemon-wide byte cap must be a positive integer, got {cap!r}")
        self.cap = cap
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        with self._lock:
            return self._held

    def charge(self, nbytes: int, what: str) -> None:
        """Take ``nbytes`` or refuse (RESOURCE_LIMIT, nothing taken) when the cap would be passed."""
        if nbytes < 0:
            raise InvalidArgument(f"{what}: a charge of {nbytes} bytes")
        with self._lock:
            if self.cap is not None and self._held + nbytes > self.cap:
                left = self.cap - self._held
                raise Refused(
                    Status.RESOURCE_LIMIT,
                    f"{what}: {nbytes} bytes, {left} left under the daemon-wide cap of {self.cap} bytes",
                )
            self._held += nbytes

    def release(self, nbytes: int) -> None:
        with self._lock:
            self._held -= nbytes
            if self._held < 0:  # a release without its charge: an engine defect, never a guest's doing
                log.error("the daemon-wide account went to %d bytes after a release of %d", self._held, nbytes)
                self._held = 0


__all__ = ["HOST_MEMORY_FRACTION", "HostAccount", "available_memory", "default_max_bytes"]
