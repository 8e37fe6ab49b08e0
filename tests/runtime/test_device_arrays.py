"""DeviceArrays: tensors that stay on their device. Calls bind them in place, so a chain of calls whose
outputs feed the next call's inputs moves nothing through the host; the accelerator's transfer calls are
counted to show it, on the CPU, on Vulkan (lavapipe), through a virtio device, and for buffers alone on the
kit's ``null`` device (which runs no program). DLPack shares a CPU buffer's memory without a copy and is
refused where the buffer is not memory of this process.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import ml_dtypes
import numpy as np
import pytest

import ironaccel as ia
from ironaccel.backends.vulkan import instance
from ironaccel.core.errors import InvalidArgument
from ironaccel.runtime import DeviceArray, MemoryDomain, reclaim
from ironaccel.runtime.device_array import resident_domain
from ironaccel.tosa import DType, Op, ProgramBuilder, write
from virtio_guest import Host
from vulkan_fixtures import open_test_device

N = 8
RUNS = ["cpu", "vulkan:llvmpipe"]
BUFFERS = [*RUNS, "null"]


def _binary(op: Op, n: int = N) -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (n,), DType.FP32)
    y = b.input("y", (n,), DType.FP32)
    b.output(b.op(op, [x, y]))
    return write(b.build())


def _two_outputs() -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (N,), DType.FP32)
    y = b.input("y", (N,), DType.FP32)
    b.output(b.op(Op.SUB, [x, y]), b.op(Op.ADD, [x, y]))
    return write(b.build())


class Transfers:
    """Counts the accelerator's write_buffer and read_buffer calls (every host transfer of the user API)."""

    def __init__(self, acc, monkeypatch: pytest.MonkeyPatch) -> None:
        self.writes = self.reads = 0
        write_buffer, read_buffer = acc.write_buffer, acc.read_buffer

        def counted_write(*args, **kwargs):
            self.writes += 1
            return write_buffer(*args, **kwargs)

        def counted_read(*args, **kwargs):
            self.reads += 1
            return read_buffer(*args, **kwargs)

        monkeypatch.setattr(acc, "write_buffer", counted_write)
        monkeypatch.setattr(acc, "read_buffer", counted_read)

    def reset(self) -> None:
        self.writes = self.reads = 0

    @property
    def counts(self) -> tuple[int, int]:
        return self.writes, self.reads


def _live(dev) -> dict[str, int]:
    return {k: v for k, v in dev.accelerator.live_resources().items() if v}


@pytest.fixture(autouse=True)
def no_layer_messages() -> Iterator[None]:
    """Vulkan's validation layers (with synchronization validation where enabled) report nothing."""
    instance.clear_validation_messages()
    yield
    messages = instance.validation_messages()
    instance.clear_validation_messages()
    assert not messages, "Vulkan layers reported:\n" + "\n".join(map(str, messages))


@pytest.fixture(params=RUNS)
def dev(request) -> Iterator[ia.runtime.Device]:
    device = open_test_device(request.param)
    yield device
    device.close()


@pytest.fixture(params=BUFFERS)
def any_dev(request) -> Iterator[ia.runtime.Device]:
    device = open_test_device(request.param)
    yield device
    device.close()


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)


# ---- buffers alone (every device, null included) -------------------------------------------------------
def test_an_array_goes_up_once_and_comes_back_unchanged(any_dev, monkeypatch):
    transfers = Transfers(any_dev.accelerator, monkeypatch)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = any_dev.array(x)
    assert transfers.counts == (1, 0)
    assert isinstance(d, DeviceArray) and d.device is any_dev
    assert (d.shape, d.dtype, d.nbytes) == ((3, 4), np.dtype(np.float32), 48)
    assert repr(d) == f"<DeviceArray float32[3, 4] on {any_dev.name}>"
    np.testing.assert_array_equal(d.numpy(), x)
    np.testing.assert_array_equal(np.asarray(d), x)
    assert transfers.counts == (1, 2)  # each read is one transfer into a new array
    assert d.numpy() is not d.numpy()


