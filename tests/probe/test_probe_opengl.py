"""The OpenGL (EGL, headless) probe: the real llvmpipe device here, and coexistence with a live context."""

from __future__ import annotations

import json
import os
import re

import pytest

from ironaccel.core import (
    BackendKind,
    CapabilityFlags,
    DeviceDescriptor,
    InvalidArgument,
    Settings,
    Tier,
    Unavailable,
    Vendor,
)
from ironaccel.probe import opengl, probe_backend

F = CapabilityFlags
NVIDIA_DRIVER = "/proc/driver/nvidia/version"


def test_driver_version_from_gl_version() -> None:
    assert opengl._driver_version("4.5 (Core Profile) Mesa 22.3.6") == "Mesa 22.3.6"
    assert opengl._driver_version("4.6.0 NVIDIA 580.159.04") == "NVIDIA 580.159.04"
    assert opengl._driver_version("4.6") is None


def test_missing_library_is_unavailable() -> None:
    settings = Settings(libraries={"opengl": "/nonexistent/libEGL.so.1"})
    with pytest.raises(Unavailable, match=re.escape("/nonexistent/libEGL.so.1")):
        opengl.probe(settings)


def test_disabled_by_setting() -> None:
    backend = probe_backend(BackendKind.OPENGL, Settings.from_env({"IRONACCEL_OPENGL": "0"}))
    assert not backend.is_available()
    assert "IRONACCEL_OPENGL=0" in (backend.reason or "")


@pytest.fixture(scope="module")
def devices() -> list[DeviceDescriptor]:
    return opengl.probe(Settings())


def test_finds_llvmpipe(devices: list[DeviceDescriptor]) -> None:
    soft = [d for d in devices if d.software == "llvmpipe"]
    assert soft, [d.name for d in devices]
    d = soft[0]
    extra = dict(d.extra)
    assert "llvmpipe" in d.name
    assert d.vendor is Vendor.MESA
    assert d.capability.flags & F.FP32
    assert d.capability.tier is Tier.BASELINE
    major, minor = map(int, re.fullmatch(r"gl(\d+)\.(\d+)", d.arch).groups())  # type: ignore[union-attr]
    assert (major, minor) >= (4, 3)
    assert d.driver_version and d.driver_version.startswith("Mesa")
    assert all(n >= 65535 for n in extra["max_compute_work_group_count"])
    assert extra["max_compute_work_group_invocations"] >= 1024
    assert extra["max_compute_shared_memory_size"] >= 32768
    assert extra["extension_count"] > 0
    # FP64 follows the extension; llvmpipe really does double precision.
    assert bool(d.capability.flags & F.FP64) == ("GL_ARB_gpu_shader_fp64" in extra["extensions"])
    assert not d.capability.flags & F.FP16 or any(e in extra["extensions"] for e in opengl.HALF_FLOAT_EXTENSIONS)


def test_leaves_an_existing_context_usable() -> None:
    """A context made current by someone else (moderngl, on the same EGL device) survives the probe."""
    moderngl = pytest.importorskip("moderngl")
    ctx = moderngl.create_standalone_context(backend="egl", require=430)
    try:
        opengl.probe(Settings())
        program = ctx.compute_shader(
            "#version 430\nlayout(local_size_x=4) in;\nlayout(std430, binding=0) buffer B { uint v[]; };\n"
            "void main() { v[gl_GlobalInvocationID.x] = gl_GlobalInvocationID.x * 3u; }\n"
        )
        buffer = ctx.buffer(reserve=16)
        buffer.bind_to_storage_buffer(0)
        program.run(1)
        assert list(memoryview(buffer.read()).cast("I")) == [0, 3, 6, 9]
    finally:
        ctx.release()


def test_backend_contract_and_json(devices: list[DeviceDescriptor]) -> None:
    backend = probe_backend(BackendKind.OPENGL, Settings())
    listed = backend.enumerate()
    assert backend.is_available() and [d.ordinal for d in listed] == list(range(len(listed)))
    for n, device in enumerate(listed):
        assert backend.capabilities(n) == device.capability.flags
        assert DeviceDescriptor.from_json(json.loads(json.dumps(device.to_json()))) == device
    for bad in (len(listed), -1, "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)  # type: ignore[arg-type]


@pytest.mark.gpu
def test_nvidia_hardware_device() -> None:
    """On an NVIDIA machine, EGL gives a 4.3+ context on the card itself."""
    if not os.path.exists(NVIDIA_DRIVER):
        pytest.skip(f"no NVIDIA driver here ({NVIDIA_DRIVER} absent), so no non-software device to find")
    try:
        devices = opengl.probe(Settings())
    except Unavailable as exc:
        if "not found" in exc.reason:
            pytest.skip(f"EGL/GL libraries missing on this NVIDIA machine: {exc.reason}")
        raise
    nvidia = [d for d in devices if d.vendor is Vendor.NVIDIA and d.software is None]
    assert nvidia, [(d.name, d.software) for d in devices]
    d = nvidia[0]
    extra = dict(d.extra)
    assert d.capability.flags & F.FP32 and d.capability.flags & F.FP64
    assert "GL_NVX_gpu_memory_info" in extra["extensions"]
    assert d.memory_bytes and d.memory_bytes > 8 * 2**30
    assert d.driver_version and d.driver_version.startswith("NVIDIA")
    assert d.arch == "gl4.6"  # the newest core version, not merely the 4.3 minimum
    if re.search(r"\bH(100|200)\b", d.name):
        assert d.capability.tier is Tier.DATACENTER
