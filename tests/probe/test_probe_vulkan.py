"""The Vulkan probe: version decoding, software detection, tiers, and the real devices (lavapipe here).

Run with VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation: the probe must not trip the validation layer.
"""

from __future__ import annotations

import json
import os
import re
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
from ironaccel.probe import probe_backend
from ironaccel.probe import vulkan as vkprobe

F = CapabilityFlags
NVIDIA_DRIVER = "/proc/driver/nvidia/version"


def nvidia_version(major: int, minor: int, patch: int, build: int = 0) -> int:
    """NVIDIA's driverVersion packing: 10.8.8.6 bits."""
    return (major << 22) | (minor << 14) | (patch << 6) | build


def test_decode_nvidia_driver_version() -> None:
    assert vkprobe.decode_driver_version(0x10DE, nvidia_version(580, 159, 4)) == "580.159.04"
    assert vkprobe.decode_driver_version(0x10DE, nvidia_version(535, 104, 12)) == "535.104.12"
    assert vkprobe.decode_driver_version(0x10DE, nvidia_version(470, 199, 2, 3)) == "470.199.02.3"
    # The generic layout would misread the same number.
    assert vkprobe.decode_version(nvidia_version(580, 159, 4)) != "580.159.4"


def test_decode_other_driver_versions() -> None:
    make = lambda a, b, c: (a << 22) | (b << 12) | c  # noqa: E731 - VK_MAKE_VERSION
    assert vkprobe.decode_driver_version(0x1002, make(2, 0, 279)) == "2.0.279"
    assert vkprobe.decode_driver_version(0x10005, make(22, 3, 6)) == "22.3.6"
    assert vkprobe.decode_driver_version(0x8086, (101 << 14) | 4146, driver_id=5) == "101.4146"
    assert vkprobe.decode_version(4206822) == "1.3.230"
    assert vkprobe._mesa_version("Mesa 22.3.6 (LLVM 15.0.6)") == "22.3.6"
    assert vkprobe._mesa_version("580.159.04") is None


def test_software_detection() -> None:
    assert vkprobe.vulkan_software("llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe", "cpu", 13) == "lavapipe"
    assert vkprobe.vulkan_software("llvmpipe (LLVM 17.0.6, 256 bits)", "", "cpu") == "lavapipe"
    assert vkprobe.vulkan_software("SwiftShader Device (Subzero)", "SwiftShader driver", "cpu", 10) == "swiftshader"
    assert vkprobe.vulkan_software("Some CPU device", "", "cpu") == "cpu"  # a CPU device is software by definition
    assert vkprobe.vulkan_software("NVIDIA H200", "NVIDIA", "discrete", 4) is None
    assert vkprobe.vulkan_software("AMD Radeon RX 7900 XTX (RADV NAVI31)", "radv", "discrete", 3) is None


def test_tier_heuristic() -> None:
    tier = vkprobe.device_tier
    assert tier("NVIDIA H200", Vendor.NVIDIA, "discrete", None) is Tier.DATACENTER
    assert tier("NVIDIA GH200 480GB", Vendor.NVIDIA, "discrete", None) is Tier.DATACENTER
    assert tier("NVIDIA A100-SXM4-80GB", Vendor.NVIDIA, "discrete", None) is Tier.DATACENTER
    assert tier("NVIDIA L40S", Vendor.NVIDIA, "discrete", None) is Tier.DATACENTER
    assert tier("AMD Instinct MI300X", Vendor.AMD, "discrete", None) is Tier.DATACENTER
    assert tier("NVIDIA RTX A1000", Vendor.NVIDIA, "discrete", None) is Tier.CONSUMER  # not "A10"
    assert tier("NVIDIA GeForce RTX 4090", Vendor.NVIDIA, "discrete", None) is Tier.CONSUMER
    assert tier("Intel(R) UHD Graphics 770", Vendor.INTEL, "integrated", None) is Tier.CONSUMER
    assert tier("Adreno (TM) 740", Vendor.QUALCOMM, "integrated", None) is Tier.MOBILE
    assert tier("llvmpipe (LLVM 15.0.6, 256 bits)", Vendor.MESA, "cpu", "lavapipe") is Tier.BASELINE


