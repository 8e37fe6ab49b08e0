"""Prepared submissions on Vulkan (backends/vulkan/launcher.py): both routes give the outputs numpy
gives, marked or not, tickets finish in order past the ticket slots' wrap, launches take the route
whose times were shorter, running launches hold their buffers and are bounded, waits time
out and resume, and a closed accelerator ends them with DeviceLost.

The semantic suite's ``prepared.*`` cases run on this backend too (test_vulkan_backend.py); these cover
what only the native launcher has. Every test ends with no Vulkan layer message and nothing live.
"""

from __future__ import annotations

import threading
import time

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


def _marked(launcher: launching.Launcher, first: int, last: int) -> list[bool]:
    return [launcher.was_marked[t % launching.MARKS] for t in range(first, last + 1)]


def test_launches_alternate_until_both_routes_are_timed_then_take_the_faster(acc, monkeypatch):
    """Launch, then poll until finished, as a latency loop does: every launch is timed, the two routes
    take turns until each has a window of times, and then launches take the route with the smaller
    median, with one in PROBE_EVERY on the other. The times are made by hand to favour each route in
    turn (a real device's times favour one or the other by microseconds, ADR 0021)."""
    n = 64
    s = Bound(acc, add_artifact(n), [4 * n] * 3)
    launcher = s.launcher
    window = launcher.route_times.window
    x, y = np.arange(n, dtype=np.float32), np.full(n, 2, np.float32)
    s.write(0, x)
    s.write(1, y)

    def launch_and_poll(count: int) -> list[int]:
        tickets = []
        for _ in range(count):
            ticket = acc.launch(s.prepared)
            while not acc.poll_launch(s.prepared, ticket):
                pass
            tickets.append(ticket)
        return tickets

    # On a host with fewer cores than busy threads (CI's two, lavapipe's workers and the poller) the
    # look that sees a launch finished can come after the poller was descheduled for longer than
    # ATTENTIVE_S, and then no launch is timed. How close a look must be is the next test's subject;
    # here any look after a miss counts, so that this one checks what the times decide.
    monkeypatch.setattr(launching, "ATTENTIVE_S", 10.0)
    first = launch_and_poll(8)
    assert _marked(launcher, first[0], first[-1]) == [True, False] * 4  # windows not full yet: turns
    # A launch seen finished by the first look after it is not timed, so keep launching until one is. On
    # a loaded two-core host that can take many: CI once saw 72 launches in a row finished at first look.
    give_up = time.monotonic() + 30.0
    while not launcher.route_times.added and time.monotonic() < give_up:
        launch_and_poll(1)
    assert launcher.route_times.added > 0  # a poll loop's launches are timed

    def favour(marked: bool) -> None:
        for route in (True, False):
            times = launcher.route_times.times[route]
            times.clear()
            times.extend([1e-6 if route == marked else 1e-3] * window)
        launcher._choose()

    favour(False)
    assert not launcher.marking
    tickets = launch_and_poll(2 * launching.PROBE_EVERY)
    marked = [t for t, m in zip(tickets, _marked(launcher, tickets[0], tickets[-1]), strict=True) if m]
    assert len(marked) == 2 and marked[1] - marked[0] == launching.PROBE_EVERY  # probes of the word's route
    favour(True)
    assert launcher.marking
    tickets = launch_and_poll(2 * launching.PROBE_EVERY)
    plain = [t for t, m in zip(tickets, _marked(launcher, tickets[0], tickets[-1]), strict=True) if not m]
    assert len(plain) == 2 and plain[1] - plain[0] == launching.PROBE_EVERY  # probes of the counter's route
    np.testing.assert_array_equal(s.read(2), x + y)
    s.close()


def test_only_launches_onto_an_idle_launcher_looked_at_closely_are_timed(acc):
    """A launch queued behind another, or found finished by a look long after the last one, would time
    the other launch or the caller: neither is added."""
    n = 64
    s = Bound(acc, add_artifact(n), [4 * n] * 3)
    launcher = s.launcher
    queued = [acc.launch(s.prepared) for _ in range(4)]
    assert launcher.submitted_at[queued[0] % launching.MARKS] > 0  # the first found the launcher idle
    assert all(launcher.submitted_at[t % launching.MARKS] == 0.0 for t in queued[1:])
    acc.wait_launch(s.prepared, queued[-1], 60)
    before = launcher.route_times.added
    ticket = acc.launch(s.prepared)
    launcher._wait_value(ticket, None)  # finished on the device before anyone looked
    assert acc.poll_launch(s.prepared, ticket)  # the first look sees it: no look missed it just before
    assert launcher.route_times.added == before
    s.close()


def test_an_unmarked_launch_is_seen_through_a_slow_counter(acc):
    """While counter reads are slow they are spaced out for tickets the word will show; an unmarked
    ticket only the counter can show, so polls read it every time rather than never seeing the ticket."""
    n = 64
    s = Bound(acc, add_artifact(n), [4 * n] * 3)
    launcher = s.launcher
    launcher.pin_marking(False)
    ticket = acc.launch(s.prepared)
    launcher._wait_value(ticket, None)
    launcher.read_every, launcher.last_read = 1e9, time.perf_counter()  # a read is never due
    assert acc.poll_launch(s.prepared, ticket)
    s.close()


def test_a_wait_the_driver_ended_returns_whatever_the_looks_saw(acc, monkeypatch):
    """A wait that ends in vkWaitSemaphores has its answer: the counter reached the ticket. It used to
    look once more, and a look that skipped the counter made an unbounded wait raise DeadlineExpired."""
    n = 64
    s = Bound(acc, add_artifact(n), [4 * n] * 3)
    launcher = s.launcher
    x = np.arange(n, dtype=np.float32)
    s.write(0, x)
    s.write(1, x)
    monkeypatch.setattr(launcher, "_look", lambda ticket: False)  # no look sees anything
    ticket = acc.launch(s.prepared)
    acc.wait_launch(s.prepared, ticket)  # no timeout: must return, not raise
    monkeypatch.undo()
    assert acc.poll_launch(s.prepared, ticket)
    np.testing.assert_array_equal(s.read(2), 2 * x)
    s.close()


def test_pinned_routes_hold_whatever_the_times_say(acc):
    n = 64
    s = Bound(acc, add_artifact(n), [4 * n] * 3)
    launcher = s.launcher
    for route in (True, False):
        launcher.route_times.times[route].extend([1e-3 if route else 1e-6] * launcher.route_times.window)
    launcher.pin_marking(True)
    tickets = [acc.launch(s.prepared) for _ in range(8)]
    acc.wait_launch(s.prepared, tickets[-1], 60)
    assert all(_marked(launcher, tickets[0], tickets[-1]))
    launcher.pin_marking(None)  # back to the times, which favour the counter
    assert not launcher.marking and launcher.probe_every == launching.PROBE_EVERY
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
