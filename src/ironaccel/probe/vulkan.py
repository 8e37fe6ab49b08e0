"""Vulkan physical devices, read through the ``vulkan`` cffi package (1.3.275.1).

Every physical device the loader lists becomes one descriptor, software ones (lavapipe, SwiftShader)
included and marked ``software``; whether a device is good enough to run on is the execution backend's
call, so nothing is filtered here. The package is imported inside :func:`probe`: without it, or without
the loader it dlopens at import (libvulkan.so.1), the family is Unavailable with the reason.

Structures the package knows are used through its ``ffi``; VkPhysicalDeviceShaderBfloat16FeaturesKHR
(VK_KHR_shader_bfloat16, newer than the package) is laid out by hand from vulkan_core.h 1.4.341.
Constants not in the package are from the same header.
"""

from __future__ import annotations

import re
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
    software_name,
)
from ._ffi import uuid_text

# vulkan_core.h 1.4.341 (VK_KHR_shader_bfloat16, VK_EXT_shader_float8): absent from the 1.3.275 package.
STYPE_SHADER_BFLOAT16_FEATURES_KHR = 1000141000
COMPONENT_BFLOAT16_KHR = 1000141000
COMPONENT_FLOAT8_E4M3_EXT = 1000491002
COMPONENT_FLOAT8_E5M2_EXT = 1000491003
# VkDriverId values that mean "runs on the CPU" (vulkan_core.h).
DRIVER_ID_MESA_LLVMPIPE = 13
DRIVER_ID_GOOGLE_SWIFTSHADER = 10

_DEVICE_TYPES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
_COMPONENT_NAMES = {
    0: "f16",
    1: "f32",
    2: "f64",
    3: "s8",
    4: "s16",
    5: "s32",
    6: "s64",
    7: "u8",
    8: "u16",
    9: "u32",
    10: "u64",
    COMPONENT_BFLOAT16_KHR: "bf16",
    COMPONENT_FLOAT8_E4M3_EXT: "e4m3",
    COMPONENT_FLOAT8_E5M2_EXT: "e5m2",
}
_SUBGROUP_OPS = ("basic", "vote", "arithmetic", "ballot", "shuffle", "shuffle_relative", "clustered", "quad")
# Extensions worth naming in ``extra`` (compute, numeric formats, memory); the rest are only counted.
RELEVANT_EXTENSIONS = frozenset(
    {
        "VK_KHR_cooperative_matrix",
        "VK_NV_cooperative_matrix",
        "VK_NV_cooperative_matrix2",
        "VK_NV_cooperative_vector",
        "VK_KHR_shader_bfloat16",
        "VK_EXT_shader_float8",
        "VK_KHR_shader_float16_int8",
        "VK_KHR_16bit_storage",
        "VK_KHR_8bit_storage",
        "VK_KHR_shader_integer_dot_product",
        "VK_KHR_shader_float_controls",
        "VK_KHR_shader_float_controls2",
        "VK_KHR_shader_subgroup_extended_types",
        "VK_EXT_subgroup_size_control",
        "VK_EXT_shader_atomic_float",
        "VK_EXT_shader_atomic_float2",
        "VK_KHR_vulkan_memory_model",
        "VK_KHR_buffer_device_address",
        "VK_KHR_timeline_semaphore",
        "VK_KHR_synchronization2",
        "VK_KHR_maintenance4",
        "VK_KHR_maintenance5",
        "VK_KHR_push_descriptor",
        "VK_EXT_memory_budget",
        "VK_EXT_pci_bus_info",
        "VK_KHR_driver_properties",
        "VK_KHR_external_memory_fd",
        "VK_EXT_external_memory_host",
    }
)

# Documented tier heuristic, shared with the OpenGL and WebGPU probes: datacenter parts by name.
_DATACENTER = re.compile(
    r"\b(H100|H200|H800|H20|A100|A800|A30|A40|A10|B100|B200|B300|GB200|GB300|GH200|L40S?|L4|T4|V100)\b"
    r"|\bInstinct\b|\bMI[1-3]\d\d",
    re.IGNORECASE,
)
_MOBILE_VENDORS = (Vendor.ARM, Vendor.QUALCOMM, Vendor.APPLE)


