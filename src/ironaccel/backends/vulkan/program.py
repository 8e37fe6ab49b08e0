"""A loaded program: its arena and constants buffers, one descriptor set per dispatch, and the one
command buffer that runs the whole graph, recorded once at load.

The command buffer is recorded with SIMULTANEOUS_USE: every submission of the program replays it
between the submission's own copy-in and copy-out commands (:mod:`.submit`). Its first barrier makes the
copied-in inputs visible to the kernels, the plan's barriers order the kernels, and its last barrier
makes the results visible to the copy-out. Submissions of one program share its arena; they are
ordered because they all go to the device's one queue, and every submission begins with a barrier
on everything earlier (see :mod:`.submit`).
"""

from __future__ import annotations

from typing import Any

from ...runtime.types import MemoryDomain
from . import binding, commands
from .kernels import Kernels, Pipeline
from .memory import Allocation, Memory
from .ops.common import Dispatch, Place
from .plan import Plan

_STEP_OVERHEAD = 512  # resident bytes charged per step (descriptor set, commands) on top of the buffers


class LoadedProgram:
    def __init__(self, memory: Memory, kernels: Kernels, plan: Plan) -> None:
        self.memory = memory
        self.device = memory.device
        self.vk = memory.vk
        self.plan = plan
        self.arena: Allocation | None = None
        self.const: Allocation | None = None
        self.pool: Any = None
        self.descriptor_pool: Any = None
        try:
            self.arena = memory.allocate(plan.arena_bytes, MemoryDomain.DEVICE)
            if plan.const_bytes:
                self.const = memory.allocate(plan.const_bytes, MemoryDomain.DEVICE)
                for offset, data in plan.constants:
                    memory.write(self.const, offset, memoryview(data.reshape(-1).view("uint8")))
            dispatches = [s for s in plan.steps if isinstance(s, Dispatch)]
            pipelines = [kernels.pipeline(d.shader, d.spec, len(d.bindings)) for d in dispatches]
            sets = self._descriptor_sets(dispatches, pipelines)
            self._record(pipelines, sets)
        except BaseException:
            self.destroy()
            raise
        self.resident_bytes = (
            self.arena.allocation_bytes
            + (self.const.allocation_bytes if self.const else 0)
            + _STEP_OVERHEAD * len(plan.steps)
        )

    def buffer(self, place: Place) -> Any:
        """The VkBuffer a place is in."""
        owner = self.arena if place.buffer == "arena" else self.const
        assert owner is not None
        return owner.buffer

    def _descriptor_sets(self, dispatches: list[Dispatch], pipelines: list[Pipeline]) -> list[Any]:
        if not dispatches:
            return []
        vk, dev, ffi = self.vk, self.device.handle, self.vk.ffi
        total = sum(len(d.bindings) for d in dispatches)
        size = vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=total)
        info = vk.VkDescriptorPoolCreateInfo(maxSets=len(dispatches), poolSizeCount=1, pPoolSizes=[size])
        self.descriptor_pool = binding.call(vk.vkCreateDescriptorPool, dev, info, None, what="vkCreateDescriptorPool")
        layouts = ffi.new("VkDescriptorSetLayout[]", [p.set_layout for p in pipelines])
        alloc = ffi.new("VkDescriptorSetAllocateInfo *")
        alloc.sType = vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO
        alloc.descriptorPool = self.descriptor_pool
        alloc.descriptorSetCount = len(pipelines)
        alloc.pSetLayouts = layouts
        sets = ffi.new("VkDescriptorSet[]", len(pipelines))
        binding.check(vk.lib.vkAllocateDescriptorSets(dev, alloc, sets), "vkAllocateDescriptorSets")
        infos = ffi.new("VkDescriptorBufferInfo[]", total)
        writes = ffi.new("VkWriteDescriptorSet[]", total)
        k = 0
        for i, d in enumerate(dispatches):
            for slot, place in enumerate(d.bindings):
                owner = self.arena if place.buffer == "arena" else self.const
                assert owner is not None
                infos[k].buffer = owner.buffer
                infos[k].offset = place.offset
                # Whole 32-bit words (BOOL kernels write them); the plan pads every buffer to allow it.
                infos[k].range = min(max(4, -(-place.size // 4) * 4), owner.size - place.offset)
                w = writes[k]
                w.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
                w.dstSet = sets[i]
                w.dstBinding = slot
                w.descriptorCount = 1
                w.descriptorType = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                w.pBufferInfo = ffi.addressof(infos, k)
                k += 1
        vk.lib.vkUpdateDescriptorSets(dev, total, writes, 0, ffi.NULL)
        return [sets[i] for i in range(len(pipelines))]

    def _record(self, pipelines: list[Pipeline], sets: list[Any]) -> None:
        vk, lib, ffi, dev = self.vk, self.vk.lib, self.vk.ffi, self.device.handle
        info = vk.VkCommandPoolCreateInfo(queueFamilyIndex=self.device.queue_family)
        self.pool = binding.call(vk.vkCreateCommandPool, dev, info, None, what="vkCreateCommandPool")
        alloc = vk.VkCommandBufferAllocateInfo(
            commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1
        )
        cb = self.cb = binding.call(vk.vkAllocateCommandBuffers, dev, alloc, what="vkAllocateCommandBuffers")[0]
        compute, copy = vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_2_COPY_BIT
        shader_rw = vk.VK_ACCESS_2_SHADER_STORAGE_READ_BIT | vk.VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT
        transfer_rw = vk.VK_ACCESS_2_TRANSFER_READ_BIT | vk.VK_ACCESS_2_TRANSFER_WRITE_BIT
        writes = vk.VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT | vk.VK_ACCESS_2_TRANSFER_WRITE_BIT
        commands.begin(vk, cb, vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT)
        # The submission's copy-in (and anything earlier on the queue) before the first kernel.
        commands.global_barrier(
            vk, cb, copy, vk.VK_ACCESS_2_TRANSFER_WRITE_BIT, compute | copy, shader_rw | transfer_rw
        )
        bind_point = vk.VK_PIPELINE_BIND_POINT_COMPUTE
        bound = None
        k = 0
        assert self.arena is not None
        for step, barrier in zip(self.plan.steps, self.plan.barriers, strict=True):
            if barrier is not None:
                src_access = 0 if barrier.execution_only else writes
                commands.buffer_barriers(
                    vk,
                    cb,
                    self.arena.buffer,
                    barrier.ranges,
                    compute | copy,
                    src_access,
                    compute | copy,
                    0 if barrier.execution_only else shader_rw | transfer_rw,
                )
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
                commands.copy(
                    vk,
                    cb,
                    self.buffer(step.src),
                    step.src.offset,
                    self.buffer(step.dst),
                    step.dst.offset,
                    step.dst.size,
                )
        # Results before the submission's copy-out.
        commands.global_barrier(vk, cb, compute | copy, writes, copy, vk.VK_ACCESS_2_TRANSFER_READ_BIT)
        commands.end(vk, cb)

    def destroy(self) -> None:
        vk, dev = self.vk, self.device.handle
        if self.pool is not None:
            vk.vkDestroyCommandPool(dev, self.pool, None)  # frees the command buffer
            self.pool = None
        if self.descriptor_pool is not None:
            vk.vkDestroyDescriptorPool(dev, self.descriptor_pool, None)
            self.descriptor_pool = None
        for a in (self.arena, self.const):
            if a is not None:
                self.memory.free(a)
        self.arena = self.const = None
