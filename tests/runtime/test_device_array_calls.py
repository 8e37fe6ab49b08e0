"""Calls on DeviceArrays take the fast paths (ADR 0039): a direct run on the arrays' own memory on the CPU,
and on Vulkan (lavapipe) a launch of a submission prepared on exactly the call's buffers, kept per
executable in a small cache. Each gives what the queue path gives (a call with a ``timeout`` always takes
the queue), keeps calls in order, and releases its prepared launches when an array they bind is closed or
collected, when they are evicted, and when the executable or the device closes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import numpy as np
import pytest

import ironaccel as ia
from ironaccel.backends.vulkan import instance
from ironaccel.core.errors import InvalidArgument
from ironaccel.runtime import DeviceArray, reclaim
from ironaccel.runtime.resident_calls import CACHED
from ironaccel.tosa import DType, Op, ProgramBuilder, write
from vulkan_fixtures import open_test_device

N = 8
RUNS = ["cpu", "vulkan:llvmpipe"]


def _binary(op: Op) -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (N,), DType.FP32)
    y = b.input("y", (N,), DType.FP32)
    b.output(b.op(op, [x, y]))
    return write(b.build())


def _live(dev) -> dict[str, int]:
    return {k: v for k, v in dev.accelerator.live_resources().items() if v}


def _settled_live(dev) -> dict[str, int]:
    gc.collect()
    assert reclaim.settle(10)
    return _live(dev)


class Paths:
    """Counts the accelerator's direct runs, launches and submissions (which path each call took)."""

    def __init__(self, acc, monkeypatch: pytest.MonkeyPatch) -> None:
        self.counts = {"run_direct": 0, "launch": 0, "submit": 0}
        for name in self.counts:
            original = getattr(acc, name)

            def counted(*args, _name=name, _original=original, **kwargs):
                self.counts[_name] += 1
                return _original(*args, **kwargs)

            monkeypatch.setattr(acc, name, counted)

    def take(self) -> dict[str, int]:
        counts = {k: v for k, v in self.counts.items() if v}
        self.counts = dict.fromkeys(self.counts, 0)
        return counts


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


def _launches(dev) -> bool:
    return dev.accelerator.launches_natively


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)


def _chain(dev, add, sub, x: np.ndarray, y: np.ndarray, queue: bool) -> np.ndarray:
    """Ten rounds of outputs fed back as inputs, on two arrays rotating through three; ``queue``: every
    call with a timeout, which takes the queue path."""

    def call(exe, *args, out):
        if queue:
            return exe.submit(*args, out=out, timeout=30).wait()
        return exe(*args, out=out)

    a, b, c = dev.array(x), dev.array(y), dev.empty((N,), np.float32)
    for _ in range(10):
        call(add, a, b, out=[c])  # c = a + b
        call(sub, c, a, out=[b])  # b = c - a
        a, c = c, a
    return a.numpy() + b.numpy()


def _reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    a, b = x.copy(), y.copy()
    for _ in range(10):
        c = a + b
        b = c - a
        a = c
    return a + b


def test_chains_of_calls_on_the_fast_paths_give_what_the_queue_gives(dev, monkeypatch):
    add, sub = dev.compile(_binary(Op.ADD)), dev.compile(_binary(Op.SUB))
    x, y = _data(0)
    paths = Paths(dev.accelerator, monkeypatch)
    queued = _chain(dev, add, sub, x, y, queue=True)
    assert paths.take() == {"submit": 20}
    fast = _chain(dev, add, sub, x, y, queue=False)
    counts = paths.take()
    if _launches(dev):
        # The rotation makes two binding sets per executable, each submitted the first time it comes and
        # launched from then on.
        assert counts == {"submit": 4, "launch": 16}, counts
    else:
        assert counts == {"run_direct": 20}, counts
    np.testing.assert_array_equal(fast, queued)
    np.testing.assert_allclose(fast, _reference(x, y), rtol=1e-5)


def test_mixed_numpy_and_device_arrays_give_what_the_queue_gives(dev):
    add = dev.compile(_binary(Op.ADD))
    x, _ = _data(1)
    dx, out = dev.array(x), dev.empty((N,), np.float32)
    for seed in range(4):  # the same binding set again and again, with new host data each time
        host = np.full(N, seed, np.float32)
        add(host, dx, out=[out])
        np.testing.assert_array_equal(out.numpy(), host + x)
        (got,) = add(dx, host)  # a new DeviceArray each time: device in, device out
        assert isinstance(got, DeviceArray)
        np.testing.assert_array_equal(got.numpy(), x + host)
        numpy_out = np.empty(N, np.float32)
        assert add(dx, host, out=[numpy_out])[0] is numpy_out
        np.testing.assert_array_equal(numpy_out, x + host)
        (queued,) = add.submit(host, dx, out=[np.empty(N, np.float32)], timeout=30).wait()
        np.testing.assert_array_equal(queued, host + x)
    (both,) = add(dx, dx)
    np.testing.assert_array_equal(both.numpy(), 2 * x)


