"""The host-thread queue backends share (runtime/worker.py): jobs in submission order, one thread at a
time, started by work and gone when idle or closed."""

from __future__ import annotations

import threading
import time

from ironaccel.runtime.worker import OrderedWorker


class _Quick(OrderedWorker):
    IDLE_S = 0.05


def _threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def _until(predicate, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def test_jobs_run_in_the_order_they_came_on_one_thread():
    worker = _Quick("ironaccel-test-ordered")
    seen: list[tuple[int, str]] = []
    gate = threading.Event()
    worker.put(gate.wait)  # holds the thread while the rest queue up behind it
    for k in range(50):
        worker.put(lambda k=k: seen.append((k, threading.current_thread().name)))
    gate.set()
    assert _until(lambda: len(seen) == 50)
    assert [k for k, _ in seen] == list(range(50))
    assert {name for _, name in seen} == {"ironaccel-test-ordered"}
    assert len(_threads("ironaccel-test-ordered")) <= 1


def test_the_thread_ends_when_idle_and_a_new_job_starts_another():
    worker = _Quick("ironaccel-test-idle")
    done = threading.Event()
    worker.put(done.set)
    assert done.wait(5)
    assert _until(lambda: not _threads("ironaccel-test-idle"))
    again = threading.Event()
    worker.put(again.set)
    assert again.wait(5)


def test_close_lets_the_thread_go_at_once():
    worker = OrderedWorker("ironaccel-test-close")  # the default idle time would keep it a second
    done = threading.Event()
    worker.put(done.set)
    assert done.wait(5)
    worker.close()
    assert _until(lambda: not _threads("ironaccel-test-close"), timeout=0.5)
