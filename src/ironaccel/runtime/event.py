"""Events: the completion token of one submission.

State machine: PENDING -> COMPLETE | FAILED(error) | CANCELLED. The first transition out of PENDING
wins (completion and cancellation race safely) and a terminal state never changes. Waiting uses a
condition variable; polling never blocks. Every method of EventCore is safe from any thread.
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
    """The shared, thread-safe state behind an :class:`~ironaccel.runtime.handles.Event` handle.

    Terminal callbacks run once, on the thread that wins the transition, before the state is published."""

    def __init__(self, deadline: float | None) -> None:
        self._cond = threading.Condition()
        self._state = EventState.PENDING
        self._error: IronAccelError | None = None
        self.deadline = deadline  # time.monotonic() value, or None for no timeout
        self.started = False  # set by the backend when execution begins (cancel loses after that)
        self._on_terminal: list[Callable[[], None]] = []
        self._claimed = False  # a transition out of PENDING has begun

    @property
    def state(self) -> EventState:
        return self._state

    @property
    def error(self) -> IronAccelError | None:
        return self._error

    def on_terminal(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the event is terminal (at once if it already is)."""
        with self._cond:
            if not self._state.terminal and not self._claimed:
                self._on_terminal.append(fn)
                return
        fn()

    def _finish(self, state: EventState, error: IronAccelError | None = None, unstarted: bool = False) -> bool:
        # Two phases: claim the transition, run the terminal callbacks (which release what the event
        # pinned), and only then publish the state, so a waiter that wakes finds everything released.
        with self._cond:
            if self._state.terminal or self._claimed or (unstarted and self.started):
                return False
            self._claimed = True
            callbacks, self._on_terminal = self._on_terminal, []
        for fn in callbacks:
            fn()
        with self._cond:
            self._state = state
            self._error = error
            self._cond.notify_all()
        return True

    def complete(self) -> bool:
        return self._finish(EventState.COMPLETE)

    def fail(self, error: IronAccelError) -> bool:
        return self._finish(EventState.FAILED, error)

    def cancel(self) -> bool:
        """Cancel if execution has not started; True when this call won."""
        return self._finish(EventState.CANCELLED, unstarted=True)

    def try_start(self) -> bool:
        """Mark execution begun; False when the event is already terminal (cancelled) or past its deadline."""
        with self._cond:
            if self._state.terminal or self._claimed:
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
