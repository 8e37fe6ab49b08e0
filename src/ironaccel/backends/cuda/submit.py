"""Queues and submission: each contract queue is a CUDA stream; a run goes to it from the submitting thread,
and its event is completed by whoever observes that it finished (``observes_completion``).

``_submit`` starts the event, takes the program (runs of one program share its arena) only while it puts
the run on the stream (:meth:`.program.LoadedProgram.enqueue`: one graph launch after the first run with
those ranges), and records a CUevent after it; it never waits. A run waits on the device, not on the host,
for the program's previous run on another stream (the program's ``tail`` event, ``cuStreamWaitEvent``), so
two queues never use one arena at once. ``poll_event`` and ``wait`` then ask :meth:`CudaSubmission._progress`,
which queries the queue's CUevents in order and completes the events of the runs that finished; a wait for
one run polls its CUevent for ``SPIN_S``, then blocks in ``cuEventSynchronize`` (the event is made with
blocking sync, so the thread sleeps). No thread of the backend's own stands between a submission and its
completion: a call costs the submitting thread a few driver calls and no wake-up of another thread. What an
event pins (its bound buffers, the program) stays alive until it is completed, after the device is done.

Cancellation and deadlines are checked when the run is submitted (or released by a host gate); once on
the stream it runs to its end (a cancellation that wins meanwhile still ends the event CANCELLED when the
device is done). A driver error fails the event with the error ``.driver.check`` maps it to; a fault that
loses the context (DeviceLost) makes the accelerator unusable.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Sequence
from typing import Any

from ...core.errors import DeviceLost, InternalError, IronAccelError
from ...runtime.accelerator import Accelerator, BoundRange
from ...runtime.event import EventCore
from .device import CudaDevice
from .driver import check
from .program import LoadedProgram

NOT_READY = 600  # CUDA_ERROR_NOT_READY: compared as a number, since a poll loop asks for it many times
SPIN_S = 200e-6  # a wait polls the CUevent this long before it blocks
_GATED_POLL_S = 0.05  # how long a wait for a run not yet submitted (behind a host gate) sleeps between looks


def new_event(driver: Any) -> Any:
    """A CUevent without timing that a host wait sleeps on (blocking sync) instead of spinning a core."""
    flags = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING) | int(driver.CUevent_flags.CU_EVENT_BLOCKING_SYNC)
    return check(driver.cuEventCreate(flags), "cuEventCreate")


def fired(driver: Any, event: Any) -> bool:
    """Whether the work recorded before ``event`` has finished (never blocks; raises the device's fault)."""
    result = driver.cuEventQuery(event)
    status = result[0] if isinstance(result, tuple) else result
    code = int(status)
    if code == NOT_READY:
        return False
    if code:
        check(result, "cuEventQuery")
    return True


def wait_fired(driver: Any, event: Any, timeout: float | None) -> bool:
    """Until ``event`` fired (True) or ``timeout`` seconds passed (False): polls for ``SPIN_S``, then sleeps
    in ``cuEventSynchronize`` (no timeout) or in short naps (a timeout)."""
    start = time.perf_counter()
    while not fired(driver, event):
        elapsed = time.perf_counter() - start
        if timeout is not None and elapsed >= timeout:
            return False
        if elapsed < SPIN_S:
            continue
        if timeout is None:
            check(driver.cuEventSynchronize(event), "cuEventSynchronize")
            return True
        time.sleep(min(1e-3, max(timeout - elapsed, 0.0)))
    return True


class CudaQueue:
    """One contract queue: a stream, and the runs on it not yet seen finished, in order, each with the
    CUevent recorded after it (events reused once their run is retired)."""

    def __init__(self, device: CudaDevice) -> None:
        self.device = device
        driver = device.api
        self.stream = check(driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
        self.lock = threading.Lock()
        self.pending: collections.deque[tuple[EventCore, Any]] = collections.deque()
        self.free: list[Any] = []

    def enqueue(self, program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore) -> None:
        """Put one run on the stream and note it pending (the device in use by the caller)."""
        driver = self.device.api
        with self.lock:
            marker = self.free.pop() if self.free else new_event(driver)
            try:
                with program.lock:
                    event.checkpoint()
                    if program.tail is not None and program.tail_stream is not self.stream:
                        check(driver.cuStreamWaitEvent(self.stream, program.tail, 0), "cuStreamWaitEvent")
                    program.enqueue(self.stream, ranges)
                    check(driver.cuEventRecord(marker, self.stream), "cuEventRecord")
                    program.tail, program.tail_stream = marker, self.stream
            except BaseException:
                self.free.append(marker)
                raise
            self.pending.append((event, marker))

    def retire(self, upto: EventCore | None = None, timeout: float | None = 0.0) -> list[EventCore]:
        """The events of the runs that finished, in order, taken off ``pending``. With ``upto``, waits up to
        ``timeout`` seconds for that run first (the device in use by the caller)."""
        driver = self.device.api
        with self.lock:
            marker = next((m for e, m in self.pending if e is upto), None) if upto is not None else None
        if marker is not None and timeout != 0.0:
            wait_fired(driver, marker, timeout)
        done = []
        with self.lock:
            while self.pending and fired(driver, self.pending[0][1]):
                event, used = self.pending.popleft()
                self.free.append(used)
                done.append(event)
        return done

    def holds(self, event: EventCore) -> bool:
        with self.lock:
            return any(e is event for e, _ in self.pending)

    def destroy(self) -> None:
        """The stream and the events (nothing of the queue pending; the device in use by the caller)."""
        driver = self.device.api
        with self.lock:
            markers = self.free + [m for _, m in self.pending]
            self.free, self.pending = [], collections.deque()
        for marker in markers:
            driver.cuEventDestroy(marker)
        driver.cuStreamDestroy(self.stream)


class CudaSubmission(Accelerator):
    """The queue and submission hooks of the CUDA accelerator (one of its bases)."""

    device: CudaDevice
    # Work not yet started is cancelled at once; started work ends CANCELLED once the device is done with it.
    supports_cancellation = True
    observes_completion = True

    def _init_submission(self) -> None:
        self._where: dict[EventCore, CudaQueue] = {}
        self._where_lock = threading.Lock()
        self._changed = threading.Condition()

    def _create_queue(self, context: Any) -> CudaQueue:
        with self.device.use():
            queue = CudaQueue(self.device)
        try:
            self.device.adopt("queue", queue)
        except BaseException:
            with self.device.use():
                queue.destroy()
            raise
        return queue

    def _destroy_queue(self, native: CudaQueue) -> None:
        self.device.release("queue", native)

    def _submit(self, queue: CudaQueue, program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore) -> None:
        if not event.try_start(stoppable=True):
            return  # cancelled, or past its deadline (the event says which)
        try:
            with self.device.use():
                with self._where_lock:
                    self._where[event] = queue
                queue.enqueue(program, ranges, event)
        except Exception as exc:  # noqa: BLE001 - a run that could not be submitted fails its own event
            with self._where_lock:
                self._where.pop(event, None)
            self._fail(event, exc)
        with self._changed:
            self._changed.notify_all()

    def _fail(self, event: EventCore, exc: Exception) -> None:
        """A run that could not be put on the stream fails its event (a lost device also the accelerator)."""
        if isinstance(exc, DeviceLost):
            event.fail(exc)
            with self._lock:
                if self._poisoned is None:
                    self._poison(DeviceLost(f"the CUDA device faulted: {exc}"))
        elif isinstance(exc, IronAccelError):  # RunCancelled too: the event then ends CANCELLED
            event.fail(exc)
        else:
            event.fail(InternalError(f"the CUDA backend failed a run: {type(exc).__name__}: {exc}"))

    def _complete(self, events: list[EventCore]) -> None:
        """Complete retired events, outside every backend lock (their callbacks take the runtime's)."""
        if not events:
            return
        with self._where_lock:
            for e in events:
                self._where.pop(e, None)
        for e in events:
            e.complete()
        with self._changed:
            self._changed.notify_all()

    def _progress(self, event: EventCore | None, timeout: float | None) -> None:
        if self.device.closed:
            return
        with self._where_lock:
            queue = self._where.get(event) if event is not None else None
            queues = {id(q): q for q in self._where.values()}.values() if event is None else ()
        if event is None:
            for q in list(queues):
                with self.device.use():
                    self._complete(q.retire())
            return
        if queue is not None and queue.holds(event):
            with self.device.use():
                self._complete(queue.retire(event, timeout))
            return
        if timeout == 0 or event.state.terminal:
            return
        # Not on the device yet: parked on a host gate (or being submitted right now). Sleep until a
        # submission or retirement happens, a bounded while at most, then let the caller look again.
        with self._changed:
            self._changed.wait(_GATED_POLL_S if timeout is None else min(timeout, _GATED_POLL_S))