def device_tier(name: str, vendor: Vendor, device_type: str | None, software: str | None) -> Tier:
    """Coarse tier from what any graphics API tells: software and CPU devices are Baseline; datacenter
    names (H100/H200/A100/B200/GH200/L40..., AMD Instinct) are Datacenter; integrated GPUs of phone-class
    vendors are Mobile; every other GPU is Consumer."""
    if software or device_type == "cpu":
        return Tier.BASELINE
    if _DATACENTER.search(name):
        return Tier.DATACENTER
    if device_type == "integrated":
        return Tier.MOBILE if vendor in _MOBILE_VENDORS else Tier.CONSUMER
    if device_type in ("discrete", "integrated", None):
        return Tier.CONSUMER
    return Tier.BASELINE  # "virtual" / "other": nothing known


def decode_version(version: int) -> str:
    """A VK_MAKE_API_VERSION number as "major.minor.patch" (the variant bits dropped)."""
    return f"{(version >> 22) & 0x7F}.{(version >> 12) & 0x3FF}.{version & 0xFFF}"


def decode_driver_version(vendor_id: int, version: int, driver_id: int | None = None, windows: bool = False) -> str:
    """driverVersion is vendor-defined: NVIDIA packs 10.8.8.6 bits, Intel's Windows driver 18.14,
    everyone else (Mesa, AMD, Arm, Qualcomm...) uses the VK_MAKE_VERSION layout."""
    if vendor_id == 0x10DE:
        major, minor = (version >> 22) & 0x3FF, (version >> 14) & 0xFF
        patch, build = (version >> 6) & 0xFF, version & 0x3F
        # The form nvidia-smi prints (580.159.04); a non-zero build is appended.
        return f"{major}.{minor}.{patch:02d}" + (f".{build}" if build else "")
    if vendor_id == 0x8086 and (windows or driver_id == 5):  # VK_DRIVER_ID_INTEL_PROPRIETARY_WINDOWS
        return f"{version >> 14}.{version & 0x3FFF}"
    return decode_version(version)


def _mesa_version(driver_info: str | None) -> str | None:
    """Mesa's own version from driverInfo ("Mesa 22.3.6 (LLVM 15.0.6)"): Mesa drivers fill driverVersion
    inconsistently (lavapipe reports 1), while driverInfo always names the release."""
    found = re.match(r"Mesa (\d+\.\d+(?:\.\d+)?)", driver_info or "")
    return found.group(1) if found else None


def vulkan_software(device_name: str, driver_name: str, device_type: str, driver_id: int | None = None) -> str | None:
    """The software implementation behind a physical device, or None for hardware."""
    if device_type == "cpu" and (
        driver_id == DRIVER_ID_MESA_LLVMPIPE or "llvmpipe" in f"{device_name} {driver_name}".lower()
    ):
        return "lavapipe"  # Mesa's Vulkan rasteriser; llvmpipe is its GL sibling
    found = software_name(device_name, driver_name)
    if found or device_type != "cpu":
        return found
    return "swiftshader" if driver_id == DRIVER_ID_GOOGLE_SWIFTSHADER else "cpu"


def probe(settings: Settings) -> list[DeviceDescriptor]:
    """Every Vulkan physical device; Unavailable when the package, the loader or any device is missing."""
    del settings  # IRONACCEL_VULKAN=0 is handled by the caller; the cffi package picks its own loader
    try:
        import vulkan as vk
    except ImportError:
        raise Unavailable("the `vulkan` Python package is not installed (pip install 'ironaccel[vulkan]')") from None
    except OSError as exc:  # the package dlopens libvulkan.so.1 at import
        raise Unavailable(f"Vulkan loader not found (libvulkan.so.1): {exc}") from None

    instance = _create_instance(vk)
    try:
        try:
            handles = list(vk.vkEnumeratePhysicalDevices(instance))
        except vk.VkError as exc:
            raise Unavailable(f"vkEnumeratePhysicalDevices failed: {type(exc).__name__}") from None
        if not handles:
            raise Unavailable("Vulkan loader found no physical device (no ICD installed, or none matched)")
        instance_api = _instance_api(vk)
        return [_describe(vk, instance, handle, index, instance_api) for index, handle in enumerate(handles)]
    finally:
        vk.vkDestroyInstance(instance, None)


def _instance_api(vk: Any) -> int:
    """The highest API version we may ask the loader for: min(loader, 1.3)."""
    want = vk.VK_MAKE_VERSION(1, 3, 0)  # the package lacks VK_API_VERSION_1_3
    try:
        loader = vk.vkEnumerateInstanceVersion()
    except (AttributeError, vk.ProcedureNotFoundError):
        loader = vk.VK_MAKE_VERSION(1, 0, 0)  # a 1.0 loader has no vkEnumerateInstanceVersion
    return min(want, loader)


