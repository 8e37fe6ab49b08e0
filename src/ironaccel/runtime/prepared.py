"""Prepared submissions: one program bound to one set of buffers on one queue, checked once, launched
many times.

``Accelerator.submit`` checks every binding and creates an event per call; a serving loop that launches
the same program on the same buffers thousands of times pays that on each one. ``prepare`` does the
checks once, pins the queue, program and buffers until ``release_prepared``, and hands back a
:class:`~.handles.Prepared`; ``launch`` then only starts the work and returns a ticket (1, 2, 3, ...),
and ``poll_launch`` / ``wait_launch`` say when a ticket's work is done. Tickets finish in order, as the
values of a timeline do: a backend with a native form (Vulkan: the recording and its submit info built
once, a timeline semaphore signalled per launch, ADR 0016) makes a launch one driver call.

A backend's native form is a :class:`Launcher`; :class:`Resubmit` is the form every backend has, which
launches through ``submit`` with the same bindings (so it behaves exactly as repeated submissions). The
contract's methods (``prepare``, ``launch``, ``poll_launch``, ``wait_launch``, ``release_prepared``) are
:class:`PreparedSubmissions`, a base of the Accelerator.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ..core.errors import Busy, DeadlineExpired, DeviceLost, InvalidArgument, IronAccelError
from .bindings import Binder
from .errors import ReleaseRejected
from .event import EventState
from .handles import Prepared, Program, Queue
from .hooks import BackendHooks
from .records import Record
from .submission import positive_timeout
from .types import Binding

if TYPE_CHECKING:
    from .accelerator import Accelerator
    from .handles import Event


class Launcher(Protocol):
    """What ``Accelerator._prepare`` returns. Every method is safe from any thread."""

    def launch(self) -> int:
        """Start one run; its ticket (one more than the last). Never waits; Busy when too many are in flight."""

    def reached(self, ticket: int) -> bool:
        """Whether ``ticket``'s run (and every earlier one) has finished. Never blocks. Raises the error a
        finished run ended with (DeviceLost where the device was lost)."""

    def wait(self, ticket: int, timeout: float | None) -> bool:
        """Block until ``ticket``'s run finished (True) or ``timeout`` seconds passed (False)."""

    def idle(self) -> bool:
        """Whether nothing launched is still running (observing what finished)."""

    def destroy(self) -> None:
        """Free what the launcher holds; nothing is running (``idle`` said so, or the device is idle)."""


def check_ticket(ticket: object, issued: int) -> int:
    if not isinstance(ticket, int) or isinstance(ticket, bool) or not 0 < ticket <= issued:
        raise InvalidArgument(f"ticket {ticket!r} was not returned by a launch of this prepared submission")
    return ticket


class Resubmit:
    """The launcher of a backend with no native one: each launch is ``submit`` with the same bindings, its
    event kept until the run is seen finished. Works on every backend, with ``submit``'s costs."""

    def __init__(self, acc: Accelerator, queue: Queue, program: Program, bindings: Sequence[Binding]) -> None:
        self._acc, self._queue, self._program, self._bindings = acc, queue, program, tuple(bindings)
        self._lock = threading.RLock()
        self._issued = 0
        self._done = 0  # every ticket up to this one has been seen finished and its event destroyed
        self._events: OrderedDict[int, Event] = OrderedDict()
        self._failures: list[tuple[int, IronAccelError]] = []  # runs that failed, not yet reported
        self._closed = False

    def launch(self) -> int:
        with self._lock:
            if self._closed:
                raise InvalidArgument("this prepared submission was released")
            self._retire()  # finished events do not pile up against the context's event limit
            event = self._acc.submit(self._queue, self._program, self._bindings)
            self._issued += 1
            self._events[self._issued] = event
            return self._issued

    def reached(self, ticket: int) -> bool:
        with self._lock:
            check_ticket(ticket, self._issued)
            if self._closed:
                raise InvalidArgument("this prepared submission was released")
            self._retire()
            for i, (failed, error) in enumerate(self._failures):
                if failed <= ticket:
                    del self._failures[i]
                    raise error
            return ticket <= self._done

    def wait(self, ticket: int, timeout: float | None) -> bool:
        with self._lock:
            check_ticket(ticket, self._issued)
            event = self._events.get(ticket)
        if event is not None:
            try:
                self._acc.wait(event, timeout)
            except DeadlineExpired:
                return False
            except InvalidArgument:
                pass  # destroyed meanwhile by another thread's retirement: finished
        return self.reached(ticket)

    def _retire(self) -> None:
        """Destroy the events of finished runs, oldest first, up to the first still running; the errors of
        runs that failed are kept for ``reached`` to raise."""
        while self._events:
            ticket, event = next(iter(self._events.items()))
            state = self._acc.poll_event(event)
            if not state.terminal:
                return
            if state is not EventState.COMPLETE:
                error = self._acc.event_error(event)
                self._failures.append((ticket, error or InvalidArgument(f"launch {ticket} was {state.value}")))
            del self._events[ticket]
            self._acc.destroy_event(event)
            self._done = ticket

    def idle(self) -> bool:
        with self._lock:
            self._retire()
            return not self._events

    def destroy(self) -> None:
        with self._lock:
            self._closed = True

    def surrender(self) -> list[Event]:
        """Close for a reset of the context: no launch follows, and the events of the runs not yet seen
        finished go to the reset, which ends and releases them with the context's other events."""
        with self._lock:
            self._closed = True
            events = list(self._events.values())
            self._events.clear()
            return events


