"""Thread safety of the execution contract on the CPU backend, as stress tests with fixed outcomes.

Every test starts its threads together (barriers), checks invariants that hold whatever the
interleaving, and joins its threads with a deadline, so a hang fails the test instead of blocking the
run. Where a test needs to know the order the backend saw work in, or needs a worker held busy, it
uses ``_TapCpu``: the CPU backend with a tap on its hooks (it records, and can hold one job back; it
never changes what the contract does).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import ironaccel
from ironaccel.conformance import semantic
from ironaccel.conformance.faults import FaultyAccelerator, device_lost
from ironaccel.core.errors import DeviceLost, InvalidArgument, PermissionDenied, ResourceLimit
from ironaccel.runtime import (
    ArtifactRef,
    Binding,
    BoundRange,
    BufferDesc,
    EventCore,
    EventState,
    HostGate,
    Limits,
    Quota,
    ReleaseRejected,
    SubmitRejected,
)
from ironaccel.tosa import ProgramBuilder

cpu = pytest.importorskip("ironaccel.backends.cpu.accelerator")
pytest.importorskip("ironaccel.backends.cpu.interpreter")

JOIN_S = 30.0  # a bound, never a delay: a hung thread fails the test after this long
IO = semantic.IO
ADD4 = semantic.add_program(4)  # c = a + b over fp32[4]


# ---- harness -------------------------------------------------------------------------------------


class _Team:
    """Threads started together and joined with a deadline; the first error any of them raised is re-raised."""

    def __init__(self, *targets: Callable[[], None]) -> None:
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._body, args=(fn,), daemon=True) for fn in targets]

    def _body(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread by join()
            self.errors.append(exc)

    def start(self) -> _Team:
        for t in self.threads:
            t.start()
        return self

    def join(self, timeout: float = JOIN_S) -> None:
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        hung = [t.name for t in self.threads if t.is_alive()]
        assert not hung, f"threads still running after {timeout} s: {hung}"
        if self.errors:
            raise self.errors[0]


def _run(*targets: Callable[[], None]) -> None:
    _Team(*targets).start().join()


def _barrier(parties: int) -> threading.Barrier:
    return threading.Barrier(parties, timeout=JOIN_S)


def _f32(acc: Any, buf: Any) -> np.ndarray:
    return np.frombuffer(bytes(acc.read_buffer(buf, 0, 16)), np.float32)


def _assert_nothing_live(acc: Any) -> None:
    leaks = {k: v for k, v in acc.live_resources().items() if v}
    assert not leaks, f"resources left live: {leaks}"


class _Tap:
    """Stands in for a CPU worker queue: records when each job begins and can hold the first one back."""

    def __init__(self, acc: _TapCpu, worker: Any, event: EventCore, ranges: Sequence[BoundRange], hold: Any) -> None:
        self.acc, self.worker, self.event, self.ranges, self.hold = acc, worker, event, ranges, hold

    def put(self, job: Callable[[], None]) -> None:
        def tapped() -> None:
            if self.hold is not None:  # plug the worker until the test lets go
                self.acc.holding.set()
                self.hold.wait(JOIN_S)
            with self.acc.tap_lock:
                self.acc.started.append(self.event)
                self.acc.note_gate(self.ranges, "start")
            job()

        self.worker.put(tapped)


class _TapCpu(cpu.CpuAccelerator):
    """The CPU backend with a tap on its hooks.

    ``enqueued`` / ``started``: event cores in the order ``_submit`` queued them and their jobs began.
    ``misuse``: hook calls that named a queue or buffer already released. ``gate_seen``: with ``gate``
    set, (value the work waits for, the gate's value then, where) at release and at start; the value
    waited for is read from input slot 0. ``hold``: a threading.Event the next queued job waits for.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tap_lock = threading.Lock()
        self.enqueued: list[EventCore] = []
        self.started: list[EventCore] = []
        self.released: list[Any] = []
        self.misuse: list[str] = []
        self.gate: HostGate | None = None
        self.gate_seen: list[tuple[int, int, str]] = []
        self.hold: threading.Event | None = None
        self.holding = threading.Event()

    def note_gate(self, ranges: Sequence[BoundRange], where: str) -> None:
        if self.gate is not None:
            a = ranges[0]
            waits_for = int(a.native[a.offset : a.offset + 4].view(np.float32)[0])
            self.gate_seen.append((waits_for, self.gate.value, where))

    def _free(self, native: Any) -> None:
        with self.tap_lock:
            self.released.append(native)
        super()._free(native)

    def _destroy_queue(self, native: Any) -> None:
        with self.tap_lock:
            self.released.append(native)
        super()._destroy_queue(native)

    def _submit(self, queue: Any, program: Any, ranges: Sequence[BoundRange], event: EventCore) -> None:
        with self.tap_lock:
            if any(queue is r for r in self.released):
                self.misuse.append("_submit on a destroyed queue")
            if any(rng.native is r for rng in ranges for r in self.released):
                self.misuse.append("_submit binding a freed buffer")
            self.enqueued.append(event)
            self.note_gate(ranges, "release")
            hold, self.hold = self.hold, None
            super()._submit(_Tap(self, queue, event, ranges, hold), program, ranges, event)


class _SlowParseCpu(cpu.CpuAccelerator):
    """The CPU backend whose program admission (outside the accelerator's lock) waits on ``parse_gate``:
    a Barrier lines concurrent loads up, an Event holds one load mid-way."""

    def __init__(self, limits: Limits | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._limits = limits
        self.parse_gate: Any = None
        self.parsing = threading.Event()
        self.resident: list[int] = []

    def _device_info(self) -> Any:
        info = super()._device_info()
        return info if self._limits is None else dataclasses.replace(info, limits=self._limits)

    def _capabilities(self) -> Any:
        self.parsing.set()
        if self.parse_gate is not None:
            self.parse_gate.wait(JOIN_S)
        return super()._capabilities()

    def _load(self, context: Any, program: Any, limit: int) -> tuple[Any, int]:
        native, resident = super()._load(context, program, limit)
        self.resident.append(resident)
        return native, resident


# ---- buffers and quotas ------------------------------------------------------------------------


def test_buffers_from_many_threads_stay_within_the_context_byte_quota():
    acc = cpu.CpuAccelerator()
    probe_ctx = acc.create_context()
    probe = acc.allocate_buffer(probe_ctx, BufferDesc(256, usage=IO))
    overhead = probe.info.allocation_bytes - probe.info.size  # what the backend charges beyond the size asked
    acc.free_buffer(probe)
    acc.destroy_context(probe_ctx)

    quota = 1000
    ctx = acc.create_context(Quota(buffer_bytes=quota))
    n_threads, rounds = 6, 25
    # Phase 1: every thread asks for 256 bytes at once. Admission is "charged so far + size <= quota",
    # whatever the order, so exactly this many fit:
    fits = 0
    while fits * (256 + overhead) + 256 <= quota:
        fits += 1
    assert 0 < fits < n_threads
    lined_up, holding = _barrier(n_threads), _barrier(n_threads)
    first: list[bool] = []
    peaks: list[int] = []
    lock = threading.Lock()

    def charged() -> int:
        used = acc.live_resources()["buffer_bytes"]
        with lock:
            peaks.append(used)
        return used

    def worker(k: int) -> None:
        rng = np.random.default_rng(k)
        lined_up.wait()
        try:
            held = [acc.allocate_buffer(ctx, BufferDesc(256, usage=IO))]
            first.append(True)
        except ResourceLimit:
            held = []
            first.append(False)
        charged()
        holding.wait()  # nobody frees until every thread has asked
        for buf in held:
            acc.free_buffer(buf)
        # Phase 2: churn. Each buffer carries its own pattern: a buffer shared or overwritten by another
        # thread would read back wrong.
        held_pat: list[tuple[Any, bytes]] = []
        for i in range(rounds):
            size = 64 * int(rng.integers(1, 6))
            try:
                buf = acc.allocate_buffer(ctx, BufferDesc(size, usage=IO))
            except ResourceLimit:
                charged()
                if held_pat:
                    old, pat = held_pat.pop(0)
                    assert bytes(acc.read_buffer(old, 0, len(pat))) == pat
                    acc.free_buffer(old)
                continue
            charged()
            pat = bytes([k * 37 % 251, i % 251]) * (size // 2)
            acc.write_buffer(buf, 0, pat)
            held_pat.append((buf, pat))
            if len(held_pat) > 2:
                old, old_pat = held_pat.pop(0)
                assert bytes(acc.read_buffer(old, 0, len(old_pat))) == old_pat
                acc.free_buffer(old)
        for buf, pat in held_pat:
            assert bytes(acc.read_buffer(buf, 0, len(pat))) == pat
            acc.free_buffer(buf)

    _run(*(lambda k=k: worker(k) for k in range(n_threads)))
    assert sorted(first) == [False] * (n_threads - fits) + [True] * fits
    # The check before allocation bounds what was charged before plus the size asked; the backend then
    # charges its allocation bytes, so live bytes can pass the quota by at most one allocation's overhead.
    assert max(peaks) <= quota + overhead, (max(peaks), quota, overhead)
    acc.destroy_context(ctx)
    _assert_nothing_live(acc)


def test_concurrent_program_loads_respect_the_count_limit():
    acc = _SlowParseCpu(limits=Limits(max_programs_per_context=2))
    ctx = acc.create_context()
    acc.parse_gate = _barrier(4)  # all four pass the first count check before any finishes loading
    outcomes: list[str] = []
    programs: list[Any] = []

    def load() -> None:
        try:
            programs.append(acc.load_program(ctx, ArtifactRef(ADD4, 1 << 20)))
            outcomes.append("loaded")
        except ResourceLimit:
            outcomes.append("limit")

    _run(*([load] * 4))
    assert sorted(outcomes) == ["limit", "limit", "loaded", "loaded"]
    assert acc.live_resources()["program"] == 2
    for p in programs:
        acc.unload_program(p)
    acc.destroy_context(ctx)
    _assert_nothing_live(acc)


def test_concurrent_program_loads_respect_the_resident_bytes_quota():
    acc = _SlowParseCpu()
    scratch = acc.create_context()
    acc.unload_program(acc.load_program(scratch, ArtifactRef(ADD4, 1 << 20)))
    acc.destroy_context(scratch)
    resident = acc.resident[0]
    ctx = acc.create_context(Quota(program_bytes=2 * resident + resident // 2))  # room for two
    acc.parse_gate = _barrier(5)
    programs: list[Any] = []
    refused: list[ResourceLimit] = []

    def load() -> None:
        try:
            programs.append(acc.load_program(ctx, ArtifactRef(ADD4, 1 << 20)))
        except ResourceLimit as exc:
            refused.append(exc)

    _run(*([load] * 5))
    assert (len(programs), len(refused)) == (2, 3)
    for p in programs:
        acc.unload_program(p)
    acc.destroy_context(ctx)
    _assert_nothing_live(acc)


def test_a_load_racing_the_destruction_of_its_context_loads_nothing():
    acc = _SlowParseCpu()
    ctx = acc.create_context()
    acc.parse_gate = go = threading.Event()
    result: list[Any] = []

    def load() -> None:
        try:
            result.append(acc.load_program(ctx, ArtifactRef(ADD4, 1 << 20)))
        except InvalidArgument as exc:  # the context handle went stale while the artifact was parsed
            result.append(exc)

    team = _Team(load).start()
    assert acc.parsing.wait(JOIN_S)
    acc.destroy_context(ctx)  # empty: the load in flight has not added anything yet
    go.set()
    team.join()
    assert isinstance(result[0], InvalidArgument), result
    _assert_nothing_live(acc)


# ---- contexts ----------------------------------------------------------------------------------


def test_contexts_used_from_many_threads_are_isolated():
    acc = cpu.CpuAccelerator()
    other = cpu.CpuAccelerator()
    n = 6
    fixtures: list[Any] = [None] * n
    ready, done = _barrier(n), _barrier(n)

    def worker(k: int) -> None:
        f = semantic._Fixture(acc)
        fixtures[k] = f
        gate = acc.host_gate(f.ctx)
        ready.wait()
        for i in range(8):
            f.write_inputs(np.full(4, 100.0 * k), np.arange(4) + i)
            ev = acc.submit(f.queue, f.program, f.bindings())
            assert acc.wait(ev, JOIN_S) is EventState.COMPLETE, acc.event_error(ev)
            np.testing.assert_array_equal(f.output(), 100.0 * k + np.arange(4, dtype=np.float32) + i)
            acc.destroy_event(ev)
        peer = fixtures[(k + 1) % n]
        mixes = {
            "peer's buffer": (f.queue, f.program, [Binding(0, peer.bufs[0]), *f.bindings()[1:]], None),
            "peer's program": (f.queue, peer.program, f.bindings(), None),
            "peer's queue": (peer.queue, f.program, f.bindings(), None),
            "peer's gate": (f.queue, f.program, f.bindings(), (acc.host_gate(peer.ctx), 1)),
        }
        for what, (queue, program, bindings, after) in mixes.items():
            with pytest.raises(SubmitRejected) as info:
                acc.submit(queue, program, bindings, after=after)
            assert isinstance(info.value.error, PermissionDenied), what
        with pytest.raises(PermissionDenied):  # a handle of another accelerator instance
            other.read_buffer(f.bufs[2], 0, 16)
        with pytest.raises(SubmitRejected):
            acc.submit(f.queue, f.program, f.bindings(), after=(gate, -1))
        np.testing.assert_array_equal(f.output(), 100.0 * k + np.arange(4, dtype=np.float32) + 7)
        done.wait()  # nobody releases a context a peer still probes
        f.close()

    _run(*(lambda k=k: worker(k) for k in range(n)))
    assert acc.live_resources()["event"] == 0, "a rejected submission retained its event"
    _assert_nothing_live(acc)


# ---- one queue, many threads ----------------------------------------------------------------------


def test_one_queue_fed_by_many_threads_runs_everything_once_and_in_order():
    acc = _TapCpu()
    ctx = acc.create_context()
    program = acc.load_program(ctx, ArtifactRef(ADD4, 1 << 20))
    queue = acc.create_queue(ctx)
    gate = acc.host_gate(ctx)
    buffers: list[Any] = []

    def alloc(values: Any) -> Any:
        buf = acc.allocate_buffer(ctx, BufferDesc(16, usage=IO))
        buffers.append(buf)
        acc.write_buffer(buf, 0, np.asarray(values, np.float32))
        return buf

    # Parked on the gate and pending throughout: it can be neither destroyed nor stripped of its buffers.
    parked_bufs = [alloc([1, 1, 1, 1]), alloc([2, 2, 2, 2]), alloc([0, 0, 0, 0])]
    parked = acc.submit(queue, program, [Binding(i, b) for i, b in enumerate(parked_bufs)], after=(gate, 1))

    n_submitters, per_thread, n_waiters = 4, 12, 2
    start = _barrier(n_submitters + n_waiters)
    handed: list[tuple[int, int, Any, Any]] = []  # (thread, index, event, output buffer)
    cond = threading.Condition()
    submitted = [0]
    seen: dict[int, EventState] = {}

    def submitter(k: int) -> None:
        start.wait()
        mine = []
        for i in range(per_thread):
            a, b, c = alloc(np.full(4, k)), alloc(np.full(4, 1000.0 * i)), alloc(np.full(4, -1))
            ev = acc.submit(queue, program, [Binding(0, a), Binding(1, b), Binding(2, c)])
            mine.append((ev, (a, b, c)))
            with cond:
                handed.append((k, i, ev, c))
                cond.notify_all()
        # In-order per queue, seen through the API alone: once this thread's last event is complete,
        # every earlier one of its events already is.
        assert acc.wait(mine[-1][0], JOIN_S) is EventState.COMPLETE
        assert all(acc.poll_event(ev) is EventState.COMPLETE for ev, _ in mine)
        with cond:
            submitted[0] += 1
            cond.notify_all()

    def waiter(w: int) -> None:
        start.wait()
        taken = w
        while True:
            with cond:
                ok = cond.wait_for(lambda t=taken: t < len(handed) or submitted[0] == n_submitters, JOIN_S)
                assert ok, "waiter starved"
                if taken >= len(handed):
                    return
                k, i, ev, c = handed[taken]
            taken += n_waiters
            state = acc.wait(ev, JOIN_S)
            assert state is EventState.COMPLETE, acc.event_error(ev)
            assert acc.poll_event(ev) is state
            np.testing.assert_array_equal(_f32(acc, c), np.full(4, k + 1000.0 * i, np.float32))
            seen[id(ev)] = state

    team = _Team(*(lambda k=k: submitter(k) for k in range(n_submitters)), *(lambda w=w: waiter(w) for w in range(2)))
    team.start()
    with pytest.raises(ReleaseRejected) as info:
        acc.destroy_event(parked)
    assert info.value.handle is parked
    with pytest.raises(ReleaseRejected):
        acc.free_buffer(parked_bufs[0])
    team.join()

    total = n_submitters * per_thread
    assert len(handed) == total and len(seen) == total
    assert acc.poll_event(parked) is EventState.PENDING
    gate.signal(1)
    assert acc.wait(parked, JOIN_S) is EventState.COMPLETE
    np.testing.assert_array_equal(_f32(acc, parked_bufs[2]), np.full(4, 3, np.float32))
    # One worker drains the queue: jobs begin exactly in the order they were queued, each once.
    assert acc.started == acc.enqueued and len(acc.enqueued) == total + 1
    assert len({id(core) for core in acc.enqueued}) == total + 1
    assert acc.misuse == []
    for _, _, ev, _ in handed:
        acc.destroy_event(ev)
    acc.destroy_event(parked)
    for buf in buffers:
        acc.free_buffer(buf)
    acc.unload_program(program)
    acc.destroy_queue(queue)
    acc.destroy_context(ctx)
    _assert_nothing_live(acc)


# ---- host gates --------------------------------------------------------------------------------


def test_gated_work_starts_only_once_its_value_is_reached_and_parks_no_worker():
    acc = _TapCpu()
    ctx = acc.create_context()
    program = acc.load_program(ctx, ArtifactRef(ADD4, 1 << 20))
    q1, q2 = acc.create_queue(ctx), acc.create_queue(ctx)
    gate = acc.host_gate(ctx)
    acc.gate = gate
    gate.signal(1)
    buffers: list[Any] = []

    def alloc(values: Any) -> Any:
        buf = acc.allocate_buffer(ctx, BufferDesc(16, usage=IO))
        buffers.append(buf)
        acc.write_buffer(buf, 0, np.asarray(values, np.float32))
        return buf

    half = alloc(np.full(4, 0.5))

    values = list(range(2, 42))
    parked: dict[int, tuple[Any, Any, Any]] = {}  # value -> (event, a, c)
    n_submitters = 4
    lined_up = _barrier(n_submitters)

    def park(k: int) -> None:
        lined_up.wait()
        for v in values[k::n_submitters]:
            a, c = alloc(np.full(4, v)), alloc(np.full(4, -1))  # slot 0 carries the value it waits for
            ev = acc.submit(q1, program, [Binding(0, a), Binding(1, half), Binding(2, c)], after=(gate, v))
            parked[v] = (ev, a, c)

    _run(*(lambda k=k: park(k) for k in range(n_submitters)))
    assert gate.waiting == len(values) and acc.enqueued == []
    assert all(acc.poll_event(ev) is EventState.PENDING for ev, _, _ in parked.values())

    # Nothing blocks on the gate: ungated work on the same queue and on another one runs meanwhile.
    for q in (q1, q2):
        a, c = alloc(np.zeros(4)), alloc(np.full(4, -1))
        ev = acc.submit(q, program, [Binding(0, a), Binding(1, half), Binding(2, c)])
        assert acc.wait(ev, JOIN_S) is EventState.COMPLETE
        np.testing.assert_array_equal(_f32(acc, c), np.full(4, 0.5, np.float32))
        acc.destroy_event(ev)
    assert gate.waiting == len(values)

    # One signal releases exactly the work it satisfies, on the signalling thread, before it returns.
    gate.signal(11)
    assert gate.waiting == len([v for v in values if v > 11])
    for v, (ev, _, _) in parked.items():
        if v <= 11:
            assert acc.wait(ev, JOIN_S) is EventState.COMPLETE
        else:
            assert acc.poll_event(ev) is EventState.PENDING

    # Racing signallers: a signal either raises the counter or finds it already higher (InvalidArgument).
    later = list(range(12, 46))
    lowered: list[int] = []
    race = _barrier(4)

    def signaller(k: int) -> None:
        race.wait()
        for v in later[k::3]:
            try:
                gate.signal(v)
            except InvalidArgument:
                lowered.append(v)

    def lowerer() -> None:
        race.wait()
        with pytest.raises(InvalidArgument, match="only increase"):
            gate.signal(5)  # the gate already stands at 11 or more

    _run(*(lambda k=k: signaller(k) for k in range(3)), lowerer)
    assert gate.value == max(later) and gate.waiting == 0
    assert max(later) not in lowered

    for v, (ev, _a, c) in parked.items():
        assert acc.wait(ev, JOIN_S) is EventState.COMPLETE, acc.event_error(ev)
        np.testing.assert_array_equal(_f32(acc, c), np.full(4, v + 0.5, np.float32))
    gated = [(v, g, where) for v, g, where in acc.gate_seen if v > 0]
    for where in ("release", "start"):
        waited = sorted(v for v, _, w in gated if w == where)
        assert waited == values, f"each parked submission is {where}d exactly once"
    early = [(v, g, w) for v, g, w in gated if g < v]
    assert early == [], f"work began before the gate reached its value: {early}"
    assert acc.misuse == []

    for ev, _, _ in parked.values():
        acc.destroy_event(ev)
    for buf in buffers:
        acc.free_buffer(buf)
    acc.unload_program(program)
    acc.destroy_queue(q1)
    acc.destroy_queue(q2)
    acc.destroy_context(ctx)
    _assert_nothing_live(acc)


def test_parked_work_cancelled_before_its_gate_opens_never_reaches_the_backend():
    acc = _TapCpu()
    for rounds in range(12):
        f = semantic._Fixture(acc)
        gate = acc.host_gate(f.ctx)
        ev = acc.submit(f.queue, f.program, f.bindings(), after=(gate, 1))
        if rounds == 0:
            assert acc.cancel_event(ev) is True  # in order: cancelled, released, then the gate opens
        else:
            outcome: list[bool] = []
            race = _barrier(2)

            def cancel(ev: Any = ev, outcome: list[bool] = outcome, race: Any = race) -> None:
                race.wait()
                outcome.append(acc.cancel_event(ev))

            def signal(gate: HostGate = gate, race: Any = race) -> None:
                race.wait()
                gate.signal(1)

            _run(cancel, signal)
            assert (acc.wait(ev, JOIN_S) is EventState.CANCELLED) == outcome[0]
        acc.wait(ev, JOIN_S)
        acc.destroy_event(ev)
        # The signalling thread has returned, so nothing holds what the event pinned: release it all.
        for buf in f.bufs:
            acc.free_buffer(buf)
        acc.unload_program(f.program)
        acc.destroy_queue(f.queue)
        gate.signal(2)  # opening the gate after the release must not hand released objects to the backend
        acc.destroy_context(f.ctx)
    assert acc.misuse == [], acc.misuse
    _assert_nothing_live(acc)


# ---- events ------------------------------------------------------------------------------------


def test_cancellation_racing_the_start_wins_only_for_work_that_never_ran():
    acc = _TapCpu()
    ctx = acc.create_context()
    program = acc.load_program(ctx, ArtifactRef(ADD4, 1 << 20))
    queue = acc.create_queue(ctx)
    a = acc.allocate_buffer(ctx, BufferDesc(16, usage=IO))
    b = acc.allocate_buffer(ctx, BufferDesc(16, usage=IO))
    acc.write_buffer(a, 0, np.ones(4, np.float32))
    acc.write_buffer(b, 0, np.full(4, 2, np.float32))
    sentinel = np.full(4, -7, np.float32)

    def out() -> Any:
        c = acc.allocate_buffer(ctx, BufferDesc(16, usage=IO))
        acc.write_buffer(c, 0, sentinel)
        return c

    acc.hold = release = threading.Event()
    plug_out = out()
    plug = acc.submit(queue, program, [Binding(0, a), Binding(1, b), Binding(2, plug_out)])
    assert acc.holding.wait(JOIN_S)  # the worker is busy with the plug: nothing behind it has started
    outs = [out() for _ in range(30)]
    events = [acc.submit(queue, program, [Binding(0, a), Binding(1, b), Binding(2, c)]) for c in outs]
    won = {0: acc.cancel_event(events[0])}
    assert won[0] is True

    race = _barrier(4)

    def canceller(k: int) -> None:
        race.wait()
        for i in range(1 + k, len(events), 3):
            won[i] = acc.cancel_event(events[i])

    def releaser() -> None:
        race.wait()
        release.set()  # let the worker go while the cancellers are still at it

    _run(*(lambda k=k: canceller(k) for k in range(3)), releaser)
    assert acc.wait(plug, JOIN_S) is EventState.COMPLETE
    assert acc.cancel_event(plug) is False  # it ran
    for i, (ev, c) in enumerate(zip(events, outs, strict=True)):
        state = acc.wait(ev, JOIN_S)
        assert (state is EventState.CANCELLED) == won[i], (i, state, won[i])
        got = _f32(acc, c)
        if not won[i]:
            np.testing.assert_array_equal(got, np.full(4, 3, np.float32))
        elif not acc._objects[ev.id].native.started:  # won before it ran: the output is untouched
            np.testing.assert_array_equal(got, sentinel)
        else:  # won while it ran (ADR 0027): the run stopped at a checkpoint, or after its only operator
            assert np.array_equal(got, sentinel) or np.array_equal(got, np.full(4, 3, np.float32)), got
        assert acc.cancel_event(ev) is False  # terminal: a later cancel never wins
        assert all(acc.poll_event(ev) is state for _ in range(20))
        acc.destroy_event(ev)
    acc.destroy_event(plug)
    for buf in [a, b, plug_out, *outs]:
        acc.free_buffer(buf)
    acc.unload_program(program)
    acc.destroy_queue(queue)
    acc.destroy_context(ctx)
    _assert_nothing_live(acc)


def test_pollers_see_pending_then_one_terminal_state_that_never_changes():
    acc = cpu.CpuAccelerator()
    f = semantic._Fixture(acc)
    gate = acc.host_gate(f.ctx)
    f.write_inputs(np.ones(4), np.ones(4))
    n_pollers = 3
    for r in range(6):
        ev = acc.submit(f.queue, f.program, f.bindings(), after=(gate, r + 1))
        racing_cancel = r % 2 == 1
        parties = n_pollers + 2 + racing_cancel  # pollers, a waiter, the signaller (main), maybe a canceller
        go = _barrier(parties)
        histories: list[list[EventState]] = []
        waited: list[EventState] = []
        cancelled: list[bool] = []

        def poller(ev: Any = ev, go: Any = go, histories: list = histories) -> None:
            seen = [acc.poll_event(ev)]  # the gate is closed: certainly pending
            go.wait()
            extra, deadline = 0, time.monotonic() + JOIN_S
            while extra < 200 and time.monotonic() < deadline:
                state = acc.poll_event(ev)
                if state is not seen[-1]:
                    seen.append(state)
                if state.terminal:
                    extra += 1
                time.sleep(0)  # yield the interpreter lock to the worker
            histories.append(seen)

        def waiter(ev: Any = ev, go: Any = go, waited: list = waited) -> None:
            go.wait()
            waited.append(acc.wait(ev, JOIN_S))

        def canceller(ev: Any = ev, go: Any = go, cancelled: list = cancelled) -> None:
            go.wait()
            cancelled.append(acc.cancel_event(ev))

        team = _Team(*([poller] * n_pollers), waiter, *([canceller] if racing_cancel else []))
        team.start()
        go.wait()
        gate.signal(r + 1)
        team.join()
        final = acc.poll_event(ev)
        expected = EventState.CANCELLED if cancelled and cancelled[0] else EventState.COMPLETE
        assert final is expected
        assert histories == [[EventState.PENDING, final]] * n_pollers, histories
        assert waited == [final]
        if final is EventState.COMPLETE:
            np.testing.assert_array_equal(f.output(), np.full(4, 2, np.float32))
        acc.destroy_event(ev)
    f.close()
    _assert_nothing_live(acc)


def test_device_loss_while_threads_submit_ends_every_event_and_hangs_nothing():
    n_threads = 3
    # Setup allocates 3 buffers per thread and 3 for a parked submission; the next allocation loses the device.
    acc = FaultyAccelerator(cpu.CpuAccelerator(), [device_lost("allocate", at=3 * n_threads + 3)])
    ctx = acc.create_context()
    program = acc.load_program(ctx, ArtifactRef(ADD4, 1 << 20))

    def lane() -> tuple[Any, list[Any]]:
        bufs = [acc.allocate_buffer(ctx, BufferDesc(16, usage=IO)) for _ in range(3)]
        for buf in bufs[:2]:
            acc.write_buffer(buf, 0, np.ones(4, np.float32))
        return acc.create_queue(ctx), bufs

    lanes = [lane() for _ in range(n_threads)]
    parked_queue, parked_bufs = lane()
    gate = acc.host_gate(ctx)
    parked = acc.submit(parked_queue, program, [Binding(i, b) for i, b in enumerate(parked_bufs)], after=(gate, 1))
    rolling = _barrier(n_threads + 1)
    endings: list[tuple[EventState, Any]] = []

    def submitter(queue: Any, bufs: list[Any]) -> None:
        bindings = [Binding(i, b) for i, b in enumerate(bufs)]
        in_flight = [acc.submit(queue, program, bindings) for _ in range(2)]
        rolling.wait()
        for _ in range(5000):
            oldest = in_flight.pop(0)
            endings.append((acc.wait(oldest, JOIN_S), acc.event_error(oldest)))
            acc.destroy_event(oldest)
            try:
                in_flight.append(acc.submit(queue, program, bindings))
            except SubmitRejected as exc:
                assert isinstance(exc.error, DeviceLost), exc.error
                break
        else:
            pytest.fail("submissions kept being accepted after the device was lost")
        for ev in in_flight:
            endings.append((acc.wait(ev, JOIN_S), acc.event_error(ev)))
            acc.destroy_event(ev)

    team = _Team(*(lambda q=q, b=b: submitter(q, b) for q, b in lanes)).start()
    rolling.wait()
    with pytest.raises(DeviceLost):
        acc.allocate_buffer(ctx, BufferDesc(16, usage=IO))
    team.join()

    assert endings, "nothing ran"
    for state, error in endings:
        assert state is EventState.COMPLETE or (state is EventState.FAILED and isinstance(error, DeviceLost))
    assert acc.poll_event(parked) is EventState.FAILED and isinstance(acc.event_error(parked), DeviceLost)
    gate.signal(1)  # opening the gate now starts nothing
    assert acc.poll_event(parked) is EventState.FAILED
    queue, bufs = lanes[0]
    later: list[Callable[[], Any]] = [
        lambda: acc.allocate_buffer(ctx, BufferDesc(16, usage=IO)),
        lambda: acc.write_buffer(bufs[0], 0, b"\0" * 16),
        lambda: acc.read_buffer(bufs[2], 0, 16),
        lambda: acc.create_context(),
        lambda: acc.create_queue(ctx),
        lambda: acc.load_program(ctx, ArtifactRef(ADD4, 1 << 20)),
    ]
    for call in later:
        with pytest.raises(DeviceLost):
            call()
    with pytest.raises(SubmitRejected) as info:
        acc.submit(queue, program, [Binding(i, b) for i, b in enumerate(bufs)])
    assert isinstance(info.value.error, DeviceLost)
    # Releases still work on a lost device, so the caller can account for everything.
    acc.destroy_event(parked)
    for q, bs in [*lanes, (parked_queue, parked_bufs)]:
        for buf in bs:
            acc.free_buffer(buf)
        acc.destroy_queue(q)
    acc.unload_program(program)
    acc.destroy_context(ctx)
    _assert_nothing_live(acc)


# ---- the user API ------------------------------------------------------------------------------


def _scaled_program(n: int, k: float) -> Any:
    """(x * x + k, x - k) over fp32[n]: a program with two outputs, different per thread."""
    b = ProgramBuilder()
    x = b.input("x", (n,), "fp32")
    b.output(b.add(b.mul(x, x), np.full(n, k, np.float32)), b.sub(x, np.full(n, k, np.float32)))
    return b.build()


def test_one_device_compiles_and_runs_different_programs_from_many_threads():
    dev = ironaccel.open("cpu")
    n_threads = 4
    lined_up = _barrier(n_threads)

    def worker(k: int) -> None:
        n = 3 + k
        lined_up.wait()
        square = dev.compile(_scaled_program(n, float(k)))
        add = dev.compile(semantic.add_program(n + 8))
        for i in range(6):
            x = np.arange(n, dtype=np.float32) + i
            y, z = square(x)
            np.testing.assert_array_equal(y, x * x + k)
            np.testing.assert_array_equal(z, x - k)
            p = np.full(n + 8, float(k), np.float32)
            (s,) = add(p, np.full(n + 8, float(i), np.float32))
            np.testing.assert_array_equal(s, p + i)
        # Several runs in flight on the device's one queue, collected newest first.
        runs = [(i, add.submit(np.full(n + 8, float(i), np.float32), np.ones(n + 8, np.float32))) for i in range(5)]
        for i, run in reversed(runs):
            np.testing.assert_array_equal(run.wait(JOIN_S)[0], np.full(n + 8, i + 1.0, np.float32))
            assert run.done
        square.close()
        add.close()
        add.close()  # a second close does nothing

    _run(*(lambda k=k: worker(k) for k in range(n_threads)))
    acc = dev.accelerator
    assert acc.live_resources()["program"] == 0 and acc.live_resources()["buffer"] == 0
    dev.close()
    _assert_nothing_live(acc)
