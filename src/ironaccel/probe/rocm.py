"""ROCm discovery through the HIP runtime (libamdhip64), read with ctypes.

Every symbol, constant and layout here comes from AMD's public header ``include/hip/hip_runtime_api.h`` of
HIP for ROCm 6.2.2 (ROCm/HIP, tag ``rocm-6.2.2``). The attribute values used are the same from ROCm 5.2
(which added ``MemoryPoolsSupported``; older runtimes reject 88) through the ROCm 7 header (ROCm/rocm-systems,
``projects/hip``):

* functions, all returning ``hipError_t``: ``hipInit(unsigned int)``, ``hipDriverGetVersion(int*)``,
  ``hipRuntimeGetVersion(int*)``, ``hipGetDeviceCount(int*)``, ``hipDeviceGet(hipDevice_t*, int)``,
  ``hipDeviceGetName(char*, int, hipDevice_t)``, ``hipDeviceTotalMem(size_t*, hipDevice_t)``,
  ``hipDeviceGetUuid(hipUUID*, hipDevice_t)``, ``hipDeviceGetAttribute(int*, hipDeviceAttribute_t, int)``,
  ``hipDeviceGetPCIBusId(char*, int, int)``, ``hipDeviceCanAccessPeer(int*, int, int)``,
  ``const char* hipGetErrorName(hipError_t)`` and ``hipGetDevicePropertiesR0600(hipDeviceProp_tR0600*, int)``
  (what ``hipGetDeviceProperties`` is #defined to since ROCm 6.0); ``hipDevice_t`` is ``int``;
* ``hipDeviceAttribute_t``: an implicitly numbered enum, CUDA-compatible attributes from 0 in
  (mostly) alphabetical order and AMD-specific ones from 10000; the values used are in :data:`ATTRIBUTES`;
* ``hipError_t`` codes in :data:`ERROR_NAMES`;
* ``hipDeviceProp_tR0600``, modelled whole in :class:`HipDeviceProp`, read only for ``gcnArchName``
  (no attribute gives the architecture since ``hipDeviceAttributeGcnArchName`` became ``Unused5``) and
  the ``hasDoubles`` bit of ``hipDeviceArch_t`` (17 one-bit ``unsigned`` fields = one 32-bit word);
* HIP versions are ``major * 10000000 + minor * 100000 + patch`` (HIP docs/how-to/faq.md).

Flags come from attributes the runtime states and from the gfx architecture where AMD documents the
instructions (CDNA MFMA on gfx908/gfx90a/gfx94x/gfx950, RDNA WMMA on gfx11/gfx12): FP8 only where the
format is the OCP one (gfx950, gfx12); gfx94x's FP8 is the FNUZ variant, noted in ``extra`` and not
flagged. The tier comes from product names (Instinct, Radeon PRO) only. PCI vendor/product ids are not
part of this API (``hipDeviceAttributePciDeviceId`` is the slot on the bus), so only the bus id is given.
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

LIBRARY = "amdhip64.dll" if sys.platform == "win32" else "libamdhip64.so"
CANDIDATES = (
    (LIBRARY,)
    if sys.platform == "win32"
    else (LIBRARY, "libamdhip64.so.7", "libamdhip64.so.6", "/opt/rocm/lib/libamdhip64.so")
)

HIP_SUCCESS = 0
ERROR_NAMES = {
    0: "hipSuccess",
    1: "hipErrorInvalidValue",
    2: "hipErrorOutOfMemory",
    3: "hipErrorNotInitialized",
    4: "hipErrorDeinitialized",
    35: "hipErrorInsufficientDriver",
    100: "hipErrorNoDevice",
    101: "hipErrorInvalidDevice",
    304: "hipErrorOperatingSystem",
    801: "hipErrorNotSupported",
    999: "hipErrorUnknown",
    1052: "hipErrorRuntimeMemory",
    1053: "hipErrorRuntimeOther",
}

# hipDeviceAttribute_t values read, keyed by their header names without the hipDeviceAttribute prefix.
ATTRIBUTE_PREFIX = "hipDeviceAttribute"
ATTRIBUTES = {
    "EccEnabled": 0,
    "CanMapHostMemory": 3,
    "ClockRate": 5,  # kHz
    "ConcurrentKernels": 8,
    "CooperativeLaunch": 10,
    "Integrated": 16,
    "L2CacheSize": 19,
    "ComputeCapabilityMajor": 23,
    "ManagedMemory": 24,
    "MemoryBusWidth": 59,
    "MemoryClockRate": 60,  # kHz
    "ComputeCapabilityMinor": 61,
    "MultiprocessorCount": 63,
    "MemoryPoolsSupported": 88,
    "IsLargeBar": 10011,
    "AsicRevision": 10012,
}

_ATTRIBUTE_FLAGS = {
    "CooperativeLaunch": CapabilityFlags.COOPERATIVE_LAUNCH,
    "ManagedMemory": CapabilityFlags.UNIFIED_MEMORY,
    "CanMapHostMemory": CapabilityFlags.HOST_PINNED,
    "MemoryPoolsSupported": CapabilityFlags.ASYNC_ALLOC,
    "ConcurrentKernels": CapabilityFlags.MULTI_STREAM,
}
_EXTRA_ATTRIBUTES = {
    "Integrated": ("integrated", bool),
    "EccEnabled": ("ecc_enabled", bool),
    "IsLargeBar": ("large_bar", bool),
    "AsicRevision": ("asic_revision", int),
    "MemoryClockRate": ("memory_clock_khz", int),
    "MemoryBusWidth": ("memory_bus_width_bits", int),
    "L2CacheSize": ("l2_cache_bytes", int),
}

# Matrix instructions per architecture (AMD ISA guides; LLVM AMDGPU processor table).
_MFMA = frozenset({"gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"})  # CDNA matrix cores
_XF32 = frozenset({"gfx940", "gfx941", "gfx942"})  # xf32 MFMA, dropped again in gfx950
_FP8_FNUZ = frozenset({"gfx940", "gfx941", "gfx942"})
_SPARSE = frozenset({"gfx940", "gfx941", "gfx942", "gfx950"})  # SMFMAC
# "gfx" + major (decimal) + minor and stepping (one hex digit each), e.g. gfx90a, gfx942, gfx1100.
_ARCH = re.compile(r"gfx(\d{1,2})[0-9a-f]{2}(?![0-9a-z])")
_HAS_DOUBLES_BIT = 1 << 7  # hipDeviceArch_t.hasDoubles, the eighth one-bit field

_DATACENTER = re.compile(r"\binstinct\b", re.IGNORECASE)
_WORKSTATION = re.compile(r"\bradeon (ai )?pro\b|\bfirepro\b", re.IGNORECASE)

_MAX_DEVICES = 4096
# hipGetDevicePropertiesR0600 gets this much room past the modelled struct, so a runtime whose struct grew
# writes into slack rather than past the buffer.
_PROPS_SLACK = 4096


class HipDeviceProp(ctypes.Structure):
    """``hipDeviceProp_tR0600`` exactly as hip_runtime_api.h (ROCm 6.2.2) declares it."""

    _fields_ = [
        ("name", ctypes.c_char * 256),
        ("uuid", ctypes.c_char * 16),  # hipUUID
        ("luid", ctypes.c_char * 8),
        ("luidDeviceNodeMask", ctypes.c_uint),
        ("totalGlobalMem", ctypes.c_size_t),
        ("sharedMemPerBlock", ctypes.c_size_t),
        ("regsPerBlock", ctypes.c_int),
        ("warpSize", ctypes.c_int),
        ("memPitch", ctypes.c_size_t),
        ("maxThreadsPerBlock", ctypes.c_int),
        ("maxThreadsDim", ctypes.c_int * 3),
        ("maxGridSize", ctypes.c_int * 3),
        ("clockRate", ctypes.c_int),
        ("totalConstMem", ctypes.c_size_t),
        ("major", ctypes.c_int),
        ("minor", ctypes.c_int),
        ("textureAlignment", ctypes.c_size_t),
        ("texturePitchAlignment", ctypes.c_size_t),
        ("deviceOverlap", ctypes.c_int),
        ("multiProcessorCount", ctypes.c_int),
        ("kernelExecTimeoutEnabled", ctypes.c_int),
        ("integrated", ctypes.c_int),
        ("canMapHostMemory", ctypes.c_int),
        ("computeMode", ctypes.c_int),
        ("maxTexture1D", ctypes.c_int),
        ("maxTexture1DMipmap", ctypes.c_int),
        ("maxTexture1DLinear", ctypes.c_int),
        ("maxTexture2D", ctypes.c_int * 2),
        ("maxTexture2DMipmap", ctypes.c_int * 2),
        ("maxTexture2DLinear", ctypes.c_int * 3),
        ("maxTexture2DGather", ctypes.c_int * 2),
        ("maxTexture3D", ctypes.c_int * 3),
        ("maxTexture3DAlt", ctypes.c_int * 3),
        ("maxTextureCubemap", ctypes.c_int),
        ("maxTexture1DLayered", ctypes.c_int * 2),
        ("maxTexture2DLayered", ctypes.c_int * 3),
        ("maxTextureCubemapLayered", ctypes.c_int * 2),
        ("maxSurface1D", ctypes.c_int),
        ("maxSurface2D", ctypes.c_int * 2),
        ("maxSurface3D", ctypes.c_int * 3),
        ("maxSurface1DLayered", ctypes.c_int * 2),
        ("maxSurface2DLayered", ctypes.c_int * 3),
        ("maxSurfaceCubemap", ctypes.c_int),
        ("maxSurfaceCubemapLayered", ctypes.c_int * 2),
        ("surfaceAlignment", ctypes.c_size_t),
        ("concurrentKernels", ctypes.c_int),
        ("ECCEnabled", ctypes.c_int),
        ("pciBusID", ctypes.c_int),
        ("pciDeviceID", ctypes.c_int),
        ("pciDomainID", ctypes.c_int),
        ("tccDriver", ctypes.c_int),
        ("asyncEngineCount", ctypes.c_int),
        ("unifiedAddressing", ctypes.c_int),
        ("memoryClockRate", ctypes.c_int),
        ("memoryBusWidth", ctypes.c_int),
        ("l2CacheSize", ctypes.c_int),
        ("persistingL2CacheMaxSize", ctypes.c_int),
        ("maxThreadsPerMultiProcessor", ctypes.c_int),
        ("streamPrioritiesSupported", ctypes.c_int),
        ("globalL1CacheSupported", ctypes.c_int),
        ("localL1CacheSupported", ctypes.c_int),
        ("sharedMemPerMultiprocessor", ctypes.c_size_t),
        ("regsPerMultiprocessor", ctypes.c_int),
        ("managedMemory", ctypes.c_int),
        ("isMultiGpuBoard", ctypes.c_int),
        ("multiGpuBoardGroupID", ctypes.c_int),
        ("hostNativeAtomicSupported", ctypes.c_int),
        ("singleToDoublePrecisionPerfRatio", ctypes.c_int),
        ("pageableMemoryAccess", ctypes.c_int),
        ("concurrentManagedAccess", ctypes.c_int),
        ("computePreemptionSupported", ctypes.c_int),
        ("canUseHostPointerForRegisteredMem", ctypes.c_int),
        ("cooperativeLaunch", ctypes.c_int),
        ("cooperativeMultiDeviceLaunch", ctypes.c_int),
        ("sharedMemPerBlockOptin", ctypes.c_size_t),
        ("pageableMemoryAccessUsesHostPageTables", ctypes.c_int),
        ("directManagedMemAccessFromHost", ctypes.c_int),
        ("maxBlocksPerMultiProcessor", ctypes.c_int),
        ("accessPolicyMaxWindowSize", ctypes.c_int),
        ("reservedSharedMemPerBlock", ctypes.c_size_t),
        ("hostRegisterSupported", ctypes.c_int),
        ("sparseHipArraySupported", ctypes.c_int),
        ("hostRegisterReadOnlySupported", ctypes.c_int),
        ("timelineSemaphoreInteropSupported", ctypes.c_int),
        ("memoryPoolsSupported", ctypes.c_int),
        ("gpuDirectRDMASupported", ctypes.c_int),
        ("gpuDirectRDMAFlushWritesOptions", ctypes.c_uint),
        ("gpuDirectRDMAWritesOrdering", ctypes.c_int),
        ("memoryPoolSupportedHandleTypes", ctypes.c_uint),
        ("deferredMappingHipArraySupported", ctypes.c_int),
        ("ipcEventSupported", ctypes.c_int),
        ("clusterLaunch", ctypes.c_int),
        ("unifiedFunctionPointers", ctypes.c_int),
        ("reserved", ctypes.c_int * 63),
        ("hipReserved", ctypes.c_int * 32),
        ("gcnArchName", ctypes.c_char * 256),
        ("maxSharedMemoryPerMultiProcessor", ctypes.c_size_t),
        ("clockInstructionRate", ctypes.c_int),
        ("arch", ctypes.c_uint32),  # hipDeviceArch_t: 17 one-bit fields in one unsigned
        ("hdpMemFlushCntl", ctypes.POINTER(ctypes.c_uint)),
        ("hdpRegFlushCntl", ctypes.POINTER(ctypes.c_uint)),
        ("cooperativeMultiDeviceUnmatchedFunc", ctypes.c_int),
        ("cooperativeMultiDeviceUnmatchedGridDim", ctypes.c_int),
        ("cooperativeMultiDeviceUnmatchedBlockDim", ctypes.c_int),
        ("cooperativeMultiDeviceUnmatchedSharedMem", ctypes.c_int),
        ("isLargeBar", ctypes.c_int),
        ("asicRevision", ctypes.c_int),
    ]


class _PropsBuffer(ctypes.Union):
    _fields_ = [("props", HipDeviceProp), ("room", ctypes.c_char * (ctypes.sizeof(HipDeviceProp) + _PROPS_SLACK))]


def probe(settings: Settings) -> list[DeviceDescriptor]:
    """Every HIP device the runtime reports, ordinal order; :class:`Unavailable` when there are none."""
    lib = _open(settings)
    api = _Api(lib)
    api.check("hipInit", api.hipInit(0))
    count = ctypes.c_int(0)
    api.check("hipGetDeviceCount", api.hipGetDeviceCount(ctypes.byref(count)))
    if count.value <= 0:
        raise Unavailable("hipGetDeviceCount reported no devices")
    if count.value > _MAX_DEVICES:
        raise Unavailable(f"hipGetDeviceCount reported an implausible {count.value} devices")
    versions = {}
    for label, fn in (("runtime", api.hipRuntimeGetVersion), ("driver", api.hipDriverGetVersion)):
        value = ctypes.c_int(0)
        if fn(ctypes.byref(value)) == HIP_SUCCESS:
            versions[label] = value.value
    library = getattr(lib, "_name", LIBRARY)
    return [_describe(api, ordinal, count.value, versions, library) for ordinal in range(count.value)]


def _open(settings: Settings) -> ctypes.CDLL:
    return load_library("rocm", CANDIDATES, settings.library("rocm"), missing=LIBRARY)


class _Api:
    """The bound runtime entry points; optional ones are None when the library lacks them."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        i, ip = ctypes.c_int, ctypes.POINTER(ctypes.c_int)
        self.hipInit = bind(lib, "hipInit", i, ctypes.c_uint)
        self.hipDriverGetVersion = bind(lib, "hipDriverGetVersion", i, ip)
        self.hipRuntimeGetVersion = bind(lib, "hipRuntimeGetVersion", i, ip)
        self.hipGetDeviceCount = bind(lib, "hipGetDeviceCount", i, ip)
        self.hipDeviceGet = bind(lib, "hipDeviceGet", i, ip, i)
        self.hipDeviceGetName = bind(lib, "hipDeviceGetName", i, ctypes.c_char_p, i, i)
        self.hipDeviceTotalMem = bind(lib, "hipDeviceTotalMem", i, ctypes.POINTER(ctypes.c_size_t), i)
        self.hipDeviceGetAttribute = bind(lib, "hipDeviceGetAttribute", i, ip, i, i)
        self.hipDeviceGetUuid = _optional(lib, "hipDeviceGetUuid", i, ctypes.c_char_p, i)
        self.hipDeviceGetPCIBusId = _optional(lib, "hipDeviceGetPCIBusId", i, ctypes.c_char_p, i, i)
        self.hipDeviceCanAccessPeer = _optional(lib, "hipDeviceCanAccessPeer", i, ip, i, i)
        self.hipGetErrorName = _optional(lib, "hipGetErrorName", ctypes.c_char_p, i)
        # Only the R0600 layout is modelled; an older runtime (ROCm 5) gives no architecture name.
        self.hipGetDeviceProperties = _optional(lib, "hipGetDevicePropertiesR0600", i, ctypes.POINTER(_PropsBuffer), i)
        self.has_graphs = hasattr(lib, "hipGraphCreate")

    def error_name(self, code: int) -> str:
        if code in ERROR_NAMES:
            return ERROR_NAMES[code]
        name = self.hipGetErrorName(code) if self.hipGetErrorName is not None else None
        return name.decode("ascii", "replace") if name else "an unknown hipError_t"

    def check(self, call: str, code: int, ordinal: int | None = None) -> None:
        if code != HIP_SUCCESS:
            where = "" if ordinal is None else f" for device {ordinal}"
            raise Unavailable(f"{call} failed{where} with {self.error_name(code)} ({code})")


