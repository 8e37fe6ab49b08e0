"""The execution contract on the CPU backend: the semantic suite, fault injection, the user API."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ironaccel
from ironaccel.conformance import semantic
from ironaccel.conformance.faults import Fault, FaultyAccelerator, device_lost
from ironaccel.core.errors import DeviceLost, InvalidArgument, OutOfMemory, Unsupported
from ironaccel.runtime import (
    ArtifactRef,
    Binding,
    BufferDesc,
    EventState,
    ReleaseIndeterminate,
    ReleaseRejected,
    SubmitIndeterminate,
    SubmitRejected,
)
from ironaccel.runtime.session import SPARE_SETS

cpu = pytest.importorskip("ironaccel.backends.cpu.accelerator")
pytest.importorskip("ironaccel.backends.cpu.interpreter")


@pytest.mark.parametrize("case_id", list(semantic.CASES))
def test_semantic_suite_on_cpu(case_id):
    (result,) = semantic.run(cpu.CpuAccelerator, only=[case_id])
    assert result.status == "pass", result.detail


def _fixture(acc):
    return semantic._Fixture(acc)


def test_rejected_submit_retains_nothing():
    acc = FaultyAccelerator(cpu.CpuAccelerator(), [Fault("submit", OutOfMemory("injected"))])
    f = _fixture(acc)
    with pytest.raises(SubmitRejected) as info:
        acc.submit(f.queue, f.program, f.bindings())
    assert isinstance(info.value.error, OutOfMemory)
    assert acc.live_resources()["event"] == 0
    f.close()  # nothing is pinned: every release succeeds
    assert not any(acc.live_resources().values())


def test_indeterminate_submit_hands_over_an_event_that_owns_the_resources():
    acc = FaultyAccelerator(
        cpu.CpuAccelerator(), [Fault("submit", DeviceLost("link reset"), at=1, indeterminate=True)]
    )
    f = _fixture(acc)
    f.write_inputs(np.ones(4), np.ones(4))
    # Work that never ends goes first on the same queue, so the faulty submission is certainly still
    # waiting behind it when its buffers are released below.
    endless = acc.load_program(f.ctx, ArtifactRef(semantic.endless_program(), 1 << 20))
    scratch = [acc.allocate_buffer(f.ctx, BufferDesc(4, usage=semantic.IO)) for _ in range(2)]
    blocker = acc.submit(f.queue, endless, [Binding(i, b, 0, 4) for i, b in enumerate(scratch)])
    with pytest.raises(SubmitIndeterminate) as info:
        acc.submit(f.queue, f.program, f.bindings())
    ev = info.value.event
    assert ev is not None
    with pytest.raises(ReleaseRejected):
        acc.free_buffer(f.bufs[0])  # the event still owns it
    assert acc.cancel_event(blocker) is True
    assert acc.wait(blocker, 30) is EventState.CANCELLED
    acc.destroy_event(blocker)
    for buf in scratch:
        acc.free_buffer(buf)
    acc.unload_program(endless)
    assert acc.wait(ev, 30) is EventState.COMPLETE
    acc.destroy_event(ev)
    f.close()
    assert not any(acc.live_resources().values())


def test_rejected_release_returns_the_handle_for_retry():
    acc = FaultyAccelerator(
        cpu.CpuAccelerator(), [Fault("free", InvalidArgument("busy in driver"), reject_release=True)]
    )
    ctx = acc.create_context()
    buf = acc.allocate_buffer(ctx, BufferDesc(16))
    with pytest.raises(ReleaseRejected) as info:
        acc.free_buffer(buf)
    assert info.value.handle is buf
    acc.free_buffer(buf)  # the retry succeeds
    acc.destroy_context(ctx)
    assert not any(acc.live_resources().values())


def test_indeterminate_release_poisons_the_backend():
    acc = FaultyAccelerator(cpu.CpuAccelerator(), [Fault("free", InvalidArgument("driver confused"))])
    ctx = acc.create_context()
    buf = acc.allocate_buffer(ctx, BufferDesc(16))
    with pytest.raises(ReleaseIndeterminate):
        acc.free_buffer(buf)
    with pytest.raises(DeviceLost):
        acc.allocate_buffer(ctx, BufferDesc(16))


def test_device_loss_fails_every_pending_event():
    acc = FaultyAccelerator(cpu.CpuAccelerator(), [device_lost("allocate", at=3)])
    f = _fixture(acc)
    gate = acc.host_gate(f.ctx)
    ev = acc.submit(f.queue, f.program, f.bindings(), after=(gate, 1))
    with pytest.raises(DeviceLost):
        acc.allocate_buffer(f.ctx, BufferDesc(16))
    assert acc.poll_event(ev) is EventState.FAILED
    assert isinstance(acc.event_error(ev), DeviceLost)


def test_user_api_runs_a_program_and_explains_auto():
    dev = ironaccel.open("cpu")
    exe = dev.compile(semantic.add_program(8))
    a, b = np.arange(8, dtype=np.float32), np.full(8, 2, np.float32)
    (y,) = exe(a, b)
    np.testing.assert_array_equal(y, a + b)
    run = exe.submit(a, a)
    np.testing.assert_array_equal(run.wait(30)[0], 2 * a)
    assert run.done
    with pytest.raises(InvalidArgument, match="expected shape"):
        exe(a[:4], b)
    with pytest.raises(InvalidArgument, match="expected float32"):
        exe(a.astype(np.float64), b)
    dev.close()
    assert not any(dev.accelerator.live_resources().values())
    auto = ironaccel.open("auto")
    assert auto.why.startswith("picked")
    auto.close()
    with pytest.raises(InvalidArgument, match="no execution backend 'tpux'"):
        ironaccel.open("tpux")


def test_executable_is_safe_from_many_threads():
    with ironaccel.open("cpu") as dev:
        exe = dev.compile(semantic.add_program(4))
        failures = []

        def call(k: int) -> None:
            for i in range(20):
                (y,) = exe(np.full(4, k, np.float32), np.full(4, i, np.float32))
                if not np.array_equal(y, np.full(4, k + i, np.float32)):
                    failures.append((k, i, y))

        threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []


def test_cancellation_is_unsupported_where_the_backend_says_so():
    acc = FaultyAccelerator(cpu.CpuAccelerator())
    acc.supports_cancellation = False
    f = _fixture(acc)
    ev = acc.submit(f.queue, f.program, f.bindings())
    with pytest.raises(Unsupported):
        acc.cancel_event(ev)
    acc.wait(ev, 30)
    acc.destroy_event(ev)
    f.close()


def test_program_load_refuses_an_artifact_over_its_resident_bound():
    acc = cpu.CpuAccelerator()
    ctx = acc.create_context()
    with pytest.raises(Exception, match="resident"):
        acc.load_program(ctx, ArtifactRef(semantic.add_program(), 0))
    acc.destroy_context(ctx)


def test_user_api_writes_into_the_callers_arrays():
    with ironaccel.open("cpu") as dev:
        exe = dev.compile(semantic.add_program(4))
        a = np.arange(4, dtype=np.float32)
        y = np.zeros(4, np.float32)
        run = exe.submit(a, a, out=y)
        (got,) = run.wait(30)
        assert got is y
        np.testing.assert_array_equal(y, 2 * a)
        (again,) = exe(a, np.ones(4, np.float32), out=[y])
        assert again is y and y.tolist() == [1, 2, 3, 4]
        kept = dev.accelerator.live_resources()["buffer"]  # the executable keeps a finished call's buffers
        assert kept <= 3
        for bad in (np.zeros(5, np.float32), np.zeros(4, np.float64), np.zeros(8, np.float32)[::2], [y, y]):
            with pytest.raises(InvalidArgument, match="out"):
                exe(a, a, out=bad)
        assert dev.accelerator.live_resources()["buffer"] == kept  # refused before anything was allocated
        exe.close()
        assert dev.accelerator.live_resources()["buffer"] == 0


def test_calls_reuse_their_buffers_and_close_frees_them():
    with ironaccel.open("cpu") as dev:
        exe = dev.compile(semantic.add_program(4))
        a = np.arange(4, dtype=np.float32)
        runs = [exe.submit(a, a) for _ in range(5)]  # five calls in flight: five buffer sets
        assert dev.accelerator.live_resources()["buffer"] == 15
        for run in runs:
            np.testing.assert_array_equal(run.wait(30)[0], 2 * a)
        assert dev.accelerator.live_resources()["buffer"] == 3 * SPARE_SETS  # the rest were freed
        for _ in range(10):
            np.testing.assert_array_equal(exe.submit(a, a).wait(30)[0], 2 * a)
        assert dev.accelerator.live_resources()["buffer"] == 3 * SPARE_SETS  # reused, none made
        exe.close()
        assert dev.accelerator.live_resources()["buffer"] == 0
