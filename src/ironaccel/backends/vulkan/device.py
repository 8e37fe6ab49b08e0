"""Physical-device choice and the logical device the kernels run on.

Choosing (:func:`choose`): a selector is an index in the loader's order (the probe's ordinal), a device
UUID (32 hex digits, dashes allowed), a driver alias (``lavapipe`` / ``llvmpipe`` / ``swiftshader``) or
a case-insensitive part of the device name. With no selector the first hardware device that can run the
backend is taken; software rasterisers (lavapipe, SwiftShader) only when asked for or when nothing else
exists, and they are marked ``software`` so ``ironaccel.open("auto")`` can still prefer the CPU backend.

What a device must offer (:func:`shortfall` names what is missing): Vulkan 1.3 (synchronization2,
maintenance4 and timeline semaphores are core there and are enabled), a compute queue, and
shaderSignedZeroInfNanPreserveFloat32, because every kernel declares SignedZeroInfNanPreserve so NaN,
infinities and signed zeros behave as TOSA specifies. Optional features the later tiers use (16-bit and
8-bit storage and arithmetic, 64-bit integers) are enabled only where the device has them.

:class:`Device` owns the VkDevice and its one compute queue. vkQueueSubmit2 needs the queue externally
synchronised, so every submission takes :attr:`Device.submit_lock`.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from typing import Any

from ...core.errors import InvalidArgument, Unsupported
from ...probe.vulkan import vulkan_software
from . import binding, statistics
from .instance import Instance

_DEVICE_TYPES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
_TYPE_PREFERENCE = {"discrete": 0, "integrated": 1, "virtual": 2, "other": 3, "cpu": 4}
_SOFTWARE_ALIASES = {"lavapipe": "lavapipe", "llvmpipe": "lavapipe", "swiftshader": "swiftshader"}
_UUID = re.compile(r"^[0-9a-fA-F]{32}$")

# Optional features, enabled where present: (struct, field).
_OPTIONAL = (
    ("core", "shaderInt16"),
    ("core", "shaderInt64"),
    ("v11", "storageBuffer16BitAccess"),
    ("v12", "storageBuffer8BitAccess"),
    ("v12", "shaderFloat16"),
    ("v12", "shaderInt8"),
    ("v12", "vulkanMemoryModel"),
    ("v12", "vulkanMemoryModelDeviceScope"),
)
COOPERATIVE_MATRIX = "VK_KHR_cooperative_matrix"
# What a cooperative-matrix kernel needs beside the extension's own feature.
_MATRIX_NEEDS = ("shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel", "vulkanMemoryModelDeviceScope")
_COMPONENTS = {0: "fp16", 1: "fp32", 2: "fp64", 3: "int8", 4: "int16", 5: "int32", 7: "uint8", 8: "uint16"}
# Required features: (struct, field).
_REQUIRED = (("v12", "timelineSemaphore"), ("v13", "synchronization2"), ("v13", "maintenance4"))


LLVMPIPE_LOOP_ITERATIONS = 65535  # Mesa gallivm's loop limiter, shared by every loop of a shader invocation


@dataclasses.dataclass(frozen=True)
class Limits:
    """The device limits the backend plans with."""

    max_storage_buffer_range: int
    max_memory_allocation: int
    max_buffer_size: int
    min_storage_buffer_offset_alignment: int
    non_coherent_atom_size: int
    min_memory_map_alignment: int
    max_push_constants: int
    max_group_count: tuple[int, int, int]
    max_shared_memory: int
    # Loop iterations one invocation may run in all, where the driver caps them (None: no cap). lavapipe
    # (llvmpipe) ends any invocation's loops after 65535 iterations in total, silently, as a guard
    # against endless loops; kernels that walk long axes must split the work to stay below it.
    max_loop_iterations: int | None = None


@dataclasses.dataclass(frozen=True)
class MemoryType:
    index: int
    flags: int
    heap: int
    heap_size: int


@dataclasses.dataclass
class PhysicalDevice:
    """What the backend knows of one physical device (read once, without creating a device)."""

    handle: Any
    index: int
    name: str
    uuid: bytes
    vendor_id: int
    device_id: int
    device_type: str
    api_version: int
    software: str | None
    limits: Limits | None
    memory_types: tuple[MemoryType, ...]
    compute_family: int | None
    features: dict[str, bool]
    nan_preserve: bool
    # Cooperative-matrix configurations (subgroup scope, A and B of one type, C and result of one):
    # "<A>:<M>x<N>x<K>:<C>", e.g. "fp16:16x16x16:fp32". Empty without VK_KHR_cooperative_matrix.
    matrix_tiles: frozenset[str] = frozenset()
    # The driver reports what it compiled each pipeline into (VK_KHR_pipeline_executable_properties).
    reports_pipelines: bool = False

    @property
    def uuid_hex(self) -> str:
        return self.uuid.hex()


def describe_all(inst: Instance) -> list[PhysicalDevice]:
    return [_describe(inst, handle, index) for index, handle in enumerate(inst.physical_devices)]


def _new(ffi: Any, ctype: str, stype: int, chain: list[Any]) -> Any:
    struct = ffi.new(f"{ctype} *")
    struct.sType = stype
    if chain:
        chain[-1].pNext = struct
    chain.append(struct)
    return struct


def _describe(inst: Instance, handle: Any, index: int) -> PhysicalDevice:
    vk, ffi, lib = inst.vk, inst.ffi, inst.vk.lib
    props = ffi.new("VkPhysicalDeviceProperties *")
    lib.vkGetPhysicalDeviceProperties(handle, props)
    p = props[0]
    name = ffi.string(p.deviceName).decode("utf-8", "replace")
    device_type = _DEVICE_TYPES.get(p.deviceType, "other")
    api = p.apiVersion
    v13 = api >= vk.VK_MAKE_VERSION(1, 3, 0)
    uuid = bytes(16)
    driver_id = None
    nan_preserve = False
    max_buffer = 0
    features: dict[str, bool] = {}
    if v13:
        chain: list[Any] = []
        p2 = _new(ffi, "VkPhysicalDeviceProperties2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, chain)
        p11 = _new(
            ffi, "VkPhysicalDeviceVulkan11Properties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES, chain
        )
        p12 = _new(
            ffi, "VkPhysicalDeviceVulkan12Properties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES, chain
        )
        p13 = _new(
            ffi, "VkPhysicalDeviceVulkan13Properties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES, chain
        )
        lib.vkGetPhysicalDeviceProperties2(handle, p2)
        uuid = bytes(ffi.buffer(p11.deviceUUID))
        driver_id = p12.driverID
        nan_preserve = bool(p12.shaderSignedZeroInfNanPreserveFloat32)
        max_buffer = int(p13.maxBufferSize)
        features = _features(inst, handle)
    extensions = {str(e.extensionName) for e in vk.vkEnumerateDeviceExtensionProperties(handle, None)}  # str already
    # matmul_coop.comp and matmul_int_coop.comp are written for 32-wide subgroups (4 per workgroup)
    matrix_tiles = _matrix_tiles(inst, handle, features, extensions) if v13 and p11.subgroupSize == 32 else frozenset()
    lim = p.limits
    limits = Limits(
        max_storage_buffer_range=int(lim.maxStorageBufferRange),
        max_memory_allocation=_max_allocation(inst, handle, v13),
        max_buffer_size=max_buffer or (1 << 31),
        min_storage_buffer_offset_alignment=int(lim.minStorageBufferOffsetAlignment),
        non_coherent_atom_size=int(lim.nonCoherentAtomSize),
        min_memory_map_alignment=int(lim.minMemoryMapAlignment),
        max_push_constants=int(lim.maxPushConstantsSize),
        max_group_count=tuple(int(c) for c in lim.maxComputeWorkGroupCount),  # type: ignore[arg-type]
        max_shared_memory=int(lim.maxComputeSharedMemorySize),
    )
    mem = ffi.new("VkPhysicalDeviceMemoryProperties *")
    lib.vkGetPhysicalDeviceMemoryProperties(handle, mem)
    m = mem[0]
    types = tuple(
        MemoryType(
            i,
            int(m.memoryTypes[i].propertyFlags),
            int(m.memoryTypes[i].heapIndex),
            int(m.memoryHeaps[m.memoryTypes[i].heapIndex].size),
        )
        for i in range(m.memoryTypeCount)
    )
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(handle)
    compute = [i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT and f.queueCount > 0]
    # A compute-only family (no graphics) is the one meant for compute work where both exist.
    compute.sort(key=lambda i: bool(families[i].queueFlags & vk.VK_QUEUE_GRAPHICS_BIT))
    software = vulkan_software(name, "", device_type, driver_id)
    if software == "lavapipe":
        limits = dataclasses.replace(limits, max_loop_iterations=LLVMPIPE_LOOP_ITERATIONS)
    return PhysicalDevice(
        handle=handle,
        index=index,
        name=name,
        uuid=uuid,
        vendor_id=int(p.vendorID),
        device_id=int(p.deviceID),
        device_type=device_type,
        api_version=int(api),
        software=software,
        limits=limits,
        memory_types=types,
        compute_family=compute[0] if compute else None,
        features=features,
        nan_preserve=nan_preserve,
        matrix_tiles=matrix_tiles,
        reports_pipelines=statistics.EXTENSION in extensions,
    )


def _matrix_tiles(inst: Instance, handle: Any, features: dict[str, bool], extensions: set[str]) -> frozenset[str]:
    """The device's cooperative-matrix configurations, or none where the extension, its feature or
    what the kernels need beside it (:data:`_MATRIX_NEEDS`) is missing."""
    vk, ffi, lib = inst.vk, inst.ffi, inst.vk.lib
    if COOPERATIVE_MATRIX not in extensions:
        return frozenset()
    if not all(any(features.get(f"{s}.{f}") for s in ("v11", "v12")) for f in _MATRIX_NEEDS):
        return frozenset()
    chain: list[Any] = []
    f2 = _new(ffi, "VkPhysicalDeviceFeatures2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, chain)
    coop = _new(
        ffi,
        "VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
        vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        chain,
    )
    lib.vkGetPhysicalDeviceFeatures2(handle, f2)
    if not coop.cooperativeMatrix:
        return frozenset()
    # Called directly: the package's wrapper leaves each returned struct's sType unset.
    name = "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"
    address = lib.vkGetInstanceProcAddr(inst.handle, name.encode())
    if address == ffi.NULL:
        return frozenset()
    fn = ffi.cast(f"PFN_{name}", address)
    count = ffi.new("uint32_t *")
    binding.check(fn(handle, count, ffi.NULL), name)
    props = ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
    for i in range(count[0]):
        props[i].sType = vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
    binding.check(fn(handle, count, props), name)
    tiles = set()
    for i in range(count[0]):
        q = props[i]
        if q.scope != vk.VK_SCOPE_SUBGROUP_KHR or q.AType != q.BType or q.CType != q.ResultType:
            continue
        if _COMPONENTS.get(q.AType) == "int8" and not features.get("v12.shaderInt8"):
            continue  # int8 matrices need 8-bit shader arithmetic (matmul_int_coop.comp)
        if q.AType in _COMPONENTS and q.CType in _COMPONENTS and not q.saturatingAccumulation:
            tiles.add(f"{_COMPONENTS[q.AType]}:{q.MSize}x{q.NSize}x{q.KSize}:{_COMPONENTS[q.CType]}")
    return frozenset(tiles)


def _max_allocation(inst: Instance, handle: Any, v13: bool) -> int:
    if not v13:
        return 1 << 30
    vk, ffi = inst.vk, inst.ffi
    chain: list[Any] = []
    p2 = _new(ffi, "VkPhysicalDeviceProperties2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, chain)
    m3 = _new(
        ffi,
        "VkPhysicalDeviceMaintenance3Properties",
        vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
        chain,
    )
    vk.lib.vkGetPhysicalDeviceProperties2(handle, p2)
    return int(m3.maxMemoryAllocationSize)


def _feature_structs(inst: Instance) -> tuple[Any, dict[str, Any]]:
    vk, ffi = inst.vk, inst.ffi
    chain: list[Any] = []
    f2 = _new(ffi, "VkPhysicalDeviceFeatures2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, chain)
    f11 = _new(ffi, "VkPhysicalDeviceVulkan11Features", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, chain)
    f12 = _new(ffi, "VkPhysicalDeviceVulkan12Features", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, chain)
    f13 = _new(ffi, "VkPhysicalDeviceVulkan13Features", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, chain)
    return f2, {"core": f2.features, "v11": f11, "v12": f12, "v13": f13, "_keep": chain}


def _features(inst: Instance, handle: Any) -> dict[str, bool]:
    f2, structs = _feature_structs(inst)
    inst.vk.lib.vkGetPhysicalDeviceFeatures2(handle, f2)
    return {f"{s}.{field}": bool(getattr(structs[s], field)) for s, field in (*_REQUIRED, *_OPTIONAL)}


def shortfall(pd: PhysicalDevice) -> str | None:
    """Why ``pd`` cannot run the backend, or None when it can."""
    major, minor = pd.api_version >> 22 & 0x7F, pd.api_version >> 12 & 0x3FF
    if (major, minor) < (1, 3):
        return f"Vulkan {major}.{minor} (1.3 needed)"
    if pd.compute_family is None:
        return "no compute queue"
    missing = [field for s, field in _REQUIRED if not pd.features.get(f"{s}.{field}")]
    if missing:
        return "missing " + ", ".join(missing)
    if not pd.nan_preserve:
        return "no shaderSignedZeroInfNanPreserveFloat32 (the kernels keep NaN, infinities and signed zeros)"
    return None


def _label(pd: PhysicalDevice) -> str:
    kind = f"{pd.device_type}, {pd.software}" if pd.software else pd.device_type
    return f"#{pd.index} {pd.name!r} ({kind})"


def choose(devices: list[PhysicalDevice], selector: str | int | None) -> PhysicalDevice:
    """The device ``selector`` names (see the module doc); Unsupported when none matches or the match
    cannot run the backend, InvalidArgument for a malformed selector."""
    if not devices:
        raise Unsupported("the Vulkan loader lists no physical device")
    listing = "; ".join(f"{_label(d)}: {shortfall(d) or 'usable'}" for d in devices)
    if selector is None or (isinstance(selector, str) and not selector.strip()):
        usable = [d for d in devices if shortfall(d) is None]
        if not usable:
            raise Unsupported(f"no Vulkan device can run the backend ({listing})")
        usable.sort(key=lambda d: (_TYPE_PREFERENCE.get(d.device_type, 5) + (10 if d.software else 0), d.index))
        return usable[0]
    matches = _match(devices, selector)
    if not matches:
        raise Unsupported(f"no Vulkan device matches {selector!r} (devices: {listing})")
    if len(matches) > 1:
        names = ", ".join(_label(d) for d in matches)
        raise InvalidArgument(f"Vulkan selector {selector!r} is ambiguous ({names}); use an index or a UUID")
    reason = shortfall(matches[0])
    if reason is not None:
        raise Unsupported(f"Vulkan device {_label(matches[0])} cannot run the backend: {reason}")
    return matches[0]


def _match(devices: list[PhysicalDevice], selector: str | int) -> list[PhysicalDevice]:
    text = str(selector).strip()
    compact = text.replace("-", "")
    if not isinstance(selector, int) and _UUID.match(compact):  # before indexes: a UUID may be all digits
        return [d for d in devices if d.uuid_hex == compact.lower()]
    if isinstance(selector, int) or text.isdigit():
        index = int(text)
        return [d for d in devices if d.index == index]
    alias = _SOFTWARE_ALIASES.get(text.lower())
    if alias is not None:
        return [d for d in devices if d.software == alias]
    return [d for d in devices if text.lower() in d.name.lower()]


class Device:
    """The logical device: one compute queue, the enabled features, and the submission lock."""

    def __init__(self, inst: Instance, pd: PhysicalDevice, *, pipeline_statistics: bool = False) -> None:
        """``pipeline_statistics``: have the driver keep what it compiled each pipeline into, where it can
        (:mod:`.statistics`); ``self.pipeline_statistics`` says whether it does."""
        vk = inst.vk
        self.instance = inst
        self.vk = vk
        self.ffi = inst.ffi
        self.physical = pd
        self.limits: Limits = pd.limits  # type: ignore[assignment]
        self.submit_lock = threading.Lock()
        # Whether the queue's last submission ends with a direct recording's last barrier, which orders
        # every later command after its work and makes its writes visible to them (.recording). Cleared by
        # ``submit``; a launch sets it, and leaves out its own first barrier after such a tail (.launcher).
        self.ordered_tail = False
        family = pd.compute_family
        assert family is not None  # shortfall() checked it
        self.queue_family = family
        f2, structs = _feature_structs(inst)
        for s, field in _REQUIRED:
            setattr(structs[s], field, 1)
        self.enabled = {field for s, field in _REQUIRED}
        for s, field in _OPTIONAL:
            if pd.features.get(f"{s}.{field}"):
                setattr(structs[s], field, 1)
                self.enabled.add(field)
        self.matrix_tiles = pd.matrix_tiles
        self.pipeline_statistics = pipeline_statistics and pd.reports_pipelines
        # (wanted, extension, its feature struct, the structure type, the feature's field)
        optional = (
            # _matrix_tiles checked the extension, its feature and _MATRIX_NEEDS
            (
                bool(pd.matrix_tiles),
                COOPERATIVE_MATRIX,
                "VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
                "cooperativeMatrix",
            ),
            (
                self.pipeline_statistics,
                statistics.EXTENSION,
                "VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR",
                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
                "pipelineExecutableInfo",
            ),
        )
        extensions = []
        for wanted, extension, ctype, stype, field in optional:
            if wanted:
                setattr(_new(self.ffi, ctype, stype, structs["_keep"]), field, 1)
                extensions.append(extension)
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=family, queueCount=1, pQueuePriorities=[1.0])
        named = {"enabledExtensionCount": len(extensions), "ppEnabledExtensionNames": extensions} if extensions else {}
        info = vk.VkDeviceCreateInfo(pNext=f2[0], queueCreateInfoCount=1, pQueueCreateInfos=[queue_info], **named)
        self._feature_chain = structs  # alive while the create call reads it
        self.handle = binding.call(vk.vkCreateDevice, pd.handle, info, None, what="vkCreateDevice")
        self.queue = vk.vkGetDeviceQueue(self.handle, family, 0)

    def submit(self, info: Any, fence: Any) -> int:
        """One vkQueueSubmit2 of ``info`` signalling ``fence``, under the submit lock; returns the VkResult.
        What it submits does not end with an ordering barrier (``ordered_tail``)."""
        with self.submit_lock:
            code = int(self.vk.lib.vkQueueSubmit2(self.queue, 1, info, fence))
            self.ordered_tail = False
        return code

    def wait_idle(self) -> None:
        with self.submit_lock:
            binding.check(self.vk.lib.vkDeviceWaitIdle(self.handle), "vkDeviceWaitIdle")

    def destroy(self) -> None:
        self.vk.vkDestroyDevice(self.handle, None)
