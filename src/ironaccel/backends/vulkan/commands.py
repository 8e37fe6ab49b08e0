"""Small recording helpers shared by the program recorder, the submission ring and the stager.

Structs are built with the package's ``ffi`` directly (not its Python constructors): these run on every
submission, and a cffi struct costs a fraction of the wrapper's per-field conversions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import binding


def begin(vk: Any, cb: Any, flags: int) -> None:
    info = vk.ffi.new("VkCommandBufferBeginInfo *")
    info.sType = vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO
    info.flags = flags
    binding.check(vk.lib.vkBeginCommandBuffer(cb, info), "vkBeginCommandBuffer")


def end(vk: Any, cb: Any) -> None:
    binding.check(vk.lib.vkEndCommandBuffer(cb), "vkEndCommandBuffer")


def global_barrier(vk: Any, cb: Any, src_stage: int, src_access: int, dst_stage: int, dst_access: int) -> None:
    """One VkMemoryBarrier2 covering every resource."""
    ffi = vk.ffi
    barrier = ffi.new("VkMemoryBarrier2 *")
    barrier.sType = vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER_2
    barrier.srcStageMask = src_stage
    barrier.srcAccessMask = src_access
    barrier.dstStageMask = dst_stage
    barrier.dstAccessMask = dst_access
    dep = ffi.new("VkDependencyInfo *")
    dep.sType = vk.VK_STRUCTURE_TYPE_DEPENDENCY_INFO
    dep.memoryBarrierCount = 1
    dep.pMemoryBarriers = barrier
    vk.lib.vkCmdPipelineBarrier2(cb, dep)


def buffer_barriers(
    vk: Any,
    cb: Any,
    buffer: Any,
    ranges: Sequence[tuple[int, int]],
    src_stage: int,
    src_access: int,
    dst_stage: int,
    dst_access: int,
) -> None:
    """VkBufferMemoryBarrier2s over ``ranges`` ((offset, size) of ``buffer``) in one dependency."""
    ffi = vk.ffi
    barriers = ffi.new("VkBufferMemoryBarrier2[]", len(ranges))
    for i, (offset, size) in enumerate(ranges):
        b = barriers[i]
        b.sType = vk.VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER_2
        b.srcStageMask = src_stage
        b.srcAccessMask = src_access
        b.dstStageMask = dst_stage
        b.dstAccessMask = dst_access
        b.srcQueueFamilyIndex = vk.VK_QUEUE_FAMILY_IGNORED
        b.dstQueueFamilyIndex = vk.VK_QUEUE_FAMILY_IGNORED
        b.buffer = buffer
        b.offset = offset
        b.size = size
    dep = ffi.new("VkDependencyInfo *")
    dep.sType = vk.VK_STRUCTURE_TYPE_DEPENDENCY_INFO
    dep.bufferMemoryBarrierCount = len(ranges)
    dep.pBufferMemoryBarriers = barriers
    vk.lib.vkCmdPipelineBarrier2(cb, dep)


def copy(vk: Any, cb: Any, src: Any, src_offset: int, dst: Any, dst_offset: int, size: int) -> None:
    region = vk.ffi.new("VkBufferCopy *")
    region.srcOffset = src_offset
    region.dstOffset = dst_offset
    region.size = size
    vk.lib.vkCmdCopyBuffer(cb, src, dst, 1, region)


def submit_info(vk: Any, command_buffers: Sequence[Any]) -> Any:
    """A VkSubmitInfo2 for ``command_buffers``, reusable: a submission that repeats (a direct recording)
    builds it once instead of per call."""
    ffi = vk.ffi
    infos = ffi.new("VkCommandBufferSubmitInfo[]", len(command_buffers))
    for i, cb in enumerate(command_buffers):
        infos[i].sType = vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO
        infos[i].commandBuffer = cb
    info = ffi.new("VkSubmitInfo2 *")
    info.sType = vk.VK_STRUCTURE_TYPE_SUBMIT_INFO_2
    info.commandBufferInfoCount = len(command_buffers)
    info.pCommandBufferInfos = infos
    return ffi.gc(info, lambda _, keep=infos: None)  # the array lives as long as the struct pointing at it


def submit(vk: Any, queue: Any, info: Any, fence: Any) -> int:
    """One vkQueueSubmit2 of ``info`` (:func:`submit_info`) signalling ``fence``; returns the VkResult
    (the caller holds the queue's lock)."""
    return int(vk.lib.vkQueueSubmit2(queue, 1, info, fence))
