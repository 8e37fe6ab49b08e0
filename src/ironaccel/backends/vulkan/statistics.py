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
    properties_fn = _function(vk, device, _PROPERTIES)
    statistics_fn = _function(vk, device, _STATISTICS)
    info = ffi.new("VkPipelineInfoKHR *")
    info.sType = vk.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR
    info.pipeline = pipeline
    count = ffi.new("uint32_t *")
    binding.check(properties_fn(device, info, count, ffi.NULL), _PROPERTIES)
    props = ffi.new("VkPipelineExecutablePropertiesKHR[]", count[0])
    for i in range(count[0]):
        props[i].sType = vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR
    binding.check(properties_fn(device, info, count, props), _PROPERTIES)
    found = []
    for index in range(count[0]):
        which = ffi.new("VkPipelineExecutableInfoKHR *")
        which.sType = vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR
        which.pipeline = pipeline
        which.executableIndex = index
        n = ffi.new("uint32_t *")
        binding.check(statistics_fn(device, which, n, ffi.NULL), _STATISTICS)
        stats = ffi.new("VkPipelineExecutableStatisticKHR[]", n[0])
        for i in range(n[0]):
            stats[i].sType = vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR
        binding.check(statistics_fn(device, which, n, stats), _STATISTICS)
        values = {ffi.string(stats[i].name).decode("utf-8", "replace"): _value(vk, stats[i]) for i in range(n[0])}
        p = props[index]
        found.append(
            Executable(
                name=ffi.string(p.name).decode("utf-8", "replace"),
                description=ffi.string(p.description).decode("utf-8", "replace"),
                subgroup_size=int(p.subgroupSize),
                statistics=values,
            )
        )
    return found


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
