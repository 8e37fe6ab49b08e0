"""CUDA discovery through the driver API (libcuda), read with ctypes.

Every symbol, constant and layout here comes from NVIDIA's public header ``cuda.h`` of CUDA Toolkit 12.6
(``#define CUDA_VERSION 12060``, as shipped in 12.6.3):

* functions, all returning ``CUresult``: ``cuInit(unsigned int)``, ``cuDriverGetVersion(int*)``,
  ``cuDeviceGetCount(int*)``, ``cuDeviceGet(CUdevice*, int)``, ``cuDeviceGetName(char*, int, CUdevice)``,
  ``cuDeviceTotalMem_v2(size_t*, CUdevice)`` (what ``cuDeviceTotalMem`` is #defined to),
  ``cuDeviceGetUuid_v2`` / ``cuDeviceGetUuid(CUuuid*, CUdevice)``,
  ``cuDeviceGetAttribute(int*, CUdevice_attribute, CUdevice)``, ``cuDeviceGetPCIBusId(char*, int, CUdevice)``
  ("[domain]:[bus]:[device].[function]", 13 bytes with the NUL), ``cuDeviceCanAccessPeer(int*, CUdevice,
  CUdevice)`` and ``cuGetErrorName(CUresult, const char**)``; ``CUdevice`` is ``int``;
* ``CUuuid`` = ``struct { char bytes[16]; }``;
* the ``CUresult`` codes in :data:`RESULT_NAMES` and the ``CUdevice_attribute`` values in :data:`ATTRIBUTES`;
* ``cuDriverGetVersion`` returns ``1000 * major + 10 * minor``.

Flags are set only where the capability is documented for a compute capability (CUDA C++ Programming
Guide, PTX ISA) or where the driver reports it as an attribute; HBM, NVLink, ray tracing and rates are not
derivable from this API and are left unset. The tier comes from unambiguous product names only.
The PCI vendor and product ids are not part of this API (``CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID`` is the slot
number on the bus), so only the bus id is reported.
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

LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
CANDIDATES = (LIBRARY,) if sys.platform == "win32" else (LIBRARY, "libcuda.so")

CUDA_SUCCESS = 0
# CUresult names for the codes discovery can meet; cuGetErrorName covers the rest.
RESULT_NAMES = {
    0: "CUDA_SUCCESS",
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    4: "CUDA_ERROR_DEINITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    102: "CUDA_ERROR_DEVICE_NOT_LICENSED",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    800: "CUDA_ERROR_NOT_PERMITTED",
    801: "CUDA_ERROR_NOT_SUPPORTED",
    802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

# CUdevice_attribute values read, keyed by their cuda.h names without the CU_DEVICE_ATTRIBUTE_ prefix.
ATTRIBUTE_PREFIX = "CU_DEVICE_ATTRIBUTE_"
ATTRIBUTES = {
    "CLOCK_RATE": 13,  # kHz; deprecated in newer drivers, so it may fail
    "MULTIPROCESSOR_COUNT": 16,
    "INTEGRATED": 18,
    "CAN_MAP_HOST_MEMORY": 19,
    "CONCURRENT_KERNELS": 31,
    "ECC_ENABLED": 32,
    "MEMORY_CLOCK_RATE": 36,  # kHz
    "GLOBAL_MEMORY_BUS_WIDTH": 37,  # bits
    "L2_CACHE_SIZE": 38,  # bytes
    "UNIFIED_ADDRESSING": 41,
    "COMPUTE_CAPABILITY_MAJOR": 75,
    "COMPUTE_CAPABILITY_MINOR": 76,
    "MANAGED_MEMORY": 83,
    "MULTI_GPU_BOARD": 84,
    "COOPERATIVE_LAUNCH": 95,
    "MEMORY_POOLS_SUPPORTED": 115,
}

# Boolean attributes that state a capability outright.
_ATTRIBUTE_FLAGS = {
    "COOPERATIVE_LAUNCH": CapabilityFlags.COOPERATIVE_LAUNCH,
    "MANAGED_MEMORY": CapabilityFlags.UNIFIED_MEMORY,
    "CAN_MAP_HOST_MEMORY": CapabilityFlags.HOST_PINNED,
    "MEMORY_POOLS_SUPPORTED": CapabilityFlags.ASYNC_ALLOC,
    "CONCURRENT_KERNELS": CapabilityFlags.MULTI_STREAM,
}
# Attributes copied into ``extra`` under these keys when the driver answers.
_EXTRA_ATTRIBUTES = {
    "INTEGRATED": ("integrated", bool),
    "ECC_ENABLED": ("ecc_enabled", bool),
    "UNIFIED_ADDRESSING": ("unified_addressing", bool),
    "MULTI_GPU_BOARD": ("multi_gpu_board", bool),
    "MEMORY_CLOCK_RATE": ("memory_clock_khz", int),
    "GLOBAL_MEMORY_BUS_WIDTH": ("memory_bus_width_bits", int),
    "L2_CACHE_SIZE": ("l2_cache_bytes", int),
}

# Compute capability from which each feature is documented (CUDA C++ Programming Guide, PTX ISA):
# half arithmetic 5.3; dp4a 6.1; warp matrix functions (wmma) 7.0; bf16/tf32 mma and 2:4 sparse mma 8.0;
# e4m3/e5m2 mma 8.9; e2m1 (fp4) mma on the Blackwell family, 10.0 and later; dynamic parallelism 3.5.
_CC_FLAGS = (
    ((3, 5), CapabilityFlags.DYNAMIC_PARALLELISM),
    ((5, 3), CapabilityFlags.FP16),
    ((6, 1), CapabilityFlags.INT8),
    ((7, 0), CapabilityFlags.TENSOR_CORES | CapabilityFlags.WMMA),
    ((8, 0), CapabilityFlags.BF16 | CapabilityFlags.TF32 | CapabilityFlags.SPARSE_2_4),
    ((8, 9), CapabilityFlags.FP8_E4M3 | CapabilityFlags.FP8_E5M2),
    ((10, 0), CapabilityFlags.FP4),
)

# Tier from product names that leave no doubt; anything else is Consumer.
_DATACENTER = re.compile(
    r"\b(tesla|a2|a10g?|a16|a30|a40|a100|a800|h20|h100|h200|h800|gh200|b100|b200|b300|gb200|gb300|l4|l20|l40s?)\b",
    re.IGNORECASE,
)
_WORKSTATION = re.compile(r"\b(quadro|rtx a\d{3,4}|rtx pro|rtx \d{4} ada)\b", re.IGNORECASE)
_CONSUMER = re.compile(r"\b(geforce|titan)\b", re.IGNORECASE)

_MAX_DEVICES = 4096  # a count above this is garbage from a broken driver, not hardware


class CUuuid(ctypes.Structure):
    """``CUuuid``: 16 raw bytes."""

    _fields_ = [("bytes", ctypes.c_char * 16)]


def probe(settings: Settings) -> list[DeviceDescriptor]:
    """Every CUDA device the driver reports, ordinal order; :class:`Unavailable` when there are none."""
    lib = _open(settings)
    api = _Api(lib)
    api.check("cuInit", api.cuInit(0))
    version = ctypes.c_int(0)
    driver_version = None
    if api.cuDriverGetVersion(ctypes.byref(version)) == CUDA_SUCCESS:
        driver_version = f"{version.value // 1000}.{version.value % 1000 // 10}"
    count = ctypes.c_int(0)
    api.check("cuDeviceGetCount", api.cuDeviceGetCount(ctypes.byref(count)))
    if count.value <= 0:
        raise Unavailable("cuDeviceGetCount reported no devices")
    if count.value > _MAX_DEVICES:
        raise Unavailable(f"cuDeviceGetCount reported an implausible {count.value} devices")
    handles = []
    for ordinal in range(count.value):
        handle = ctypes.c_int(0)
        api.check("cuDeviceGet", api.cuDeviceGet(ctypes.byref(handle), ordinal), ordinal)
        handles.append(handle.value)
    library = getattr(lib, "_name", LIBRARY)
    return [_describe(api, ordinal, handles, driver_version, library) for ordinal in range(len(handles))]


def _open(settings: Settings) -> ctypes.CDLL:
    return load_library("cuda", CANDIDATES, settings.library("cuda"), missing=LIBRARY)


class _Api:
    """The bound driver entry points; optional ones are None when the library lacks them."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        i, ip = ctypes.c_int, ctypes.POINTER(ctypes.c_int)
        self.cuInit = bind(lib, "cuInit", i, ctypes.c_uint)
        self.cuDriverGetVersion = bind(lib, "cuDriverGetVersion", i, ip)
        self.cuDeviceGetCount = bind(lib, "cuDeviceGetCount", i, ip)
        self.cuDeviceGet = bind(lib, "cuDeviceGet", i, ip, i)
        self.cuDeviceGetName = bind(lib, "cuDeviceGetName", i, ctypes.c_char_p, i, i)
        self.cuDeviceTotalMem = bind(lib, "cuDeviceTotalMem_v2", i, ctypes.POINTER(ctypes.c_size_t), i)
        self.cuDeviceGetAttribute = bind(lib, "cuDeviceGetAttribute", i, ip, i, i)
        # _v2 (11.4+) returns the MIG instance's UUID under MIG; the older entry point is the fallback.
        self.cuDeviceGetUuid = _optional(lib, ("cuDeviceGetUuid_v2", "cuDeviceGetUuid"), i, ctypes.POINTER(CUuuid), i)
        self.cuDeviceGetPCIBusId = _optional(lib, ("cuDeviceGetPCIBusId",), i, ctypes.c_char_p, i, i)
        self.cuDeviceCanAccessPeer = _optional(lib, ("cuDeviceCanAccessPeer",), i, ip, i, i)
        self.cuGetErrorName = _optional(lib, ("cuGetErrorName",), i, i, ctypes.POINTER(ctypes.c_char_p))
        self.has_graphs = hasattr(lib, "cuGraphCreate")

    def error_name(self, code: int) -> str:
        if code in RESULT_NAMES:
            return RESULT_NAMES[code]
        text = ctypes.c_char_p()
        if (
            self.cuGetErrorName is not None
            and self.cuGetErrorName(code, ctypes.byref(text)) == CUDA_SUCCESS
            and text.value
        ):
            return text.value.decode("ascii", "replace")
        return "an unknown CUresult"

    def check(self, call: str, code: int, ordinal: int | None = None) -> None:
        if code != CUDA_SUCCESS:
            where = "" if ordinal is None else f" for device {ordinal}"
            raise Unavailable(f"{call} failed{where} with {self.error_name(code)} ({code})")


