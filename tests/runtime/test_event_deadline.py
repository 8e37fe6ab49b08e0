"""Late completion: a run that ends past its deadline ends FAILED with DeadlineExpired, never COMPLETE, on
every backend (decided in EventCore). Where completion is observed after the fact, a run is late only if it
was seen still running past its deadline, never for being looked at late."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ironaccel.conformance.semantic_fixtures import Fixture
from ironaccel.core.errors import DeadlineExpired, InternalError
from ironaccel.runtime import EventCore, EventState
from ironaccel.runtime.event import RunCancelled

cpu = pytest.importorskip("ironaccel.backends.cpu.accelerator")


def _started(deadline_in: float | None, observed: bool = False, stoppable: bool = False) -> EventCore:
    """A started core whose deadline is ``deadline_in`` s after its start: a loaded machine that takes longer
    than that between making the core and starting it would otherwise fail the start."""
    core = EventCore(None, observed)
    assert core.try_start(stoppable)
    core.deadline = None if deadline_in is None else time.monotonic() + deadline_in
    return core


# ---- EventCore -------------------------------------------------------------------------------------------
def test_a_run_completed_past_its_deadline_fails_with_deadline_expired():
    core = _started(0.01)
    time.sleep(0.03)
    assert core.complete()
    assert core.state is EventState.FAILED
    assert isinstance(core.error, DeadlineExpired) and "past its deadline" in str(core.error)
    assert not core.complete() and core.state is EventState.FAILED  # terminal states never change


def test_a_run_completed_in_time_completes():
    core = _started(30)
    assert core.complete() and core.state is EventState.COMPLETE and core.error is None
    untimed = _started(None)
    assert untimed.complete() and untimed.state is EventState.COMPLETE


def test_a_failure_keeps_its_own_error_and_a_won_cancellation_stays_cancelled():
    failed = _started(0.01)
    time.sleep(0.03)
    failed.fail(InternalError("the run's own failure"))
    assert isinstance(failed.error, InternalError)
    stopped = _started(0.01, stoppable=True)
    assert stopped.cancel()
    time.sleep(0.03)
    stopped.complete()  # the run went to its end anyway: the cancellation decided the outcome
    assert stopped.state is EventState.CANCELLED
    with pytest.raises(RunCancelled):
        stopped.checkpoint()


def test_an_observed_completion_is_late_only_when_seen_running_past_the_deadline():
    looked_late = _started(0.01, observed=True)
    time.sleep(0.03)
    looked_late.complete()  # ended at some time before this look: nothing says it was late
    assert looked_late.state is EventState.COMPLETE

    seen = _started(0.01, observed=True)
    seen.seen_pending(seen.deadline - 0.005)  # a look before the deadline: no effect
    assert not seen.late
    time.sleep(0.03)
    seen.seen_pending(time.monotonic())
    assert seen.late
    seen.complete()
    assert seen.state is EventState.FAILED and isinstance(seen.error, DeadlineExpired)

    untimed = _started(None, observed=True)
    untimed.seen_pending(time.monotonic() + 100)
    assert not untimed.late and untimed.complete() and untimed.state is EventState.COMPLETE


def test_a_look_after_the_event_ended_marks_nothing():
    core = _started(0.01, observed=True)
    core.complete()
    time.sleep(0.03)
    core.seen_pending(time.monotonic())
    assert core.state is EventState.COMPLETE and not core.late


# ---- a backend that observes completion ------------------------------------------------------------------
class Observed(cpu.CpuAccelerator):
    """The CPU accelerator made to observe completion: a run starts when submitted and ends when the test
    says so (``end``), seen by the runtime's poll and wait through ``_progress``."""

    observes_completion = True

    def __init__(self) -> None:
        super().__init__()
        self.ended: set[EventCore] = set()
        self.changed = threading.Condition()

    def _submit(self, queue: Any, program: Any, ranges: Any, event: EventCore) -> None:
        assert event.try_start()

    def end(self, event: Any) -> None:
        with self.changed:
            self.ended.add(self._record(event, type(event)).native)
            self.changed.notify_all()

    def _progress(self, event: EventCore | None, timeout: float | None) -> None:
        with self.changed:
            if event is not None and event not in self.ended and timeout != 0.0:
                self.changed.wait(timeout)
            done = [e for e in self.ended if not e.state.terminal]
        for e in done:
            e.complete()


