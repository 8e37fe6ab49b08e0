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
launches through ``submit`` with the same bindings (so it behaves exactly as repeated submissions).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ..core.errors import DeadlineExpired, InvalidArgument, IronAccelError
from .event import EventState

if TYPE_CHECKING:
    from .accelerator import Accelerator
    from .handles import Event, Program, Queue
    from .types import Binding


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
