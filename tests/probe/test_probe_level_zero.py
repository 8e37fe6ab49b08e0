"""Level Zero probe against a fake libze_loader built from tests/support/fakes/ze_fake.c, its layouts and constants, and
real absence."""

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
from ironaccel.probe import level_zero as ze

F = CapabilityFlags
GIB = 1 << 30
fake_ze = shared_object("ze_fake.c")


@pytest.fixture
def cfg(fake_ze, monkeypatch) -> Settings:
    monkeypatch.delenv("FAKE_ZE_INIT_RESULT", raising=False)
    monkeypatch.delenv("FAKE_ZE_DEVICES", raising=False)
    return Settings(libraries={"level-zero": str(fake_ze)})


def test_fake_loader_parsed_field_by_field(cfg, fake_ze):
    devices = ze.probe(cfg)
    assert [d.id for d in devices] == [DeviceId(BackendKind.LEVEL_ZERO, n) for n in range(3)]
    pvc, arc, npu = devices  # ordinals run on across the two drivers

    assert pvc.vendor is Vendor.INTEL
    assert pvc.name == "Intel(R) Data Center GPU Max 1550"
    assert pvc.arch == ""
    assert pvc.memory_bytes == 128 * GIB  # two local memories (one per tile), summed
    assert pvc.multiprocessors == 2 * 64
    assert pvc.clock_khz is None  # ze_api.h gives coreClockRate no unit
    assert pvc.driver_version == "16929350"
    assert pvc.uuid == "d5d6d7d8-d9da-dbdc-ddde-dfe0e1e2e3e4"
    assert pvc.pci == PciAddress(vendor_id=0x8086, device_id=0x0BD5, bus_id="0000:3a:00.0")
    assert pvc.capability.flags == F.FP32 | F.FP16 | F.FP64 | F.INT8
    assert pvc.capability.tier is Tier.DATACENTER
    assert dict(pvc.extra) == {
        "library": str(fake_ze),
        "device_type": "gpu",
        "core_clock_rate": 1600,
        "max_mem_alloc_bytes": 64 * GIB,
        "execution_units": 1024,
        "threads_per_eu": 8,
        "eu_simd_width": 16,
        "integrated": False,
        "ecc": True,
        "on_demand_paging": True,
        "driver_uuid": "10111213-1415-1617-1819-1a1b1c1d1e1f",
        "api_version": "1.17",
        "spirv_version": "1.4",
    }

    assert arc.name == "Intel(R) Arc(TM) A770 Graphics"
    assert arc.memory_bytes == 16 * GIB
    assert arc.multiprocessors == 32
    assert arc.uuid == "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"
    assert arc.pci == PciAddress(0x8086, 0x56A0, "0000:03:00.0")
    assert arc.capability.flags == F.FP32 | F.FP16 | F.INT8  # its FP64 is SOFT_FLOAT: not claimed
    assert arc.capability.tier is Tier.CONSUMER
    assert dict(arc.extra)["execution_units"] == 512

    assert npu.vendor is Vendor.INTEL
    assert npu.name == "Intel(R) AI Boost"
    assert npu.memory_bytes is None and npu.multiprocessors is None
    assert npu.driver_version == "1688"
    assert npu.uuid == "1d1e1f20-2122-2324-2526-2728292a2b2c"
    assert npu.pci == PciAddress(vendor_id=0x8086, device_id=0x7D1D, bus_id=None)
    assert npu.capability.flags == F.NONE  # no module properties: nothing stated
    assert npu.capability.tier is Tier.BASELINE
    extra = dict(npu.extra)
    assert (extra["device_type"], extra["integrated"], extra["api_version"]) == ("vpu", True, "1.13")
    assert extra["driver_uuid"] == "20212223-2425-2627-2829-2a2b2c2d2e2f"
    assert "spirv_version" not in extra

    for dev in devices:
        assert [k for k, _ in dev.extra] == sorted(k for k, _ in dev.extra)
        assert type(dev).from_json(json.loads(json.dumps(dev.to_json()))) == dev


