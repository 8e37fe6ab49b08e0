"""The host-thread queue backends share (runtime/worker.py): jobs in submission order, one thread at a
time, started by work and gone when idle or closed."""

from __future__ import annotations

import queue
import threading

from ironaccel.runtime.worker import OrderedWorker


class _Quick(OrderedWorker):
    IDLE_S = 0.05


def _thread_of(worker: OrderedWorker) -> threading.Thread:
    """The thread that runs ``worker``'s next job (starting one if none is running)."""
    found: queue.Queue[threading.Thread] = queue.Queue()
    worker.put(lambda: found.put(threading.current_thread()))
    return found.get(timeout=5)


def test_jobs_run_in_the_order_they_came_on_one_thread():
    worker = _Quick("ironaccel-test-ordered")
    seen: list[tuple[int, threading.Thread]] = []
    gate = threading.Event()
    worker.put(gate.wait)  # holds the thread while the rest queue up behind it
    for k in range(50):
        worker.put(lambda k=k: seen.append((k, threading.current_thread())))
    gate.set()
    last = _thread_of(worker)
    assert [k for k, _ in seen] == list(range(50))
    assert {t for _, t in seen} == {last}
    assert last.name == "ironaccel-test-ordered"


def test_the_thread_ends_when_idle_and_a_new_job_starts_another():
    worker = _Quick("ironaccel-test-idle")
    first = _thread_of(worker)
    first.join(timeout=5)
    assert not first.is_alive()
    second = _thread_of(worker)
    assert second is not first


def test_close_lets_the_thread_go_at_once():
    worker = OrderedWorker("ironaccel-test-close")  # the default idle time would keep it a second
    thread = _thread_of(worker)
    worker.close()
    thread.join(timeout=0.5)
    assert not thread.is_alive()