def test_missing_package_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vulkan", None)  # makes `import vulkan` raise ImportError
    with pytest.raises(Unavailable, match="vulkan"):
        vkprobe.probe(Settings())


def test_disabled_by_setting() -> None:
    backend = probe_backend(BackendKind.VULKAN, Settings.from_env({"IRONACCEL_VULKAN": "0"}))
    assert not backend.is_available()
    assert "IRONACCEL_VULKAN=0" in (backend.reason or "")


@pytest.fixture(scope="module")
def devices() -> list[DeviceDescriptor]:
    return vkprobe.probe(Settings())


def test_validation_layer_stays_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    vkprobe.probe(Settings())
    out, err = capfd.readouterr()
    assert "VUID" not in out + err and "Validation Error" not in out + err


def test_finds_lavapipe(devices: list[DeviceDescriptor]) -> None:
    lavapipe = [d for d in devices if d.software == "lavapipe"]
    assert lavapipe, [d.name for d in devices]
    d = lavapipe[0]
    extra = dict(d.extra)
    assert "llvmpipe" in d.name
    assert d.vendor is Vendor.MESA
    assert d.arch == "cpu"
    assert d.memory_bytes and d.memory_bytes > 0
    assert d.capability.flags & F.FP32
    assert d.capability.flags & F.UNIFIED_MEMORY  # one heap, device-local and host-visible
    assert d.capability.tier is Tier.BASELINE
    assert d.pci is None  # 0x10005 is a Khronos vendor id, not a PCI one
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", d.uuid or "")
    assert extra["api_version"].startswith("1.")
    assert extra["driver_name"] == "llvmpipe"
    assert extra["extension_count"] > 0 and "VK_KHR_shader_float16_int8" in extra["extensions"]
    assert extra["subgroup_size"] >= 1
    assert d.driver_version and d.driver_version[0].isdigit()


def test_flags_follow_features(devices: list[DeviceDescriptor]) -> None:
    for d in devices:
        extra, flags = dict(d.extra), d.capability.flags
        assert bool(flags & F.FP64) == bool(extra.get("shader_float64"))
        assert bool(flags & F.FP16) == bool(extra.get("shader_float16"))
        assert bool(flags & F.INT8) == bool(extra.get("shader_int8"))
        assert bool(flags & F.BF16) == bool(extra.get("shader_bfloat16_type"))
        assert bool(flags & F.WMMA) == bool(extra.get("cooperative_matrix_tiles"))
        if d.software:
            assert not flags & F.TENSOR_CORES


def test_backend_contract_and_json(devices: list[DeviceDescriptor]) -> None:
    backend = probe_backend(BackendKind.VULKAN, Settings())
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
    """On an NVIDIA machine, Vulkan shows the card itself, not a software rasteriser."""
    if not os.path.exists(NVIDIA_DRIVER):
        pytest.skip(f"no NVIDIA driver here ({NVIDIA_DRIVER} absent), so no non-software device to find")
    try:
        devices = vkprobe.probe(Settings())
    except Unavailable as exc:
        if "not installed" in exc.reason or "not found" in exc.reason:
            pytest.skip(f"Vulkan runtime missing on this NVIDIA machine: {exc.reason}")
        raise
    nvidia = [d for d in devices if d.vendor is Vendor.NVIDIA and d.software is None]
    assert nvidia, [(d.name, d.software) for d in devices]
    d = nvidia[0]
    extra = dict(d.extra)
    assert d.arch == "discrete"
    assert d.memory_bytes and d.memory_bytes > 8 * 2**30
    assert d.pci and d.pci.vendor_id == 0x10DE
    flags = d.capability.flags
    assert flags & (F.FP32 | F.FP16 | F.INT8) == F.FP32 | F.FP16 | F.INT8
    assert not flags & F.UNIFIED_MEMORY  # resizable BAR maps VRAM, but host memory is not device memory
    if extra.get("cooperative_matrix_tiles"):
        assert flags & F.WMMA and flags & F.TENSOR_CORES
    if re.search(r"\bH(100|200)\b", d.name):
        assert d.capability.tier is Tier.DATACENTER
    with open(NVIDIA_DRIVER) as f:
        kernel = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", f.read())
    if kernel:
        assert d.driver_version == kernel.group(1)  # the 10.8.8.6 decoding matches the kernel module
