"""CUDA probe against a fake libcuda (tests/support/fakes/cuda_fake.c), its layouts and constants, real absence,
and (marked gpu) a real driver."""

from __future__ import annotations

import json
import re

import pytest

from fakes.build import c_values, ctypes_layout, layout_expressions, shared_object
from ironaccel.core import (
    BackendKind,
    CapabilityFlags,
    DeviceId,
    InvalidArgument,
    PciAddress,
    ProbedBackend,
    Settings,
    Tier,
    Unavailable,
    Vendor,
)
from ironaccel.probe import cuda

F = CapabilityFlags
fake_cuda = shared_object("cuda_fake.c")


@pytest.fixture
def cfg(fake_cuda, monkeypatch) -> Settings:
    monkeypatch.delenv("FAKE_CUDA_INIT_RESULT", raising=False)
    monkeypatch.delenv("FAKE_CUDA_DEVICES", raising=False)
    return Settings(libraries={"cuda": str(fake_cuda)})


# What compute capability 8.0+ documents, plus FP32/FP64 and the driver's graph API.
_AMPERE = (
    (F.FP32 | F.FP64 | F.DYNAMIC_PARALLELISM | F.FP16 | F.INT8 | F.TENSOR_CORES | F.WMMA | F.BF16 | F.TF32)
    | F.SPARSE_2_4
    | F.GRAPHS
)


def test_fake_driver_parsed_field_by_field(cfg, fake_cuda):
    devices = cuda.probe(cfg)
    assert [d.id for d in devices] == [DeviceId(BackendKind.CUDA, 0), DeviceId(BackendKind.CUDA, 1)]
    h200, rtx = devices

    assert h200.vendor is Vendor.NVIDIA
    assert h200.name == "NVIDIA H200"
    assert h200.arch == "sm_90"
    assert h200.memory_bytes == 150754820096
    assert h200.multiprocessors == 132
    assert h200.clock_khz == 1980000
    assert h200.driver_version == "12.8"
    assert h200.uuid == "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"
    assert h200.pci == PciAddress(vendor_id=None, device_id=None, bus_id="0000:1b:00.0")
    assert h200.software is None
    assert h200.capability.flags == (
        _AMPERE
        | F.FP8_E4M3
        | F.FP8_E5M2
        | F.COOPERATIVE_LAUNCH
        | F.UNIFIED_MEMORY
        | F.HOST_PINNED
        | F.ASYNC_ALLOC
        | F.MULTI_STREAM
        | F.PEER_ACCESS
    )
    assert not h200.capability.flags & (F.FP4 | F.HBM | F.NVLINK | F.TRANSFORMER_ENGINE | F.INT4)
    assert h200.capability.tier is Tier.DATACENTER
    assert (h200.capability.fp16_tflops, h200.capability.mem_bandwidth_gbs) == (None, None)
    assert dict(h200.extra) == {
        "library": str(fake_cuda),
        "compute_capability": "9.0",
        "integrated": False,
        "ecc_enabled": True,
        "unified_addressing": True,
        "multi_gpu_board": False,
        "memory_clock_khz": 3201000,
        "memory_bus_width_bits": 6144,
        "l2_cache_bytes": 52428800,
    }
    assert [k for k, _ in h200.extra] == sorted(k for k, _ in h200.extra)

    assert rtx.name == "NVIDIA GeForce RTX 3060"
    assert rtx.arch == "sm_86"
    assert rtx.memory_bytes == 12622168064
    assert rtx.multiprocessors == 28
    assert rtx.clock_khz is None  # the fake driver rejects CU_DEVICE_ATTRIBUTE_CLOCK_RATE for it
    assert rtx.uuid == "b0b1b2b3-b4b5-b6b7-b8b9-babbbcbdbebf"
    assert rtx.pci == PciAddress(bus_id="0000:65:00.0")
    # 8.6: no FP8 (8.9+); no cooperative launch, memory pools or peer access on this device.
    assert rtx.capability.flags == _AMPERE | F.UNIFIED_MEMORY | F.HOST_PINNED | F.MULTI_STREAM
    assert rtx.capability.tier is Tier.CONSUMER
    assert dict(rtx.extra)["compute_capability"] == "8.6"
    assert dict(rtx.extra)["ecc_enabled"] is False

    for dev in devices:
        data = json.loads(json.dumps(dev.to_json()))
        assert type(dev).from_json(data) == dev