def test_a_call_reads_what_an_unwaited_call_before_it_writes(dev):
    add = dev.compile(_binary(Op.ADD))
    x, y = _data(2)
    dx, dy = dev.array(x), dev.array(y)
    first, second = dev.empty((N,), np.float32), dev.empty((N,), np.float32)
    for _ in range(3):  # the launch path's sets exist from the third round on
        runs = [add.submit(dx, dy, out=[first])]  # not waited for
        add(first, dy, out=[second])  # ordered after it: on the CPU, through the queue
        runs.append(add.submit(second, dx, out=[first], timeout=30))  # a queue submission after a launch
        add(first, first, out=[second])
        for run in runs:
            run.wait()
        np.testing.assert_allclose(second.numpy(), 2 * (x + 2 * y + x), rtol=1e-6)


def test_a_closed_array_releases_the_launch_prepared_on_it(dev):
    add = dev.compile(_binary(Op.ADD))
    dx, dy = dev.array(np.ones(N, np.float32)), dev.array(np.ones(N, np.float32))
    add(dx, dy, out=[dev.empty((N,), np.float32)])  # the executable's own buffers, where it keeps any
    baseline = _settled_live(dev)
    out = dev.empty((N,), np.float32)
    for _ in range(3):
        add(dx, dy, out=[out])
    live = _live(dev)
    assert live.get("prepared", 0) == baseline.get("prepared", 0) + _launches(dev)
    out.close()
    assert out.closed
    with pytest.raises(InvalidArgument, match="closed"):
        add(dx, dy, out=[out])
    assert _live(dev) == baseline
    for _ in range(3):  # collection does the same
        add(dx, dy, out=[dev.empty((N,), np.float32)])
        kept = dev.empty((N,), np.float32)
        add(dx, dy, out=[kept])
        add(dx, dy, out=[kept])
        del kept
        assert _settled_live(dev) == baseline


def test_an_array_closed_while_a_call_on_it_runs_is_freed_after_it(dev):
    add = dev.compile(_binary(Op.ADD))
    dx, dy = dev.array(np.ones(N, np.float32)), dev.array(np.ones(N, np.float32))
    baseline = _settled_live(dev)
    out = dev.empty((N,), np.float32)
    for _ in range(3):
        add(dx, dy, out=[out])
    run = add.submit(dx, dy, out=[out])
    out.close()  # the launch still binds it: freed once it ended
    (got,) = run.wait()
    assert got is out
    del run, got, out
    add.close()
    assert _settled_live(dev) == {k: v for k, v in baseline.items() if k != "program"}


def test_binding_sets_are_evicted_beyond_the_cache(dev):
    add = dev.compile(_binary(Op.ADD))
    dx = dev.array(np.arange(N, dtype=np.float32))
    add(dx, dx, out=[dev.empty((N,), np.float32)])
    baseline = _settled_live(dev)
    outs = [dev.empty((N,), np.float32) for _ in range(CACHED + 3)]
    for out in outs:
        for _ in range(2):
            add(dx, dx, out=[out])
        np.testing.assert_array_equal(out.numpy(), 2 * np.arange(N, dtype=np.float32))
    kept = CACHED if _launches(dev) else 0
    live = _live(dev)
    assert live.get("prepared", 0) == baseline.get("prepared", 0) + kept
    assert live["buffer"] == baseline["buffer"] + len(outs)  # the sets have no buffers of their own here
    if _launches(dev):
        assert len(add._held.resident.idle) == CACHED
        assert set(add._held.resident.idle) == {(dx.buffer, dx.buffer, o.buffer) for o in outs[-CACHED:]}
    for out in outs:
        out.close()
    assert _live(dev) == baseline


def test_closing_the_executable_or_the_device_releases_its_sets(dev):
    x, y = _data(3)
    dx, out = dev.array(x), dev.empty((N,), np.float32)
    baseline = _settled_live(dev)
    add = dev.compile(_binary(Op.ADD))
    for _ in range(3):
        add(y, dx, out=[out])  # a set with a buffer of its own for the numpy input
    add.close()
    assert _live(dev) == baseline
    np.testing.assert_array_equal(out.numpy(), x + y)
    with pytest.raises(ia.IronAccelError, match="stale"):  # as a closed executable's calls always were
        add(y, dx, out=[out])
    again = dev.compile(_binary(Op.SUB))
    for _ in range(3):
        again(dx, dx, out=[out])
    accelerator = dev.accelerator
    dev.close()
    assert {k: v for k, v in accelerator.live_resources().items() if v} == {}


def test_refusals_are_those_of_the_queue_path_once_sets_are_kept(dev):
    add = dev.compile(_binary(Op.ADD))
    dx, dy, out = dev.array(np.ones(N, np.float32)), dev.array(np.ones(N, np.float32)), dev.empty((N,), np.float32)
    for _ in range(3):
        add(dx, dy, out=[out])
    with pytest.raises(InvalidArgument, match=r"out\[0\].*also an input"):
        add(dx, out, out=[out])
    with pytest.raises(InvalidArgument, match=r"out\[1\]|program has 1 output"):
        add(dx, dy, out=[out, out])
    dy.close()
    with pytest.raises(InvalidArgument, match=r"input 1: .*closed"):
        add(dx, dy, out=[out])
    with ia.open("cpu") as other:
        with pytest.raises(InvalidArgument, match=r"input 1 is a DeviceArray of <Device cpu"):
            add(dx, other.array(np.ones(N, np.float32)), out=[out])
    add(dx, dx, out=[out])
    np.testing.assert_array_equal(out.numpy(), np.full(N, 2, np.float32))
