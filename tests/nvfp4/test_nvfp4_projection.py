"""NVFP4 projections through the user API on the CPU backend (the oracle) and on Vulkan (lavapipe, or the
device ``IRONACCEL_TEST_VULKAN_DEVICE`` names): every form and activation against act(x @ dequantize(q).T)
in float64, bindings checked, and backends without NVFP4 refusing the artifact at load with
LoweringError naming it. On Vulkan every test also ends with no validation message and nothing live."""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel import nvfp4
from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.core.errors import InvalidArgument
from ironaccel.runtime import ArtifactRef, Device
from ironaccel.runtime.types import NVFP4_FORMAT, TOSA_FORMAT
from ironaccel.tosa.errors import LoweringError
from vulkan_fixtures import DEVICE, clean, close_without_leaks, open_test_device

__all__ = ["clean"]  # the fixture, used by name

ACTIVATIONS = {
    "none": lambda v: v,
    "silu": lambda v: v / (1 + np.exp(-v)),
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "squared_relu": lambda v: np.maximum(v, 0) ** 2,
}
RTOL = 1e-5


@pytest.fixture(scope="module", params=["cpu", DEVICE])
def dev(request):
    device = open_test_device(request.param)
    yield device
    close_without_leaks(device)


def _assert_close(y: np.ndarray, want: np.ndarray) -> None:
    """Within 1e-5 relative of the float64 oracle (relative to the largest result where an element cancels)."""
    assert y.dtype == np.float32 and y.shape == want.shape
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=RTOL * np.abs(want).max())


def _oracle(x: np.ndarray, w_hat: np.ndarray, activation: str) -> np.ndarray:
    return ACTIVATIONS[activation](x.astype(np.float64) @ w_hat.astype(np.float64).T)


def _weights(rng, *shape) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize(("m", "n", "k"), [(1, 64, 128), (8, 96, 256), (3, 16, 16), (24, 40, 96), (64, 40, 96)])
def test_projection(dev, activation, m, n, k):
    rng = np.random.default_rng(m * n + k)
    q = nvfp4.quantize(_weights(rng, n, k))
    x = rng.standard_normal((m, k)).astype(np.float32)
    exe = dev.compile(nvfp4.Projection(m=m, n=n, k=k, activation=activation))
    (y,) = exe(x, q.packed, q.scales, q.tensor_scale)
    _assert_close(y, _oracle(x, nvfp4.dequantize(q), activation))
    # The queue path (submit) gives the same bits as the direct call.
    (queued,) = exe.submit(x, q.packed, q.scales, q.tensor_scale).wait()
    assert np.array_equal(queued, y)
    exe.close()


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_batched_projection(dev, activation):
    rng = np.random.default_rng(7)
    batch, n, k = 6, 48, 64
    q = nvfp4.quantize(_weights(rng, batch, n, k))  # one matrix per row, each with its own tensor scale
    x = rng.standard_normal((batch, k)).astype(np.float32)
    exe = dev.compile(nvfp4.BatchedProjection(batch=batch, n=n, k=k, activation=activation))
    (y,) = exe(x, q.packed, q.scales, q.tensor_scale)
    w_hat = nvfp4.dequantize(q)
    want = np.stack([_oracle(x[b : b + 1], w_hat[b], activation)[0] for b in range(batch)])
    _assert_close(y, want)
    exe.close()


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_expert_projection(dev, activation):
    rng = np.random.default_rng(11)
    experts, m, n, k = 3, 4, 32, 48
    qs = [nvfp4.quantize(_weights(rng, n, k) * (e + 1)) for e in range(experts)]  # separate arrays
    x = rng.standard_normal((experts, m, k)).astype(np.float32)
    exe = dev.compile(nvfp4.ExpertProjection(experts=experts, m=m, n=n, k=k, activation=activation))
    assert len(exe.inputs) == 1 + 3 * experts
    (y,) = exe(x, *(a for q in qs for a in q.operands))
    want = np.stack([_oracle(x[e], nvfp4.dequantize(qs[e]), activation) for e in range(experts)])
    _assert_close(y, want)
    exe.close()


