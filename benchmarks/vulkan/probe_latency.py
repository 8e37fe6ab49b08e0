"""Where one submission's submit -> complete time goes, on one Vulkan device.

Every row times the same 1-operator program (ADD of 256 fp32, the latency row of bench_vulkan.py) from
the call that submits it until the host sees it finished, by a different route, so the differences
name the costs: the runtime contract (``acc.submit`` then ``poll_event``), prepared launches (as the
launcher decides, and with its host-word mark forced on and off), the backend's own recording
submitted straight through the `vulkan` package (with and without a fence reset, by vkQueueSubmit and
vkQueueSubmit2), an empty command buffer, a timeline semaphore instead of a fence, completion seen as a
flag the device writes into host memory, the recording without its first or last global barrier, and
the same loops in C (built here with the CPU backend's compiler, when there is one).

    python3 benchmarks/vulkan/probe_latency.py --device nvidia [--count 2000]

Prints a table of medians (and 10th / 90th percentiles) in microseconds. Python's cyclic collector is off
while a row is timed (``bench_vulkan.collector_off``).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vulkan import Loaded, collector_off  # noqa: E402

import ironaccel  # noqa: E402
from ironaccel.backends.vulkan import binding  # noqa: E402
from ironaccel.backends.vulkan import recording as vk_recording  # noqa: E402
from ironaccel.runtime.types import MemoryDomain  # noqa: E402
from ironaccel.tosa import ProgramBuilder  # noqa: E402

# submit + spin on the fence in C: one foreign call per sample, so no Python between the driver calls.
_C_SOURCE = r"""
#include <stdint.h>
#include <time.h>
#define EXPORT __attribute__((visibility("default")))
typedef int (*submit2_t)(void *, uint32_t, const void *, void *);
typedef int (*fence_status_t)(void *, void *);
typedef int (*reset_t)(void *, uint32_t, void *const *);
typedef int (*counter_t)(void *, void *, uint64_t *);
static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
/* n samples of reset + submit + spin on the fence; ns per sample into out. Returns 0 or a VkResult. */
EXPORT int ia_fence_loop(void *dev, void *queue, const void *info, void *fence, submit2_t submit, reset_t reset,
                          fence_status_t status, int n, int64_t *out) {
    for (int i = 0; i < n; ++i) {
        int64_t t0 = now_ns();
        int r = reset(dev, 1, &fence);
        if (r) return r;
        r = submit(queue, 1, info, fence);
        if (r) return r;
        while ((r = status(dev, fence)) == 1) {}
        if (r) return r;
        out[i] = now_ns() - t0;
    }
    return 0;
}
/* the same with a timeline semaphore: info signals sem to *value, which the loop raises each sample. */
EXPORT int ia_timeline_loop(void *dev, void *queue, const void *info, uint64_t *value, void *sem,
                            submit2_t submit, counter_t counter, int n, int64_t *out) {
    for (int i = 0; i < n; ++i) {
        *value += 1;
        int64_t t0 = now_ns();
        int r = submit(queue, 1, info, 0);
        if (r) return r;
        uint64_t seen = 0;
        do {
            r = counter(dev, sem, &seen);
            if (r) return r;
        } while (seen < *value);
        out[i] = now_ns() - t0;
    }
    return 0;
}
"""


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6  # noqa: E731
    return pick(0.1), statistics.median(ordered) * 1e6, pick(0.9)


def timed(count: int, body: Callable[[], None]) -> list[float]:
    for _ in range(min(50, count)):
        body()
    samples = []
    with collector_off():
        for _ in range(count):
            start = time.perf_counter()
            body()
            samples.append(time.perf_counter() - start)
    return samples


def native_library() -> Any:
    """The C loops, compiled now; None where no compiler is found."""
    try:
        from ironaccel.backends.cpu.native import toolchain
    except ImportError:
        return None
    tools = toolchain.compiler()
    if tools is None:
        print("no C compiler:", toolchain.unavailable_reason())
        return None
    return ctypes.CDLL(str(toolchain.build(_C_SOURCE, tools, libraries=())))


def barrier_free(program: Any, ranges: Any, command_pool: Any, skip: set[int]) -> Any:
    """The program's direct recording for ``ranges`` with the global barriers at positions ``skip``
    (0: the first, -1: the last) left out."""
    calls: list[tuple[Any, ...]] = []
    original = vk_recording.global_barrier

    def count(*args: Any) -> None:  # first pass: how many barriers the recording has
        calls.append(args)

    vk_recording.global_barrier = count
    try:
        counted = program.direct.record_apart(ranges, command_pool)
    finally:
        vk_recording.global_barrier = original
    total = len(calls)
    vk = program.vk
    if counted.descriptor_pool is not None:
        vk.vkDestroyDescriptorPool(program.device.handle, counted.descriptor_pool, None)
    dropped = {i % total for i in skip}
    seen = iter(range(total))

    def some(*args: Any) -> None:
        if next(seen) not in dropped:
            original(*args)

    vk_recording.global_barrier = some
    try:
        return program.direct.record_apart(ranges, command_pool)
    finally:
        vk_recording.global_barrier = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="lavapipe", help="vulkan device selector (index, name, uuid)")
    parser.add_argument("--count", type=int, default=2000, help="samples per row")
    args = parser.parse_args()

    dev = ironaccel.open(f"vulkan:{args.device}")
    b = ProgramBuilder()
    x = b.input("x", (256,), "fp32")
    b.output(b.add(x, x))
    loaded = Loaded(dev, b.build(), [np.ones(256, np.float32)])
    acc = loaded.acc
    native = acc._native
    vk, ffi, lib = native.device.vk, native.device.vk.ffi, native.device.vk.lib
    vdev, queue = native.device.handle, native.device.queue
    loaded.finish(loaded.submit())  # records the direct recording for these buffers
    program = acc._record(loaded.exe.program, type(loaded.exe.program)).native
    recording = next(iter(program.direct.entries.values()))
    rows: list[tuple[str, list[float]]] = []

    # -- the runtime contract, as bench_vulkan.py times it, and its two halves ---------------------------
    def contract() -> None:
        event = loaded.submit()
        while not acc.poll_event(event).terminal:
            pass
        acc.destroy_event(event)

    rows.append(("contract: acc.submit + poll_event", timed(args.count, contract)))
    halves: list[float] = []

    def submit_only() -> None:
        start = time.perf_counter()
        event = loaded.submit()
        halves.append(time.perf_counter() - start)
        loaded.finish(event)

    timed(args.count, submit_only)
    rows.append(("  of which acc.submit alone", halves[-args.count :]))

    prepared = acc.prepare(dev.queue, loaded.exe.program, loaded.bindings)

    def launch() -> None:
        ticket = acc.launch(prepared)
        while not acc.poll_launch(prepared, ticket):
            pass

    rows.append(("contract: prepared, launch + poll_launch", timed(args.count, launch)))
    rows.append(
        (
            "contract: prepared, launch + wait_launch",
            timed(args.count, lambda: acc.wait_launch(prepared, acc.launch(prepared))),
        )
    )
    launcher = acc._record(prepared, type(prepared)).native
    times = launcher.route_times
    medians = ", ".join(
        f"{label} {1e6 * m:.1f} us" if (m := times.median(route)) is not None else f"{label} untimed"
        for route, label in ((True, "marked"), (False, "unmarked"))
    )
    print(
        f"prepared launches: {launcher.issued} ({times.added} timed), chosen route: "
        f"{'marked' if launcher.marking else 'unmarked'} (latest medians: {medians})",
        flush=True,
    )
    # the two routes the launcher chooses between, each forced (ADR 0017, ADR 0021)
    for pinned, label in ((True, "every launch marked"), (False, "no launch marked")):
        launcher.pin_marking(pinned)
        rows.append((f"  prepared, {label}", timed(args.count, launch)))
    launcher.pin_marking(None)
    acc.release_prepared(prepared)

    # -- the recording through the package, no runtime --------------------------------------------------
    fence = binding.call(vk.vkCreateFence, vdev, vk.VkFenceCreateInfo(), None, what="vkCreateFence")
    fences = ffi.new("VkFence[1]", [fence])
    info2 = recording.submit_info

    def spin_fence() -> None:
        while lib.vkGetFenceStatus(vdev, fence) == binding.VK_NOT_READY:
            pass

    def raw2() -> None:
        lib.vkResetFences(vdev, 1, fences)
        lib.vkQueueSubmit2(queue, 1, info2, fence)
        spin_fence()

    rows.append(("raw: reset + vkQueueSubmit2 + fence poll", timed(args.count, raw2)))
    cbs = ffi.new("VkCommandBuffer[1]", [recording.cb])
    info1 = ffi.new("VkSubmitInfo *")
    info1.sType = vk.VK_STRUCTURE_TYPE_SUBMIT_INFO
    info1.commandBufferCount = 1
    info1.pCommandBuffers = cbs

    def raw1() -> None:
        lib.vkResetFences(vdev, 1, fences)
        lib.vkQueueSubmit(queue, 1, info1, fence)
        spin_fence()

    rows.append(("raw: reset + vkQueueSubmit + fence poll", timed(args.count, raw1)))
    resets: list[float] = []

    def reset_apart() -> None:
        start = time.perf_counter()
        lib.vkResetFences(vdev, 1, fences)
        resets.append(time.perf_counter() - start)
        lib.vkQueueSubmit2(queue, 1, info2, fence)
        spin_fence()

    timed(args.count, reset_apart)
    rows.append(("  of which vkResetFences alone", resets[-args.count :]))

    pool = binding.call(
        vk.vkCreateCommandPool,
        vdev,
        vk.VkCommandPoolCreateInfo(queueFamilyIndex=native.device.queue_family),
        None,
        what="vkCreateCommandPool",
    )
    primary = vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY
    alloc = vk.VkCommandBufferAllocateInfo(commandPool=pool, level=primary, commandBufferCount=2)
    empty, flag_cb = binding.call(vk.vkAllocateCommandBuffers, vdev, alloc, what="vkAllocateCommandBuffers")
    vk_recording.begin(vk, empty, 0)
    vk_recording.end(vk, empty)
    info_empty = vk_recording.submit_info(vk, [empty])

    def raw_empty() -> None:
        lib.vkResetFences(vdev, 1, fences)
        lib.vkQueueSubmit2(queue, 1, info_empty, fence)
        spin_fence()

    rows.append(("raw: empty command buffer", timed(args.count, raw_empty)))

    # -- a timeline semaphore in place of the fence -----------------------------------------------------
    type_info = ffi.new("VkSemaphoreTypeCreateInfo *")
    type_info.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO
    type_info.semaphoreType = vk.VK_SEMAPHORE_TYPE_TIMELINE
    sem_info = ffi.new("VkSemaphoreCreateInfo *")
    sem_info.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO
    sem_info.pNext = type_info
    sem_out = ffi.new("VkSemaphore *")
    binding.check(lib.vkCreateSemaphore(vdev, sem_info, ffi.NULL, sem_out), "vkCreateSemaphore")
    sem = sem_out[0]
    signal = ffi.new("VkSemaphoreSubmitInfo *")
    signal.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO
    signal.semaphore = sem
    signal.stageMask = vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT
    info_tl = ffi.new("VkSubmitInfo2 *")
    info_tl.sType = vk.VK_STRUCTURE_TYPE_SUBMIT_INFO_2
    info_tl.commandBufferInfoCount = 1
    info_tl.pCommandBufferInfos = info2.pCommandBufferInfos
    info_tl.signalSemaphoreInfoCount = 1
    info_tl.pSignalSemaphoreInfos = signal
    seen = ffi.new("uint64_t *")

    def timeline() -> None:
        signal.value += 1
        lib.vkQueueSubmit2(queue, 1, info_tl, ffi.NULL)
        while True:
            lib.vkGetSemaphoreCounterValue(vdev, sem, seen)
            if seen[0] >= signal.value:
                return

    rows.append(("raw: timeline semaphore + counter poll", timed(args.count, timeline)))

    # -- what the recording's two global barriers cost: the same recording without one or both ----------
    # (wrong in general, since they order the program after earlier submissions and its results before
    # the host; each sample here waits for the last, so nothing is read or written early)
    with acc._lock:
        ranges = acc._work(dev.queue, loaded.exe.program, loaded.bindings)[2]
    stripped_pools = []
    for label, skip in (("the first barrier", {0}), ("the last barrier", {-1}), ("both barriers", {0, -1})):
        made = barrier_free(program, ranges, pool, skip)
        stripped_pools.append(made.descriptor_pool)
        info_tl.pCommandBufferInfos = made.submit_info.pCommandBufferInfos
        rows.append((f"  raw: timeline, without {label}", timed(args.count, timeline)))
    info_tl.pCommandBufferInfos = info2.pCommandBufferInfos

    # -- completion as a flag the device writes into host memory ----------------------------------------
    flag = native.memory.allocate(256, MemoryDomain.HOST)
    flag_view = np.frombuffer(flag.mapping, np.uint32)
    vk_recording.begin(vk, flag_cb, 0)
    everything = vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT
    vk_recording.global_barrier(
        vk,
        flag_cb,
        everything,
        vk.VK_ACCESS_2_MEMORY_WRITE_BIT,
        vk.VK_PIPELINE_STAGE_2_COPY_BIT,
        vk.VK_ACCESS_2_TRANSFER_WRITE_BIT,
    )
    lib.vkCmdFillBuffer(flag_cb, flag.buffer, 0, 4, 1)
    vk_recording.global_barrier(
        vk,
        flag_cb,
        vk.VK_PIPELINE_STAGE_2_COPY_BIT,
        vk.VK_ACCESS_2_TRANSFER_WRITE_BIT,
        vk.VK_PIPELINE_STAGE_2_HOST_BIT,
        vk.VK_ACCESS_2_HOST_READ_BIT,
    )
    vk_recording.end(vk, flag_cb)
    info_flag = vk_recording.submit_info(vk, [recording.cb, flag_cb])
    flag_samples: list[float] = []
    with collector_off():
        for i in range(args.count + 50):
            flag_view[0] = 0
            lib.vkResetFences(vdev, 1, fences)
            start = time.perf_counter()
            lib.vkQueueSubmit2(queue, 1, info_flag, fence)
            while flag_view[0] == 0:
                pass
            if i >= 50:
                flag_samples.append(time.perf_counter() - start)
            spin_fence()
    rows.append(("raw: device-written host flag, spun on", flag_samples))

    # -- the same loops in C --------------------------------------------------------------------------
    clib = native_library()
    if clib is not None:
        addr = lambda cdata: ctypes.c_void_p(int(ffi.cast("uintptr_t", cdata)))  # noqa: E731
        out = (ctypes.c_int64 * args.count)()
        clib.ia_fence_loop.restype = ctypes.c_int
        fence_args = [addr(vdev), addr(queue), addr(info2), addr(fence)]
        fence_args += [addr(lib.vkQueueSubmit2), addr(lib.vkResetFences), addr(lib.vkGetFenceStatus)]
        code = clib.ia_fence_loop(*fence_args, 50, out)  # warm-up
        code = code or clib.ia_fence_loop(*fence_args, args.count, out)
        if code == 0:
            rows.append(("C: reset + vkQueueSubmit2 + fence spin", [v * 1e-9 for v in out]))
        value = ctypes.c_uint64(0)
        signal.value = 0
        binding.check(lib.vkDeviceWaitIdle(vdev), "vkDeviceWaitIdle")
        # the C loop raises the value through this pointer; the submit info reads it at each submit
        info_c = ffi.new("VkSemaphoreSubmitInfo *")
        info_c.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO
        info_c.semaphore = sem
        info_c.stageMask = everything
        lib.vkGetSemaphoreCounterValue(vdev, sem, seen)
        info_c.value = seen[0]
        info_tl.pSignalSemaphoreInfos = info_c
        value_ptr = ctypes.c_void_p(int(ffi.cast("uintptr_t", ffi.addressof(info_c, "value"))))
        code = clib.ia_timeline_loop(
            addr(vdev),
            addr(queue),
            addr(info_tl),
            value_ptr,
            addr(sem),
            addr(lib.vkQueueSubmit2),
            addr(lib.vkGetSemaphoreCounterValue),
            args.count,
            out,
        )
        if code == 0:
            rows.append(("C: vkQueueSubmit2 + timeline spin", [v * 1e-9 for v in out]))
        del value

    binding.check(lib.vkDeviceWaitIdle(vdev), "vkDeviceWaitIdle")
    native.memory.free(flag)
    for descriptor_pool in stripped_pools:
        if descriptor_pool is not None:
            vk.vkDestroyDescriptorPool(vdev, descriptor_pool, None)
    vk.vkDestroySemaphore(vdev, sem, None)
    vk.vkDestroyCommandPool(vdev, pool, None)
    vk.vkDestroyFence(vdev, fence, None)
    loaded.close()

    print(f"\nsubmit -> complete of a 1-operator program on {acc.device_info().name}, {args.count} samples, us")
    print(f"| {'route':<44} | p10 | median | p90 |")
    print(f"|{'-' * 46}|---|---|---|")
    for label, samples in rows:
        lo, mid, hi = percentiles(samples)
        print(f"| {label:<44} | {lo:.1f} | {mid:.1f} | {hi:.1f} |")


if __name__ == "__main__":
    main()