class PreparedSubmissions(Binder):
    """``prepare``, ``launch``, ``poll_launch``, ``wait_launch`` and ``release_prepared`` (a base of Accelerator)."""

    @property
    def launches_natively(self) -> bool:
        """Whether ``launch`` is the backend's own (cheaper than ``submit``), not a ``submit`` each time."""
        return type(self)._prepare is not BackendHooks._prepare

    def prepare(self, queue: Queue, program: Program, bindings: Sequence[Binding]) -> Prepared:
        """Check ``bindings`` once, for launching ``program`` on ``queue`` any number of times (``launch``).

        Ownership: a new Prepared in the queue's context; until ``release_prepared`` the queue, the program
        and the bound buffers cannot be released, and a bound buffer cannot be written while a launch runs
        (Busy, as for pending submissions: write inputs once the last ticket is reached). Failure: nothing
        retained. Copies: none (buffers are bound directly, as by ``submit``)."""
        with self._lock:
            qrec, prec, ranges, brecs = self._work(queue, program, bindings)
            if self._resetting:
                self._refuse(queue.context)
            self._limit(queue.context, Prepared, self.device_info().limits.max_events_per_context)
            native = self._guard(self._prepare, qrec.native, prec.native, ranges)
            launcher = native if native is not None else Resubmit(self, queue, program, bindings)
            handle = Prepared(self, self._ids.new(), queue.context)
            held = [qrec, prec, *brecs]
            for r in held:
                r.holders.append(launcher)
            self._add(Record(handle, launcher, queue.context, extra=held))
            return handle

    def launch(self, prepared: Prepared) -> int:
        """Start one run of ``prepared``; returns its ticket (1 for the first launch, then one more each
        time). Runs of one prepared submission finish in ticket order. Blocking: never. Failure: Busy when
        the backend's runs in flight are at its limit, nothing started (observe some finish, then retry)."""
        if self._refusing:  # poisoned, or some context is being reset: one attribute read otherwise
            with self._lock:
                self._check_alive()
                self._refuse(getattr(prepared, "context", None))
        launcher = self._launcher(prepared)
        try:  # _guard's body, written out: this is the hot path
            return launcher.launch()
        except DeviceLost as exc:
            with self._lock:
                self._poison(exc)
            raise

    def poll_launch(self, prepared: Prepared, ticket: int) -> bool:
        """Whether the run of ``ticket`` (and every earlier one) has finished. Never blocks. Raises the error
        a finished run failed with (reported once), DeviceLost where the device was lost."""
        launcher = self._launcher(prepared)
        try:  # _guard's body, written out: this runs on every poll
            return bool(launcher.reached(ticket))
        except DeviceLost as exc:
            with self._lock:
                self._poison(exc)
            raise

    def wait_launch(self, prepared: Prepared, ticket: int, timeout: float | None = None) -> None:
        """Block until the run of ``ticket`` finished; DeadlineExpired after ``timeout`` seconds (None: no
        limit), when it may be waited for again. Raises as ``poll_launch`` does."""
        launcher = self._launcher(prepared)
        if not self._guard(launcher.wait, ticket, None if timeout is None else positive_timeout(timeout)):
            raise DeadlineExpired(f"launch {ticket} of {prepared!r} still running after {timeout} s")

    def _launcher(self, prepared: Prepared) -> Launcher:
        """``prepared``'s launcher, looked up without the lock (launches are the hot path): one dict read,
        atomic; a launcher released meanwhile refuses the call itself."""
        rec = self._objects.get(prepared.id) if type(prepared) is Prepared and prepared.owner is self else None
        if rec is None or rec.handle is not prepared:
            return self._record(prepared, Prepared).native  # raises the reason
        return rec.native

    def release_prepared(self, prepared: Prepared) -> None:
        """Ownership: consumes ``prepared`` and unpins what it bound. Failure: ReleaseRejected(Busy) while a
        launched run is still running."""
        with self._lock:
            rec = self._record(prepared, Prepared)
            if self._poisoned is None and not self._guard(rec.native.idle):
                raise ReleaseRejected(Busy(f"{prepared!r} has launched runs still running"), prepared)
            try:
                self._release(rec, self._release_launcher)
            finally:
                if prepared.id not in self._objects:
                    for r in rec.extra:
                        r.holders.remove(rec.native)