def test_batched_row_equals_single_projection(dev):
    rng = np.random.default_rng(5)
    q = nvfp4.quantize(_weights(rng, 4, 32, 64))
    x = rng.standard_normal((4, 64)).astype(np.float32)
    batched = dev.compile(nvfp4.BatchedProjection(batch=4, n=32, k=64, activation="silu"))
    single = dev.compile(nvfp4.Projection(m=1, n=32, k=64, activation="silu"))
    (y,) = batched(x, q.packed, q.scales, q.tensor_scale)
    for b in range(4):
        (row,) = single(x[b : b + 1], q.packed[b], q.scales[b], q.tensor_scale[b])
        np.testing.assert_allclose(y[b], row[0], rtol=RTOL, atol=RTOL * np.abs(row).max())
    batched.close()
    single.close()


def test_activations_at_extremes(dev):
    # Large pre-activations: sigmoid saturates to 0 / 1 without overflow, squared_relu stays finite.
    w = np.eye(16, dtype=np.float32) * 4
    q = nvfp4.quantize(w)
    x = np.array([[-1000, -30, -1, 0, 1, 30, 1000, 2, -2, 0.5, -0.5, 3, -3, 100, -100, 7]], np.float32)
    for activation, fn in ACTIVATIONS.items():
        exe = dev.compile(nvfp4.Projection(m=1, n=16, k=16, activation=activation))
        (y,) = exe(x, q.packed, q.scales, q.tensor_scale)
        with np.errstate(over="ignore"):
            _assert_close(y, fn(x.astype(np.float64) * 4))
        exe.close()


def test_compile_accepts_the_serialized_artifact(dev, tmp_path):
    projection = nvfp4.Projection(m=2, n=16, k=32, activation="sigmoid", name="gate")
    path = tmp_path / "gate.nvf4"
    path.write_bytes(projection.to_bytes())
    rng = np.random.default_rng(3)
    q = nvfp4.quantize(_weights(rng, 16, 32))
    x = rng.standard_normal((2, 32)).astype(np.float32)
    results = []
    for source in (projection, projection.to_bytes(), path):
        exe = dev.compile(source)
        results.append(exe(x, q.packed, q.scales, q.tensor_scale)[0])
        exe.close()
    assert all(np.array_equal(results[0], r) for r in results)


def test_wrong_operands_are_refused_naming_the_slot(dev):
    q = nvfp4.quantize(np.ones((16, 32), np.float32))
    x = np.ones((1, 32), np.float32)
    exe = dev.compile(nvfp4.Projection(m=1, n=16, k=32))
    with pytest.raises(InvalidArgument, match="packed"):
        exe(x, q.packed.view(np.int8), q.scales, q.tensor_scale)
    with pytest.raises(InvalidArgument, match="scales"):
        exe(x, q.packed, q.scales[:, :1], q.tensor_scale)
    with pytest.raises(InvalidArgument, match="scales"):
        exe(x, q.packed, q.scales.view(np.uint8), q.tensor_scale)
    with pytest.raises(InvalidArgument, match="program takes 4 input"):
        exe(x, q.packed, q.scales)
    exe.close()


def test_hostile_header_fails_at_compile_naming_the_field(dev):
    data = bytearray(nvfp4.Projection(m=1, n=16, k=32).to_bytes())
    data[20] = 40  # k = 40: not a multiple of 16
    with pytest.raises(LoweringError, match="nvfp4 k: must be a multiple of 16"):
        dev.compile(bytes(data))
    with pytest.raises(LoweringError, match="truncated"):
        dev.compile(bytes(data[:30]))
    assert dev.accelerator.live_resources()["program"] == 0


def test_target_words_are_refused_for_projections():
    acc = CpuAccelerator()
    ctx = acc.create_context()
    artifact = ArtifactRef(nvfp4.Projection(m=1, n=16, k=16).to_bytes(), 1 << 20, (1,) * 12, NVFP4_FORMAT)
    with pytest.raises(InvalidArgument, match="TOSA target"):
        acc.load_program(ctx, artifact)
    acc.destroy_context(ctx)


class _TosaOnly(CpuAccelerator):
    artifact_formats = frozenset({TOSA_FORMAT})


def test_backend_without_nvfp4_refuses_with_lowering_error_naming_the_artifact():
    with Device(_TosaOnly(), "tosa-only") as device:
        projection = nvfp4.ExpertProjection(experts=2, m=1, n=16, k=32, activation="silu", name="moe.up")
        with pytest.raises(LoweringError, match=r"does not run NVFP4 projections.*ExpertProjection 'moe.up'"):
            device.compile(projection)
        assert device.accelerator.live_resources()["program"] == 0