def _optional(lib: ctypes.CDLL, name: str, restype: Any, *argtypes: Any) -> Any:
    return bind(lib, name, restype, *argtypes) if hasattr(lib, name) else None


def _describe(api: _Api, ordinal: int, count: int, versions: dict[str, int], library: str) -> DeviceDescriptor:
    # hipDevice_t-taking calls get the handle hipDeviceGet returns; int-deviceId ones get the ordinal.
    handle = ctypes.c_int(0)
    api.check("hipDeviceGet", api.hipDeviceGet(ctypes.byref(handle), ordinal), ordinal)
    dev = handle.value
    name_buf = ctypes.create_string_buffer(256)
    api.check("hipDeviceGetName", api.hipDeviceGetName(name_buf, len(name_buf), dev), ordinal)
    name = c_string(name_buf.raw)
    total = ctypes.c_size_t(0)
    api.check("hipDeviceTotalMem", api.hipDeviceTotalMem(ctypes.byref(total), dev), ordinal)

    attrs = _attributes(api, ordinal)
    arch_name, arch_bits = _properties(api, ordinal)
    arch_match = _ARCH.match(arch_name or "")
    arch = arch_match.group(0) if arch_match else ""

    flags = CapabilityFlags.FP32
    if arch_match:
        flags |= _arch_flags(arch, int(arch_match.group(1)))
    if arch_bits is not None and arch_bits & _HAS_DOUBLES_BIT:
        flags |= CapabilityFlags.FP64
    for key, bit in _ATTRIBUTE_FLAGS.items():
        if attrs.get(key):
            flags |= bit
    if api.has_graphs:
        flags |= CapabilityFlags.GRAPHS
    if _can_access_any_peer(api, ordinal, count):
        flags |= CapabilityFlags.PEER_ACCESS

    extra: dict[str, Any] = {"library": library}
    if arch_name:
        extra["gcn_arch_name"] = arch_name
    if arch in _FP8_FNUZ:
        extra["fp8_fnuz"] = True  # e4m3fnuz/e5m2fnuz MFMA: not the OCP formats the FP8 flags mean
    major, minor = attrs.get("ComputeCapabilityMajor"), attrs.get("ComputeCapabilityMinor")
    if major is not None and minor is not None:
        extra["compute_capability"] = f"{major}.{minor}"
    if "driver" in versions:
        extra["hip_driver_version"] = versions["driver"]
    for key, (label, kind) in _EXTRA_ATTRIBUTES.items():
        if key in attrs:
            extra[label] = kind(attrs[key])
    bus_id = _pci_bus_id(api, ordinal)
    runtime = versions.get("runtime")
    return DeviceDescriptor(
        id=DeviceId(BackendKind.ROCM, ordinal),
        vendor=Vendor.AMD,
        name=name,
        arch=arch,
        memory_bytes=total.value,
        multiprocessors=attrs.get("MultiprocessorCount"),
        clock_khz=attrs.get("ClockRate") or None,
        driver_version=_hip_version(runtime) if runtime else None,
        uuid=_uuid(api, dev),
        pci=PciAddress(bus_id=bus_id) if bus_id else None,
        capability=Capability(flags=flags, tier=_tier(name)),
        extra=tuple(sorted(extra.items())),
    )


