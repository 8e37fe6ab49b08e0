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
from . import binding
from .direct import DirectRecordings
from .kernels import Kernels, Pipeline
from .memory import Allocation, Memory
from .ops.common import Dispatch, Place
from .plan import Plan
from .recording import descriptor_sets, record_graph

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
        self.direct: DirectRecordings | None = None
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
            self.direct = DirectRecordings(self.device, plan, pipelines, self.resolve)
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

    def resolve(self, place: Place) -> tuple[Any, int, int]:
        """(VkBuffer, offset, descriptor range) of a place in the program's own buffers."""
        owner = self.arena if place.buffer == "arena" else self.const
        assert owner is not None
        # Whole 32-bit words (BOOL kernels write them); the plan pads every buffer to allow it.
        return owner.buffer, place.offset, min(max(4, -(-place.size // 4) * 4), owner.size - place.offset)

    def _descriptor_sets(self, dispatches: list[Dispatch], pipelines: list[Pipeline]) -> list[Any]:
        if not dispatches:
            return []
        self.descriptor_pool, sets = descriptor_sets(self.vk, self.device.handle, dispatches, pipelines, self.resolve)
        return sets

    def _record(self, pipelines: list[Pipeline], sets: list[Any]) -> None:
        vk, dev = self.vk, self.device.handle
        info = vk.VkCommandPoolCreateInfo(queueFamilyIndex=self.device.queue_family)
        self.pool = binding.call(vk.vkCreateCommandPool, dev, info, None, what="vkCreateCommandPool")
        alloc = vk.VkCommandBufferAllocateInfo(
            commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1
        )
        self.cb = binding.call(vk.vkAllocateCommandBuffers, dev, alloc, what="vkAllocateCommandBuffers")[0]
        self.pipelines = pipelines
        record_graph(vk, self.cb, self.plan, pipelines, sets, self.resolve, self.arena.buffer if self.arena else None)

    def destroy(self) -> None:
        vk, dev = self.vk, self.device.handle
        if self.direct is not None:
            self.direct.destroy()
            self.direct = None
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


def plan_resident_bytes(plan: Plan) -> int:
    """What a program of ``plan`` keeps resident, known before anything is allocated (the allocations
    may round up: the loaded figure can be a little larger)."""
    return plan.arena_bytes + plan.const_bytes + _STEP_OVERHEAD * len(plan.steps)
