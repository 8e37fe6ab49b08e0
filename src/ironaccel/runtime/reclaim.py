"""Releasing what users drop: the user API's objects give their resources back when collected.

An :class:`~.session.Executable`, a :class:`~.session.Run` or a :class:`~.session.Device` that its user
drops without ``close()`` hands a *release job* to :func:`release`. A job is a function that frees what
the object held and returns True, or returns False while that is not possible yet (work it bound is
still running); it never refers to the dropped object itself.

Where the job runs:
- When the object went away because its last reference was dropped (``del``, a name rebound), the job
  runs at once on that thread: the caller's own code was running, holding none of IronAccel's locks,
  so ``live_resources()`` is back to its baseline as soon as ``del`` returns.
- When the cyclic garbage collector found the object, the collection may have started inside any
  allocation, including one made while a backend held a lock that the release needs. Such jobs go to
  one reaper thread, started on first need, which runs them after the collection (an unbounded wait
  on a non-reentrant lock is the failure this avoids). :func:`settle` waits for it.
- A job that answers False (work still running) is retried by the reaper with a growing pause, up to
  ``RETRY_MAX_S`` apart: work that ends is released soon after, and work that never ends costs one
  check per pause.

A job that raises is logged and dropped: a release must never raise into the code that happened to
drop the last reference. Nothing runs while the interpreter shuts down.
"""

from __future__ import annotations

import gc
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger("ironaccel.runtime")

Job = Callable[[], bool]

RETRY_FIRST_S = 1e-3
RETRY_MAX_S = 0.1

_jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()  # put() is safe from finalizers and GC callbacks
_state = threading.local()  # .collecting: a cyclic collection is running on this thread
_lock = threading.Lock()
_reaper: threading.Thread | None = None
_pending = 0  # jobs handed to the reaper and not yet finished (settle waits for 0)
_idle = threading.Condition(_lock)


def _on_gc(phase: str, info: dict) -> None:
    _state.collecting = phase == "start"


gc.callbacks.append(_on_gc)


def release(job: Job) -> None:
    """Run ``job`` now if this thread may, else hand it to the reaper; retried until it returns True."""
    if sys.is_finalizing():
        return
    if getattr(_state, "collecting", False):
        _defer(job)
        return
    try:
        if job():
            return
    except Exception:  # a release must not raise into whoever dropped the last reference
        log.exception("releasing a dropped object failed")
        return
    _defer(job)


def _defer(job: Job) -> None:
    global _pending, _reaper
    with _lock:
        _pending += 1
        if _reaper is None:
            _reaper = threading.Thread(target=_reap, name="ironaccel-reaper", daemon=True)
            _reaper.start()
    _jobs.put(job)


def _reap() -> None:
    global _pending
    waiting: list[Job] = []
    pause = RETRY_FIRST_S
    while True:
        try:
            job = _jobs.get(timeout=pause if waiting else None)
            waiting.append(job)
        except queue.Empty:
            pass
        still: list[Job] = []
        for job in waiting:
            try:
                done = job()
            except Exception:  # one failed release must not stop the others
                log.exception("releasing a dropped object failed")
                done = True
            if not done:
                still.append(job)
        finished = len(waiting) - len(still)
        pause = RETRY_FIRST_S if finished or not still else min(pause * 2, RETRY_MAX_S)
        waiting = still
        if finished:
            with _lock:
                _pending -= finished
                if not _pending:
                    _idle.notify_all()


def settle(timeout: float | None = None) -> bool:
    """Wait until every job handed to the reaper has finished; False if ``timeout`` seconds passed
    first (work that never ends keeps its job waiting)."""
    end = None if timeout is None else time.monotonic() + timeout
    with _lock:
        while _pending:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return False
            _idle.wait(left)
    return True


__all__ = ["Job", "release", "settle"]