def test_arrays_of_every_storage_dtype_and_shape_round_trip(any_dev):
    cases = [
        np.array(3.5, np.float32),  # rank 0
        np.zeros((0, 3), np.int8),  # no elements: nothing to move
        np.arange(6, dtype=np.int32)[::2],  # not contiguous
        np.linspace(-2, 2, 7).astype(ml_dtypes.bfloat16),
        np.array([True, False, True]),
        [[1, 2], [3, 4]],  # anything np.asarray takes
    ]
    for value in cases:
        d = any_dev.array(value)
        back = d.numpy()
        expected = np.asarray(value)
        assert back.dtype == expected.dtype and back.shape == expected.shape
        np.testing.assert_array_equal(back.astype(np.float64), expected.astype(np.float64))
        d.close()
    assert any_dev.array([1, 2], dtype=np.float16).dtype == np.float16
    assert any_dev.array([1, 2], dtype=DType.BF16).dtype == ml_dtypes.bfloat16


def test_empty_makes_an_uninitialised_array_and_host_empty_a_host_one(any_dev):
    d = any_dev.empty((2, 5), DType.FP16)
    assert (d.shape, d.dtype, d.nbytes) == ((2, 5), np.dtype(np.float16), 20)
    assert d.numpy().shape == (2, 5)
    staging = any_dev.host_empty((2, 5), np.float16)
    assert type(staging) is np.ndarray and staging.shape == (2, 5)
    with pytest.raises(InvalidArgument, match="negative"):
        any_dev.empty((-1,), np.float32)


def test_arrays_live_in_device_memory_where_the_device_has_some(any_dev):
    assert MemoryDomain.DEVICE in any_dev.info.domains
    assert resident_domain(any_dev.info) is MemoryDomain.DEVICE
    assert any_dev.array([1.0]).buffer.info.domain is MemoryDomain.DEVICE
    info = type(any_dev.info)
    offered = info("d", "k", "v", domains=frozenset({MemoryDomain.HOST, MemoryDomain.SHARED}))
    assert resident_domain(offered) is MemoryDomain.SHARED
    assert resident_domain(info("d", "k", "v", domains=frozenset({MemoryDomain.HOST}))) is MemoryDomain.HOST


def test_close_with_and_collection_free_the_buffer(any_dev):
    baseline = _live(any_dev)
    d = any_dev.array(np.ones(16, np.float32))
    assert _live(any_dev)["buffer"] == baseline.get("buffer", 0) + 1
    d.close()
    d.close()  # idempotent
    assert _live(any_dev) == baseline
    assert repr(d).endswith("closed>") and d.closed
    with pytest.raises(InvalidArgument, match="closed"):
        d.numpy()
    with any_dev.array(np.ones(4, np.float32)) as e:
        assert not e.closed
    assert e.closed and _live(any_dev) == baseline
    for _ in range(200):
        any_dev.array(np.ones(64, np.float32))  # dropped at once
    cycle = [any_dev.empty((4,), np.float32)]
    cycle.append(cycle)
    del cycle
    gc.collect()
    assert reclaim.settle(10)
    assert _live(any_dev) == baseline


def test_closing_the_device_frees_its_arrays():
    dev = ia.open("cpu")
    d = dev.array(np.ones(4, np.float32))
    dev.close()
    assert d.closed
    assert _live(dev) == {}
    with pytest.raises(InvalidArgument, match="closed"):
        dev.array([1.0])
    with pytest.raises(InvalidArgument, match="closed"):
        d.numpy()


# ---- calls --------------------------------------------------------------------------------------------
def test_outputs_fed_to_the_next_call_never_leave_the_device(dev, monkeypatch):
    add, sub = dev.compile(_binary(Op.ADD)), dev.compile(_binary(Op.SUB))
    x, y = _data()
    transfers = Transfers(dev.accelerator, monkeypatch)
    dx, dy = dev.array(x), dev.array(y)
    assert transfers.counts == (2, 0)
    transfers.reset()
    (s,) = add(dx, dy)  # device in, device out
    assert isinstance(s, DeviceArray) and s.device is dev and s.shape == (N,)
    (p,) = sub(s, dx)
    (q,) = add(p, s)
    (r,) = sub.submit(q, dy).wait()
    assert transfers.counts == (0, 0)
    np.testing.assert_allclose(r.numpy(), ((x + y) - x + (x + y)) - y, rtol=1e-6)
    assert transfers.counts == (0, 1)