def _create_instance(vk: Any) -> Any:
    app = vk.VkApplicationInfo(
        pApplicationName="ironaccel-probe",
        applicationVersion=1,
        pEngineName="ironaccel",
        engineVersion=1,
        apiVersion=_instance_api(vk),
    )
    extensions: list[str] = []
    flags = 0
    try:
        available = {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(None)}
    except vk.VkError:
        available = set()
    # MoltenVK and other non-conformant drivers are only listed when we opt in.
    if "VK_KHR_portability_enumeration" in available:
        extensions.append("VK_KHR_portability_enumeration")
        flags |= 0x1  # VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
    info = vk.VkInstanceCreateInfo(
        flags=flags,
        pApplicationInfo=app,
        enabledExtensionCount=len(extensions),
        ppEnabledExtensionNames=extensions or None,
    )
    try:
        return vk.vkCreateInstance(info, None)
    except vk.VkErrorIncompatibleDriver:
        raise Unavailable("vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER (no usable Vulkan driver/ICD)") from None
    except vk.VkError as exc:
        raise Unavailable(f"vkCreateInstance failed: {type(exc).__name__}") from None


class _Chain:
    """A pNext chain built with the package's ffi; keeps every struct alive while in use."""

    def __init__(self, ffi: Any, head: Any) -> None:
        self.ffi = ffi
        self.head = head
        self.tail = head

    def add(self, struct: Any) -> Any:
        self.tail.pNext = self.ffi.cast("void *", struct)
        self.tail = self.ffi.cast("VkBaseOutStructure *", struct)
        return struct


def _new(ffi: Any, ctype: str, stype: int) -> Any:
    struct = ffi.new(f"{ctype} *")
    struct.sType = stype
    return struct


