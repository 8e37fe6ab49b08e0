"""Context reset beyond what the semantic suite reaches (its cases are in conformance/semantic_cases_reset.py):
work that outlives the reset's wait quarantines what it pins until a release job sees it end, the report's
counts, a release the backend refuses, device loss during a reset, and resets racing other threads."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from ironaccel.conformance.faults import Fault, FaultyAccelerator, device_lost
from ironaccel.conformance.semantic_fixtures import Endless, Fixture, add_program
from ironaccel.core.errors import Busy, DeviceLost, InvalidArgument
from ironaccel.runtime import ArtifactRef, ContextReset, EventCore, EventState, ReleaseRejected, SubmitRejected, reclaim
from ironaccel.runtime.reset import KINDS

cpu = pytest.importorskip("ironaccel.backends.cpu.accelerator")
pytest.importorskip("ironaccel.backends.cpu.interpreter")


class Held(cpu.CpuAccelerator):
    """The CPU accelerator with runs that neither stop nor end until the test says so (``finish``), observed
    as a Vulkan or CUDA run is: a backend that cannot cancel started work."""

    observes_completion = True
    supports_cancellation = False

    def __init__(self) -> None:
        super().__init__()
        self.running: list[EventCore] = []
        self.ended: set[EventCore] = set()
        self.changed = threading.Condition()

    def _submit(self, queue: Any, program: Any, ranges: Any, event: EventCore) -> None:
        if event.try_start():
            with self.changed:
                self.running.append(event)

    def finish(self) -> None:
        with self.changed:
            self.ended.update(self.running)
            self.changed.notify_all()

    def _progress(self, event: EventCore | None, timeout: float | None) -> None:
        with self.changed:
            if event is not None and event not in self.ended and timeout != 0.0:
                self.changed.wait(0.05 if timeout is None else min(timeout, 0.05))
            done = [e for e in self.ended if not e.state.terminal]
        for e in done:
            e.complete()


def _none(**counts: int) -> dict[str, int]:
    return {k: counts.get(k, 0) for k in KINDS}


def _empty(acc: Any) -> bool:
    return not any(acc.live_resources().values())


def test_work_that_outlives_the_wait_is_quarantined_then_released_when_it_ends():
    acc = Held()
    f = Fixture(acc)
    gate = acc.host_gate(f.ctx)
    running = acc.submit(f.queue, f.program, f.bindings())
    parked = acc.submit(f.queue, f.program, f.bindings(), after=(gate, 1))
    started = time.monotonic()
    report = acc.reset_context(f.ctx, wait=0.1)
    assert 0.1 <= time.monotonic() - started < 5
    assert not report.complete and report.lost is None
    assert report.cancelled == 1  # the parked one, on a backend that cancels nothing else
    assert report.released == _none(event=1, gate=1)
    assert report.quarantined == _none(event=1, queue=1, program=1, buffer=3, context=1)
    live = acc.live_resources()
    assert live["context"] == 1 and live["buffer"] == 3 and live["event"] == 1 and live["buffer_bytes"] > 0
    for fn in (
        lambda: acc.poll_event(running),
        lambda: acc.poll_event(parked),
        lambda: acc.free_buffer(f.bufs[0]),
        lambda: acc.destroy_context(f.ctx),
        lambda: acc.create_queue(f.ctx),
    ):
        with pytest.raises(InvalidArgument):
            fn()
    acc.finish()
    assert reclaim.settle(10)
    assert _empty(acc), acc.live_resources()


def test_a_running_deadline_ends_quarantined_work_on_the_cpu_backend():
    class Uncancelled(cpu.CpuAccelerator):
        supports_cancellation = False

    acc = Uncancelled()
    f = Endless(acc)
    event = f.submit(timeout=1.0)  # the reset must find the run started and still within its deadline
    core = acc._record(event, type(event)).native
    end = time.monotonic() + 10
    while not core.started and time.monotonic() < end:
        time.sleep(0.001)
    report = acc.reset_context(f.ctx, wait=0.01)
    assert report.quarantined == _none(event=1, queue=1, program=1, buffer=2, context=1), report
    assert acc.live_resources()["program"] == 1
    assert reclaim.settle(10)  # the deadline stopped the run; the release job freed what it pinned
    assert _empty(acc), acc.live_resources()


def test_work_that_ends_within_the_wait_is_released_now():
    acc = Held()
    f = Fixture(acc)
    acc.submit(f.queue, f.program, f.bindings())
    threading.Timer(0.05, acc.finish).start()
    report = acc.reset_context(f.ctx, wait=10)
    assert report.complete and report.cancelled == 0
    assert report.released == _none(event=1, queue=1, program=1, buffer=3, context=1)
    assert _empty(acc)


def test_a_launched_prepared_submission_is_released_and_its_run_quarantined():
    acc = Held()
    f = Fixture(acc)
    prepared = acc.prepare(f.queue, f.program, f.bindings())
    acc.launch(prepared)
    report = acc.reset_context(f.ctx, wait=0.05)
    assert report.released == _none(prepared=1)
    assert report.quarantined == _none(event=1, queue=1, program=1, buffer=3, context=1)
    with pytest.raises(InvalidArgument):
        acc.launch(prepared)
    acc.finish()
    assert reclaim.settle(10)
    assert _empty(acc)


def test_admission_is_busy_while_a_reset_waits_and_a_second_reset_is_refused():
    acc = Held()
    f = Fixture(acc)
    prepared = acc.prepare(f.queue, f.program, f.bindings())
    acc.submit(f.queue, f.program, f.bindings())
    other = Fixture(acc)
    reports: list[ContextReset] = []
    resetting = threading.Thread(target=lambda: reports.append(acc.reset_context(f.ctx, wait=30)))
    resetting.start()
    end = time.monotonic() + 10
    while f.ctx not in acc._resetting and time.monotonic() < end:
        time.sleep(0.001)
    refused = {
        "submit": lambda: acc.submit(f.queue, f.program, f.bindings()),
        "launch": lambda: acc.launch(prepared),
        "prepare": lambda: acc.prepare(f.queue, f.program, f.bindings()),
        "load_program": lambda: acc.load_program(f.ctx, ArtifactRef(add_program(), 1 << 20)),
        "create_queue": lambda: acc.create_queue(f.ctx),
        "gate": lambda: acc.host_gate(f.ctx),
        "reset": lambda: acc.reset_context(f.ctx),
        "destroy": lambda: acc.destroy_context(f.ctx),
        "run_direct": lambda: acc.run_direct(f.program, [np.ones(4, np.float32)] * 2, [np.empty(4, np.float32)]),
    }
    for what, fn in refused.items():
        with pytest.raises((Busy, SubmitRejected, ReleaseRejected)) as caught:
            fn()
        error = getattr(caught.value, "error", caught.value)
        assert isinstance(error, Busy) and "reset" in str(error), (what, caught.value)
    event = acc.submit(other.queue, other.program, other.bindings())  # another context admits
    acc.finish()
    resetting.join(30)
    (report,) = reports
    assert report.complete and report.released["prepared"] == 1 and report.released["event"] == 1
    assert acc.wait(event, 30) is EventState.COMPLETE
    acc.destroy_event(event)
    other.close()
    assert _empty(acc)


def test_resets_of_many_contexts_race_work_on_others():
    acc = cpu.CpuAccelerator()
    errors: list[BaseException] = []
    stop = threading.Event()

    def keep_working() -> None:
        try:
            f = Fixture(acc)
            i = 0
            while not stop.is_set():
                f.write_inputs(np.full(4, i), np.ones(4))
                event = acc.submit(f.queue, f.program, f.bindings())
                assert acc.wait(event, 30) is EventState.COMPLETE
                np.testing.assert_array_equal(f.output(), np.full(4, i + 1, np.float32))
                acc.destroy_event(event)
                i += 1
            f.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reset_many() -> None:
        try:
            for _ in range(10):
                f = Fixture(acc)
                gate = acc.host_gate(f.ctx)
                for v in range(3):
                    acc.submit(f.queue, f.program, f.bindings(), after=(gate, v + 1))
                gate.signal(1)  # one may run, or be cancelled: either way it ends
                report = acc.reset_context(f.ctx, wait=10)
                assert report.complete, report
                assert report.cancelled >= 2, report
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=keep_working) for _ in range(2)]
    resetters = [threading.Thread(target=reset_many) for _ in range(3)]
    for t in workers + resetters:
        t.start()
    for t in resetters:
        t.join(60)
    stop.set()
    for t in workers:
        t.join(60)
    assert not errors, errors
    assert _empty(acc), acc.live_resources()


def test_a_release_the_backend_refuses_is_quarantined_and_retried():
    acc = FaultyAccelerator(cpu.CpuAccelerator(), [Fault("free", Busy("kept by the backend"), reject_release=True)])
    f = Fixture(acc)
    report = acc.reset_context(f.ctx)
    assert report.released == _none(queue=1, program=1, buffer=2)
    assert report.quarantined == _none(buffer=1, context=1)
    assert reclaim.settle(10)
    assert _empty(acc)


def test_device_loss_during_a_reset_poisons_and_is_reported():
    acc = FaultyAccelerator(cpu.CpuAccelerator(), [device_lost("destroy_queue")])
    f = Fixture(acc)
    report = acc.reset_context(f.ctx)
    assert isinstance(report.lost, DeviceLost) and not report.complete
    assert report.quarantined["program"] == 1 and report.quarantined["context"] == 1
    with pytest.raises(DeviceLost):
        acc.create_context()
    with pytest.raises(DeviceLost):
        acc.reset_context(f.ctx)


def test_device_loss_while_a_reset_waits_quarantines_everything():
    inner = Held()
    acc = FaultyAccelerator(inner, [device_lost("progress")])
    f = Fixture(acc)
    acc.submit(f.queue, f.program, f.bindings())
    report = acc.reset_context(f.ctx, wait=5)
    assert isinstance(report.lost, DeviceLost)
    assert report.quarantined == _none(event=1, queue=1, program=1, buffer=3, context=1)
    assert all(core.state is EventState.FAILED for core in inner.running)  # failed by the poisoning
    with pytest.raises(DeviceLost):
        acc.create_context()


def test_wait_must_be_a_finite_number_and_a_foreign_context_is_refused():
    acc = cpu.CpuAccelerator()
    ctx = acc.create_context()
    for bad in (-1, float("nan"), float("inf"), "1", True):
        with pytest.raises(InvalidArgument):
            acc.reset_context(ctx, wait=bad)
    with pytest.raises(InvalidArgument):
        acc.reset_context(object())
    assert acc.reset_context(ctx, wait=0).complete
    assert _empty(acc)