def _attributes(api: _Api, ordinal: int) -> dict[str, int]:
    found = {}
    value = ctypes.c_int(0)
    for key, attr in ATTRIBUTES.items():
        if api.hipDeviceGetAttribute(ctypes.byref(value), attr, ordinal) == HIP_SUCCESS:
            found[key] = value.value
    return found


def _properties(api: _Api, ordinal: int) -> tuple[str | None, int | None]:
    """``gcnArchName`` and the ``hipDeviceArch_t`` word, when the R0600 entry point answers sanely."""
    if api.hipGetDeviceProperties is None:
        return None, None
    buf = _PropsBuffer()
    if api.hipGetDeviceProperties(ctypes.byref(buf), ordinal) != HIP_SUCCESS:
        return None, None
    text = c_string(buf.props.gcnArchName)
    if not text.startswith("gfx"):  # not the layout we modelled: believe none of it
        return None, None
    return text, buf.props.arch


def _arch_flags(arch: str, major: int) -> CapabilityFlags:
    flags = CapabilityFlags.NONE
    if major >= 9:  # packed half-precision math from GFX9 on
        flags |= CapabilityFlags.FP16
    if arch in _MFMA:
        flags |= CapabilityFlags.TENSOR_CORES | CapabilityFlags.WMMA | CapabilityFlags.BF16 | CapabilityFlags.INT8
    if major in (11, 12):  # RDNA3/RDNA4 WMMA: f16, bf16, iu8, iu4
        flags |= CapabilityFlags.WMMA | CapabilityFlags.BF16 | CapabilityFlags.INT8 | CapabilityFlags.INT4
    if arch in _XF32:
        flags |= CapabilityFlags.TF32
    if arch == "gfx950" or major == 12:  # OCP e4m3/e5m2
        flags |= CapabilityFlags.FP8_E4M3 | CapabilityFlags.FP8_E5M2
    if arch == "gfx950":
        flags |= CapabilityFlags.FP4
    if arch in _SPARSE or major == 12:  # SMFMAC / SWMMAC
        flags |= CapabilityFlags.SPARSE_2_4
    return flags


