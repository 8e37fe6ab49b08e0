"""Prepared submissions on Vulkan (backends/vulkan/launcher.py): both routes give the outputs numpy
gives, marked or not, tickets finish in order past the ticket slots' wrap, marking follows whichever of
the word and the counter tells first, running launches hold their buffers and are bounded, waits time
out and resume, and a closed accelerator ends them with DeviceLost.

The semantic suite's ``prepared.*`` cases run on this backend too (test_vulkan_backend.py); these cover
what only the native launcher has. Every test ends with no Vulkan layer message and nothing live.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ironaccel.backends import vulkan
from ironaccel.backends.vulkan import launcher as launching
from ironaccel.conformance import semantic
from ironaccel.core.errors import Busy, DeadlineExpired, DeviceLost, InvalidArgument, Unsupported
from ironaccel.core.settings import Settings
from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, MemoryDomain, ReleaseRejected
from ironaccel.tosa import ProgramBuilder, write
from vulkan_fixtures import DEVICE, clean  # noqa: F401 - autouse: no layer messages, nothing left live

IO = semantic.IO
SELECTOR = DEVICE.split(":", 1)[1]  # lavapipe here; scripts/gpu-check runs these on the NVIDIA device


@pytest.fixture
def acc():
    try:
        accelerator = vulkan.open_accelerator(SELECTOR, settings=Settings())
    except Unsupported as exc:
        pytest.skip(f"{DEVICE} unavailable: {exc}")
    yield accelerator
    leaks = {k: v for k, v in accelerator.live_resources().items() if v}
    accelerator.close()
    assert not leaks, leaks


def add_artifact(n: int) -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (n,), "fp32")
    y = b.input("y", (n,), "fp32")
    b.output(b.add(x, y))
    return write(b.build())


def matmul_artifact(n: int) -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (1, n, n), "fp32")
    y = b.input("y", (1, n, n), "fp32")
    b.output(b.matmul(x, y))
    return write(b.build())


class Bound:
    """A context, queue and program with one buffer per slot (at ``offset`` in each), prepared."""

    def __init__(self, acc, artifact: bytes, sizes: list[int], offset: int = 0) -> None:
        self.acc = acc
        self.ctx = acc.create_context()
        self.queue = acc.create_queue(self.ctx)
        self.program = acc.load_program(self.ctx, ArtifactRef(artifact, 1 << 26))
        self.buffers = [acc.allocate_buffer(self.ctx, BufferDesc(offset + n, MemoryDomain.SHARED, IO)) for n in sizes]
        self.offset, self.sizes = offset, sizes
        bindings = [Binding(i, b, offset, n) for i, (b, n) in enumerate(zip(self.buffers, sizes, strict=True))]
        self.prepared = acc.prepare(self.queue, self.program, bindings)

    @property
    def launcher(self) -> launching.Launcher:
        return self.acc._record(self.prepared, type(self.prepared)).native

    def write(self, slot: int, values: np.ndarray) -> None:
        self.acc.write_buffer(self.buffers[slot], self.offset, np.ascontiguousarray(values, np.float32))

    def read(self, slot: int) -> np.ndarray:
        raw = self.acc.read_buffer(self.buffers[slot], self.offset, self.sizes[slot])
        return np.frombuffer(raw, np.float32)

    def close(self) -> None:
        self.acc.release_prepared(self.prepared)
        for b in self.buffers:
            self.acc.free_buffer(b)
        self.acc.unload_program(self.program)
        self.acc.destroy_queue(self.queue)
        self.acc.destroy_context(self.ctx)


@pytest.mark.parametrize("marking", [None, True, False], ids=["marks-decided", "marks-always", "marks-never"])
@pytest.mark.parametrize(("offset", "route"), [(0, "direct"), (4, "copies")])
def test_both_routes_past_the_marks_wrap(acc, offset, route, marking):
    n = 64
    s = Bound(acc, add_artifact(n), [4 * n] * 3, offset)
    assert s.launcher.route == route  # an offset of 4 is not vector-aligned: the copying route
    s.launcher.pin_marking(marking)
    x = np.arange(n, dtype=np.float32)
    s.write(0, x)
    for i in range(launching.MARKS + 40):  # the host word wraps once
        s.write(1, np.full(n, i, np.float32))
        ticket = acc.launch(s.prepared)
        assert ticket == i + 1
        while not acc.poll_launch(s.prepared, ticket):
            pass
        if i % 37 == 0 or i >= launching.MARKS:
            np.testing.assert_array_equal(s.read(2), x + i)
    written = s.launcher.words[0]
    if marking is False:
        assert written == 0 and s.launcher.last_marked == 0  # never marked: the word is never written
    else:
        assert written == s.launcher.last_marked > 0  # the newest marked ticket, in full
        if marking:
            assert written == launching.MARKS + 40
    s.close()


def test_marking_follows_whichever_tells_first(acc):
    """Launches are marked while the word shows a finish before the counter does, and go unmarked (one in
    PROBE_EVERY marked still) once the counter is first. Each side is made to lag by hand: the word by
    writing its old value back, the counter by answering with its previous read."""
    n = 64
    s = Bound(acc, add_artifact(n), [4 * n] * 3)
    launcher = s.launcher
    assert launcher.marking  # nothing seen yet

    def finish(ticket: int) -> None:
        launcher._wait_value(ticket, None)  # finished on the device, whatever the host has looked at

    # The counter first: the word is put back before anyone looks.
    ticket = acc.launch(s.prepared)
    assert launcher.last_marked == ticket
    finish(ticket)
    launcher.words[0] = 0
    assert acc.poll_launch(s.prepared, ticket)
    assert not launcher.marking
    plain = [acc.launch(s.prepared) for _ in range(launching.PROBE_EVERY - 1)]
    assert launcher.last_marked == ticket  # none of these was marked
    acc.wait_launch(s.prepared, plain[-1], 60)
    probe = acc.launch(s.prepared)
    assert launcher.last_marked == probe == ticket + launching.PROBE_EVERY  # one in PROBE_EVERY is marked

    # The word first: the counter answers with its previous read.
    real = launcher._counter

    def stale(handle, semaphore, seen):
        seen[0] = launcher.counted
        return 0

    launcher._counter = stale
    finish(probe)
    assert acc.poll_launch(s.prepared, probe)  # seen from the word
    assert launcher.marking
    launcher._counter = real
    after = acc.launch(s.prepared)
    assert launcher.last_marked == after
    acc.wait_launch(s.prepared, after, 60)
    s.close()


def test_launches_in_flight_finish_in_order_and_are_bounded(acc):
    n = 192
    s = Bound(acc, matmul_artifact(n), [4 * n * n] * 3)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    s.write(0, a)
    s.write(1, b)
    tickets, refused = [], None
    for _ in range(launching.IN_FLIGHT + 64):
        try:
            tickets.append(acc.launch(s.prepared))
        except Busy as exc:
            refused = exc
            break
    # lavapipe finishes some while the loop runs; whatever it does, no more than IN_FLIGHT run at once
    assert refused is not None or len(tickets) == launching.IN_FLIGHT + 64
    last = tickets[-1]
    with pytest.raises(Busy):
        s.write(0, a)  # an input of a running launch
    acc.wait_launch(s.prepared, last, 120)
    assert all(acc.poll_launch(s.prepared, t) for t in tickets)
    np.testing.assert_allclose(s.read(2).reshape(n, n), a @ b, rtol=1e-4, atol=1e-4)
    s.write(0, a)  # nothing runs any more
    s.close()


def test_short_wait_expires_and_the_launch_can_be_waited_for_again(acc):
    n, count = (384, 4) if SELECTOR == "llvmpipe" else (2048, 16)  # work that outlasts the launches
    s = Bound(acc, matmul_artifact(n), [4 * n * n] * 3)
    s.write(0, np.ones((n, n), np.float32))
    s.write(1, np.ones((n, n), np.float32))
    tickets = [acc.launch(s.prepared) for _ in range(count)]
    with pytest.raises(DeadlineExpired):
        acc.wait_launch(s.prepared, tickets[-1], 1e-4)
    with pytest.raises(ReleaseRejected):
        acc.release_prepared(s.prepared)  # launches still run
    acc.wait_launch(s.prepared, tickets[-1], 120)
    np.testing.assert_array_equal(s.read(2), np.full(n * n, n, np.float32))
    s.close()


def test_closing_the_accelerator_ends_prepared_submissions():
    try:
        own = vulkan.open_accelerator(SELECTOR, settings=Settings())
    except Unsupported as exc:
        pytest.skip(f"{DEVICE} unavailable: {exc}")
    s = Bound(own, add_artifact(16), [64] * 3)
    ticket = own.launch(s.prepared)
    own.close()
    with pytest.raises(DeviceLost):
        own.launch(s.prepared)
    with pytest.raises(DeviceLost):
        own.poll_launch(s.prepared, ticket)  # not seen finished before the close
    own.release_prepared(s.prepared)  # releasing still works
    with pytest.raises(InvalidArgument):
        own.poll_launch(s.prepared, ticket)  # released: a stale handle


def test_a_wait_in_progress_when_the_accelerator_closes_ends_cleanly():
    try:
        own = vulkan.open_accelerator(SELECTOR, settings=Settings())
    except Unsupported as exc:
        pytest.skip(f"{DEVICE} unavailable: {exc}")
    n, count = (384, 4) if SELECTOR == "llvmpipe" else (2048, 16)
    s = Bound(own, matmul_artifact(n), [4 * n * n] * 3)
    tickets = [own.launch(s.prepared) for _ in range(count)]
    outcome: list[object] = []

    def waiter() -> None:
        try:
            own.wait_launch(s.prepared, tickets[-1], 60)
            outcome.append("finished")
        except DeviceLost as exc:
            outcome.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    own.close()  # waits for the device, then for the waiter to leave, before freeing what it reads
    thread.join(60)
    assert not thread.is_alive()
    assert outcome and (outcome[0] == "finished" or isinstance(outcome[0], DeviceLost)), outcome
    own.release_prepared(s.prepared)


def test_a_launch_after_a_direct_recording_leaves_its_first_barrier_out(acc):
    """The queue's tail decides: after a direct recording's last barrier (a launch of this or another
    prepared submission) the next launch goes without its first barrier; after anything else (a
    submission through the ring) with it. Outputs are right either way."""
    n = 64
    one = Bound(acc, add_artifact(n), [4 * n] * 3)
    two = Bound(acc, add_artifact(n), [4 * n] * 3)
    assert one.launcher.route == two.launcher.route == "direct"
    x = np.arange(n, dtype=np.float32)
    for s in (one, two):
        s.write(0, x)
        s.write(1, 2 * x)

    def run(s: Bound) -> None:
        acc.wait_launch(s.prepared, acc.launch(s.prepared), 60)
        np.testing.assert_array_equal(s.read(2), 3 * x)

    acc._native.device.ordered_tail = False  # whatever ran before this test
    run(one)
    assert one.launcher.bare_launches == 0  # the first launch orders itself
    run(one)
    run(two)  # another prepared submission's tail orders it too
    run(one)
    assert (one.launcher.bare_launches, two.launcher.bare_launches) == (2, 1)
    event = acc.submit(one.queue, one.program, [Binding(i, b, 0, 4 * n) for i, b in enumerate(one.buffers)])
    acc.wait(event, 60)
    acc.destroy_event(event)
    run(one)  # after a submission through the ring: with the barrier
    assert one.launcher.bare_launches == 2
    tickets = [acc.launch(one.prepared) for _ in range(5)]  # back to back, still running: ordered all the same
    acc.wait_launch(one.prepared, tickets[-1], 60)
    assert one.launcher.bare_launches == 7
    np.testing.assert_array_equal(one.read(2), 3 * x)
    one.close()
    two.close()


def test_launches_and_ring_submissions_from_two_threads_keep_their_outputs(acc):
    """The queue's tail changes under two threads: one launches a prepared submission (after its own
    launches, without the first barrier), the other submits through the ring. Each checks its outputs
    every time."""
    n = 256
    launched = Bound(acc, add_artifact(n), [4 * n] * 3)
    ringed = Bound(acc, add_artifact(n), [4 * n] * 3)
    ring_bindings = [Binding(i, b, 0, 4 * n) for i, b in enumerate(ringed.buffers)]
    failures: list[str] = []
    x = np.arange(n, dtype=np.float32)

    def launches() -> None:
        for i in range(60):
            launched.write(0, x)
            launched.write(1, np.full(n, i, np.float32))
            acc.wait_launch(launched.prepared, acc.launch(launched.prepared), 60)
            if not np.array_equal(launched.read(2), x + i):
                failures.append(f"launch {i}")

    def ring() -> None:
        for i in range(60):
            ringed.write(0, 2 * x)
            ringed.write(1, np.full(n, -i, np.float32))
            event = acc.submit(ringed.queue, ringed.program, ring_bindings)
            acc.wait(event, 60)
            acc.destroy_event(event)
            if not np.array_equal(ringed.read(2), 2 * x - i):
                failures.append(f"ring {i}")

    threads = [threading.Thread(target=launches), threading.Thread(target=ring)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert not failures, failures
    assert launched.launcher.bare_launches > 0  # some launches followed their own
    launched.close()
    ringed.close()