def test_capabilities_agree_with_enumerate(cfg):
    backend = ProbedBackend(BackendKind.LEVEL_ZERO, lambda: ze.probe(cfg))
    devices = backend.enumerate()
    assert len(devices) == 3
    for n, dev in enumerate(devices):
        assert backend.capabilities(n) == dev.capability.flags
    for bad in (-1, len(devices), "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)


def test_a_wrong_stype_is_refused(cfg, monkeypatch):
    # IronAccelerator's mistake: the driver-properties stype on ze_device_properties_t.
    monkeypatch.setattr(ze.ZeDeviceProperties, "STYPE", ze.ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES)
    with pytest.raises(Unavailable) as info:
        ze.probe(cfg)
    assert info.value.reason == (
        "zeDeviceGetProperties failed for device 0 with ZE_RESULT_ERROR_INVALID_ARGUMENT (0x78000004)"
    )


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("0x78000001", "zeInit failed with ZE_RESULT_ERROR_UNINITIALIZED (0x78000001)"),
        ("0x70020000", "zeInit failed with ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE (0x70020000)"),
        ("0x12345", "zeInit failed with an unknown ze_result_t (0x00012345)"),
    ],
)
def test_init_failure_is_the_reason(cfg, monkeypatch, code, reason):
    monkeypatch.setenv("FAKE_ZE_INIT_RESULT", code)
    backend = ProbedBackend(BackendKind.LEVEL_ZERO, lambda: ze.probe(cfg))
    assert (backend.is_available(), backend.reason, backend.error) == (False, reason, None)


def test_zero_devices_is_the_reason(cfg, monkeypatch):
    monkeypatch.setenv("FAKE_ZE_DEVICES", "0")
    with pytest.raises(Unavailable, match=r"^zeDeviceGet reported no devices \(2 driver\(s\)\)$"):
        ze.probe(cfg)


def test_real_absence_names_the_library():
    if _library_here():
        pytest.skip("this host has a Level Zero loader")
    with pytest.raises(Unavailable) as info:
        ze.probe(Settings())
    assert info.value.reason.startswith("libze_loader.so.1 not found (tried libze_loader.so.1 (not found)")
    backend = ProbedBackend(BackendKind.LEVEL_ZERO, lambda: ze.probe(Settings()))
    assert backend.is_available() is False
    assert backend.reason == info.value.reason


# --- layouts and constants against include/ze_api.h, loader v1.32.0 (spec v1.17-r1.17.24) ------------------

# Sizes worked out from the header's member list (LP64), as anchors beside the compiler's answer.
STRUCTS = [
    (ze.ZeDriverProperties, "ze_driver_properties_t", 40),
    (ze.ZeDeviceProperties, "ze_device_properties_t", 368),
    (ze.ZeDeviceMemoryProperties, "ze_device_memory_properties_t", 296),
    (ze.ZeDeviceModuleProperties, "ze_device_module_properties_t", 64),
    (ze.ZePciAddressExt, "ze_pci_address_ext_t", 16),
    (ze.ZePciSpeedExt, "ze_pci_speed_ext_t", 16),
    (ze.ZePciExtProperties, "ze_pci_ext_properties_t", 48),
]


@pytest.mark.parametrize(("model", "c_type", "size"), STRUCTS, ids=[c for _, c, _ in STRUCTS])
def test_struct_layout(header, model, c_type, size):
    mine = ctypes_layout(model, c_type)
    assert {k: header[k] for k in mine} == mine
    assert mine[f"{c_type}.sizeof"] == size


def test_device_properties_anchors():
    # flags sits between deviceId and subdeviceId: the member IronAccelerator left out.
    p = ze.ZeDeviceProperties
    assert (p.stype.offset, p.pNext.offset, p.type.offset, p.deviceId.offset, p.flags.offset) == (0, 8, 16, 24, 28)
    assert (p.maxMemAllocSize.offset, p.timerResolution.offset, p.uuid.offset, p.name.offset) == (40, 80, 96, 112)