def _host_reads(dev) -> bool:
    """Whether the device's programs read host memory as it is (the CPU backend runs a call directly on the
    arrays' memory: no transfer at all), rather than through transfers into its buffers."""
    return dev.accelerator.device_info().kind == "cpu"


def test_numpy_calls_are_unchanged_and_mixed_calls_write_only_the_host_inputs(dev, monkeypatch):
    add = dev.compile(_binary(Op.ADD))
    x, y = _data(1)
    (plain,) = add(x, y)
    assert type(plain) is np.ndarray
    dx = dev.array(x)
    transfers = Transfers(dev.accelerator, monkeypatch)
    writes = 0 if _host_reads(dev) else 1
    (mixed,) = add(dx, y)
    assert isinstance(mixed, DeviceArray) and transfers.counts == (writes, 0)
    (named,) = add(x=y, y=dx)
    assert isinstance(named, DeviceArray) and transfers.counts == (2 * writes, 0)
    np.testing.assert_allclose(mixed.numpy(), x + y, rtol=1e-6)
    np.testing.assert_allclose(add.run_named({"x": dx, "y": dx})[add.outputs[0].name].numpy(), 2 * x, rtol=1e-6)


def test_out_device_arrays_receive_the_outputs_in_place(dev, monkeypatch):
    two = dev.compile(_two_outputs())
    x, y = _data(2)
    dx, dy = dev.array(x), dev.array(y)
    diff, total = dev.empty((N,), np.float32), dev.empty((N,), np.float32)
    transfers = Transfers(dev.accelerator, monkeypatch)
    got = two(dx, dy, out=[diff, total])
    assert got[0] is diff and got[1] is total and transfers.counts == (0, 0)
    got = two(x, y, out=[diff, total])  # numpy in, device out: the inputs are written, nothing is read
    writes = 0 if _host_reads(dev) else 2
    assert got[0] is diff and transfers.counts == (writes, 0)
    host = np.empty(N, np.float32)
    run = two.submit(dx, dy, out=[host, total])  # mixed out: only the numpy one is read back
    got = run.wait()
    assert got[0] is host and got[1] is total and transfers.counts == (writes, 1)
    np.testing.assert_allclose(host, x - y, rtol=1e-6)
    np.testing.assert_allclose(total.numpy(), x + y, rtol=1e-6)
    add = dev.compile(_binary(Op.ADD))
    (single,) = add(dx, dy, out=diff)  # one array for one output
    assert single is diff
    np.testing.assert_allclose(diff.numpy(), x + y, rtol=1e-6)


def test_submitted_calls_with_arrays_and_runs_dropped_unwaited_leave_nothing(dev):
    baseline = _live(dev)
    add = dev.compile(_binary(Op.ADD))
    x, y = _data(3)
    dx, dy = dev.array(x), dev.array(y)
    runs = [add.submit(dx, dy, timeout=30) for _ in range(3)]
    outs = [run.wait()[0] for run in runs]
    for out in outs:
        np.testing.assert_allclose(out.numpy(), x + y, rtol=1e-6)
    for _ in range(20):
        add.submit(dx, dy)  # dropped unwaited: its output array and the call's buffers go back once it ends
        add(dx, dy)
    add.close()
    del runs, outs, out, dx, dy
    gc.collect()
    assert reclaim.settle(10)
    assert _live(dev) == baseline


def test_wrong_shapes_and_dtypes_are_refused_as_for_numpy_inputs(dev):
    add = dev.compile(_binary(Op.ADD))
    for bad in (np.ones(N, np.float64), np.ones(N + 1, np.float32), np.ones((N, 1), np.float32)):
        with pytest.raises(InvalidArgument) as host:
            add(bad, np.ones(N, np.float32))
        with pytest.raises(InvalidArgument) as device:
            add(dev.array(bad), dev.array(np.ones(N, np.float32)))
        assert str(device.value) == str(host.value)
    dx = dev.array(np.ones(N, np.float32))
    with pytest.raises(InvalidArgument, match=r"out\[0\] must be a float32 array of shape \(8,\)"):
        add(dx, dx, out=dev.empty((N,), np.int32))
    with pytest.raises(InvalidArgument, match=r"out\[0\].*also an input"):
        add(dx, dx, out=dx)
    closed = dev.array(np.ones(N, np.float32))
    closed.close()
    with pytest.raises(InvalidArgument, match=r"input 1: .*closed"):
        add(dx, closed)


