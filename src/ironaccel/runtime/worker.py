"""A queue's jobs run in submission order on a thread that exists only while there is work.

Backends whose queues are host threads (the CPU backend's) make
``_submit`` enqueue a job on an :class:`OrderedWorker` and return: the job then starts the run's event,
runs it and ends the event. The thread is started when a job comes to an idle worker and ends after
``IDLE_S`` without one, so the hundreds of idle queues a virtio guest may hold keep no thread. Waiting a
little before ending it saves a thread start per run when a caller submits one run after another.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable


class OrderedWorker:
    """Runs jobs one at a time, in the order :meth:`put` received them, on a thread of its own named
    ``name``. A job must not raise: it ends its event itself, whatever happens."""

    IDLE_S = 1.0

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: collections.deque[Callable[[], None] | None] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._running = False  # a thread is draining the jobs (or about to)

    def put(self, job: Callable[[], None]) -> None:
        """Run ``job`` after every job put before it; never waits for it."""
        with self._cond:
            self._jobs.append(job)
            if self._running:
                self._cond.notify()
                return
            self._running = True
        threading.Thread(target=self._loop, name=self._name, daemon=True).start()

    def close(self) -> None:
        """No job is pending (the runtime destroys a queue only then): let the thread go at once."""
        with self._cond:
            self._jobs.append(None)
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    self._cond.wait(self.IDLE_S)
                if not self._jobs or self._jobs[0] is None:
                    self._jobs.clear()
                    self._running = False
                    return
                job = self._jobs.popleft()
            job()  # type: ignore[misc]  # never None: close's marker is looked at before a job is taken


__all__ = ["OrderedWorker"]
