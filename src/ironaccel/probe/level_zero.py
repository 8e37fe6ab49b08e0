"""oneAPI Level Zero discovery through the loader (libze_loader), read with ctypes.

Every symbol, constant and layout here comes from the public header ``include/ze_api.h`` of the Level Zero
loader v1.32.0 (oneapi-src/level-zero, spec ``v1.17-r1.17.24``):

* functions, all returning ``ze_result_t``: ``zeInit(ze_init_flags_t)``, ``zeDriverGet(uint32_t*,
  ze_driver_handle_t*)``, ``zeDriverGetProperties(ze_driver_handle_t, ze_driver_properties_t*)``,
  ``zeDriverGetApiVersion(ze_driver_handle_t, ze_api_version_t*)``, ``zeDeviceGet(ze_driver_handle_t,
  uint32_t*, ze_device_handle_t*)``, ``zeDeviceGetProperties(ze_device_handle_t, ze_device_properties_t*)``,
  ``zeDeviceGetMemoryProperties(ze_device_handle_t, uint32_t*, ze_device_memory_properties_t*)``,
  ``zeDeviceGetModuleProperties(ze_device_handle_t, ze_device_module_properties_t*)`` and
  ``zeDevicePciGetPropertiesExt(ze_device_handle_t, ze_pci_ext_properties_t*)``; handles are pointers;
* the structs modelled below, each opening with ``ze_structure_type_t stype`` and ``void* pNext``, and
  their ``stype`` values: DRIVER_PROPERTIES 0x1, DEVICE_PROPERTIES 0x3, DEVICE_MODULE_PROPERTIES 0x5,
  DEVICE_MEMORY_PROPERTIES 0x7, PCI_EXT_PROPERTIES 0x10008;
* ``ze_device_type_t``, ``ze_device_property_flag_t``, ``ze_device_module_flag_t``, ``ze_device_fp_flag_t``
  and the ``ze_result_t`` codes in :data:`RESULT_NAMES`; ``ZE_MAJOR_VERSION(v) = v >> 16``, minor ``v & 0xffff``.

``zeInit(0)`` with ``zeDriverGet`` is the pre-1.10 way in (deprecated for ``zeInitDrivers``, still
served by every loader), kept so old loaders work. ``ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES`` (0x3) is asked for
rather than ``_1_2``, which only changes ``timerResolution``'s unit and older drivers do not know.

Every device of every driver is listed, whatever its type (GPU, VPU/NPU, ...): IronAccel discovers every
accelerator, so the type is recorded in ``extra["device_type"]`` and non-GPU devices get Tier BASELINE.
Ordinals run across drivers in the order the loader lists them. ``coreClockRate`` is reported raw in
``extra``: the header states no unit, so ``clock_khz`` stays None. ``multiprocessors`` is the sub-slice
count (Xe-cores: slices x sub-slices per slice). Numeric flags come from ``zeDeviceGetModuleProperties``
(FP16/FP64 only when not emulated in software, INT8 from DP4A); nothing else is claimed.
"""

from __future__ import annotations

import ctypes
import re
import sys
from typing import Any

from ..core import (
    BackendKind,
    Capability,
    CapabilityFlags,
    DeviceDescriptor,
    DeviceId,
    PciAddress,
    Settings,
    Tier,
    Unavailable,
    Vendor,
)
from ._ffi import bind, c_string, load_library, uuid_text

LIBRARY = "ze_loader.dll" if sys.platform == "win32" else "libze_loader.so.1"
CANDIDATES = (LIBRARY,) if sys.platform == "win32" else (LIBRARY, "libze_loader.so")

