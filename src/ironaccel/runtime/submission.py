"""Submission and its events: ``submit`` admits work and returns an event; the event methods observe it.

``submit`` checks the bindings (:mod:`.bindings`), pins the queue, program and bound buffers, and hands
the work to the backend's ``_submit`` now, or when a host gate reaches a value (``after``). The event it
returns is the one way to learn how the work ended: ``poll_event`` never blocks, ``wait`` blocks up to a
timeout, ``cancel_event`` stops work that has not started (or that runs where runs stop at checkpoints),
``destroy_event`` releases a terminal event. A terminal state never changes.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence

from ..core.errors import (
    Busy,
    DeadlineExpired,
    InvalidArgument,
    IronAccelError,
    PermissionDenied,
    Unsupported,
)
from .bindings import Binder
from .errors import ReleaseRejected, SubmitIndeterminate, SubmitRejected
from .event import EventCore, EventState
from .gate import HostGate
from .handles import Context, Event, Program, Queue
from .records import Record
from .types import Binding

PARKED = "parked"  # an event record's ``extra`` while its work waits on a host gate


def positive_timeout(timeout: float) -> float:
    """``timeout`` as seconds, once it is a positive number (None is the caller's to handle)."""
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidArgument(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    return float(timeout)


class Submission(Binder):
    """``submit``, host gates and the event methods (a base of Accelerator)."""

    def host_gate(self, ctx: Context) -> HostGate:
        """A host-signalled gate usable as ``submit(..., after=(gate, value))`` within ``ctx``. It lives as
        long as its user keeps it (the book does not count it); a reset of ``ctx`` makes it stale."""
        with self._lock:
            self._check_alive()
            self._record(ctx, Context)
            if self._resetting:
                self._refuse(ctx)
            gate = HostGate(self, ctx)
            gates = self._gates.get(ctx)
            if gates is None:
                gates = self._gates[ctx] = weakref.WeakSet()
            gates.add(gate)
            return gate

    def submit(
        self,
        queue: Queue,
        program: Program,
        bindings: Sequence[Binding],
        timeout: float | None = None,
        after: tuple[HostGate, int] | None = None,
    ) -> Event:
        """Admit work and return its event; never waits for it.

        Ownership: on success the event pins the queue, program and bound buffers until it is terminal.
        Failure: SubmitRejected (nothing retained) or SubmitIndeterminate (the carried event owns them).
        Copies: none; buffers are bound directly. ``timeout`` (seconds) counts from admission.
        """
        try:
            with self._lock:
                qrec, prec, ranges, brecs = self._work(queue, program, bindings)
                if self._resetting:
                    self._refuse(queue.context)
                if after is not None:
                    gate, value = after
                    if not isinstance(gate, HostGate) or gate.owner is not self or gate.context is not queue.context:
                        raise PermissionDenied("gate belongs to another accelerator or context")
                    if not isinstance(value, int) or value < 0:
                        raise InvalidArgument(f"gate value must be a non-negative integer, got {value!r}")
                limits = self.device_info().limits
                self._limit(queue.context, Event, limits.max_events_per_context)
                deadline = None if timeout is None else time.monotonic() + positive_timeout(timeout)
                core = EventCore(deadline, self.observes_completion) if timeout is not None else EventCore(None)
                event = Event(self, self._ids.new(), queue.context)
                pinned = [qrec, prec, *brecs]
                for r in pinned:
                    r.pins += 1
                # A gated event's record says so until the gate hands the work over (a reset cancels parked
                # work on every backend: it has not reached the backend).
                erec = Record(event, core, queue.context)
                if after is not None:
                    erec.extra = PARKED
                self._add(erec)
        except IronAccelError as exc:
            raise SubmitRejected(exc) from exc

        def unpin() -> None:
            with self._lock:
                for r in pinned:
                    r.pins -= 1

        core.on_terminal(unpin)

        def start() -> None:
            # Runs on the thread that signals the gate: a failure to start fails the event, never that thread.
            # Work cancelled (or failed by device loss) while parked never reaches the backend: its queue and
            # buffers may be released by now. Otherwise the hold keeps the event from turning terminal (and
            # so from dropping its pins) until _submit has returned, even if the work ends or a cancel wins
            # meanwhile: a waiter that sees the terminal state finds everything released.
            if not core.hold():
                return
            erec.extra = None
            try:
                self._submit(qrec.native, prec.native, ranges, core)
            except SubmitIndeterminate as exc:
                core.fail(exc.error)
            except IronAccelError as exc:
                core.fail(exc)
            finally:
                core.release()

        if after is None:
            try:
                self._guard(self._submit, qrec.native, prec.native, ranges, core)
            except SubmitIndeterminate as exc:
                raise SubmitIndeterminate(exc.error, event) from exc
            except IronAccelError as exc:
                # Not accepted: undo the bookkeeping so nothing is retained.
                with self._lock:
                    core.fail(exc)
                    self._drop(event.id)
                raise SubmitRejected(exc) from exc
        else:
            gate, value = after
            gate.when(value, start)
        return event

    # ---- events ---------------------------------------------------------------------------------
    def poll_event(self, event: Event) -> EventState:
        """Never blocks. A terminal state never changes."""
        with self._lock:
            core: EventCore = self._record(event, Event).native
        if self.observes_completion and not core.state.terminal:
            looked = time.monotonic() if core.deadline is not None else 0.0
            self._guard(self._progress, core, 0.0)
            if looked:
                core.seen_pending(looked)
        return core.state

    def event_error(self, event: Event) -> IronAccelError | None:
        with self._lock:
            return self._record(event, Event).native.error

    def wait(self, event: Event, timeout: float | None = None) -> EventState:
        """Block up to ``timeout`` seconds (None: forever); raises DeadlineExpired if still pending.
        Any number of threads may wait on one event; all wake when it becomes terminal."""
        with self._lock:
            core: EventCore = self._record(event, Event).native
        if self.observes_completion:
            end = None if timeout is None else time.monotonic() + timeout
            while not core.state.terminal:
                now = time.monotonic()
                remaining = None if end is None else end - now
                if remaining is not None and remaining <= 0:
                    break
                deadline = core.deadline
                if deadline is not None and not core.late:
                    # Look as the deadline passes: work still running then ends late (event.py).
                    if now > deadline:
                        self._guard(self._progress, core, 0.0)
                        core.seen_pending(now)
                        if core.state.terminal:
                            break
                    else:
                        remaining = deadline - now if remaining is None else min(remaining, deadline - now)
                self._guard(self._progress, core, remaining)
            state = core.state
        else:
            state = core.wait(timeout)
        if not state.terminal:
            raise DeadlineExpired(f"{event!r} still pending after {timeout} s")
        return state

    def cancel_event(self, event: Event) -> bool:
        """True when cancellation won: the work never started, or it was running on a backend that stops
        runs at checkpoints (the event stays PENDING until the run has stopped, then is CANCELLED).
        False when the event finished first, or its work started where it cannot be stopped."""
        with self._lock:
            core: EventCore = self._record(event, Event).native
        if not self.supports_cancellation:
            raise Unsupported("this backend does not cancel submitted work")
        return core.cancel()

    def destroy_event(self, event: Event) -> None:
        """Ownership: consumes a TERMINAL event. Failure: ReleaseRejected(Busy) while it is pending."""
        self._observe_all()
        with self._lock:
            rec = self._record(event, Event)
            if not rec.native.state.terminal:
                raise ReleaseRejected(Busy(f"{event!r} is pending"), event)
            self._drop(event.id)


__all__ = ["Submission", "positive_timeout"]
