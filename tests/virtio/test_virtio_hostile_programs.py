"""Hostile programs, not only hostile frames: valid programs that never end, through a daemon serving the
CPU backend. Their deadlines and cancellations stop them while they run, and a guest that leaves with
one running has it stopped and everything it held released within a second, with the daemon's threads
back to where they were."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ironaccel.conformance.semantic import endless_program
from ironaccel.core.errors import DeadlineExpired
from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, BufferUsage, EventState, MemoryDomain
from ironaccel.virtio.guest import VirtioAccelerator
from virtio_guest import ZERO, Host, thread_count

IO = BufferUsage(0x1F)


@pytest.fixture
def host(tmp_path):
    h = Host(str(tmp_path / "accel.sock"))
    yield h
    h.stop()
    assert h.accelerator.live_resources() == ZERO


class _Endless:
    """One guest with the endless program loaded and its two buffers."""

    def __init__(self, path: str) -> None:
        self.acc = VirtioAccelerator(path)
        acc = self.acc
        self.ctx = acc.create_context()
        self.queue = acc.create_queue(self.ctx)
        self.program = acc.load_program(self.ctx, ArtifactRef(endless_program(), 1 << 20))
        self.bufs = [acc.allocate_buffer(self.ctx, BufferDesc(4, MemoryDomain.SHARED, IO)) for _ in range(2)]
        acc.write_buffer(self.bufs[0], 0, np.zeros(1, np.int32))

    def submit(self, timeout: float | None = None):
        bindings = [Binding(i, b, 0, 4) for i, b in enumerate(self.bufs)]
        return self.acc.submit(self.queue, self.program, bindings, timeout)

    def close(self) -> None:
        acc = self.acc
        for b in self.bufs:
            acc.free_buffer(b)
        acc.unload_program(self.program)
        acc.destroy_queue(self.queue)
        acc.destroy_context(self.ctx)
        acc.close()


def test_an_endless_program_fails_at_its_deadline_on_the_host(host):
    guest = _Endless(host.path)
    event = guest.submit(timeout=0.3)
    start = time.monotonic()
    assert guest.acc.wait(event, 10) is EventState.FAILED
    assert time.monotonic() - start < 5
    assert isinstance(guest.acc.event_error(event), DeadlineExpired)
    guest.acc.destroy_event(event)
    guest.close()
    assert host.settled(5) is not None


def test_cancel_reaches_an_endless_program_while_it_runs(host):
    guest = _Endless(host.path)
    event = guest.submit()
    time.sleep(0.1)  # running on the host by now
    assert guest.acc.cancel_event(event) is True
    assert guest.acc.wait(event, 10) is EventState.CANCELLED
    guest.acc.destroy_event(event)
    guest.close()
    assert host.settled(5) is not None


def test_guests_that_leave_with_endless_work_running_leave_nothing_and_no_thread(host):
    threads = thread_count()
    for _ in range(3):
        guest = _Endless(host.path)
        guest.submit()
        time.sleep(0.05)
        guest.acc.close()  # gone without a word: the engine's teardown cancels what runs
        took = host.settled(5)
        assert took is not None and took < 1.0, f"released after {took} s"
    deadline = time.monotonic() + 5  # idle queue threads end on their own
    while thread_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert thread_count() <= threads, [t.name for t in threading.enumerate()]
    other = VirtioAccelerator(host.path)  # the daemon still answers others
    assert other.device_info().name
    other.close()