ZE_RESULT_SUCCESS = 0
RESULT_NAMES = {
    0x0: "ZE_RESULT_SUCCESS",
    0x70000001: "ZE_RESULT_ERROR_DEVICE_LOST",
    0x70000002: "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
    0x70000003: "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
    0x70000006: "ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET",
    0x70000007: "ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE",
    0x70010000: "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS",
    0x70010001: "ZE_RESULT_ERROR_NOT_AVAILABLE",
    0x70020000: "ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE",
    0x78000001: "ZE_RESULT_ERROR_UNINITIALIZED",
    0x78000002: "ZE_RESULT_ERROR_UNSUPPORTED_VERSION",
    0x78000003: "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE",
    0x78000004: "ZE_RESULT_ERROR_INVALID_ARGUMENT",
    0x78000005: "ZE_RESULT_ERROR_INVALID_NULL_HANDLE",
    0x78000007: "ZE_RESULT_ERROR_INVALID_NULL_POINTER",
    0x7800000C: "ZE_RESULT_ERROR_INVALID_ENUMERATION",
    0x7FFFFFFE: "ZE_RESULT_ERROR_UNKNOWN",
}

# ze_structure_type_t
ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES = 0x1
ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES = 0x3
ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES = 0x5
ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES = 0x7
ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES = 0x10008
# ze_device_type_t
ZE_DEVICE_TYPE_GPU = 1
DEVICE_TYPES = {1: "gpu", 2: "cpu", 3: "fpga", 4: "mca", 5: "vpu"}
# ze_device_property_flag_t
ZE_DEVICE_PROPERTY_FLAG_INTEGRATED = 1 << 0
ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE = 1 << 1
ZE_DEVICE_PROPERTY_FLAG_ECC = 1 << 2
ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING = 1 << 3
# ze_device_module_flag_t
ZE_DEVICE_MODULE_FLAG_FP16 = 1 << 0
ZE_DEVICE_MODULE_FLAG_FP64 = 1 << 1
ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS = 1 << 2
ZE_DEVICE_MODULE_FLAG_DP4A = 1 << 3
# ze_device_fp_flag_t
ZE_DEVICE_FP_FLAG_SOFT_FLOAT = 1 << 7

ZE_MAX_DEVICE_NAME = 256
_MAX_HANDLES = 4096  # counts above this are garbage from a broken driver

_DATACENTER = re.compile(r"\bdata center gpu\b", re.IGNORECASE)
_WORKSTATION = re.compile(r"\barc\S* pro\b", re.IGNORECASE)  # "Intel(R) Arc(TM) Pro B60 Graphics"


class _Chained(ctypes.Structure):
    """Base of the extensible structs: ``stype`` and ``pNext`` come first."""

    STYPE = 0

    def __init__(self) -> None:
        super().__init__()
        self.stype = self.STYPE


