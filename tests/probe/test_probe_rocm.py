"""ROCm probe against a fake libamdhip64 built from tests/support/fakes/hip_fake.c, its layouts and constants, and real
absence."""

from __future__ import annotations

import json

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
from ironaccel.probe import rocm

F = CapabilityFlags
fake_hip = shared_object("hip_fake.c")
fake_hip_rocm5 = shared_object("hip_fake.c", ["NO_R0600"])

_RUNTIME = F.COOPERATIVE_LAUNCH | F.UNIFIED_MEMORY | F.HOST_PINNED | F.ASYNC_ALLOC | F.MULTI_STREAM | F.GRAPHS


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("FAKE_HIP_INIT_RESULT", raising=False)
    monkeypatch.delenv("FAKE_HIP_DEVICES", raising=False)


def _cfg(path) -> Settings:
    return Settings(libraries={"rocm": str(path)})


def test_fake_runtime_parsed_field_by_field(fake_hip):
    devices = rocm.probe(_cfg(fake_hip))
    assert [d.id for d in devices] == [DeviceId(BackendKind.ROCM, 0), DeviceId(BackendKind.ROCM, 1)]
    mi300, navi = devices

    assert mi300.vendor is Vendor.AMD
    assert mi300.name == "AMD Instinct MI300X"
    assert mi300.arch == "gfx942"
    assert mi300.memory_bytes == 205822885888
    assert mi300.multiprocessors == 304
    assert mi300.clock_khz == 2100000
    assert mi300.driver_version == "6.3.42134"
    # ROCm fills hipUUID with the ASCII unique id; uuid_text shows those 16 bytes as they are.
    assert mi300.uuid == "32663365-3161-3763-3962-386436653530"
    assert mi300.pci == PciAddress(vendor_id=None, device_id=None, bus_id="0000:0c:00.0")
    assert mi300.software is None
    gfx942 = F.FP32 | F.FP64 | F.FP16 | F.TENSOR_CORES | F.WMMA | F.BF16 | F.INT8 | F.TF32 | F.SPARSE_2_4
    assert mi300.capability.flags == gfx942 | _RUNTIME | F.PEER_ACCESS
    assert not mi300.capability.flags & (F.FP8_E4M3 | F.FP8_E5M2 | F.FP4 | F.HBM | F.INFINITY_FABRIC | F.RCCL)
    assert mi300.capability.tier is Tier.DATACENTER
    assert dict(mi300.extra) == {
        "library": str(fake_hip),
        "gcn_arch_name": "gfx942:sramecc+:xnack-",
        "fp8_fnuz": True,
        "compute_capability": "9.4",
        "hip_driver_version": 60342134,
        "integrated": False,
        "ecc_enabled": True,
        "large_bar": True,
        "asic_revision": 1,
        "memory_clock_khz": 1300000,
        "memory_bus_width_bits": 8192,
        "l2_cache_bytes": 4194304,
    }

    assert navi.name == "AMD Radeon RX 7900 XTX"
    assert navi.arch == "gfx1100"
    assert navi.memory_bytes == 25753026560
    assert navi.multiprocessors == 48
    assert navi.clock_khz == 2482000
    assert navi.uuid is None  # all-zero hipUUID
    assert navi.pci == PciAddress(bus_id="0000:03:00.0")
    gfx1100 = F.FP32 | F.FP64 | F.FP16 | F.WMMA | F.BF16 | F.INT8 | F.INT4
    # No cooperative launch, memory pools or peer access on this one.
    assert navi.capability.flags == gfx1100 | F.UNIFIED_MEMORY | F.HOST_PINNED | F.MULTI_STREAM | F.GRAPHS
    assert navi.capability.tier is Tier.CONSUMER
    assert "fp8_fnuz" not in dict(navi.extra)
    assert dict(navi.extra)["gcn_arch_name"] == "gfx1100"

    for dev in devices:
        assert [k for k, _ in dev.extra] == sorted(k for k, _ in dev.extra)
        assert type(dev).from_json(json.loads(json.dumps(dev.to_json()))) == dev


