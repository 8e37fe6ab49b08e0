"""Queues and submission: each contract queue is a CUDA stream and a worker thread that runs the queue's
submissions in order and ends their events.

``_submit`` only enqueues the run for the queue's worker (never waits). The worker (an
:class:`~ironaccel.runtime.worker.OrderedWorker`: started when work comes, gone after ``IDLE_S`` without
any, as a guest may hold hundreds of idle queues) takes each run in turn: it starts the event, takes the
program (runs of one program share its arena), puts the run on the stream
(:meth:`.program.LoadedProgram.enqueue`), records the queue's CUevent after it and waits for that event,
polling ``cuEventQuery`` for ``SPIN_S`` and then blocking in ``cuEventSynchronize`` (the event is created
with blocking sync, so the wait sleeps instead of spinning a core). Only then does it end the event: what
the event pins (the bound buffers, the program) stays alive until the device has finished with it.

Cancellation and deadlines are checked when the run starts and before its work goes to the stream; once on
the stream it runs to its end (a cancellation that wins meanwhile still ends the event CANCELLED, and the
event waits until the device is done). A driver error fails the event with the error ``.driver.check``
maps it to; a fault that loses the context (DeviceLost) also makes the accelerator unusable.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ...core.errors import DeviceLost, InternalError, IronAccelError
from ...runtime.accelerator import Accelerator, BoundRange
from ...runtime.event import EventCore
from ...runtime.worker import OrderedWorker
from .device import CudaDevice
from .driver import check, status_name
from .program import LoadedProgram

SPIN_S = 200e-6  # a wait polls the CUevent this long before it blocks


class CudaQueue(OrderedWorker):
    """One contract queue: a stream, the CUevent that marks each run's end on it, and the worker thread
    that runs the queue's jobs in submission order."""

    def __init__(self, device: CudaDevice, lost: Callable[[IronAccelError], None]) -> None:
        super().__init__("ironaccel-cuda-queue")
        self.device = device
        self.lost = lost
        driver = device.api
        self.stream = check(driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
        flags = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING) | int(driver.CUevent_flags.CU_EVENT_BLOCKING_SYNC)
        try:
            self.done = check(driver.cuEventCreate(flags), "cuEventCreate")
        except BaseException:
            driver.cuStreamDestroy(self.stream)
            raise

    def wait(self) -> None:
        """Until the work recorded before ``done`` has finished on the device."""
        driver = self.device.api
        end = time.perf_counter() + SPIN_S
        while time.perf_counter() < end:
            result = driver.cuEventQuery(self.done)
            if status_name(result) != "CUDA_ERROR_NOT_READY":
                check(result, "cuEventQuery")
                return
        check(driver.cuEventSynchronize(self.done), "cuEventSynchronize")

    def run(self, program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore) -> None:
        """One submission, on the worker thread: see the module doc."""
        if not event.try_start(stoppable=True):
            return  # cancelled, or past its deadline (the event says which)
        try:
            with self.device.use() as driver, program.lock:
                event.checkpoint()
                try:
                    if program.tail is not None:  # a launched run may still use the arena
                        check(driver.cuStreamWaitEvent(self.stream, program.tail, 0), "cuStreamWaitEvent")
                    program.enqueue(self.stream, ranges)
                    check(driver.cuEventRecord(self.done, self.stream), "cuEventRecord")
                except BaseException:
                    # What reached the stream finishes before the event releases what it binds.
                    driver.cuStreamSynchronize(self.stream)
                    raise
                self.wait()
        except DeviceLost as exc:
            event.fail(exc)
            self.lost(exc)
        except IronAccelError as exc:  # RunCancelled too: the event then ends CANCELLED
            event.fail(exc)
        except Exception as exc:  # noqa: BLE001 - a failing run fails its event, never the queue's thread
            event.fail(InternalError(f"the CUDA backend failed a run: {type(exc).__name__}: {exc}"))
        else:
            event.complete()

    def destroy(self) -> None:
        """The stream and the event (no work of the queue is pending; the device in use by the caller)."""
        self.close()
        driver = self.device.api
        driver.cuEventDestroy(self.done)
        driver.cuStreamDestroy(self.stream)


class CudaSubmission(Accelerator):
    """The queue and submission hooks of the CUDA accelerator (one of its bases)."""

    device: CudaDevice
    # Work not yet started is cancelled at once; started work ends CANCELLED once the device is done with it.
    supports_cancellation = True

    def _lost(self, error: IronAccelError) -> None:
        """The device faulted: the accelerator is unusable from now on (pending events fail with it)."""
        with self._lock:
            if self._poisoned is None:
                self._poison(DeviceLost(f"the CUDA device faulted: {error}"))

    def _create_queue(self, context: Any) -> CudaQueue:
        # Weak: the device owns its queues, and must not keep the accelerator (its finalizer's owner) alive.
        method = weakref.WeakMethod(self._lost)

        def lost(error: IronAccelError) -> None:
            found = method()
            if found is not None:
                found(error)

        with self.device.use():
            queue = CudaQueue(self.device, lost)
        try:
            self.device.adopt("queue", queue)
        except BaseException:
            with self.device.use():
                queue.destroy()
            raise
        return queue

    def _destroy_queue(self, native: CudaQueue) -> None:
        if not self.device.release("queue", native):
            native.close()  # the device closed meanwhile: its worker thread still goes

    def _submit(self, queue: CudaQueue, program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore) -> None:
        queue.put(lambda: queue.run(program, ranges, event))
