"""Recording command buffers: the commands every recording is made of, and a program's whole graph.

The commands (:func:`begin`, :func:`end`, :func:`global_barrier`, :func:`buffer_barriers`, :func:`copy`,
:func:`submit_info`) serve the program's recording, the submission ring's copies (:mod:`.submit`), the
launcher's marks (:mod:`.launcher`) and the stager (:mod:`.memory`). Their structs are built with the
package's ``ffi`` directly (not its Python constructors): these run on every submission, and a cffi
struct costs a fraction of the wrapper's per-field conversions.

The graph (:func:`descriptor_sets`, :func:`record_graph`) is recorded for the program's own arena
(:mod:`.program`) and for recordings bound to the caller's buffers (:mod:`.direct`); ``resolve`` says
where each place is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import binding
from .ops.common import Dispatch

if TYPE_CHECKING:
    from .kernels import Pipeline
    from .ops.common import Place
    from .plan import Plan


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


def descriptor_sets(
    vk: Any,
    dev: Any,
    dispatches: list[Dispatch],
    pipelines: list[Pipeline],
    resolve: Callable[[Place], tuple[Any, int, int]],
) -> tuple[Any, list[Any]]:
    """A descriptor pool and one set per dispatch, each binding placed by ``resolve``."""
    ffi = vk.ffi
    total = sum(len(d.bindings) for d in dispatches)
    size = vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=total)
    info = vk.VkDescriptorPoolCreateInfo(maxSets=len(dispatches), poolSizeCount=1, pPoolSizes=[size])
    pool = binding.call(vk.vkCreateDescriptorPool, dev, info, None, what="vkCreateDescriptorPool")
    try:
        layouts = ffi.new("VkDescriptorSetLayout[]", [p.set_layout for p in pipelines])
        alloc = ffi.new("VkDescriptorSetAllocateInfo *")
        alloc.sType = vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO
        alloc.descriptorPool = pool
        alloc.descriptorSetCount = len(pipelines)
        alloc.pSetLayouts = layouts
        sets = ffi.new("VkDescriptorSet[]", len(pipelines))
        binding.check(vk.lib.vkAllocateDescriptorSets(dev, alloc, sets), "vkAllocateDescriptorSets")
    except BaseException:
        vk.vkDestroyDescriptorPool(dev, pool, None)
        raise
    infos = ffi.new("VkDescriptorBufferInfo[]", total)
    writes = ffi.new("VkWriteDescriptorSet[]", total)
    k = 0
    for i, d in enumerate(dispatches):
        for slot, place in enumerate(d.bindings):
            infos[k].buffer, infos[k].offset, infos[k].range = resolve(place)
            w = writes[k]
            w.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
            w.dstSet = sets[i]
            w.dstBinding = slot
            w.descriptorCount = 1
            w.descriptorType = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
            w.pBufferInfo = ffi.addressof(infos, k)
            k += 1
    vk.lib.vkUpdateDescriptorSets(dev, total, writes, 0, ffi.NULL)
    return pool, [sets[i] for i in range(len(pipelines))]


def record_graph(
    vk: Any,
    cb: Any,
    plan: Plan,
    pipelines: list[Pipeline],
    sets: list[Any],
    resolve: Callable[[Place], tuple[Any, int, int]],
    arena: Any | None,
    leading_barrier: bool = True,
) -> None:
    """Record the whole graph into ``cb`` (SIMULTANEOUS_USE).

    With ``arena`` (the program's own buffer), for replay between a submission's copy-in and copy-out:
    the plan's barriers are buffer barriers on arena ranges. Without it, for a recording whose inputs
    and outputs are the caller's buffers (:mod:`.direct`): each plan barrier becomes a global one (the
    ranges may lie in any buffer), the first orders everything earlier on the queue before the kernels,
    and the last makes the results visible to the host. ``leading_barrier=False`` leaves the first out,
    for a submission that follows one ending with such a last barrier, which already orders it
    (:mod:`.launcher`).
    """
    lib, ffi = vk.lib, vk.ffi
    compute, copying = vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_2_COPY_BIT
    everything = vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT
    shader_rw = vk.VK_ACCESS_2_SHADER_STORAGE_READ_BIT | vk.VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT
    transfer_rw = vk.VK_ACCESS_2_TRANSFER_READ_BIT | vk.VK_ACCESS_2_TRANSFER_WRITE_BIT
    writes = vk.VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT | vk.VK_ACCESS_2_TRANSFER_WRITE_BIT
    memory_rw = vk.VK_ACCESS_2_MEMORY_READ_BIT | vk.VK_ACCESS_2_MEMORY_WRITE_BIT
    begin(vk, cb, vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT)
    if arena is not None:
        # The submission's copy-in (and anything earlier on the queue) before the first kernel.
        global_barrier(vk, cb, copying, vk.VK_ACCESS_2_TRANSFER_WRITE_BIT, compute | copying, shader_rw | transfer_rw)
    elif leading_barrier:
        # Whatever ran before on the queue (another submission using these buffers) happens-before.
        global_barrier(vk, cb, everything, vk.VK_ACCESS_2_MEMORY_WRITE_BIT, everything, memory_rw)
    bind_point = vk.VK_PIPELINE_BIND_POINT_COMPUTE
    bound = None
    k = 0
    for step, barrier in zip(plan.steps, plan.barriers, strict=True):
        if barrier is not None:
            src_access = 0 if barrier.execution_only else writes
            dst_access = 0 if barrier.execution_only else shader_rw | transfer_rw
            if arena is not None:
                buffer_barriers(
                    vk, cb, arena, barrier.ranges, compute | copying, src_access, compute | copying, dst_access
                )
            else:
                global_barrier(vk, cb, compute | copying, src_access, compute | copying, dst_access)
        if isinstance(step, Dispatch):
            pipeline = pipelines[k]
            if bound is not pipeline.handle:
                lib.vkCmdBindPipeline(cb, bind_point, pipeline.handle)
                bound = pipeline.handle
            set_ptr = ffi.new("VkDescriptorSet[1]", [sets[k]])
            lib.vkCmdBindDescriptorSets(cb, bind_point, pipeline.layout, 0, 1, set_ptr, 0, ffi.NULL)
            push = ffi.new("char[]", step.push)
            lib.vkCmdPushConstants(cb, pipeline.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(step.push), push)
            lib.vkCmdDispatch(cb, *step.groups)
            k += 1
        else:
            src, src_offset, _ = resolve(step.src)
            dst, dst_offset, _ = resolve(step.dst)
            copy(vk, cb, src, src_offset, dst, dst_offset, step.dst.size)
    if arena is not None:
        # Results before the submission's copy-out.
        global_barrier(vk, cb, compute | copying, writes, copying, vk.VK_ACCESS_2_TRANSFER_READ_BIT)
    else:
        # Results visible to the host (read_buffer after the fence) and to later submissions.
        global_barrier(vk, cb, compute | copying, writes, everything | vk.VK_PIPELINE_STAGE_2_HOST_BIT, memory_rw)
    end(vk, cb)