def test_capabilities_agree_with_enumerate(fake_hip):
    cfg = _cfg(fake_hip)
    backend = ProbedBackend(BackendKind.ROCM, lambda: rocm.probe(cfg))
    devices = backend.enumerate()
    assert len(devices) == 2
    for n, dev in enumerate(devices):
        assert backend.capabilities(n) == dev.capability.flags
    for bad in (-1, len(devices), "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)


def test_runtime_without_the_r0600_properties_gives_no_arch(fake_hip_rocm5):
    mi300, navi = rocm.probe(_cfg(fake_hip_rocm5))
    assert (mi300.arch, navi.arch) == ("", "")
    assert mi300.capability.flags == F.FP32 | _RUNTIME | F.PEER_ACCESS
    assert "gcn_arch_name" not in dict(mi300.extra)
    assert dict(mi300.extra)["compute_capability"] == "9.4"


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (100, "hipInit failed with hipErrorNoDevice (100)"),
        (35, "hipInit failed with hipErrorInsufficientDriver (35)"),
        (720, "hipInit failed with hipErrorCooperativeLaunchTooLarge (720)"),  # named by hipGetErrorName
        (4242, "hipInit failed with an unknown hipError_t (4242)"),
    ],
)
def test_init_failure_is_the_reason(fake_hip, monkeypatch, code, reason):
    monkeypatch.setenv("FAKE_HIP_INIT_RESULT", str(code))
    backend = ProbedBackend(BackendKind.ROCM, lambda: rocm.probe(_cfg(fake_hip)))
    assert (backend.is_available(), backend.reason, backend.error) == (False, reason, None)


def test_zero_devices_is_the_reason(fake_hip, monkeypatch):
    monkeypatch.setenv("FAKE_HIP_DEVICES", "0")
    with pytest.raises(Unavailable, match=r"^hipGetDeviceCount failed with hipErrorNoDevice \(100\)$"):
        rocm.probe(_cfg(fake_hip))


def test_real_absence_names_the_library():
    if _library_here():
        pytest.skip("this host has a HIP runtime")
    with pytest.raises(Unavailable) as info:
        rocm.probe(Settings())
    assert info.value.reason.startswith("libamdhip64.so not found (tried libamdhip64.so (not found)")
    assert "/opt/rocm/lib/libamdhip64.so" in info.value.reason
    backend = ProbedBackend(BackendKind.ROCM, lambda: rocm.probe(Settings()))
    assert backend.is_available() is False
    assert backend.reason == info.value.reason


@pytest.mark.parametrize(
    ("arch", "flags"),
    [
        ("gfx900", F.FP16),
        ("gfx906", F.FP16),
        ("gfx908", F.FP16 | F.TENSOR_CORES | F.WMMA | F.BF16 | F.INT8),
        ("gfx90a", F.FP16 | F.TENSOR_CORES | F.WMMA | F.BF16 | F.INT8),
        (
            "gfx950",
            F.FP16 | F.TENSOR_CORES | F.WMMA | F.BF16 | F.INT8 | F.FP8_E4M3 | F.FP8_E5M2 | F.FP4 | F.SPARSE_2_4,
        ),
        ("gfx1030", F.FP16),
        ("gfx1201", F.FP16 | F.WMMA | F.BF16 | F.INT8 | F.INT4 | F.FP8_E4M3 | F.FP8_E5M2 | F.SPARSE_2_4),
    ],
)
def test_arch_flags(arch, flags):
    match = rocm._ARCH.match(arch + ":xnack-")
    assert match and match.group(0) == arch
    assert rocm._arch_flags(arch, int(match.group(1))) == flags


@pytest.mark.parametrize(
    ("name", "tier"),
    [
        ("AMD Instinct MI250X/MI250", Tier.DATACENTER),
        ("AMD Radeon PRO W7900", Tier.WORKSTATION),
        ("AMD Radeon Pro VII", Tier.WORKSTATION),
        ("AMD Radeon AI PRO R9700", Tier.WORKSTATION),
        ("AMD Radeon RX 7900 XTX", Tier.CONSUMER),
        ("AMD Radeon Graphics", Tier.CONSUMER),
    ],
)
def test_tier_from_names(name, tier):
    assert rocm._tier(name) is tier


# --- layouts and constants against include/hip/hip_runtime_api.h, ROCm 6.2.2 --------------------------------