def _optional(lib: ctypes.CDLL, names: tuple[str, ...], restype: Any, *argtypes: Any) -> Any:
    for name in names:
        if hasattr(lib, name):
            return bind(lib, name, restype, *argtypes)
    return None


def _describe(
    api: _Api, ordinal: int, handles: list[int], driver_version: str | None, library: str
) -> DeviceDescriptor:
    dev = handles[ordinal]
    name_buf = ctypes.create_string_buffer(256)
    api.check("cuDeviceGetName", api.cuDeviceGetName(name_buf, len(name_buf), dev), ordinal)
    name = c_string(name_buf.raw)
    total = ctypes.c_size_t(0)
    api.check("cuDeviceTotalMem_v2", api.cuDeviceTotalMem(ctypes.byref(total), dev), ordinal)

    attrs = _attributes(api, dev)
    major, minor = attrs.get("COMPUTE_CAPABILITY_MAJOR"), attrs.get("COMPUTE_CAPABILITY_MINOR")
    cc = (major, minor) if major is not None and minor is not None else None

    flags = CapabilityFlags.FP32 | CapabilityFlags.FP64  # every device the driver supports has both
    if cc is not None:
        for since, bits in _CC_FLAGS:
            if cc >= since:
                flags |= bits
    for key, bit in _ATTRIBUTE_FLAGS.items():
        if attrs.get(key):
            flags |= bit
    if api.has_graphs:
        flags |= CapabilityFlags.GRAPHS
    if _can_access_any_peer(api, ordinal, handles):
        flags |= CapabilityFlags.PEER_ACCESS

    extra: dict[str, Any] = {"library": library}
    if cc is not None:
        extra["compute_capability"] = f"{cc[0]}.{cc[1]}"
    for key, (label, kind) in _EXTRA_ATTRIBUTES.items():
        if key in attrs:
            extra[label] = kind(attrs[key])
    bus_id = _pci_bus_id(api, dev)
    return DeviceDescriptor(
        id=DeviceId(BackendKind.CUDA, ordinal),
        vendor=Vendor.NVIDIA,
        name=name,
        arch=f"sm_{cc[0]}{cc[1]}" if cc is not None else "",
        memory_bytes=total.value,
        multiprocessors=attrs.get("MULTIPROCESSOR_COUNT"),
        clock_khz=attrs.get("CLOCK_RATE") or None,
        driver_version=driver_version,
        uuid=_uuid(api, dev),
        pci=PciAddress(bus_id=bus_id) if bus_id else None,
        capability=Capability(flags=flags, tier=_tier(name)),
        extra=tuple(sorted(extra.items())),
    )