def test_an_array_of_another_device_is_refused_naming_both(dev):
    add = dev.compile(_binary(Op.ADD))
    with ia.open("cpu") as other:
        foreign = other.array(np.ones(N, np.float32))
        mine = dev.array(np.ones(N, np.float32))
        with pytest.raises(InvalidArgument, match=r"input 1 is a DeviceArray of <Device cpu.*this executable runs on"):
            add(mine, foreign)
        with pytest.raises(InvalidArgument, match=r"out\[0\] is a DeviceArray of <Device cpu") as caught:
            add(mine, mine, out=other.empty((N,), np.float32))
        assert repr(dev) in str(caught.value)


# ---- DLPack -------------------------------------------------------------------------------------------
def test_dlpack_shares_a_cpu_buffer_without_a_copy():
    with ia.open("cpu") as dev:
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        d = dev.array(x)
        assert d.__dlpack_device__() == (1, 0)  # kDLCPU
        view = np.from_dlpack(d)
        np.testing.assert_array_equal(view, x)
        view[0, 0] = 42.0  # the buffer's own memory
        assert d.numpy()[0, 0] == 42.0
        add = dev.compile(_binary(Op.ADD, 6))
        (s,) = add(dev.array(np.ones(6, np.float32)), dev.array(np.ones(6, np.float32)))
        np.testing.assert_array_equal(np.from_dlpack(s), np.full(6, 2, np.float32))
        kept = np.from_dlpack(s)
        del s
        gc.collect()
        np.testing.assert_array_equal(kept, np.full(6, 2, np.float32))  # the capsule keeps the memory
        with pytest.raises(BufferError, match="stream"):
            d.__dlpack__(stream=1)


def test_dlpack_is_refused_where_the_buffer_is_not_memory_of_this_process():
    for spec in ("vulkan:llvmpipe", "null"):
        try:
            dev = ia.open(spec)
        except ia.IronAccelError:
            continue
        with dev:
            d = dev.array(np.ones(3, np.float32))
            for export in (np.from_dlpack, type(d).__dlpack__, type(d).__dlpack_device__):
                with pytest.raises(BufferError, match=r"use \.numpy\(\)"):
                    export(d)


# ---- through virtio -----------------------------------------------------------------------------------
@pytest.fixture
def served(tmp_path) -> Iterator[Host]:
    host = Host(str(tmp_path / "accel.sock"))
    yield host
    host.stop()


def test_a_chained_call_through_virtio_moves_no_resident_tensor(served, monkeypatch):
    with ia.open(f"virtio:{served.path}") as dev:
        guest = dev.accelerator
        commands = {"write": 0, "read": 0}
        write, read = guest._write, guest._read

        def counted_write(*args):
            commands["write"] += 1
            return write(*args)

        def counted_read(*args):
            commands["read"] += 1
            return read(*args)

        monkeypatch.setattr(guest, "_write", counted_write)
        monkeypatch.setattr(guest, "_read", counted_read)
        add, sub = dev.compile(_binary(Op.ADD)), dev.compile(_binary(Op.SUB))
        x, y = _data(4)
        dx, dy = dev.array(x), dev.array(y)
        assert commands == {"write": 2, "read": 0}
        (s,) = add(dx, dy)
        (p,) = sub(s, dx)
        (q,) = add.submit(p, s).wait(30)
        assert commands == {"write": 2, "read": 0}  # no WRITE_BUFFER or READ_BUFFER for the chain
        np.testing.assert_allclose(q.numpy(), (x + y) - x + (x + y), rtol=1e-6)
        assert commands == {"write": 2, "read": 1}
        with pytest.raises(BufferError):
            np.from_dlpack(q)
        add.close()
        sub.close()
        del s, p, q, dx, dy
        gc.collect()
        assert reclaim.settle(10)
        (session,) = served.engine.sessions  # the device's books agree: nothing but the context and queue
        counts = session.live_objects()
        assert (counts.programs, counts.buffers, counts.events) == (0, 0, 0), counts