# hipDeviceAttribute_t values, counted from the header's implicitly numbered enum (ROCm 6.2.2 lines 407-540;
# identical in ROCm/rocm-systems projects/hip for these names).
HEADER_ATTRIBUTES = {
    "hipDeviceAttributeEccEnabled": 0,
    "hipDeviceAttributeCanMapHostMemory": 3,
    "hipDeviceAttributeClockRate": 5,
    "hipDeviceAttributeConcurrentKernels": 8,
    "hipDeviceAttributeCooperativeLaunch": 10,
    "hipDeviceAttributeIntegrated": 16,
    "hipDeviceAttributeL2CacheSize": 19,
    "hipDeviceAttributeComputeCapabilityMajor": 23,
    "hipDeviceAttributeManagedMemory": 24,
    "hipDeviceAttributeMemoryBusWidth": 59,
    "hipDeviceAttributeMemoryClockRate": 60,
    "hipDeviceAttributeComputeCapabilityMinor": 61,
    "hipDeviceAttributeMultiprocessorCount": 63,
    "hipDeviceAttributeMemoryPoolsSupported": 88,
    "hipDeviceAttributeIsLargeBar": 10011,
    "hipDeviceAttributeAsicRevision": 10012,
}
HEADER_ERRORS = {
    "hipSuccess": 0,
    "hipErrorInvalidValue": 1,
    "hipErrorOutOfMemory": 2,
    "hipErrorNotInitialized": 3,
    "hipErrorDeinitialized": 4,
    "hipErrorInsufficientDriver": 35,
    "hipErrorNoDevice": 100,
    "hipErrorInvalidDevice": 101,
    "hipErrorOperatingSystem": 304,
    "hipErrorNotSupported": 801,
    "hipErrorUnknown": 999,
    "hipErrorRuntimeMemory": 1052,
    "hipErrorRuntimeOther": 1053,
}


_HAS_DOUBLES = "((union { hipDeviceArch_t a; unsigned int u; }){ .a = { .hasDoubles = 1 } }).u"


@pytest.fixture(scope="module")
def header(tmp_path_factory) -> dict[str, int]:
    """What the C compiler makes of the fake runtime's hip_runtime_api.h declarations, in one program."""
    exprs = [(n, n) for n in [*HEADER_ATTRIBUTES, *HEADER_ERRORS]]
    exprs += [("has_doubles", _HAS_DOUBLES), ("sizeof(hipUUID)", "sizeof(hipUUID)")]
    exprs += [("sizeof(hipDeviceArch_t)", "sizeof(hipDeviceArch_t)")]
    exprs += layout_expressions("hipDeviceProp_tR0600", [name for name, _ in rocm.HipDeviceProp._fields_])
    return c_values("hip_fake.c", tmp_path_factory.mktemp("hip_values"), exprs)


def test_constants_match_the_header(header):
    used = {rocm.ATTRIBUTE_PREFIX + key: value for key, value in rocm.ATTRIBUTES.items()}
    assert used == HEADER_ATTRIBUTES
    assert {name: code for code, name in rocm.ERROR_NAMES.items()} == HEADER_ERRORS
    # The compiler numbers the enum declared in the header's order; it must agree with the table.
    names = {**HEADER_ATTRIBUTES, **HEADER_ERRORS}
    assert {n: header[n] for n in names} == names
    assert header["has_doubles"] == rocm._HAS_DOUBLES_BIT


def test_device_prop_layout(header):
    mine = ctypes_layout(rocm.HipDeviceProp, "hipDeviceProp_tR0600")
    assert {k: header[k] for k in mine} == mine
    assert mine["hipDeviceProp_tR0600.sizeof"] == 1472
    assert mine["hipDeviceProp_tR0600.gcnArchName"] == 1160
    assert header["sizeof(hipUUID)"] == rocm.HipDeviceProp.uuid.size
    assert header["sizeof(hipDeviceArch_t)"] == rocm.HipDeviceProp.arch.size


def _library_here() -> bool:
    """Whether the probe's own search (names, then the linker cache) finds a library on this host."""
    try:
        rocm._open(Settings())
    except Unavailable:
        return False
    return True