def _hip_version(value: int) -> str:
    return f"{value // 10_000_000}.{value // 100_000 % 100}.{value % 100_000}"


def _uuid(api: _Api, dev: int) -> str | None:
    raw = ctypes.create_string_buffer(16)
    if api.hipDeviceGetUuid is None or api.hipDeviceGetUuid(raw, dev) != HIP_SUCCESS:
        return None
    data = raw.raw[:16]
    return uuid_text(data) if any(data) else None


def _pci_bus_id(api: _Api, ordinal: int) -> str | None:
    if api.hipDeviceGetPCIBusId is None:
        return None
    buf = ctypes.create_string_buffer(64)
    if api.hipDeviceGetPCIBusId(buf, len(buf), ordinal) != HIP_SUCCESS:
        return None
    return c_string(buf.raw).lower() or None


def _can_access_any_peer(api: _Api, ordinal: int, count: int) -> bool:
    if api.hipDeviceCanAccessPeer is None:
        return False
    value = ctypes.c_int(0)
    for peer in range(count):
        if peer == ordinal:
            continue
        if api.hipDeviceCanAccessPeer(ctypes.byref(value), ordinal, peer) == HIP_SUCCESS and value.value:
            return True
    return False


def _tier(name: str) -> Tier:
    if _DATACENTER.search(name):
        return Tier.DATACENTER
    if _WORKSTATION.search(name):
        return Tier.WORKSTATION
    return Tier.CONSUMER
