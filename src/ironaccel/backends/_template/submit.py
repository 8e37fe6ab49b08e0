"""Queues and submission: a loaded program run on bound buffers, in submission order, ending its event.

Here a queue is a host thread that exists only while submissions wait: it runs each in turn and completes,
fails or cancels its event. A device hands the work to a hardware queue in ``_submit`` (never waiting for
it) and learns it finished from a fence or an interrupt: either a thread of its own then ends the events, as
here, or the runtime asks ``_progress`` (``observes_completion``, as the Vulkan backend does).
"""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...core.errors import InternalError, IronAccelError
from ...runtime.accelerator import Accelerator, BoundRange
from ...runtime.event import EventCore
from .program import LoadedProgram
from .registration import NAME


class HostQueue:
    """Runs its jobs one at a time in the order they came, on a thread started when a job arrives to an idle
    queue and gone once none waits (a guest may hold hundreds of idle queues)."""

    def __init__(self) -> None:
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._lock = threading.Lock()
        self._draining = False  # a thread is running the jobs (only one ever is)
        self._closed = False

    def put(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._closed:
                raise InternalError(f"a submission reached a destroyed {NAME} queue")
            self._jobs.append(job)
            if self._draining:
                return
            self._draining = True
        threading.Thread(target=self._drain, name=f"ironaccel-{NAME}-queue", daemon=True).start()

    def close(self) -> None:
        """The queue is destroyed (the runtime does so only when no work of it is pending)."""
        with self._lock:
            self._closed = True

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._draining = False
                    return
                job = self._jobs.popleft()
            job()


class TemplateSubmission(Accelerator):
    """The queue and submission hooks of the template's accelerator (one of its bases)."""

    # Work not yet started is cancelled at once; running work stops at its next step (see _run).
    supports_cancellation = True

    def _create_queue(self, context: Any) -> HostQueue:
        # TODO(backend): create (or pick) the device queue this contract queue submits to.
        return HostQueue()

    def _destroy_queue(self, native: HostQueue) -> None:
        # TODO(backend): destroy the device queue.
        native.close()

    def _submit(self, queue: HostQueue, program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore) -> None:
        # TODO(backend): record (or reuse) the commands that run ``program`` on the bound ranges, submit them
        # to the device queue with a fence, and end ``event`` when the fence signals.
        queue.put(functools.partial(_run, program, ranges, event))


def _view(bound: BoundRange) -> np.ndarray:
    """The bound range as an array of its slot's dtype and shape (a view: no copy)."""
    raw = bound.native[bound.offset : bound.offset + bound.length]
    return raw.view(bound.spec.numpy_dtype).reshape(bound.spec.shape)


def _run(program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore) -> None:
    # Stoppable: the program calls event.checkpoint before each step, so a cancellation or the deadline
    # ends the run there, not only before it starts.
    if not event.try_start(stoppable=True):
        return  # cancelled, or past its deadline (the event says which)
    try:
        count = len(program.inputs)
        inputs = [_view(r) for r in ranges if r.slot < count]
        outputs = [_view(r) for r in ranges if r.slot >= count]
        program.run(inputs, outputs, event.checkpoint)
    except IronAccelError as exc:  # RunCancelled too: the event then ends CANCELLED
        event.fail(exc)
    except Exception as exc:  # noqa: BLE001 - a failing step fails its event, never the queue's thread
        event.fail(InternalError(f"the {NAME} backend failed a run: {type(exc).__name__}: {exc}"))
    else:
        event.complete()
