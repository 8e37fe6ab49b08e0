"""The WebGPU probe: adapters from sample info dicts, and the real adapters here (lavapipe and llvmpipe)."""

from __future__ import annotations

import json
import sys

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
from ironaccel.probe import probe_backend, webgpu

F = CapabilityFlags


def info(**kw: object) -> dict[str, object]:
    base = {"vendor": "", "architecture": "", "device": "", "description": "", "vendor_id": 0, "device_id": 0}
    return {**base, **kw}


def test_describe_nvidia_adapter() -> None:
    d = webgpu.describe(
        0,
        info(
            vendor="NVIDIA",
            device="NVIDIA H200",
            description="580.159.04",
            vendor_id=0x10DE,
            device_id=0x2335,
            adapter_type="DiscreteGPU",
            backend_type="Vulkan",
        ),
        {"shader-f16", "timestamp-query"},
        {"max-buffer-size": 2**40, "max-compute-invocations-per-workgroup": 1024, "max-texture-dimension-1d": 32768},
    )
    assert d.vendor is Vendor.NVIDIA and d.software is None
    assert d.pci is not None and (d.pci.vendor_id, d.pci.device_id) == (0x10DE, 0x2335)
    assert d.capability.flags == F.FP32 | F.FP16
    assert d.capability.tier is Tier.DATACENTER
    extra = dict(d.extra)
    assert extra["limits"] == {"max-buffer-size": 2**40, "max-compute-invocations-per-workgroup": 1024}
    assert extra["features"] == ["shader-f16", "timestamp-query"]


def test_software_adapters() -> None:
    lavapipe = info(
        device="llvmpipe (LLVM 15.0.6, 256 bits)", vendor_id=0x10005, adapter_type="CPU", backend_type="Vulkan"
    )
    llvmpipe = dict(lavapipe, backend_type="OpenGL")
    swiftshader = info(device="SwiftShader Device (Subzero)", adapter_type="CPU", backend_type="Vulkan")
    warp = info(device="Microsoft Basic Render Driver", adapter_type="CPU", backend_type="D3D12")
    unnamed = info(device="Some CPU adapter", adapter_type="CPU", backend_type="Vulkan")
    assert webgpu.webgpu_software(lavapipe) == "lavapipe"
    assert webgpu.webgpu_software(llvmpipe) == "llvmpipe"
    assert webgpu.webgpu_software(swiftshader) == "swiftshader"
    assert webgpu.webgpu_software(warp) == "basic render driver"
    assert webgpu.webgpu_software(unnamed) == "cpu"
    d = webgpu.describe(0, lavapipe, set(), {})
    assert d.vendor is Vendor.MESA and d.pci is None and d.capability.tier is Tier.BASELINE
    assert d.capability.flags == F.FP32


def test_missing_package_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wgpu", None)
    with pytest.raises(Unavailable, match="wgpu"):
        webgpu.probe(Settings())


@pytest.fixture(scope="module")
def devices() -> list[DeviceDescriptor]:
    return webgpu.probe(Settings())


def test_finds_software_adapters(devices: list[DeviceDescriptor]) -> None:
    soft = [d for d in devices if d.software and "llvmpipe" in d.name]
    assert soft, [(d.name, d.software) for d in devices]
    backends = {dict(d.extra)["backend_type"]: d for d in soft}
    assert "Vulkan" in backends, backends
    assert backends["Vulkan"].software == "lavapipe"
    for d in soft:
        assert d.capability.flags & F.FP32
        assert d.capability.tier is Tier.BASELINE
        assert d.vendor is Vendor.MESA


def test_flags_follow_features(devices: list[DeviceDescriptor]) -> None:
    for d in devices:
        extra = dict(d.extra)
        assert bool(d.capability.flags & F.FP16) == ("shader-f16" in extra["features"])
        assert extra["limits"]["max-compute-invocations-per-workgroup"] >= 256


def test_backend_contract_and_json(devices: list[DeviceDescriptor]) -> None:
    backend = probe_backend(BackendKind.WEBGPU, Settings())
    listed = backend.enumerate()
    assert backend.is_available() and [d.ordinal for d in listed] == list(range(len(listed)))
    for n, device in enumerate(listed):
        assert backend.capabilities(n) == device.capability.flags
        assert DeviceDescriptor.from_json(json.loads(json.dumps(device.to_json()))) == device
    for bad in (len(listed), -1, "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)  # type: ignore[arg-type]
