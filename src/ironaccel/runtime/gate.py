"""Host gates: a monotonic counter the host raises to release work that waits on it.

``submit(..., after=(gate, value))`` admits the work at once but starts it only when the gate
reaches ``value``. Nothing blocks while waiting: the waiting work is parked on the gate, and the
thread that signals hands it to its queue. A reset of the gate's context (:mod:`.reset`) closes it: its
parked work is dropped (the reset cancels it) and ``signal`` raises InvalidArgument naming the reset. Parked
work is never put on the device before the signal (ADR 0047).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..core.errors import InvalidArgument


class HostGate:
    """A monotonic 64-bit counter. Every method is safe from any thread: racing signals leave the
    highest value (a lower one raises InvalidArgument), and released work is handed to its queue on the
    signalling thread, outside the gate's lock; no thread blocks while work waits."""

    _stale: str | None = None  # why the gate is closed (its context was reset)

    def __init__(self, owner: object, context: object) -> None:
        self._lock = threading.Lock()
        self._value = 0
        self._waiters: list[tuple[int, Callable[[], None]]] = []
        self.owner = owner
        self.context = context

    @property
    def value(self) -> int:
        return self._value

    def signal(self, value: int) -> None:
        """Raise the counter to ``value`` (never lower) and release every waiter it satisfies."""
        if self._stale is not None:
            raise InvalidArgument(self._stale)
        if not isinstance(value, int) or value < 0 or value >= 1 << 64:
            raise InvalidArgument(f"gate value must be an integer in [0, 2**64), got {value!r}")
        with self._lock:
            if self._stale is not None:
                raise InvalidArgument(self._stale)
            if value < self._value:
                raise InvalidArgument(f"gate values only increase: {value} < current {self._value}")
            self._value = value
            ready = [fn for v, fn in self._waiters if v <= value]
            self._waiters = [(v, fn) for v, fn in self._waiters if v > value]
        for fn in ready:
            fn()

    def when(self, value: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the counter reaches ``value`` (at once if it already has); never on a closed gate
        (work admitted as its context's reset began: the reset cancels it)."""
        with self._lock:
            if self._stale is not None:
                return
            if self._value < value:
                self._waiters.append((value, fn))
                return
        fn()

    def close(self, why: str) -> None:
        """Make the gate stale; the work parked on it is never started by it."""
        with self._lock:
            self._stale = why
            self._waiters = []

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiters)
