"""Threads for the CPU kernels: numpy's BLAS runs single-threaded while a program runs, and the big kernels
split their own work across a small pool instead.

Why not let OpenBLAS thread each call: its workers spin and then sleep between calls, so on a busy
machine (or with a program of many small products) a two-thread GEMM waits a scheduler tick for the
second thread, many times what a small product takes (ADR 0011). Splitting ourselves also runs the im2col copies in
parallel, which BLAS threading never does, and chunks go to whichever thread asks next. A kernel
splits only while a CPU is idle (:func:`split_threads`): with every core busy, waiting for a
descheduled helper costs more than the helper saves.

The BLAS thread count is process-wide (OpenBLAS keeps one number), so :func:`single_threaded_blas`
lowers it while any program runs and restores the caller's value when the last one ends; numpy calls
made meanwhile on other threads run single-threaded too. Where no OpenBLAS is found (another BLAS),
nothing is changed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

# (setter, getter) names: numpy >= 2 wheels ship scipy-openblas (prefixed, 64-bit interface), older ones openblas.
_BLAS_SYMBOLS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


def _find_blas() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    import numpy  # noqa: F401 - loads the BLAS numpy was built with

    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line})
    except OSError:  # not Linux: leave the BLAS as it is
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _BLAS_SYMBOLS:
            setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, getter
    return None


_blas = _find_blas()
_blas_lock = threading.Lock()
_blas_users = 0
_blas_saved = 1


class _SingleThreadedBlas:
    """The context manager behind :func:`single_threaded_blas` (a class: entered once per program run, where a
    generator-based one costs a few microseconds)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _blas_users, _blas_saved
        if _blas is None:
            return
        setter, getter = _blas
        with _blas_lock:
            if _blas_users == 0:
                _blas_saved = getter()
                if _blas_saved != 1:
                    setter(1)
            _blas_users += 1

    def __exit__(self, *exc: object) -> None:
        global _blas_users
        if _blas is None:
            return
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0 and _blas_saved != 1:
                _blas[0](_blas_saved)


_single_threaded_blas = _SingleThreadedBlas()


def single_threaded_blas() -> contextlib.AbstractContextManager[None]:
    """numpy's BLAS on one thread while the block runs (nested and concurrent uses share one setting)."""
    return _single_threaded_blas


def blas_info() -> str:
    """What the kernels run on, for reports."""
    if _blas is None:
        return "numpy's BLAS (thread count not controlled: no OpenBLAS found)"
    return f"OpenBLAS on 1 thread while a program runs; large kernels split over up to {workers()} threads"


# -- our own pool ------------------------------------------------------------------------------------
def workers() -> int:
    """Threads a split kernel uses, the caller included: one per CPU this process may run on."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    return max(1, min(count, 8))


_LOAD_TTL = 0.02  # seconds an answer of split_threads is reused
_split_seen = (-1.0, 1)


def _idle_cpus(cpus: int) -> int:
    """Of ``cpus``, those with nothing to run right now, from the kernel's count of runnable threads
    (this one included).

    A split that hands chunks to a helper only pays when the helper gets a CPU at once: on a machine
    whose cores are all busy, the caller waits for the descheduled helper and the split is slower than
    one thread (ADR 0011); on a free core the same split halves the time. So the split is used only while
    a core is idle (like OpenMP's dynamic thread adjustment). Where /proc/loadavg is absent, every core
    counts as idle."""
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
        return max(0, cpus - max(0, running - 1))
    except (OSError, ValueError, IndexError):
        return cpus - 1


def split_threads() -> int:
    """How many threads a large kernel should use now: the caller plus one per idle CPU. Asked before
    every native run, so the answer is reused for _LOAD_TTL (the affinity query and the run-queue read
    cost system calls, a tenth of a small program's run)."""
    global _split_seen
    now = time.monotonic()
    if now - _split_seen[0] < _LOAD_TTL:
        return _split_seen[1]
    cpus = workers()
    threads = min(cpus, 1 + _idle_cpus(cpus))
    _split_seen = (now, threads)
    return threads


class _Pool:
    """Helper threads (workers() - 1 of them) that take chunks of a split job alongside the caller."""

    def __init__(self, helpers: int) -> None:
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.helpers = helpers
        for index in range(helpers):
            threading.Thread(target=self._loop, name=f"ironaccel-cpu-helper-{index}", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._tasks.get()()

    def post(self, task: Callable[[], None]) -> None:
        self._tasks.put(task)


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _get_pool() -> _Pool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool(workers() - 1)
        return _pool


class _Job:
    """Chunks 0..n-1 handed out one at a time to whichever thread asks next."""

    def __init__(self, count: int, body: Callable[[int], None]) -> None:
        self.count = count
        self.body = body
        self.lock = threading.Lock()
        self.next = 0
        self.running = 0
        self.done = threading.Condition(self.lock)
        self.error: BaseException | None = None

    def _take(self) -> int | None:
        with self.lock:
            if self.next >= self.count or self.error is not None:
                return None
            index = self.next
            self.next += 1
            self.running += 1
            return index

    def work(self) -> None:
        while (index := self._take()) is not None:
            try:
                self.body(index)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
                with self.lock:
                    self.error = self.error or exc
            finally:
                with self.lock:
                    self.running -= 1
                    self.done.notify_all()

    def wait(self) -> None:
        with self.lock:
            while self.running or (self.next < self.count and self.error is None):
                self.done.wait()
        if self.error is not None:
            raise self.error


def _nothing() -> None:
    pass


def wake(threads: int) -> None:
    """Hand the helpers an empty task, so that ``threads - 1`` of them are awake when a parallel_for
    follows shortly: a helper asleep on an idle CPU takes about as long to start as a small operator
    that runs before a large one takes to run, so waking it during that operator hides the start."""
    pool = _get_pool() if threads > 1 else None
    if pool is not None:
        for _ in range(min(pool.helpers, threads - 1)):
            pool.post(_nothing)


def parallel_for(count: int, body: Callable[[int], None], threads: int | None = None) -> None:
    """Call ``body(i)`` for i in range(count), on the calling thread and up to ``threads - 1`` helpers
    (default: :func:`split_threads`); returns when all are done and re-raises the first exception.
    ``body`` must release the GIL for the split to pay (numpy's large copies and BLAS calls do)."""
    if count <= 0:
        return
    helpers = min((threads if threads is not None else split_threads()) - 1, count - 1)
    pool = _get_pool() if helpers > 0 else None
    if pool is None or pool.helpers == 0:
        for index in range(count):
            body(index)
        return
    job = _Job(count, body)
    for _ in range(min(pool.helpers, helpers)):
        pool.post(job.work)
    job.work()
    job.wait()
