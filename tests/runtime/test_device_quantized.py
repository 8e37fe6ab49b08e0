"""NVFP4 weights uploaded once: ``Device.array(q)`` writes the three parts of ``nvfp4.quantize(w)`` to the
device as a DeviceQuantizedWeights, which projections' calls bind in place of their weight inputs. On the
CPU and on Vulkan (lavapipe, skipped where absent): results equal to the call with numpy weights, only the
activation's bytes written per call (the accelerator's write_buffer counted), numpy outputs for numpy
activations, shapes and placement checked with clear messages, and the buffers freed by close, ``with``
and collection.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import numpy as np
import pytest

import ironaccel as ia
from ironaccel import nvfp4
from ironaccel.backends.vulkan import instance
from ironaccel.core.errors import InvalidArgument
from ironaccel.runtime import DeviceArray, reclaim
from ironaccel.runtime.device_array import DeviceQuantizedWeights
from vulkan_fixtures import DEVICE, open_test_device

M, N, K = 4, 48, 96


class Writes:
    """The sizes of the accelerator's write_buffer calls (every host-to-device transfer of the user API)."""

    def __init__(self, acc, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        self.reads = 0
        write_buffer, read_buffer = acc.write_buffer, acc.read_buffer

        def spied_write(buffer, offset, data):
            self.sizes.append(memoryview(data).nbytes)
            return write_buffer(buffer, offset, data)

        def spied_read(*args, **kwargs):
            self.reads += 1
            return read_buffer(*args, **kwargs)

        monkeypatch.setattr(acc, "write_buffer", spied_write)
        monkeypatch.setattr(acc, "read_buffer", spied_read)

    def reset(self) -> None:
        self.sizes, self.reads = [], 0


@pytest.fixture(autouse=True)
def no_layer_messages() -> Iterator[None]:
    """Vulkan's validation layers (with synchronization validation where enabled) report nothing."""
    instance.clear_validation_messages()
    yield
    messages = instance.validation_messages()
    instance.clear_validation_messages()
    assert not messages, "Vulkan layers reported:\n" + "\n".join(map(str, messages))


@pytest.fixture(params=["cpu", DEVICE])
def dev(request) -> Iterator[ia.runtime.Device]:
    device = open_test_device(request.param)
    yield device
    device.close()


def _live(dev) -> dict[str, int]:
    return {k: v for k, v in dev.accelerator.live_resources().items() if v}


def _weights(seed: int, *shape: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 0.05).astype(np.float32)


def _x(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_weights_go_up_once_and_calls_write_only_the_activation(dev, monkeypatch):
    q = nvfp4.quantize(_weights(0, N, K))
    exe = dev.compile(nvfp4.Projection(m=M, n=N, k=K, activation="silu"))
    writes = Writes(dev.accelerator, monkeypatch)
    dq = dev.array(q)
    assert isinstance(dq, DeviceQuantizedWeights) and dq.device is dev
    assert sorted(writes.sizes) == sorted([q.packed.nbytes, q.scales.nbytes, 4])
    assert (dq.n, dq.k, dq.lead, dq.nbytes) == (N, K, (), sum(writes.sizes))
    assert repr(dq) == f"<DeviceQuantizedWeights NVFP4 (n={N}, k={K}) on {dev.name}>"
    # The CPU backend runs the call directly on the arrays' memory: nothing crosses at all.
    direct = dev.accelerator.device_info().kind == "cpu"
    for seed in range(3):
        x = _x(seed, M, K)
        (want,) = exe(x, q.packed, q.scales, q.tensor_scale)
        writes.reset()
        (y,) = exe(x, dq)
        assert writes.sizes == ([] if direct else [x.nbytes])  # the activation alone: no weight byte crosses again
        assert writes.reads == (0 if direct else 1)  # y, read back: numpy activations give numpy outputs
        assert type(y) is np.ndarray
        np.testing.assert_array_equal(y, want)
    writes.reset()
    (y,) = exe(x=x, weights=dq)  # by name: "weights" stands for packed, scales and tensor_scale
    np.testing.assert_array_equal(y, want)
    (y,) = exe({"x": x, "weights": dq})
    np.testing.assert_array_equal(y, want)
    assert writes.sizes == ([] if direct else [x.nbytes, x.nbytes])


def test_a_device_activation_gives_device_outputs(dev, monkeypatch):
    q = nvfp4.quantize(_weights(1, N, K))
    exe = dev.compile(nvfp4.Projection(m=M, n=N, k=K))
    x = _x(1, M, K)
    (want,) = exe(x, *q.operands)
    dq, dx = dev.array(q), dev.array(x)
    writes = Writes(dev.accelerator, monkeypatch)
    (y,) = exe(dx, dq)
    assert type(y) is DeviceArray and (writes.sizes, writes.reads) == ([], 0)
    np.testing.assert_array_equal(y.numpy(), want)
    out = np.empty((M, N), np.float32)
    exe.submit(x, dq, out=out).wait()  # out= as ever
    np.testing.assert_array_equal(out, want)


def test_batched_and_expert_weights(dev):
    batch, experts = 3, 2
    stack = nvfp4.quantize(_weights(2, batch, N, K))
    batched = dev.compile(nvfp4.BatchedProjection(batch=batch, n=N, k=K, activation="sigmoid"))
    x = _x(2, batch, K)
    (want,) = batched(x, *stack.operands)
    with dev.array(stack) as dstack:
        assert dstack.lead == (batch,) and repr(dstack).startswith(f"<DeviceQuantizedWeights NVFP4 [{batch}] x ")
        np.testing.assert_array_equal(batched(x, dstack)[0], want)
    qs = [nvfp4.quantize(_weights(3 + e, N, K)) for e in range(experts)]
    expert = dev.compile(nvfp4.ExpertProjection(experts=experts, m=M, n=N, k=K))
    xe = _x(3, experts, M, K)
    (want,) = expert(xe, *qs[0].operands, *qs[1].operands)
    d0, d1 = (dev.array(q) for q in qs)
    np.testing.assert_array_equal(expert(xe, d0, d1)[0], want)
    np.testing.assert_array_equal(expert(xe, d0, *qs[1].operands)[0], want)  # mixed with numpy weights
    np.testing.assert_array_equal(expert(x=xe, expert0=d0, expert1=d1)[0], want)
    (swapped,) = expert(xe, d1, d0)  # the same object may fill any expert's slots
    (want_swapped,) = expert(xe, *qs[1].operands, *qs[0].operands)
    np.testing.assert_array_equal(swapped, want_swapped)


def test_to_host_gives_the_quantized_weights_back(dev):
    for w in (_weights(4, N, K), _weights(5, 2, N, K)):
        q = nvfp4.quantize(w)
        back = dev.array(q).to_host()
        assert type(back) is nvfp4.QuantizedWeights
        back.check()
        np.testing.assert_array_equal(back.packed, q.packed)
        np.testing.assert_array_equal(back.scales.view(np.uint8), q.scales.view(np.uint8))
        assert type(back.tensor_scale) is type(q.tensor_scale)
        np.testing.assert_array_equal(back.tensor_scale, q.tensor_scale)
        np.testing.assert_array_equal(nvfp4.dequantize(back), nvfp4.dequantize(q))


def test_weights_that_do_not_fit_are_refused_clearly(dev):
    exe = dev.compile(nvfp4.Projection(m=M, n=N, k=K))
    x = _x(6, M, K)
    narrow = dev.array(nvfp4.quantize(_weights(6, N // 2, K)))
    with pytest.raises(
        InvalidArgument, match=r"input 'packed' must be uint8\[48, 48\], the weights hold uint8\[24, 48\]"
    ):
        exe(x, narrow)
    short = dev.array(nvfp4.quantize(_weights(6, N, K - 16)))
    with pytest.raises(InvalidArgument, match="does not fit this program"):
        exe(x=x, weights=short)
    stacked = dev.array(nvfp4.quantize(_weights(6, 2, N, K)))
    with pytest.raises(
        InvalidArgument, match=r"input 'packed' must be uint8\[48, 48\], the weights hold uint8\[2, 48, 48\]"
    ):
        exe(x, stacked)
    good = dev.array(nvfp4.quantize(_weights(6, N, K)))
    with pytest.raises(InvalidArgument, match="lands on input 0"):
        exe(good, x)
    with pytest.raises(InvalidArgument, match=r"'w' is NVFP4 weights, which fill the inputs 'w\.packed'"):
        exe(x=x, w=good)
    with pytest.raises(InvalidArgument, match="no dtype="):
        dev.array(nvfp4.quantize(_weights(6, N, K)), dtype=np.float32)
    with ia.open("cpu") as other:
        foreign = other.array(nvfp4.quantize(_weights(6, N, K)))
        with pytest.raises(InvalidArgument, match="NVFP4 weights of <Device cpu"):
            exe(x, foreign)
    good.close()
    with pytest.raises(InvalidArgument, match="was closed"):
        exe(x, good)


def test_close_with_and_collection_free_the_buffers(dev):
    exe = dev.compile(nvfp4.Projection(m=M, n=N, k=K))
    exe(_x(7, M, K), dev.array(nvfp4.quantize(_weights(7, N, K))))  # the call set now exists
    baseline = _live(dev)
    q = nvfp4.quantize(_weights(7, N, K))
    dq = dev.array(q)
    assert _live(dev)["buffer"] == baseline.get("buffer", 0) + 3
    dq.close()
    dq.close()  # idempotent
    assert dq.closed and repr(dq).endswith("closed>") and _live(dev) == baseline
    with dev.array(q) as dq:
        exe(_x(7, M, K), dq)
    assert dq.closed and _live(dev) == baseline
    for _ in range(20):
        exe(_x(7, M, K), dev.array(q))  # dropped after the call
    cycle: list[object] = [dev.array(q)]
    cycle.append(cycle)
    del cycle, dq
    gc.collect()
    assert reclaim.settle(10)
    assert _live(dev) == baseline
