"""What the user API hands out is released when its user drops it: executables, runs and devices, on
the CPU, on Vulkan (lavapipe) and through a virtio daemon, with no ``close()`` anywhere; ``with`` and
``close()`` release at once and are idempotent.

The books checked are the accelerator's own (``live_resources()``) and, through virtio, the device
engine's per-guest counts, whose quota (64 programs per context) a leak would hit within one loop.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

import ironaccel as ia
from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.runtime import reclaim
from ironaccel.tosa import DType, Op, ProgramBuilder, write
from virtio_guest import Host
from vulkan_fixtures import open_test_device

CYCLES = 1000
ROOT = Path(__file__).resolve().parents[2]


def _add_program(n: int = 8) -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (n,), DType.FP32)
    y = b.input("y", (n,), DType.FP32)
    b.output(b.op(Op.ADD, [x, y]))
    return write(b.build())


@pytest.fixture
def served(tmp_path):
    host = Host(str(tmp_path / "accel.sock"))
    yield host
    host.stop()


def _open(spec: str, served: Host | None = None) -> ia.runtime.Device:
    if spec == "virtio":
        assert served is not None
        return ia.open(f"virtio:{served.path}")
    return open_test_device(spec)


def _live(dev) -> dict[str, int]:
    return {k: v for k, v in dev.accelerator.live_resources().items() if v}


@pytest.mark.parametrize("spec", ["cpu", "vulkan", "virtio"])
def test_a_thousand_compile_run_drop_cycles_leave_nothing(spec, request):
    served = request.getfixturevalue("served") if spec == "virtio" else None
    dev = _open("vulkan:llvmpipe" if spec == "vulkan" else spec, served)
    program = _add_program()
    x, y = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    baseline = _live(dev)
    for _ in range(CYCLES):
        (out,) = dev.compile(program)(x, y)  # the Executable is dropped at the end of the statement
    np.testing.assert_array_equal(out, x + y)
    gc.collect()
    assert reclaim.settle(10)
    assert _live(dev) == baseline
    if served is not None:  # the guest's books on the host agree: nothing but its context and queue
        (session,) = served.engine.sessions
        counts = session.live_objects()
        assert (counts.programs, counts.buffers, counts.events) == (0, 0, 0), counts
    accelerator = dev.accelerator
    del dev
    gc.collect()
    assert reclaim.settle(10)
    assert _live_of(accelerator) == {}
    if hasattr(accelerator, "close"):
        accelerator.close()


def _live_of(accelerator) -> dict[str, int]:
    return {k: v for k, v in accelerator.live_resources().items() if v}


@pytest.mark.parametrize("spec", ["cpu", "vulkan:llvmpipe"])
def test_runs_dropped_unwaited_give_back_their_buffers_once_their_work_ends(spec):
    dev = open_test_device(spec)
    exe = dev.compile(_add_program())
    x = np.arange(8, dtype=np.float32)
    baseline = _live(dev)
    for _ in range(50):
        exe.submit(x, x)  # never waited for
    gc.collect()
    assert reclaim.settle(10)
    live = _live(dev)
    # At most the two buffer sets the executable keeps for its next calls (and their prepared launches).
    assert live.get("event", 0) == 0
    assert live.get("buffer", 0) <= 2 * 3 and live.get("prepared", 0) <= 2, live
    exe.close()
    assert reclaim.settle(10)
    assert _live(dev) == {k: v for k, v in baseline.items() if k != "program"}
    dev.close()


def test_with_and_close_release_at_once_and_close_twice_is_harmless():
    with ia.open("cpu") as dev:
        x = np.arange(8, dtype=np.float32)
        with dev.compile(_add_program()) as exe:
            with exe.submit(x, x) as run:
                (out,) = run.wait()
            run.close()
            np.testing.assert_array_equal(out, 2 * x)
            assert _live(dev)["program"] == 1
        assert "program" not in _live(dev)
        exe.close()
        with pytest.raises(ia.IronAccelError):
            exe.submit(x, x).wait()
        run = dev.compile(_add_program()).submit(x, x)
        run.close()
        run.close()
        with pytest.raises(ia.IronAccelError, match="closed"):
            run.wait()
    assert reclaim.settle(10)
    assert _live(dev) == {}
    dev.close()
    with pytest.raises(ia.IronAccelError, match="closed"):
        dev.compile(_add_program())


def test_an_executable_kept_alive_by_a_pending_run_is_released_after_it():
    dev = ia.open("cpu")
    exe = dev.compile(_add_program())
    x = np.arange(8, dtype=np.float32)
    run = exe.submit(x, x)
    del exe
    gc.collect()
    (out,) = run.wait()  # the run still owns its executable
    np.testing.assert_array_equal(out, 2 * x)
    del run
    assert reclaim.settle(10)
    assert _live(dev) == {"context": 1, "queue": 1}
    dev.close()


def test_executables_in_reference_cycles_are_released_by_the_collector_off_the_collecting_thread():
    dev = ia.open("cpu")
    x = np.arange(8, dtype=np.float32)
    for _ in range(20):
        exe = dev.compile(_add_program())
        exe.cycle = exe  # only the cyclic collector can free it
        exe(x, x)
        del exe
    gc.collect()
    assert reclaim.settle(10)
    assert _live(dev) == {"context": 1, "queue": 1}
    dev.close()


def test_a_device_dropped_with_live_executables_is_released_with_them():
    dev = ia.open("cpu")
    accelerator = dev.accelerator
    exe = dev.compile(_add_program())
    del dev
    gc.collect()
    assert _live_of(accelerator)["program"] == 1  # the executable holds its device
    del exe
    gc.collect()
    assert reclaim.settle(10)
    assert _live_of(accelerator) == {}


def test_the_virtio_accel_corpus_runs_whole_through_one_virtio_device(served):
    """Each case compiled, run and dropped on one device: the guest's quota never fills."""
    from corpus import NAMES, compare, load_case

    if not NAMES:
        pytest.skip("no virtio-accel corpus")
    dev = ia.open(f"virtio:{served.path}")
    for name in NAMES:
        program, inputs, meta = load_case(name)
        (got,) = dev.compile(program)(*inputs)
        compare(got, meta)
    assert reclaim.settle(10)
    assert _live(dev) == {"context": 1, "queue": 1}
    dev.close()
    dev.accelerator.close()


def test_contract_handles_release_in_with_blocks():
    from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, BufferUsage, MemoryDomain

    acc = CpuAccelerator()
    usage = BufferUsage.PROGRAM_INPUT | BufferUsage.PROGRAM_OUTPUT | BufferUsage.TRANSFER_SOURCE
    usage |= BufferUsage.TRANSFER_DESTINATION
    with acc.create_context() as ctx, acc.create_queue(ctx) as queue:
        with acc.load_program(ctx, ArtifactRef(_add_program(), 1 << 30)) as program:
            buffers = [acc.allocate_buffer(ctx, BufferDesc(32, MemoryDomain.HOST, usage)) for _ in range(3)]
            x = np.arange(8, dtype=np.float32)
            acc.write_buffer(buffers[0], 0, x)
            acc.write_buffer(buffers[1], 0, x)
            with acc.prepare(queue, program, [Binding(i, b, 0, 32) for i, b in enumerate(buffers)]) as prepared:
                acc.wait_launch(prepared, acc.launch(prepared), 10)
            assert "prepared" not in _live_of(acc)
            out = np.frombuffer(acc.read_buffer(buffers[2], 0, 32), np.float32)
            np.testing.assert_array_equal(out, 2 * x)
            for buf in buffers:
                buf.release()
    assert _live_of(acc) == {}
