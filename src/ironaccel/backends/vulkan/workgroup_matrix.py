"""Workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2), which the `vulkan` package predates.

With VK_KHR_cooperative_matrix a kernel holds 16 x 16 fragments per subgroup and stages every slice
through shared memory itself (``shaders/matmul_coop.comp``). VK_NV_cooperative_matrix2 adds matrices
owned by a whole workgroup, of any size that is a multiple of the driver's granularity, whose staging
the driver's compiler writes. A GEMM then reads as its definition (load a 128 x 32 slice of A and a
32 x 128 slice of B, multiply-add, repeat), and how to pipeline the loads is the driver's to choose.

The package's cffi declarations stop before this extension, so its structs are declared here, in a
private FFI with names of our own, and passed to the driver by address. Nothing here is enabled unless
asked for (``open_accelerator(..., workgroup_matrices=True)`` or IRONACCEL_VULKAN_WORKGROUP_MATRICES=1);
then fp16 MATMUL runs on ``shaders/matmul_wg_coop.comp`` where the device lists a configuration it fits
(ADR 0020: off until a device measures it faster than ``matmul_coop.comp``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

EXTENSION = "VK_NV_cooperative_matrix2"
SPIRV_EXTENSION = "SPV_NV_cooperative_matrix2"  # declared by kernels using their tensor addressing
FEATURES_STYPE = 1000593000  # VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV
FLEXIBLE_STYPE = 1000593001  # VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV
PROPERTIES_STYPE = 1000593002  # VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV
LIST_FLEXIBLE = "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"
WORKGROUP_SCOPE = 2  # VK_SCOPE_WORKGROUP_KHR
_COMPONENTS = {0: "fp16", 1: "fp32", 2: "fp64", 3: "int8", 4: "int16", 5: "int32", 7: "uint8", 8: "uint16"}


@functools.cache
def _ffi() -> Any:
    """The private FFI (made on first use: cffi comes with the `vulkan` package, which may be absent)."""
    import cffi

    ffi = cffi.FFI()
    # The C layouts of VkPhysicalDeviceCooperativeMatrix2FeaturesNV, VkCooperativeMatrixFlexibleDimensions-
    # PropertiesNV and VkPhysicalDeviceCooperativeMatrix2PropertiesNV: enums and VkBool32 are 32-bit.
    ffi.cdef(
        """
        typedef struct {
            int32_t sType; void *pNext;
            uint32_t workgroupScope, flexibleDimensions, reductions, conversions, perElementOperations,
                     tensorAddressing, blockLoads;
        } Matrix2Features;
        typedef struct {
            int32_t sType; void *pNext;
            uint32_t MGranularity, NGranularity, KGranularity;
            int32_t AType, BType, CType, ResultType;
            uint32_t saturatingAccumulation;
            int32_t scope;
            uint32_t workgroupInvocations;
        } FlexibleDimensions;
        typedef struct {
            int32_t sType; void *pNext;
            uint32_t workgroupScopeMaxWorkgroupSize, flexibleDimensionsMaxDimension, workgroupScopeReservedSharedMemory;
        } Matrix2Properties;
        typedef int32_t (*ListFlexible)(void *physicalDevice, uint32_t *count, FlexibleDimensions *properties);
        """
    )
    return ffi


@dataclasses.dataclass(frozen=True)
class WorkgroupMatrices:
    """What a device offers at workgroup scope."""

    # "<A>:<M>x<N>x<K>:<C>@<invocations>": A and B of one type, C and result of one, the granularity of
    # each dimension, and the workgroup size the configuration needs, e.g. "fp16:16x16x16:fp32@256".
    configurations: frozenset[str]
    max_workgroup_size: int
    max_dimension: int
    reserved_shared_memory: int  # bytes of a workgroup's shared memory the driver keeps for its staging
    tensor_addressing: bool = False  # loads and stores through tensor layouts (bounds, batches, clamping)


def describe(vk: Any, instance: Any, physical: Any, extensions: set[str]) -> WorkgroupMatrices | None:
    """The device's workgroup-scope configurations, or None where the extension, either feature
    (workgroup scope, flexible dimensions) or a configuration of the kinds kept here is missing."""
    if EXTENSION not in extensions:
        return None
    ffi, vffi, lib = _ffi(), vk.ffi, vk.lib
    features = ffi.new("Matrix2Features *", {"sType": FEATURES_STYPE})
    f2 = vffi.new("VkPhysicalDeviceFeatures2 *")
    f2.sType = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2
    f2.pNext = _foreign(vffi, features)
    lib.vkGetPhysicalDeviceFeatures2(physical, f2)
    if not (features.workgroupScope and features.flexibleDimensions):
        return None
    props = ffi.new("Matrix2Properties *", {"sType": PROPERTIES_STYPE})
    p2 = vffi.new("VkPhysicalDeviceProperties2 *")
    p2.sType = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2
    p2.pNext = _foreign(vffi, props)
    lib.vkGetPhysicalDeviceProperties2(physical, p2)
    address = lib.vkGetInstanceProcAddr(instance, LIST_FLEXIBLE.encode())
    if address == vffi.NULL:
        return None
    listed = ffi.cast("ListFlexible", int(vffi.cast("uintptr_t", address)))
    handle = ffi.cast("void *", int(vffi.cast("uintptr_t", physical)))
    # A list that cannot be read (any result but VK_SUCCESS) counts as none offered: discovery of the
    # device must not fail over an extension only an optional kernel needs.
    count = ffi.new("uint32_t *")
    if listed(handle, count, ffi.NULL) != 0:
        return None
    items = ffi.new("FlexibleDimensions[]", count[0])
    for i in range(count[0]):
        items[i].sType = FLEXIBLE_STYPE
    if listed(handle, count, items) != 0:
        return None
    configurations = frozenset(filter(None, (_configuration(items[i]) for i in range(count[0]))))
    if not configurations:
        return None  # nothing a kernel here could use
    return WorkgroupMatrices(
        configurations=configurations,
        max_workgroup_size=int(props.workgroupScopeMaxWorkgroupSize),
        max_dimension=int(props.flexibleDimensionsMaxDimension),
        reserved_shared_memory=int(props.workgroupScopeReservedSharedMemory),
        tensor_addressing=bool(features.tensorAddressing),
    )


def enable(vffi: Any, chain: list[Any], offered: WorkgroupMatrices) -> Any:
    """Append the features a workgroup-scope kernel needs (workgroup scope, flexible dimensions, and
    tensor addressing where ``offered``) to a VkDeviceCreateInfo feature chain of the package's structs;
    the caller keeps the result alive until the device is created."""
    wanted = {"workgroupScope": 1, "flexibleDimensions": 1, "tensorAddressing": int(offered.tensor_addressing)}
    features = _ffi().new("Matrix2Features *", {"sType": FEATURES_STYPE, **wanted})
    chain[-1].pNext = _foreign(vffi, features)
    return features


class Configuration(NamedTuple):
    """One entry of :attr:`WorkgroupMatrices.configurations`, read back (:func:`parse`)."""

    a_type: str  # A and B
    m: int  # the granularity of each dimension
    n: int
    k: int
    c_type: str  # C and the result
    invocations: int  # the workgroup size the configuration holds at


def parse(entry: str) -> Configuration | None:
    """The parts of ``entry`` ("fp16:16x16x16:fp32@256"); None for a subgroup-scope one, which has no
    "@<invocations>" (a device's ``matrix_tiles`` holds both kinds)."""
    config, at, invocations = entry.partition("@")
    if not at:
        return None
    a_type, dims, c_type = config.split(":")
    m, n, k = (int(v) for v in dims.split("x"))
    return Configuration(a_type, m, n, k, c_type, int(invocations))


def _configuration(q: Any) -> str | None:
    if q.scope != WORKGROUP_SCOPE or q.AType != q.BType or q.CType != q.ResultType or q.saturatingAccumulation:
        return None
    if q.AType not in _COMPONENTS or q.CType not in _COMPONENTS:
        return None
    a, c = _COMPONENTS[q.AType], _COMPONENTS[q.CType]
    return f"{a}:{q.MGranularity}x{q.NGranularity}x{q.KGranularity}:{c}@{q.workgroupInvocations}"


def _foreign(vffi: Any, struct: Any) -> Any:
    """``struct`` (of this module's FFI) as a ``void *`` of the package's, for a pNext."""
    return vffi.cast("void *", int(_ffi().cast("uintptr_t", struct)))