@pytest.fixture
def observed():
    acc = Observed()
    f = Fixture(acc)
    yield acc, f
    f.close()
    assert not any(acc.live_resources().values())


def test_observed_work_that_ended_in_time_completes_however_late_it_is_polled(observed):
    acc, f = observed
    # Submitted, looked at and ended within a deadline a loaded machine meets; polled again only after it.
    event = acc.submit(f.queue, f.program, f.bindings(), timeout=0.5)
    assert acc.poll_event(event) is EventState.PENDING
    acc.end(event)
    time.sleep(0.6)
    assert acc.poll_event(event) is EventState.COMPLETE
    acc.destroy_event(event)


def test_observed_work_seen_running_past_its_deadline_by_a_poll_fails(observed):
    acc, f = observed
    event = acc.submit(f.queue, f.program, f.bindings(), timeout=0.05)
    time.sleep(0.1)
    assert acc.poll_event(event) is EventState.PENDING  # still running past the deadline
    acc.end(event)
    assert acc.poll_event(event) is EventState.FAILED
    assert isinstance(acc.event_error(event), DeadlineExpired)
    acc.destroy_event(event)


def test_a_wait_looks_as_the_deadline_passes(observed):
    acc, f = observed
    event = acc.submit(f.queue, f.program, f.bindings(), timeout=0.05)
    threading.Timer(0.3, acc.end, args=(event,)).start()
    assert acc.wait(event, 30) is EventState.FAILED  # one wait, blocked across the deadline
    assert isinstance(acc.event_error(event), DeadlineExpired)
    acc.destroy_event(event)
    event = acc.submit(f.queue, f.program, f.bindings(), timeout=30)
    threading.Timer(0.05, acc.end, args=(event,)).start()
    assert acc.wait(event, 30) is EventState.COMPLETE
    acc.destroy_event(event)


def test_the_user_api_raises_deadline_expired_for_a_late_run():
    from ironaccel.conformance.semantic_fixtures import add_program
    from ironaccel.runtime.device import Device

    acc = Observed()
    dev = Device(acc, "observed")
    exe = dev.compile(add_program())
    x = np.ones(4, np.float32)
    late = exe.submit(x, x, timeout=0.05)
    threading.Timer(0.2, acc.end, args=(late.event,)).start()
    with pytest.raises(DeadlineExpired, match="past its deadline"):
        late.wait()
    in_time = exe.submit(x, x, timeout=30)
    acc.end(in_time.event)
    (out,) = in_time.wait()
    assert out.shape == (4,)
    exe.close()
    dev.close()
    assert not any(acc.live_resources().values()), acc.live_resources()


# ---- the CUDA backend on its stand-in driver ---------------------------------------------------------------
def test_a_cuda_run_seen_running_past_its_deadline_fails(monkeypatch):
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is installed with the [cuda] extra")
    sys.path.insert(0, str(Path(__file__).parents[1] / "backends" / "cuda"))
    try:
        from cuda_driver_fake import FakeDriver, install
    finally:
        sys.path.pop(0)
    from cuda.bindings import driver as real

    from ironaccel.backends.cuda import accelerator

    driver = FakeDriver([("Stand-in Device", bytes(range(16)))])
    install(monkeypatch, driver)
    acc = accelerator.open_accelerator()
    f = Fixture(acc)
    f.write_inputs(np.ones(4), np.ones(4))
    query = driver.cuEventQuery
    monkeypatch.setattr(driver, "cuEventQuery", lambda event: (real.CUresult.CUDA_ERROR_NOT_READY,))
    late = acc.submit(f.queue, f.program, f.bindings(), timeout=0.05)
    assert acc.poll_event(late) is EventState.PENDING
    time.sleep(0.1)
    assert acc.poll_event(late) is EventState.PENDING  # the device is not done: seen past the deadline
    monkeypatch.setattr(driver, "cuEventQuery", query)
    assert acc.wait(late, 30) is EventState.FAILED
    assert isinstance(acc.event_error(late), DeadlineExpired)
    acc.destroy_event(late)
    in_time = acc.submit(f.queue, f.program, f.bindings(), timeout=0.05)
    time.sleep(0.1)  # ended long ago, looked at only now
    assert acc.poll_event(in_time) is EventState.COMPLETE
    np.testing.assert_array_equal(f.output(), np.full(4, 2, np.float32))
    acc.destroy_event(in_time)
    f.close()
    acc.close()
