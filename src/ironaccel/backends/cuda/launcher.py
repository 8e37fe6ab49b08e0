"""Prepared submissions: a run launched from the calling thread, with no hand-off to the queue's worker.

``launch`` puts the run on the queue's stream itself (its captured graph: one ``cuGraphLaunch``, see
:mod:`.program`) and records the ticket's CUevent after it; ``reached`` queries that event and ``wait``
polls it briefly, then blocks in ``cuEventSynchronize`` (:func:`.submit.wait_fired`). A launch skips the
contract's event and its bookkeeping: it costs a few driver calls.

Runs of one program share its arena. The queue's worker holds the program's lock until its run has
finished on the device; a launch holds it only while it enqueues. So that a later run on another stream
(another queue's worker, or another launcher) cannot overwrite the arena while a launched run still uses
it, a launch leaves its ticket's event as the program's ``tail``, and every run waits on the device for
the tail before its own work (``cuStreamWaitEvent``: the stream waits, not the host).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from typing import Any

from ...core.errors import Busy, DeviceLost
from ...runtime.accelerator import BoundRange
from ...runtime.prepared import check_ticket
from .driver import check
from .program import LoadedProgram, run_key
from .submit import CudaQueue, fired, new_event, wait_fired

MAX_IN_FLIGHT = 64  # launches not yet seen finished; one more is refused as Busy


class CudaLauncher:
    """One program bound to fixed ranges on one queue, launched from any thread (see the module doc)."""

    def __init__(self, queue: CudaQueue, program: LoadedProgram, ranges: Sequence[BoundRange]) -> None:
        self.queue, self.program, self.ranges = queue, program, tuple(ranges)
        self._key = run_key(self.ranges)  # the program's graph for these ranges, found without rebuilding it
        self.device = queue.device
        self._lock = threading.Lock()
        self._issued = 0
        self._finished = 0
        self._pending: collections.deque[tuple[int, Any]] = collections.deque()  # (ticket, CUevent), in order
        self._free: list[Any] = []  # events of finished tickets, reused

    def _event(self, driver: Any) -> Any:
        return self._free.pop() if self._free else new_event(driver)

    def launch(self) -> int:
        with self._lock, self.device.use() as driver:
            self._retire(driver)
            if len(self._pending) >= MAX_IN_FLIGHT:
                raise Busy(f"{MAX_IN_FLIGHT} launches of this prepared submission are still running")
            event = self._event(driver)
            stream, program = self.queue.stream, self.program
            try:
                with program.lock:
                    if program.tail is not None and program.tail_stream is not stream:
                        check(driver.cuStreamWaitEvent(stream, program.tail, 0), "cuStreamWaitEvent")
                    program.enqueue(stream, self.ranges, self._key)
                    check(driver.cuEventRecord(event, stream), "cuEventRecord")
                    program.tail, program.tail_stream = event, stream
            except BaseException:
                self._free.append(event)
                raise
            self._issued += 1
            self._pending.append((self._issued, event))
            return self._issued

    def _retire(self, driver: Any) -> None:
        """Move the tickets whose events have fired to finished (never blocks)."""
        while self._pending:
            ticket, event = self._pending[0]
            if not fired(driver, event):
                return
            self._pending.popleft()
            self._finished = ticket
            self._free.append(event)

    def reached(self, ticket: int) -> bool:
        with self._lock:
            check_ticket(ticket, self._issued)
            if ticket <= self._finished:  # seen finished already (by a wait): no driver call
                return True
        with self._lock, self.device.use() as driver:
            self._retire(driver)
            return ticket <= self._finished

    def wait(self, ticket: int, timeout: float | None) -> bool:
        with self._lock:
            check_ticket(ticket, self._issued)
            waiting = next((e for t, e in self._pending if t >= ticket), None)
        if waiting is None:
            return self.reached(ticket)
        with self.device.use() as driver:
            if not wait_fired(driver, waiting, timeout):
                return False
            with self._lock:  # the runs before it have finished too: retire up to it without asking again
                while self._pending and self._pending[0][0] <= ticket:
                    done, event = self._pending.popleft()
                    self._finished = done
                    self._free.append(event)
        return True

    def idle(self) -> bool:
        with self._lock, self.device.use() as driver:
            self._retire(driver)
            return not self._pending

    def destroy(self) -> None:
        with self._lock:
            events = [e for _, e in self._pending] + self._free
            self._pending.clear()
            self._free = []
        with self.program.lock:
            if any(self.program.tail is e for e in events):
                self.program.tail = self.program.tail_stream = None
        try:
            with self.device.use() as driver:
                for event in events:
                    driver.cuEventDestroy(event)
        except DeviceLost:
            pass  # the device was closed: its context took the events with it


__all__ = ["MAX_IN_FLIGHT", "CudaLauncher"]