def _attributes(api: _Api, dev: int) -> dict[str, int]:
    """The attributes this driver answers; one it rejects (older or newer driver) is simply absent."""
    found = {}
    value = ctypes.c_int(0)
    for key, attr in ATTRIBUTES.items():
        if api.cuDeviceGetAttribute(ctypes.byref(value), attr, dev) == CUDA_SUCCESS:
            found[key] = value.value
    return found


def _uuid(api: _Api, dev: int) -> str | None:
    raw = CUuuid()
    if api.cuDeviceGetUuid is None or api.cuDeviceGetUuid(ctypes.byref(raw), dev) != CUDA_SUCCESS:
        return None
    data = bytes(raw)
    return uuid_text(data) if any(data) else None


def _pci_bus_id(api: _Api, dev: int) -> str | None:
    if api.cuDeviceGetPCIBusId is None:
        return None
    buf = ctypes.create_string_buffer(64)
    if api.cuDeviceGetPCIBusId(buf, len(buf), dev) != CUDA_SUCCESS:
        return None
    return c_string(buf.raw).lower() or None  # lower case, as sysfs and the other probes write it


def _can_access_any_peer(api: _Api, ordinal: int, handles: list[int]) -> bool:
    if api.cuDeviceCanAccessPeer is None:
        return False
    value = ctypes.c_int(0)
    for other, peer in enumerate(handles):
        if other == ordinal:
            continue
        if api.cuDeviceCanAccessPeer(ctypes.byref(value), handles[ordinal], peer) == CUDA_SUCCESS and value.value:
            return True
    return False


def _tier(name: str) -> Tier:
    if _CONSUMER.search(name):
        return Tier.CONSUMER
    if _DATACENTER.search(name):
        return Tier.DATACENTER
    if _WORKSTATION.search(name):
        return Tier.WORKSTATION
    return Tier.CONSUMER