def _describe(vk: Any, instance: Any, handle: Any, index: int, instance_api: int) -> DeviceDescriptor:
    ffi, lib = vk.ffi, vk.lib
    props = ffi.new("VkPhysicalDeviceProperties *")
    lib.vkGetPhysicalDeviceProperties(handle, props)
    p = props[0]
    name = ffi.string(p.deviceName).decode("utf-8", "replace")
    device_api = min(p.apiVersion, instance_api)
    extensions = sorted({e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(handle, None)})
    ext = set(extensions)
    v11 = device_api >= vk.VK_MAKE_VERSION(1, 1, 0)
    v12 = device_api >= vk.VK_MAKE_VERSION(1, 2, 0)
    device_type = _DEVICE_TYPES.get(p.deviceType, "other")
    extra: dict[str, Any] = {
        "api_version": decode_version(p.apiVersion),
        "device_type": device_type,
        "driver_version_raw": p.driverVersion,
        "extension_count": len(extensions),
        "extensions": [e for e in extensions if e in RELEVANT_EXTENSIONS],
    }
    lim = p.limits
    extra["max_compute_work_group_count"] = list(lim.maxComputeWorkGroupCount)
    extra["max_compute_work_group_size"] = list(lim.maxComputeWorkGroupSize)
    extra["max_compute_work_group_invocations"] = lim.maxComputeWorkGroupInvocations
    extra["max_compute_shared_memory_size"] = lim.maxComputeSharedMemorySize
    extra["max_storage_buffer_range"] = lim.maxStorageBufferRange
    extra["max_push_constants_size"] = lim.maxPushConstantsSize
    extra["timestamp_period_ns"] = float(lim.timestampPeriod)

    # Properties2 chain: IDs and subgroups are core 1.1, driver properties 1.2 (or the KHR extension).
    uuid = driver_name = driver_info = None
    driver_id: int | None = None
    bus_id: str | None = None
    if v11:
        props2 = _new(ffi, "VkPhysicalDeviceProperties2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2)
        chain = _Chain(ffi, props2)
        ids = chain.add(_new(ffi, "VkPhysicalDeviceIDProperties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES))
        subgroup = chain.add(
            _new(ffi, "VkPhysicalDeviceSubgroupProperties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES)
        )
        driver = None
        if v12 or "VK_KHR_driver_properties" in ext:
            driver = chain.add(
                _new(ffi, "VkPhysicalDeviceDriverProperties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES)
            )
        pci = None
        if "VK_EXT_pci_bus_info" in ext:
            pci = chain.add(
                _new(
                    ffi,
                    "VkPhysicalDevicePCIBusInfoPropertiesEXT",
                    vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT,
                )
            )
        lib.vkGetPhysicalDeviceProperties2(handle, props2)
        uuid = uuid_text(bytes(ffi.buffer(ids.deviceUUID)))
        extra["driver_uuid"] = uuid_text(bytes(ffi.buffer(ids.driverUUID)))
        extra["subgroup_size"] = subgroup.subgroupSize
        extra["subgroup_ops"] = [n for bit, n in enumerate(_SUBGROUP_OPS) if subgroup.supportedOperations & (1 << bit)]
        if driver is not None:
            driver_id = driver.driverID
            driver_name = ffi.string(driver.driverName).decode("utf-8", "replace")
            driver_info = ffi.string(driver.driverInfo).decode("utf-8", "replace")
            extra["driver_name"] = driver_name
            extra["driver_info"] = driver_info
        if pci is not None:
            bus_id = f"{pci.pciDomain:04x}:{pci.pciBus:02x}:{pci.pciDevice:02x}.{pci.pciFunction:x}"

    features, coop_tiles = _features(vk, instance, handle, ext, v11, v12)
    extra.update(features)
    if coop_tiles is not None:
        extra["cooperative_matrix_tiles"] = coop_tiles

    memory_bytes, unified, heaps = _memory(vk, handle, device_type)
    extra["memory_heaps"] = heaps

    vendor = Vendor.from_pci(p.vendorID)
    software = vulkan_software(name, driver_name or "", device_type, driver_id)
    flags = CapabilityFlags.FP32
    if features.get("shader_float64"):
        flags |= CapabilityFlags.FP64
    if features.get("shader_float16"):
        flags |= CapabilityFlags.FP16
    if features.get("shader_int8"):
        flags |= CapabilityFlags.INT8
    if features.get("shader_bfloat16_type"):
        flags |= CapabilityFlags.BF16
    if coop_tiles:
        flags |= CapabilityFlags.WMMA
        types = {t for tile in coop_tiles for t in tile.split(" ")[1].split(",")}
        if "e4m3" in types:
            flags |= CapabilityFlags.FP8_E4M3
        if "e5m2" in types:
            flags |= CapabilityFlags.FP8_E5M2
        # Dedicated matrix units sit behind coopmat on NVIDIA (Volta+) and AMD CDNA (Instinct) hardware;
        # RDNA's WMMA runs on the shader ALUs, so it earns WMMA alone.
        if not software and (vendor is Vendor.NVIDIA or (vendor is Vendor.AMD and _DATACENTER.search(name))):
            flags |= CapabilityFlags.TENSOR_CORES
    if unified:
        flags |= CapabilityFlags.UNIFIED_MEMORY

    pci_address = None
    if p.vendorID <= 0xFFFF or bus_id:  # ids above 0xFFFF are Khronos vendor ids, not PCI
        pci_address = PciAddress(vendor_id=p.vendorID, device_id=p.deviceID, bus_id=bus_id)
    return DeviceDescriptor(
        id=DeviceId(BackendKind.VULKAN, index),
        vendor=vendor,
        name=name,
        arch=device_type,
        memory_bytes=memory_bytes,
        driver_version=_mesa_version(driver_info) or decode_driver_version(p.vendorID, p.driverVersion, driver_id),
        uuid=uuid,
        pci=pci_address,
        software=software,
        capability=Capability(flags=flags, tier=device_tier(name, vendor, device_type, software)),
        extra=tuple(sorted(extra.items())),
    )


def _features(
    vk: Any, instance: Any, handle: Any, ext: set[str], v11: bool, v12: bool
) -> tuple[dict[str, Any], list[str] | None]:
    """Shader feature booleans (chained only where core or the extension allows) and the coopmat tiles."""
    ffi, lib = vk.ffi, vk.lib
    out: dict[str, Any] = {}
    if not v11:
        base = ffi.new("VkPhysicalDeviceFeatures *")
        lib.vkGetPhysicalDeviceFeatures(handle, base)
        out["shader_float64"] = bool(base.shaderFloat64)
        out["shader_int64"] = bool(base.shaderInt64)
        out["shader_int16"] = bool(base.shaderInt16)
        return out, None

    feats2 = _new(ffi, "VkPhysicalDeviceFeatures2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2)
    chain = _Chain(ffi, feats2)
    s16 = chain.add(
        _new(ffi, "VkPhysicalDevice16BitStorageFeatures", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES)
    )
    s8 = f16i8 = coop = bf16 = None
    if v12 or "VK_KHR_8bit_storage" in ext:
        s8 = chain.add(
            _new(ffi, "VkPhysicalDevice8BitStorageFeatures", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES)
        )
    if v12 or "VK_KHR_shader_float16_int8" in ext:
        f16i8 = chain.add(
            _new(
                ffi,
                "VkPhysicalDeviceShaderFloat16Int8Features",
                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
            )
        )
    if "VK_KHR_cooperative_matrix" in ext:
        coop = chain.add(
            _new(
                ffi,
                "VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
            )
        )
    if "VK_KHR_shader_bfloat16" in ext:
        # sType, pNext, then three VkBool32 (vulkan_core.h 1.4.341): 32 bytes, 8-aligned.
        raw = ffi.new("uint64_t[4]")
        head = ffi.cast("VkBaseOutStructure *", raw)
        head.sType = STYPE_SHADER_BFLOAT16_FEATURES_KHR
        chain.add(head)
        bf16 = (raw, ffi.cast("uint32_t *", raw))
    lib.vkGetPhysicalDeviceFeatures2(handle, feats2)

    base = feats2.features
    out["shader_float64"] = bool(base.shaderFloat64)
    out["shader_int64"] = bool(base.shaderInt64)
    out["shader_int16"] = bool(base.shaderInt16)
    out["storage_buffer_16bit"] = bool(s16.storageBuffer16BitAccess)
    if s8 is not None:
        out["storage_buffer_8bit"] = bool(s8.storageBuffer8BitAccess)
    if f16i8 is not None:
        out["shader_float16"] = bool(f16i8.shaderFloat16)
        out["shader_int8"] = bool(f16i8.shaderInt8)
    if bf16 is not None:
        words = bf16[1]
        out["shader_bfloat16_type"] = bool(words[4])
        out["shader_bfloat16_dot_product"] = bool(words[5])
        out["shader_bfloat16_cooperative_matrix"] = bool(words[6])
    tiles = None
    if coop is not None:
        out["cooperative_matrix"] = bool(coop.cooperativeMatrix)
        if coop.cooperativeMatrix:
            tiles = _coop_tiles(vk, instance, handle)
    return out, tiles


def _coop_tiles(vk: Any, instance: Any, handle: Any) -> list[str]:
    """vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR as "MxNxK A,B,C,R[ sat][ scope]" strings.

    Called directly, not through the package's wrapper, which leaves each element's sType unset.
    """
    ffi, lib = vk.ffi, vk.lib
    name = b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"
    address = lib.vkGetInstanceProcAddr(instance, name)
    if address == ffi.NULL:
        return []
    fn = ffi.cast("PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", address)
    count = ffi.new("uint32_t *")
    if fn(handle, count, ffi.NULL) != vk.VK_SUCCESS or count[0] == 0:
        return []
    items = ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
    for i in range(count[0]):
        items[i].sType = vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
    if fn(handle, count, items) not in (vk.VK_SUCCESS, vk.VK_INCOMPLETE):
        return []
    tiles = []
    for i in range(count[0]):
        t = items[i]
        types = ",".join(_COMPONENT_NAMES.get(c, str(c)) for c in (t.AType, t.BType, t.CType, t.ResultType))
        text = f"{t.MSize}x{t.NSize}x{t.KSize} {types}"
        if t.saturatingAccumulation:
            text += " sat"
        if t.scope != vk.VK_SCOPE_SUBGROUP_KHR:
            text += f" scope={t.scope}"
        tiles.append(text)
    return tiles


def _memory(vk: Any, handle: Any, device_type: str) -> tuple[int | None, bool, list[dict[str, Any]]]:
    """Device-local heap total, whether host memory *is* device memory, and the heap list."""
    ffi, lib = vk.ffi, vk.lib
    mem = ffi.new("VkPhysicalDeviceMemoryProperties *")
    lib.vkGetPhysicalDeviceMemoryProperties(handle, mem)
    m = mem[0]
    local_bit = vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
    host_mapped = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
    heaps = []
    total = 0
    shared_heaps = set()
    for i in range(m.memoryTypeCount):
        if m.memoryTypes[i].propertyFlags & host_mapped == host_mapped:
            shared_heaps.add(m.memoryTypes[i].heapIndex)
    local_heaps = []
    for i in range(m.memoryHeapCount):
        heap = m.memoryHeaps[i]
        local = bool(heap.flags & local_bit)
        heaps.append({"size": int(heap.size), "device_local": local, "host_visible": i in shared_heaps})
        if local:
            total += int(heap.size)
            local_heaps.append(i)
    # A discrete card with resizable BAR also maps all of VRAM; only integrated/CPU devices share memory.
    unified = device_type in ("integrated", "cpu") and bool(local_heaps) and all(i in shared_heaps for i in local_heaps)
    return (total or None), unified, heaps
