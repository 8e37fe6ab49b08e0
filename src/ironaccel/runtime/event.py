"""Events: the completion token of one submission.

State machine: PENDING -> COMPLETE | FAILED(error) | CANCELLED. The first transition out of PENDING
wins (completion and cancellation race safely) and a terminal state never changes. Waiting uses a
condition variable; polling never blocks.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable

from ..core.errors import DeadlineExpired, IronAccelError


class EventState(enum.Enum):
    PENDING = "pending"
    COMPLETE = "complete"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self is not EventState.PENDING


class EventCore:
    """The shared, thread-safe state behind an :class:`~ironaccel.runtime.handles.Event` handle."""

    def __init__(self, deadline: float | None) -> None:
        self._cond = threading.Condition()
        self._state = EventState.PENDING
        self._error: IronAccelError | None = None
        self.deadline = deadline  # time.monotonic() value, or None for no timeout
        self.started = False  # set by the backend when execution begins (cancel loses after that)
        self._on_terminal: list[Callable[[], None]] = []

    @property
    def state(self) -> EventState:
        return self._state

    @property
    def error(self) -> IronAccelError | None:
        return self._error

    def on_terminal(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the event is terminal (at once if it already is)."""
        with self._cond:
            if not self._state.terminal:
                self._on_terminal.append(fn)
                return
        fn()

    def _finish(self, state: EventState, error: IronAccelError | None = None) -> bool:
        with self._cond:
            if self._state.terminal:
                return False
            self._state = state
            self._error = error
            callbacks, self._on_terminal = self._on_terminal, []
            self._cond.notify_all()
        for fn in callbacks:
            fn()
        return True

    def complete(self) -> bool:
        return self._finish(EventState.COMPLETE)

    def fail(self, error: IronAccelError) -> bool:
        return self._finish(EventState.FAILED, error)

    def cancel(self) -> bool:
        """Cancel if execution has not started; True when this call won."""
        with self._cond:
            if self._state.terminal or self.started:
                return False
        return self._finish(EventState.CANCELLED)

    def try_start(self) -> bool:
        """Mark execution begun; False when the event is already terminal (cancelled) or past its deadline."""
        with self._cond:
            if self._state.terminal:
                return False
            if self.deadline is not None and time.monotonic() > self.deadline:
                expired = True
            else:
                self.started = True
                expired = False
        if expired:
            self.fail(DeadlineExpired("deadline passed before execution started"))
            return False
        return True

    def wait(self, timeout: float | None) -> EventState:
        """Block until terminal or ``timeout`` seconds pass; returns the state then."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._state.terminal:
                remaining = None if end is None else end - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._cond.wait(remaining)
            return self._state
