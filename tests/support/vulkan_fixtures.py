"""Shared helpers of the Vulkan operator tests: the device fixture, the CPU oracle, ulp distances.

``IRONACCEL_TEST_VULKAN_DEVICE`` names the device (default lavapipe; ``scripts/gpu-check`` runs the
operator tests on the NVIDIA H200 with ``IRONACCEL_TEST_VULKAN_DEVICE=nvidia``). Import the fixtures
``dev`` and ``clean`` into a test module by name: every test then ends with no message from the Vulkan
layers and nothing live on the device beyond the fixture's context and queue.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import ironaccel
from ironaccel.backends.cpu import run as cpu_run
from ironaccel.backends.vulkan import instance
from ironaccel.core.errors import Unsupported
from ironaccel.tosa import ProgramBuilder

RNG_SEED = 20261203
DEVICE = "vulkan:" + (os.environ.get("IRONACCEL_TEST_VULKAN_DEVICE") or "llvmpipe")
BIG = 1 << 30  # resident-bytes bound for these test programs (the arena counts as resident)
DTYPES = {
    np.dtype(np.float32): "fp32",
    np.dtype(np.float16): "fp16",
    np.dtype(ml_dtypes.bfloat16): "bf16",
    np.dtype(ml_dtypes.float8_e4m3fn): "fp8e4m3",
    np.dtype(ml_dtypes.float8_e5m2): "fp8e5m2",
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "int8",
    np.dtype(np.int16): "int16",
    np.dtype(np.int32): "int32",
}


def open_test_device(spec: str = DEVICE):
    """The test device (or the device ``spec`` names, such as "cpu"), or a skip where it cannot be opened."""
    try:
        return ironaccel.open(spec)
    except Unsupported as exc:
        pytest.skip(f"{spec} unavailable: {exc}")


def close_without_leaks(device) -> None:
    """Close ``device`` and its accelerator, failing if anything but the device's own context lived on."""
    device.close()
    leaks = {k: v for k, v in device.accelerator.live_resources().items() if v}
    if hasattr(device.accelerator, "close"):  # a Vulkan device is released at once, not at collection
        device.accelerator.close()
    assert not leaks, leaks


@pytest.fixture(scope="module")
def dev():
    device = open_test_device()
    yield device
    close_without_leaks(device)


@pytest.fixture(autouse=True)
def clean(request):
    instance.clear_validation_messages()
    yield
    messages = instance.validation_messages()
    instance.clear_validation_messages()
    assert not messages, "Vulkan layers reported:\n" + "\n".join(map(str, messages))
    if "dev" in request.fixturenames:
        live = request.getfixturevalue("dev").accelerator.live_resources()
        assert {k: v for k, v in live.items() if v} == {"context": 1, "queue": 1}, live


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in representable fp32 values (0 where both are NaN, or equal including the zero's sign)."""
    g = np.asarray(got, np.float32).reshape(-1).view(np.int32).astype(np.int64)
    w = np.asarray(want, np.float32).reshape(-1).view(np.int32).astype(np.int64)
    g = np.where(g < 0, -(g & 0x7FFFFFFF), g)  # a monotone integer line through -0 and +0
    w = np.where(w < 0, -(w & 0x7FFFFFFF), w)
    both_nan = np.isnan(np.asarray(got, np.float32).reshape(-1)) & np.isnan(np.asarray(want, np.float32).reshape(-1))
    return np.where(both_nan, 0, np.abs(g - w))


def program_of(build, inputs):
    """A one-graph program over inputs shaped and typed like ``inputs``; ``build(b, *values)`` returns
    its output value(s)."""
    b = ProgramBuilder()
    xs = [b.input(f"x{i}", x.shape, DTYPES[x.dtype]) for i, x in enumerate(inputs)]
    outs = build(b, *xs)
    b.output(*(outs if isinstance(outs, tuple) else (outs,)))
    return b.build()


def run_vulkan(dev, program, inputs, resident_bytes: int = BIG):
    exe = dev.compile(program, resident_bytes=resident_bytes)
    try:
        return exe(*inputs)
    finally:
        exe.close()


def run_both(dev, build, inputs, **compile_kw):
    """Build a one-graph program over ``inputs``, run it on Vulkan and on the CPU backend."""
    program = program_of(build, inputs)
    got = run_vulkan(dev, program, inputs, compile_kw.get("resident_bytes", BIG))
    want = cpu_run(program, list(inputs))
    return got, want


def flushed(a: np.ndarray) -> np.ndarray:
    """``a`` with subnormals replaced by zero of the same sign: TOSA lets fp32 subnormals be flushed
    (all or none), and some drivers do so by default (NVIDIA's did, measured on the H200)."""
    a = np.array(a, np.float32, copy=True)
    small = (a != 0) & (np.abs(a) < np.finfo(np.float32).tiny)
    a[small] = np.copysign(np.float32(0), a[small])
    return a


def assert_close(got, want, max_ulp=0, abs_tol=0.0, what="", want_flushed=None):
    """Within ``max_ulp`` of ``want``, or (element by element) of ``want_flushed``: the oracle's result
    for subnormal inputs flushed, itself flushed (given where the device may flush subnormals)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    if got.dtype == np.bool_:
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    d = ulps(got, want)
    if want_flushed is not None:
        d = np.minimum(d, ulps(got, flushed(want_flushed)))
    with np.errstate(invalid="ignore"):  # inf - inf: judged by the ulp distance
        close = np.abs(got.astype(np.float64) - want.astype(np.float64)).reshape(-1) <= abs_tol
    bad = (d > max_ulp) & ~close
    if bad.any():
        i = int(np.argmax(np.where(bad, d, -1)))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {d.size} beyond {max_ulp} ulp; worst {int(d[i])} ulp: "
            f"got {got.reshape(-1)[i]!r} want {want.reshape(-1)[i]!r}"
        )


def normal(rng, shape, scale=1.0):
    return np.asarray(rng.standard_normal(shape) * scale, np.float32)