def test_capabilities_agree_with_enumerate(cfg):
    backend = ProbedBackend(BackendKind.CUDA, lambda: cuda.probe(cfg))
    assert backend.is_available() and backend.reason is None
    devices = backend.enumerate()
    assert len(devices) == 2
    for n, dev in enumerate(devices):
        assert backend.capabilities(n) == dev.capability.flags
    for bad in (-1, len(devices), "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (100, "cuInit failed with CUDA_ERROR_NO_DEVICE (100)"),
        (999, "cuInit failed with CUDA_ERROR_UNKNOWN (999)"),
        (804, "cuInit failed with CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)"),
        (720, "cuInit failed with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE (720)"),  # named by cuGetErrorName
        (4242, "cuInit failed with an unknown CUresult (4242)"),
    ],
)
def test_init_failure_is_the_reason(cfg, monkeypatch, code, reason):
    monkeypatch.setenv("FAKE_CUDA_INIT_RESULT", str(code))
    with pytest.raises(Unavailable) as info:
        cuda.probe(cfg)
    assert info.value.reason == reason
    backend = ProbedBackend(BackendKind.CUDA, lambda: cuda.probe(cfg))
    assert (backend.is_available(), backend.reason, backend.error) == (False, reason, None)


def test_zero_devices_is_the_reason(cfg, monkeypatch):
    monkeypatch.setenv("FAKE_CUDA_DEVICES", "0")
    with pytest.raises(Unavailable, match=r"^cuDeviceGetCount reported no devices$"):
        cuda.probe(cfg)


def test_one_device(cfg, monkeypatch):
    monkeypatch.setenv("FAKE_CUDA_DEVICES", "1")
    (only,) = cuda.probe(cfg)
    assert only.name == "NVIDIA H200"
    assert not only.capability.flags & F.PEER_ACCESS  # its peer is gone


def test_override_to_a_missing_file_names_it(tmp_path):
    missing = tmp_path / "libcuda.so.1"
    with pytest.raises(Unavailable, match=rf"^libcuda\.so\.1 not found \(tried {re.escape(str(missing))} "):
        cuda.probe(Settings(libraries={"cuda": str(missing)}))


def test_real_absence_names_the_library():
    if _library_here():
        pytest.skip("this host has a CUDA driver")
    with pytest.raises(Unavailable) as info:
        cuda.probe(Settings())
    assert info.value.reason.startswith("libcuda.so.1 not found (tried libcuda.so.1 (not found)")
    backend = ProbedBackend(BackendKind.CUDA, lambda: cuda.probe(Settings()))
    assert backend.is_available() is False
    assert backend.reason == info.value.reason
    assert backend.enumerate() == []


@pytest.mark.parametrize(
    ("name", "tier"),
    [
        ("NVIDIA H100 80GB HBM3", Tier.DATACENTER),
        ("NVIDIA A100-SXM4-80GB", Tier.DATACENTER),
        ("Tesla V100-SXM2-16GB", Tier.DATACENTER),
        ("NVIDIA L40S", Tier.DATACENTER),
        ("NVIDIA GH200 480GB", Tier.DATACENTER),
        ("NVIDIA RTX A6000", Tier.WORKSTATION),
        ("NVIDIA RTX A2000 12GB", Tier.WORKSTATION),
        ("Quadro RTX 8000", Tier.WORKSTATION),
        ("NVIDIA RTX 6000 Ada Generation", Tier.WORKSTATION),
        ("NVIDIA GeForce RTX 4090", Tier.CONSUMER),
        ("NVIDIA TITAN V", Tier.CONSUMER),
        ("NVIDIA GB10", Tier.CONSUMER),  # not a known datacenter name
        ("Orin (nvgpu)", Tier.CONSUMER),
    ],
)
def test_tier_from_unambiguous_names_only(name, tier):
    assert cuda._tier(name) is tier


# --- layouts and constants against cuda.h, CUDA Toolkit 12.6 (CUDA_VERSION 12060) -------------------------

