"""Kernel time of a loaded Vulkan program from GPU timestamps (benchmarks only; the backend never reads them).

:func:`kernel_ms` records, into a command buffer of its own, a timestamp, the program's dispatches
``reps`` times (its own barriers inside each repetition, a full compute barrier between repetitions so
they do not overlap), and a second timestamp; submits it twice (the first warms up), waits, and
returns the time between the timestamps per repetition in milliseconds. The kernels read and write
the program's arena, as its own command buffer does, so the figure excludes submission, copies and
host work: what the device spends running the graph.
"""

from __future__ import annotations

from typing import Any

from ironaccel.backends.vulkan import binding, recording
from ironaccel.backends.vulkan.ops.common import Dispatch


def loaded_program(acc: Any) -> Any:
    """The accelerator's one loaded program (the benchmark loads one at a time)."""
    programs = list(acc._native.programs)
    if len(programs) != 1:
        raise RuntimeError(f"expected one loaded program, found {len(programs)}")
    return programs[0]


def kernel_ms(acc: Any, program: Any, reps: int = 20) -> float:
    device = acc._native.device
    vk, ffi, dev = device.vk, device.ffi, device.handle
    period_ns = float(vk.vkGetPhysicalDeviceProperties(device.physical.handle).limits.timestampPeriod)
    dispatches = [s for s in program.plan.steps if isinstance(s, Dispatch)]
    if len(dispatches) != len(program.plan.steps):
        raise RuntimeError("the timer replays dispatches only; this plan has copies")
    pool_info = vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=2)
    queries = binding.call(vk.vkCreateQueryPool, dev, pool_info, None, what="vkCreateQueryPool")
    cmd_pool = binding.call(
        vk.vkCreateCommandPool,
        dev,
        vk.VkCommandPoolCreateInfo(queueFamilyIndex=device.queue_family),
        None,
        what="vkCreateCommandPool",
    )
    descriptor_pool, sets = recording.descriptor_sets(vk, dev, dispatches, program.pipelines, program.resolve)
    fence = binding.call(vk.vkCreateFence, dev, vk.VkFenceCreateInfo(), None, what="vkCreateFence")
    try:
        alloc = vk.VkCommandBufferAllocateInfo(
            commandPool=cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1
        )
        cb = binding.call(vk.vkAllocateCommandBuffers, dev, alloc, what="vkAllocateCommandBuffers")[0]
        compute = vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT
        rw = vk.VK_ACCESS_2_SHADER_STORAGE_READ_BIT | vk.VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT
        lib, point = vk.lib, vk.VK_PIPELINE_BIND_POINT_COMPUTE
        recording.begin(vk, cb, 0)
        lib.vkCmdResetQueryPool(cb, queries, 0, 2)
        recording.global_barrier(vk, cb, vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, 0, compute, 0)
        lib.vkCmdWriteTimestamp2(cb, vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, queries, 0)
        for _ in range(reps):
            for i, (step, barrier) in enumerate(zip(program.plan.steps, program.plan.barriers, strict=True)):
                if barrier is not None or i == 0:
                    recording.global_barrier(vk, cb, compute, rw, compute, rw)
                pipeline = program.pipelines[i]
                lib.vkCmdBindPipeline(cb, point, pipeline.handle)
                lib.vkCmdBindDescriptorSets(
                    cb, point, pipeline.layout, 0, 1, ffi.new("VkDescriptorSet[1]", [sets[i]]), 0, ffi.NULL
                )
                push = ffi.new("char[]", step.push)
                lib.vkCmdPushConstants(cb, pipeline.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(step.push), push)
                lib.vkCmdDispatch(cb, *step.groups)
        recording.global_barrier(vk, cb, compute, rw, vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, 0)
        lib.vkCmdWriteTimestamp2(cb, vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, queries, 1)
        recording.end(vk, cb)
        stamps = ffi.new("uint64_t[2]")
        flags = vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT
        fences = ffi.new("VkFence[1]", [fence])
        for _ in range(2):  # the first run warms clocks and caches (and lavapipe's lazy shader compiles)
            with device.submit_lock:
                binding.check(
                    lib.vkQueueSubmit2(device.queue, 1, recording.submit_info(vk, [cb]), fence), "vkQueueSubmit2"
                )
            binding.check(lib.vkWaitForFences(dev, 1, fences, 1, 60_000_000_000), "vkWaitForFences")
            binding.check(lib.vkResetFences(dev, 1, fences), "vkResetFences")
            binding.check(lib.vkGetQueryPoolResults(dev, queries, 0, 2, 16, stamps, 8, flags), "vkGetQueryPoolResults")
        return (stamps[1] - stamps[0]) * period_ns / reps / 1e6
    finally:
        vk.vkDestroyFence(dev, fence, None)
        vk.vkDestroyDescriptorPool(dev, descriptor_pool, None)
        vk.vkDestroyCommandPool(dev, cmd_pool, None)
        vk.vkDestroyQueryPool(dev, queries, None)
