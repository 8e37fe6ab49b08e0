"""What the driver compiled a pipeline into: registers, shared and local memory, as the driver counts them.

A kernel's speed on a GPU turns on numbers the SPIR-V does not show: how many registers the driver's
compiler gave each invocation (which caps how many workgroups share a multiprocessor), whether
anything spilled to local memory, how much shared memory it reserved. VK_KHR_pipeline_executable_properties
lets a driver report them per pipeline, under names of its own choosing. Asking costs something at
pipeline creation (the driver keeps the figures), so a device reports them only when opened with
``open_accelerator(..., pipeline_statistics=True)``; ``benchmarks/vulkan/pipeline_stats.py`` prints them
for the kernels a set of programs uses.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...core.errors import Unsupported
from . import binding

EXTENSION = "VK_KHR_pipeline_executable_properties"
_PROPERTIES = "vkGetPipelineExecutablePropertiesKHR"
_STATISTICS = "vkGetPipelineExecutableStatisticsKHR"


@dataclasses.dataclass(frozen=True)
class Executable:
    """One of a pipeline's compiled programs (a compute pipeline has one) and the driver's figures for it."""

    name: str
    description: str
    subgroup_size: int
    statistics: dict[str, bool | int | float]  # the driver's own names, in the driver's order


def read(vk: Any, device: Any, pipeline: Any) -> list[Executable]:
    """The executables of ``pipeline`` (created with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR on a
    device with the extension enabled) and their statistics."""
    ffi = vk.ffi
    text = lambda chars: ffi.string(chars).decode("utf-8", "replace")  # noqa: E731
    info = ffi.new("VkPipelineInfoKHR *")
    info.sType = vk.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR
    info.pipeline = pipeline
    props, count = _listed(vk, device, _PROPERTIES, info, "VkPipelineExecutablePropertiesKHR", "PROPERTIES")
    found = []
    for index in range(count):
        p = props[index]
        which = ffi.new("VkPipelineExecutableInfoKHR *")
        which.sType = vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR
        which.pipeline = pipeline
        which.executableIndex = index
        stats, n = _listed(vk, device, _STATISTICS, which, "VkPipelineExecutableStatisticKHR", "STATISTIC")
        found.append(
            Executable(
                name=text(p.name),
                description=text(p.description),
                subgroup_size=int(p.subgroupSize),
                statistics={text(stats[i].name): _value(vk, stats[i]) for i in range(n)},
            )
        )
    return found


def _listed(vk: Any, device: Any, name: str, info: Any, ctype: str, kind: str) -> tuple[Any, int]:
    """The structs the query ``name`` lists for ``info`` (asked twice: how many, then them), each with
    its sType (VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_<kind>_KHR) set first, as the call requires."""
    ffi = vk.ffi
    fn = _function(vk, device, name)
    count = ffi.new("uint32_t *")
    binding.check(fn(device, info, count, ffi.NULL), name)
    items = ffi.new(f"{ctype}[]", count[0])
    for i in range(count[0]):
        items[i].sType = getattr(vk, f"VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_{kind}_KHR")
    binding.check(fn(device, info, count, items), name)
    return items, count[0]  # the owner: its items are read while the caller holds it


def _value(vk: Any, stat: Any) -> bool | int | float:
    kind, value = stat.format, stat.value
    if kind == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        return bool(value.b32)
    if kind == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        return int(value.i64)
    if kind == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        return int(value.u64)
    return float(value.f64)


def _function(vk: Any, device: Any, name: str) -> Any:
    # Called directly, as device.py does for the cooperative-matrix query: the package's wrappers leave
    # each returned struct's sType unset.
    ffi = vk.ffi
    address = vk.lib.vkGetDeviceProcAddr(device, name.encode())
    if address == ffi.NULL:
        raise Unsupported(f"the driver has no {name} although {EXTENSION} is enabled")
    return ffi.cast(f"PFN_{name}", address)
