"""The bundled fp32 programs (src/ironaccel/models, exported from PyTorch) on the Vulkan backend, through
``ironaccel.open``, against the CPU backend and against torch's recorded outputs.

Tolerances, and what was measured when they were set (lavapipe, LLVM 15):

* against the CPU backend: max |vulkan - cpu| <= 1e-5 * max |cpu|. The two sum convolutions, matmuls,
  softmax and layer norms in different orders (the GPU accumulates with fma in fp32 tiles, the CPU
  through sgemm), so outputs differ by a few ulps of the largest values they were built from.
  Measured: cnn_fp32 3.0e-8 (1.6e-7 of max |cpu|), attention_fp32 4.8e-7 (1.2e-7 of max |cpu|).
  As in tests/test_models.py, elementwise ulps are no measure: outputs near zero differ by thousands
  of ulps (6144 seen in attention_fp32) while being as accurate as the rest in absolute terms.
* against torch: the bound tests/test_models.py uses for the CPU backend (1e-4 relative + 1e-5).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ironaccel
from ironaccel.backends.vulkan import instance
from ironaccel.tosa import load
from vulkan_fixtures import dev

__all__ = ["dev"]  # fixture, used by name

MODELS = Path(__file__).resolve().parents[3] / "src" / "ironaccel" / "models"
FLOAT_MODELS = sorted(
    p.stem for p in MODELS.glob("*.tosa") if not json.loads(p.with_suffix(".json").read_text())["quantized"]
)
CPU_REL = 1e-5
TORCH_REL, TORCH_ABS = 1e-4, 1e-5


@pytest.fixture(autouse=True)
def no_validation_messages():
    instance.clear_validation_messages()
    yield
    messages = instance.validation_messages()
    instance.clear_validation_messages()
    assert not messages, "Vulkan layers reported:\n" + "\n".join(map(str, messages))


def _torch(name: str) -> dict[str, np.ndarray]:
    with np.load(MODELS / f"{name}.torch.npz") as data:
        return {key: data[key] for key in data.files}


def _cpu(name: str, x: np.ndarray) -> np.ndarray:
    with ironaccel.open("cpu") as cpu:
        exe = cpu.compile(MODELS / f"{name}.tosa")
        (out,) = exe(x)
        exe.close()
    return out


def test_the_float_models_are_the_ones_tested():
    assert FLOAT_MODELS == ["attention_fp32", "cnn_fp32"]


@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_model_matches_the_cpu_backend_and_torch(dev, name):
    data = _torch(name)
    x = data["input"]
    exe = dev.compile(MODELS / f"{name}.tosa")  # the default resident-bytes bound admits it
    try:
        (got,) = exe(x)
        (again,) = exe.submit(x).wait(60)
    finally:
        exe.close()
    spec = load(MODELS / f"{name}.tosa").main.output_tensors[0]
    assert got.dtype == spec.dtype.numpy and got.shape == tuple(spec.shape)
    np.testing.assert_array_equal(got, again)  # one recorded command buffer, the same result every time
    want = _cpu(name, x).astype(np.float64)
    diff = np.abs(got.astype(np.float64) - want).max()
    bound = CPU_REL * np.abs(want).max()
    assert diff <= bound, f"{name}: max |vulkan - cpu| {diff:.3g} > {bound:.3g}"
    expected = data["output"].astype(np.float64)
    diff = np.abs(got.astype(np.float64) - expected).max()
    bound = TORCH_REL * np.abs(expected).max() + TORCH_ABS
    assert diff <= bound, f"{name}: max |vulkan - torch| {diff:.3g} > {bound:.3g}"
    assert {k: v for k, v in dev.accelerator.live_resources().items() if v} == {"context": 1, "queue": 1}


@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_model_over_random_inputs(dev, name):
    """Inputs the export never saw, batched through one executable."""
    x0 = _torch(name)["input"]
    rng = np.random.default_rng(11)
    exe = dev.compile(MODELS / f"{name}.tosa")
    try:
        for _ in range(3):
            x = np.asarray(rng.standard_normal(x0.shape) * np.abs(x0).max(), np.float32)
            (got,) = exe(x)
            want = _cpu(name, x).astype(np.float64)
            diff = np.abs(got.astype(np.float64) - want).max()
            assert diff <= CPU_REL * np.abs(want).max(), f"{name}: max |vulkan - cpu| {diff:.3g}"
    finally:
        exe.close()