# CUdevice_attribute_enum as cuda.h 12.6 numbers it (lines 701-844 of that header).
HEADER_ATTRIBUTES = {
    "CU_DEVICE_ATTRIBUTE_CLOCK_RATE": 13,
    "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": 16,
    "CU_DEVICE_ATTRIBUTE_INTEGRATED": 18,
    "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY": 19,
    "CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS": 31,
    "CU_DEVICE_ATTRIBUTE_ECC_ENABLED": 32,
    "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE": 36,
    "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH": 37,
    "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE": 38,
    "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING": 41,
    "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 75,
    "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 76,
    "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY": 83,
    "CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD": 84,
    "CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH": 95,
    "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED": 115,
}
# cudaError_enum (CUresult) as cuda.h 12.6 numbers it.
HEADER_RESULTS = {
    "CUDA_SUCCESS": 0,
    "CUDA_ERROR_INVALID_VALUE": 1,
    "CUDA_ERROR_OUT_OF_MEMORY": 2,
    "CUDA_ERROR_NOT_INITIALIZED": 3,
    "CUDA_ERROR_DEINITIALIZED": 4,
    "CUDA_ERROR_STUB_LIBRARY": 34,
    "CUDA_ERROR_DEVICE_UNAVAILABLE": 46,
    "CUDA_ERROR_NO_DEVICE": 100,
    "CUDA_ERROR_INVALID_DEVICE": 101,
    "CUDA_ERROR_DEVICE_NOT_LICENSED": 102,
    "CUDA_ERROR_OPERATING_SYSTEM": 304,
    "CUDA_ERROR_NOT_PERMITTED": 800,
    "CUDA_ERROR_NOT_SUPPORTED": 801,
    "CUDA_ERROR_SYSTEM_NOT_READY": 802,
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": 803,
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": 804,
    "CUDA_ERROR_UNKNOWN": 999,
}


@pytest.fixture(scope="module")
def header(tmp_path_factory) -> dict[str, int]:
    """What the C compiler makes of the fake driver's cuda.h declarations: one program for every check."""
    exprs = [(n, n) for n in [*HEADER_ATTRIBUTES, *HEADER_RESULTS]]
    exprs += layout_expressions("CUuuid", ["bytes"])
    return c_values("cuda_fake.c", tmp_path_factory.mktemp("cuda_values"), exprs)


def test_constants_match_the_header(header):
    used = {cuda.ATTRIBUTE_PREFIX + key: value for key, value in cuda.ATTRIBUTES.items()}
    assert used == HEADER_ATTRIBUTES
    assert {name: code for code, name in cuda.RESULT_NAMES.items()} == HEADER_RESULTS
    assert cuda.CUDA_SUCCESS == HEADER_RESULTS["CUDA_SUCCESS"]
    # The fake driver's declarations (which its switch answers by) agree too.
    names = {**HEADER_ATTRIBUTES, **HEADER_RESULTS}
    assert {n: header[n] for n in names} == names


def test_cuuuid_layout(header):
    mine = ctypes_layout(cuda.CUuuid, "CUuuid")
    assert {k: header[k] for k in mine} == mine
    assert mine == {"CUuuid.sizeof": 16, "CUuuid.alignof": 1, "CUuuid.bytes": 0}


# --- a real driver (scripts/gpu-check on the device machine) ------------------------------------------------


@pytest.mark.gpu
def test_real_driver_finds_an_nvidia_gpu():
    try:
        devices = cuda.probe(Settings())
    except Unavailable as exc:
        if " not found " in exc.reason:
            pytest.skip(f"no CUDA driver here: {exc.reason}")
        raise
    assert devices
    for n, dev in enumerate(devices):
        assert dev.id == DeviceId(BackendKind.CUDA, n)
        assert dev.vendor is Vendor.NVIDIA
        assert dev.memory_bytes and dev.memory_bytes > 0
        assert re.fullmatch(r"sm_\d+", dev.arch), dev.arch
        assert dev.multiprocessors and dev.multiprocessors > 0
        assert dev.capability.flags & F.FP32
        assert dev.pci is not None and re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", dev.pci.bus_id)


def _library_here() -> bool:
    """Whether the probe's own search (names, then the linker cache) finds a library on this host."""
    try:
        cuda._open(Settings())
    except Unavailable:
        return False
    return True