class ZeDriverProperties(_Chained):
    """``ze_driver_properties_t``."""

    STYPE = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES
    _fields_ = [
        ("stype", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("uuid", ctypes.c_uint8 * 16),  # ze_driver_uuid_t
        ("driverVersion", ctypes.c_uint32),
    ]


class ZeDeviceProperties(_Chained):
    """``ze_device_properties_t``."""

    STYPE = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES
    _fields_ = [
        ("stype", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("type", ctypes.c_int),  # ze_device_type_t
        ("vendorId", ctypes.c_uint32),
        ("deviceId", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),  # ze_device_property_flags_t
        ("subdeviceId", ctypes.c_uint32),
        ("coreClockRate", ctypes.c_uint32),
        ("maxMemAllocSize", ctypes.c_uint64),
        ("maxHardwareContexts", ctypes.c_uint32),
        ("maxCommandQueuePriority", ctypes.c_uint32),
        ("numThreadsPerEU", ctypes.c_uint32),
        ("physicalEUSimdWidth", ctypes.c_uint32),
        ("numEUsPerSubslice", ctypes.c_uint32),
        ("numSubslicesPerSlice", ctypes.c_uint32),
        ("numSlices", ctypes.c_uint32),
        ("timerResolution", ctypes.c_uint64),
        ("timestampValidBits", ctypes.c_uint32),
        ("kernelTimestampValidBits", ctypes.c_uint32),
        ("uuid", ctypes.c_uint8 * 16),  # ze_device_uuid_t
        ("name", ctypes.c_char * ZE_MAX_DEVICE_NAME),
    ]


class ZeDeviceMemoryProperties(_Chained):
    """``ze_device_memory_properties_t``."""

    STYPE = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES
    _fields_ = [
        ("stype", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("maxClockRate", ctypes.c_uint32),
        ("maxBusWidth", ctypes.c_uint32),
        ("totalSize", ctypes.c_uint64),
        ("name", ctypes.c_char * ZE_MAX_DEVICE_NAME),
    ]


class ZeDeviceModuleProperties(_Chained):
    """``ze_device_module_properties_t``."""

    STYPE = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES
    _fields_ = [
        ("stype", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("spirvVersionSupported", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),  # ze_device_module_flags_t
        ("fp16flags", ctypes.c_uint32),  # ze_device_fp_flags_t
        ("fp32flags", ctypes.c_uint32),
        ("fp64flags", ctypes.c_uint32),
        ("maxArgumentsSize", ctypes.c_uint32),
        ("printfBufferSize", ctypes.c_uint32),
        ("nativeKernelSupported", ctypes.c_uint8 * 16),  # ze_native_kernel_uuid_t
    ]


class ZePciAddressExt(ctypes.Structure):
    """``ze_pci_address_ext_t``."""

    _fields_ = [
        ("domain", ctypes.c_uint32),
        ("bus", ctypes.c_uint32),
        ("device", ctypes.c_uint32),
        ("function", ctypes.c_uint32),
    ]


class ZePciSpeedExt(ctypes.Structure):
    """``ze_pci_speed_ext_t``."""

    _fields_ = [("genVersion", ctypes.c_int32), ("width", ctypes.c_int32), ("maxBandwidth", ctypes.c_int64)]


class ZePciExtProperties(_Chained):
    """``ze_pci_ext_properties_t``."""

    STYPE = ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES
    _fields_ = [
        ("stype", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("address", ZePciAddressExt),
        ("maxSpeed", ZePciSpeedExt),
    ]


def probe(settings: Settings) -> list[DeviceDescriptor]:
    """Every device of every Level Zero driver, ordinal order; :class:`Unavailable` when there are none."""
    lib = _open(settings)
    api = _Api(lib)
    api.check("zeInit", api.zeInit(0))
    drivers = _handles(api, "zeDriverGet", lambda n, out: api.zeDriverGet(n, out))
    if not drivers:
        raise Unavailable("zeDriverGet reported no drivers")
    library = getattr(lib, "_name", LIBRARY)
    found: list[tuple[Any, dict[str, Any]]] = []
    for driver in drivers:
        info = _driver_info(api, driver)
        devices = _handles(api, "zeDeviceGet", lambda n, out, d=driver: api.zeDeviceGet(d, n, out))
        found += [(device, info) for device in devices]
    if not found:
        raise Unavailable(f"zeDeviceGet reported no devices ({len(drivers)} driver(s))")
    return [_describe(api, ordinal, device, info, library) for ordinal, (device, info) in enumerate(found)]


def _open(settings: Settings) -> ctypes.CDLL:
    return load_library("level-zero", CANDIDATES, settings.library("level-zero"), missing=LIBRARY)


class _Api:
    """The bound loader entry points; optional ones are None when the loader lacks them."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        r, h, u32p = ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)
        hp = ctypes.POINTER(ctypes.c_void_p)
        self.zeInit = bind(lib, "zeInit", r, ctypes.c_uint32)
        self.zeDriverGet = bind(lib, "zeDriverGet", r, u32p, hp)
        self.zeDeviceGet = bind(lib, "zeDeviceGet", r, h, u32p, hp)
        self.zeDeviceGetProperties = bind(lib, "zeDeviceGetProperties", r, h, ctypes.POINTER(ZeDeviceProperties))
        self.zeDriverGetProperties = _optional(lib, "zeDriverGetProperties", r, h, ctypes.POINTER(ZeDriverProperties))
        self.zeDriverGetApiVersion = _optional(lib, "zeDriverGetApiVersion", r, h, ctypes.POINTER(ctypes.c_int))
        self.zeDeviceGetMemoryProperties = _optional(
            lib, "zeDeviceGetMemoryProperties", r, h, u32p, ctypes.POINTER(ZeDeviceMemoryProperties)
        )
        self.zeDeviceGetModuleProperties = _optional(
            lib, "zeDeviceGetModuleProperties", r, h, ctypes.POINTER(ZeDeviceModuleProperties)
        )
        self.zeDevicePciGetPropertiesExt = _optional(
            lib, "zeDevicePciGetPropertiesExt", r, h, ctypes.POINTER(ZePciExtProperties)
        )

    @staticmethod
    def check(call: str, code: int, ordinal: int | None = None) -> None:
        if code != ZE_RESULT_SUCCESS:
            where = "" if ordinal is None else f" for device {ordinal}"
            name = RESULT_NAMES.get(code & 0xFFFFFFFF, "an unknown ze_result_t")
            raise Unavailable(f"{call} failed{where} with {name} (0x{code & 0xFFFFFFFF:08x})")


def _optional(lib: ctypes.CDLL, name: str, restype: Any, *argtypes: Any) -> Any:
    return bind(lib, name, restype, *argtypes) if hasattr(lib, name) else None


def _handles(api: _Api, call: str, get: Any) -> list[int]:
    """The two-call count-then-fill pattern of zeDriverGet / zeDeviceGet."""
    count = ctypes.c_uint32(0)
    api.check(call, get(ctypes.byref(count), None))
    if count.value > _MAX_HANDLES:
        raise Unavailable(f"{call} reported an implausible {count.value} handles")
    if count.value == 0:
        return []
    handles = (ctypes.c_void_p * count.value)()
    api.check(call, get(ctypes.byref(count), handles))
    return [h for h in handles[: count.value] if h]


def _driver_info(api: _Api, driver: int) -> dict[str, Any]:
    info: dict[str, Any] = {}
    props = ZeDriverProperties()
    if (
        api.zeDriverGetProperties is not None
        and api.zeDriverGetProperties(driver, ctypes.byref(props)) == ZE_RESULT_SUCCESS
    ):
        info["driver_version"] = str(props.driverVersion)  # an opaque, increasing number per the header
        info["driver_uuid"] = uuid_text(bytes(props.uuid))
    version = ctypes.c_int(0)
    if (
        api.zeDriverGetApiVersion is not None
        and api.zeDriverGetApiVersion(driver, ctypes.byref(version)) == ZE_RESULT_SUCCESS
    ):
        info["api_version"] = f"{version.value >> 16}.{version.value & 0xFFFF}"
    return info


def _describe(api: _Api, ordinal: int, device: int, info: dict[str, Any], library: str) -> DeviceDescriptor:
    props = ZeDeviceProperties()
    api.check("zeDeviceGetProperties", api.zeDeviceGetProperties(device, ctypes.byref(props)), ordinal)
    name = c_string(props.name)
    device_type = DEVICE_TYPES.get(props.type, f"unknown ({props.type})")
    flags_bits = props.flags
    subslices = props.numSlices * props.numSubslicesPerSlice

    extra: dict[str, Any] = {
        "library": library,
        "device_type": device_type,
        "core_clock_rate": props.coreClockRate,  # unit not stated by ze_api.h
        "max_mem_alloc_bytes": props.maxMemAllocSize,
        "execution_units": subslices * props.numEUsPerSubslice,
        "threads_per_eu": props.numThreadsPerEU,
        "eu_simd_width": props.physicalEUSimdWidth,
        "integrated": bool(flags_bits & ZE_DEVICE_PROPERTY_FLAG_INTEGRATED),
        "ecc": bool(flags_bits & ZE_DEVICE_PROPERTY_FLAG_ECC),
        "on_demand_paging": bool(flags_bits & ZE_DEVICE_PROPERTY_FLAG_ONDEMANDPAGING),
    }
    if flags_bits & ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE:
        extra["subdevice_id"] = props.subdeviceId
    for key in ("driver_uuid", "api_version"):
        if key in info:
            extra[key] = info[key]
    flags = _module_flags(api, device, extra)
    memory = _memory_bytes(api, device)
    bus_id = _pci_bus_id(api, device)
    uuid_raw = bytes(props.uuid)
    return DeviceDescriptor(
        id=DeviceId(BackendKind.LEVEL_ZERO, ordinal),
        vendor=Vendor.from_pci(props.vendorId),
        name=name,
        memory_bytes=memory,
        multiprocessors=subslices or None,
        driver_version=info.get("driver_version"),
        uuid=uuid_text(uuid_raw) if any(uuid_raw) else None,
        pci=PciAddress(vendor_id=props.vendorId, device_id=props.deviceId, bus_id=bus_id),
        capability=Capability(flags=flags, tier=_tier(name, props.type)),
        extra=tuple(sorted(extra.items())),
    )


def _module_flags(api: _Api, device: int, extra: dict[str, Any]) -> CapabilityFlags:
    """Numeric formats the device's module properties state; none when it has no module support."""
    props = ZeDeviceModuleProperties()
    if api.zeDeviceGetModuleProperties is None or api.zeDeviceGetModuleProperties(device, ctypes.byref(props)):
        return CapabilityFlags.NONE
    extra["spirv_version"] = f"{props.spirvVersionSupported >> 16}.{props.spirvVersionSupported & 0xFFFF}"
    flags = CapabilityFlags.NONE
    if props.fp32flags and not props.fp32flags & ZE_DEVICE_FP_FLAG_SOFT_FLOAT:
        flags |= CapabilityFlags.FP32
    if props.flags & ZE_DEVICE_MODULE_FLAG_FP16 and not props.fp16flags & ZE_DEVICE_FP_FLAG_SOFT_FLOAT:
        flags |= CapabilityFlags.FP16
    if props.flags & ZE_DEVICE_MODULE_FLAG_FP64 and not props.fp64flags & ZE_DEVICE_FP_FLAG_SOFT_FLOAT:
        flags |= CapabilityFlags.FP64
    if props.flags & ZE_DEVICE_MODULE_FLAG_DP4A:
        flags |= CapabilityFlags.INT8
    return flags


def _memory_bytes(api: _Api, device: int) -> int | None:
    """The sum of the device's local memories (several on multi-tile parts); None when not reported."""
    if api.zeDeviceGetMemoryProperties is None:
        return None
    count = ctypes.c_uint32(0)
    if api.zeDeviceGetMemoryProperties(device, ctypes.byref(count), None) or not 0 < count.value <= 64:
        return None
    memories = (ZeDeviceMemoryProperties * count.value)()
    for mem in memories:
        mem.stype = ZeDeviceMemoryProperties.STYPE
    if api.zeDeviceGetMemoryProperties(device, ctypes.byref(count), memories):
        return None
    return sum(mem.totalSize for mem in memories[: count.value]) or None


def _pci_bus_id(api: _Api, device: int) -> str | None:
    props = ZePciExtProperties()
    if api.zeDevicePciGetPropertiesExt is None or api.zeDevicePciGetPropertiesExt(device, ctypes.byref(props)):
        return None  # extension absent, or unsupported by this driver
    a = props.address
    return f"{a.domain:04x}:{a.bus:02x}:{a.device:02x}.{a.function:x}"


def _tier(name: str, device_type: int) -> Tier:
    if device_type != ZE_DEVICE_TYPE_GPU:
        return Tier.BASELINE
    if _DATACENTER.search(name):
        return Tier.DATACENTER
    if _WORKSTATION.search(name):
        return Tier.WORKSTATION
    return Tier.CONSUMER