# ze_api.h v1.17-r1.17.24: _ze_structure_type_t, _ze_device_type_t, the flag enums and _ze_result_t.
HEADER_CONSTANTS = {
    "ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES": 0x1,
    "ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES": 0x3,
    "ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES": 0x5,
    "ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES": 0x7,
    "ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES": 0x10008,
    "ZE_DEVICE_TYPE_GPU": 1,
    "ZE_DEVICE_PROPERTY_FLAG_INTEGRATED": 1,
    "ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE": 2,
    "ZE_DEVICE_PROPERTY_FLAG_ECC": 4,
    "ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING": 8,
    "ZE_DEVICE_MODULE_FLAG_FP16": 1,
    "ZE_DEVICE_MODULE_FLAG_FP64": 2,
    "ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS": 4,
    "ZE_DEVICE_MODULE_FLAG_DP4A": 8,
    "ZE_DEVICE_FP_FLAG_SOFT_FLOAT": 0x80,
    "ZE_MAX_DEVICE_NAME": 256,
    "ZE_RESULT_SUCCESS": 0,
}
HEADER_DEVICE_TYPES = {
    "ZE_DEVICE_TYPE_GPU": 1,
    "ZE_DEVICE_TYPE_CPU": 2,
    "ZE_DEVICE_TYPE_FPGA": 3,
    "ZE_DEVICE_TYPE_MCA": 4,
    "ZE_DEVICE_TYPE_VPU": 5,
}
HEADER_RESULTS = {
    "ZE_RESULT_SUCCESS": 0x0,
    "ZE_RESULT_ERROR_DEVICE_LOST": 0x70000001,
    "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY": 0x70000002,
    "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY": 0x70000003,
    "ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET": 0x70000006,
    "ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE": 0x70000007,
    "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS": 0x70010000,
    "ZE_RESULT_ERROR_NOT_AVAILABLE": 0x70010001,
    "ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE": 0x70020000,
    "ZE_RESULT_ERROR_UNINITIALIZED": 0x78000001,
    "ZE_RESULT_ERROR_UNSUPPORTED_VERSION": 0x78000002,
    "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE": 0x78000003,
    "ZE_RESULT_ERROR_INVALID_ARGUMENT": 0x78000004,
    "ZE_RESULT_ERROR_INVALID_NULL_HANDLE": 0x78000005,
    "ZE_RESULT_ERROR_INVALID_NULL_POINTER": 0x78000007,
    "ZE_RESULT_ERROR_INVALID_ENUMERATION": 0x7800000C,
    "ZE_RESULT_ERROR_UNKNOWN": 0x7FFFFFFE,
}


@pytest.fixture(scope="module")
def header(tmp_path_factory) -> dict[str, int]:
    """What the C compiler makes of the fake loader's ze_api.h declarations: one program for every check."""
    exprs = [(n, n) for n in [*HEADER_CONSTANTS, *HEADER_DEVICE_TYPES, *HEADER_RESULTS]]
    for model, c_type, _ in STRUCTS:
        exprs += layout_expressions(c_type, [name for name, _ in model._fields_])
    return c_values("ze_fake.c", tmp_path_factory.mktemp("ze_values"), exprs)


def test_constants_match_the_header(header):
    assert {name: getattr(ze, name) for name in HEADER_CONSTANTS} == HEADER_CONSTANTS
    assert {name: code for code, name in ze.RESULT_NAMES.items()} == HEADER_RESULTS
    assert {f"ZE_DEVICE_TYPE_{label.upper()}": value for value, label in ze.DEVICE_TYPES.items()} == (
        HEADER_DEVICE_TYPES
    )
    names = {**HEADER_CONSTANTS, **HEADER_DEVICE_TYPES, **HEADER_RESULTS}
    assert {n: header[n] for n in names} == names


def _library_here() -> bool:
    """Whether the probe's own search (names, then the linker cache) finds a library on this host."""
    try:
        ze._open(Settings())
    except Unavailable:
        return False
    return True
