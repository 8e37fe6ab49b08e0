"""Events: the completion token of one submission.

State machine: PENDING -> COMPLETE | FAILED(error) | CANCELLED. The first transition out of PENDING
wins (completion and cancellation race safely) and a terminal state never changes. Waiting uses a
condition variable; polling never blocks. Every method of EventCore is safe from any thread.

Cancelling started work: a backend that stops its runs at checkpoints (the CPU backend: before every
operator, every loop iteration, and at bounded intervals inside native code) starts them with
``try_start(stoppable=True)`` and calls :meth:`EventCore.checkpoint` at each. A cancel that comes while
such a run is going wins at once: the event's outcome is decided (CANCELLED) even if the run then
finishes before it looks, but its state stays PENDING until the run has stopped, so everything the
work binds stays pinned while code may still touch it. Deadlines are enforced at the same checkpoints.

Late completion: a run that ends past its deadline ends FAILED with DeadlineExpired, never COMPLETE,
whether or not the backend could stop it (a Vulkan or CUDA run, once on the device, goes to its end);
its outputs are not to be used. A finite timeout therefore always means what it says. The end of a run
is known to the event where the backend completes it as it ends (its own thread); where completion is
observed later (``observed``: a fence or a CUevent looked at by ``poll_event`` or ``wait``), the run may
have ended long before anyone looked, so it is late only if it was seen still running after the deadline
(:meth:`EventCore.seen_pending`, which the runtime's poll and wait call), never for being looked at late.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable

from ..core.errors import DeadlineExpired, IronAccelError

LATE = "the work ended past its deadline; its outputs are not to be used"


class RunCancelled(IronAccelError):
    """Raised by :meth:`EventCore.checkpoint` inside a run whose cancellation won; the run's event ends
    CANCELLED (never FAILED) whatever the backend reports."""


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

    # Defaults kept on the class: an event is made per submission, and most never change them.
    observed = False
    _late = False  # seen still running after the deadline: a completion then is a failure

    def __init__(self, deadline: float | None, observed: bool = False) -> None:
        self._cond = threading.Condition()
        self._state = EventState.PENDING
        self._error: IronAccelError | None = None
        self.deadline = deadline  # time.monotonic() value, or None for no timeout
        if observed:  # completion is observed after the fact (see the module's Late completion)
            self.observed = True
        self.started = False  # set by the backend when execution begins
        self.stoppable = False  # the started run stops at checkpoints: a cancel may still win
        self._stop = False  # a cancel won while the run went: it ends CANCELLED once it has stopped
        self._on_terminal: list[Callable[[], None]] = []
        self._claimed = False  # a transition out of PENDING has begun
        self._holds = 0  # hand-overs to the backend in progress (see hold)
        self._on_stop: list[Callable[[], None]] = []
        self._deferred: tuple[EventState, IronAccelError | None, list[Callable[[], None]]] | None = None

    @property
    def state(self) -> EventState:
        return self._state

    @property
    def error(self) -> IronAccelError | None:
        return self._error

    @property
    def late(self) -> bool:
        """Whether the run was seen still going past its deadline (it cannot end COMPLETE)."""
        return self._late

    def on_terminal(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the event is terminal (at once if it already is)."""
        with self._cond:
            if not self._state.terminal and not self._claimed:
                self._on_terminal.append(fn)
                return
        fn()

    def _finish(self, state: EventState, error: IronAccelError | None = None) -> bool:
        # Two phases: claim the transition, run the terminal callbacks (which release what the event
        # pinned), and only then publish the state, so a waiter that wakes finds everything released.
        with self._cond:
            if self._state.terminal or self._claimed:
                return False
            if self._stop:  # the cancellation that won while the work ran decides the outcome
                state, error = EventState.CANCELLED, None
            elif state is EventState.COMPLETE and self.deadline is not None and self._overran():
                state, error = EventState.FAILED, DeadlineExpired(LATE)
            self._claimed = True
            callbacks, self._on_terminal = self._on_terminal, []
            if self._holds:  # published when the hand-over returns (release)
                self._deferred = (state, error, callbacks)
                return True
        self._publish(state, error, callbacks)
        return True

    def _overran(self) -> bool:
        """Whether the run, now seen ended, ended past its deadline (under the condition's lock)."""
        return self._late or (not self.observed and time.monotonic() > self.deadline)

    def seen_pending(self, when: float) -> None:
        """The event was seen PENDING by a look at the backend that began at ``when`` (a
        ``time.monotonic()`` value): if that was past the deadline, the run ends FAILED with
        DeadlineExpired whenever it ends (a cancellation still wins)."""
        deadline = self.deadline
        if deadline is not None and when > deadline:
            with self._cond:
                if not self._state.terminal and not self._claimed:
                    self._late = True

    def hold(self) -> bool:
        """Keep the event from becoming terminal while the caller hands its work to the backend (the
        hand-over may still read what the event pins, even if the work ends or is cancelled meanwhile);
        False when the event is already decided. Each successful hold needs one :meth:`release`."""
        with self._cond:
            if self._state.terminal or self._claimed:
                return False
            self._holds += 1
            return True

    def release(self) -> None:
        """End a :meth:`hold`; a transition decided meanwhile is published now."""
        with self._cond:
            self._holds -= 1
            deferred = self._deferred if not self._holds else None
            if deferred is not None:
                self._deferred = None
        if deferred is not None:
            self._publish(*deferred)

    def _publish(self, state: EventState, error: IronAccelError | None, callbacks: list[Callable[[], None]]) -> None:
        for fn in callbacks:
            fn()
        with self._cond:
            self._state = state
            self._error = error
            self._cond.notify_all()

    def complete(self) -> bool:
        return self._finish(EventState.COMPLETE)

    def fail(self, error: IronAccelError) -> bool:
        return self._finish(EventState.FAILED, error)

    def cancel(self) -> bool:
        """True when this call won. Work not started ends CANCELLED now; started work that stops at
        checkpoints (``stoppable``) is told to stop and ends CANCELLED once it has (PENDING until then);
        started work that cannot be stopped, or an event already decided, is not cancelled."""
        stops: list[Callable[[], None]] | None = None  # set when the cancellation stops a started run
        with self._cond:
            if self._state.terminal or self._claimed or self._stop:
                return False
            if self.started:
                if not self.stoppable:
                    return False
                self._stop = True
                stops, self._on_stop = self._on_stop, []
            else:
                self._claimed = True
                callbacks, self._on_terminal = self._on_terminal, []
                if self._holds:
                    self._deferred = (EventState.CANCELLED, None, callbacks)
                    return True
        if stops is not None:
            for fn in stops:  # the run's own stop signal (native code reads a word, not this object)
                fn()
            return True
        self._publish(EventState.CANCELLED, None, callbacks)
        return True

    def on_stop(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (once, on the cancelling thread) when a cancellation wins against the running work;
        at once if one already has. For runs that cannot call :meth:`checkpoint` themselves (native code),
        so they can be told through a flag of their own."""
        with self._cond:
            if not self._stop:
                self._on_stop.append(fn)
                return
        fn()

    @property
    def stop_requested(self) -> bool:
        """Whether a cancellation won against the running work (it should stop at its next checkpoint)."""
        return self._stop

    def try_start(self, stoppable: bool = False) -> bool:
        """Mark execution begun; False when the event is already terminal (cancelled) or past its deadline.
        ``stoppable``: the backend calls :meth:`checkpoint` while the work runs, so cancellation may still
        win and the deadline is enforced while it runs."""
        with self._cond:
            if self._state.terminal or self._claimed:
                return False
            if self.deadline is not None and time.monotonic() > self.deadline:
                expired = True
            else:
                self.started = True
                self.stoppable = stoppable
                expired = False
        if expired:
            self.fail(DeadlineExpired("deadline passed before execution started"))
            return False
        return True

    def checkpoint(self) -> None:
        """For a stoppable run, between steps: raises RunCancelled when a cancellation won, DeadlineExpired
        once the deadline has passed. Cheap: two attribute reads, and the clock only under a deadline."""
        if self._stop:
            raise RunCancelled("the work was cancelled while it ran")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise DeadlineExpired("the work ran past its deadline")

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
