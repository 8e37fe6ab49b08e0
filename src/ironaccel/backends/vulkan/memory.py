"""Buffers: one VkBuffer per allocation, on its own (dedicated) VkDeviceMemory.

Every buffer is a storage buffer and a transfer source and destination, so any of them can feed a
kernel, take a copy or give one. Dedicated allocations keep the bookkeeping honest (a freed buffer
returns its memory at once, ``allocation_bytes`` is what the driver asked for) and cost nothing that
matters at the sizes tensors have; sub-allocation is for a later step if allocation counts ever bind.

Domains, in the order of preference of memory types:

* HOST: host-visible and coherent memory, system memory where the device distinguishes it (cached when
  offered, so reading back is fast). Persistently mapped.
* SHARED: host-visible and coherent, device-local too where possible (resizable BAR, unified memory).
  Persistently mapped: write/read are a memcpy into the mapping.
* DEVICE: device-local. Mapped as well when the device has host-visible device-local memory on its main
  heap (unified memory, resizable BAR); otherwise write/read go through a 4 MiB staging buffer and a
  copy on the queue (:class:`Stager`), which blocks the caller until the copy is done.

Reads from a mapping that is not host-cached (device-local memory behind a PCIe BAR on a discrete
GPU) go through the stager as well, from ``STAGED_READ_BYTES`` up: the CPU reads such memory without
caching, a few bytes per bus round trip (orders of magnitude below the bus's bandwidth; ADR 0008), while
the device copies it to cached system memory at bus speed. Writes stay direct: they are combined into
full bus transactions.

Only coherent memory is mapped, so no flush or invalidate is needed; the queue submission that follows
a host write makes it visible to the device, and each submission ends with a barrier that makes device
writes visible to the host once its fence has signalled.
"""

from __future__ import annotations

import threading
from typing import Any

from ...core.errors import ResourceLimit, Unsupported
from ...runtime.types import MemoryDomain
from . import binding, recording
from .device import Device, MemoryType

DEVICE_LOCAL = 0x1
HOST_VISIBLE = 0x2
HOST_COHERENT = 0x4
HOST_CACHED = 0x8
_MAPPABLE = HOST_VISIBLE | HOST_COHERENT

STAGING_BYTES = 4 << 20
# Where an uncached read costs about what a staged one does: a staged read pays a fixed cost (a recording,
# a submit, a wait for the copy) that below this size exceeds reading the mapping byte by byte (ADR 0008).
STAGED_READ_BYTES = 2048


class Allocation:
    """A VkBuffer with its dedicated memory; ``mapping`` is a writable memoryview when host-visible."""

    __slots__ = ("allocation_bytes", "buffer", "domain", "mapping", "memory", "memory_type", "size")

    def __init__(
        self,
        buffer: Any,
        memory: Any,
        size: int,
        allocation_bytes: int,
        memory_type: MemoryType,
        mapping: memoryview | None,
        domain: MemoryDomain,
    ) -> None:
        self.buffer = buffer
        self.memory = memory
        self.size = size
        self.allocation_bytes = allocation_bytes
        self.memory_type = memory_type
        self.mapping = mapping
        self.domain = domain

    @property
    def host_visible(self) -> bool:
        return self.mapping is not None


class Memory:
    """Allocates, maps, writes and reads buffers of one device.

    ``staging=True`` treats the device as if no device-local memory were host-visible, so the DEVICE
    domain takes the staged path (tests use it to exercise that path on lavapipe, whose only memory
    type is host-visible).
    """

    def __init__(self, device: Device, staging: bool = False) -> None:
        self.device = device
        self.vk = device.vk
        self.force_staging = staging
        self.types = device.physical.memory_types
        self._stager: Stager | None = None
        self._stager_lock = threading.Lock()
        local_heaps = [t.heap_size for t in self.types if t.flags & DEVICE_LOCAL]
        self._main_heap = max(local_heaps, default=0)
        # The stager's memory (HOST domain) is cached where any mappable type is.
        self._cached_staging = any(t.flags & (_MAPPABLE | HOST_CACHED) == _MAPPABLE | HOST_CACHED for t in self.types)

    @property
    def domains(self) -> frozenset[MemoryDomain]:
        """The domains this device can offer: HOST and SHARED need coherent host-visible memory."""
        domains = {MemoryDomain.DEVICE}
        if any(t.flags & _MAPPABLE == _MAPPABLE for t in self.types):
            domains |= {MemoryDomain.HOST, MemoryDomain.SHARED}
        return frozenset(domains)

    def _candidates(self, domain: MemoryDomain) -> list[tuple[MemoryType, bool]]:
        """(memory type, map it) in order of preference for ``domain``."""
        mappable = [t for t in self.types if t.flags & _MAPPABLE == _MAPPABLE]
        if domain is MemoryDomain.HOST:
            order = sorted(mappable, key=lambda t: (bool(t.flags & DEVICE_LOCAL), not t.flags & HOST_CACHED))
            return [(t, True) for t in order]
        if domain is MemoryDomain.SHARED:
            order = sorted(mappable, key=lambda t: (not t.flags & DEVICE_LOCAL, not t.flags & HOST_CACHED))
            return [(t, True) for t in order]
        local = [t for t in self.types if t.flags & DEVICE_LOCAL] or list(self.types)
        out = []
        for t in local:
            # Map device-local memory only on the main heap (a small BAR window would run out).
            direct = not self.force_staging and t.flags & _MAPPABLE == _MAPPABLE and t.heap_size * 2 >= self._main_heap
            out.append((t, direct))
        out.sort(key=lambda c: not c[1])
        return out

    def allocate(self, size: int, domain: MemoryDomain) -> Allocation:
        """A buffer of ``size`` bytes in ``domain``. ResourceLimit beyond the device's buffer or
        allocation size, OutOfMemory when the driver has no memory left."""
        vk, dev, limits = self.vk, self.device.handle, self.device.limits
        most = min(limits.max_memory_allocation, limits.max_buffer_size)
        if size > most:
            raise ResourceLimit(
                f"a buffer of {size} bytes exceeds what {self.device.physical.name} allocates at once ({most} bytes)"
            )
        usage = (
            vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        )
        info = vk.VkBufferCreateInfo(size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        buffer = binding.call(vk.vkCreateBuffer, dev, info, None, what="vkCreateBuffer")
        try:
            req = vk.vkGetBufferMemoryRequirements(dev, buffer)
            choices = [(t, m) for t, m in self._candidates(domain) if req.memoryTypeBits & (1 << t.index)]
            if not choices:
                raise Unsupported(f"no memory type of {self.device.physical.name} suits a {domain.name} buffer")
            mtype, mapped = choices[0]
            dedicated = vk.VkMemoryDedicatedAllocateInfo(buffer=buffer)
            alloc = vk.VkMemoryAllocateInfo(pNext=dedicated, allocationSize=req.size, memoryTypeIndex=mtype.index)
            memory = binding.call(vk.vkAllocateMemory, dev, alloc, None, what=f"vkAllocateMemory({req.size} bytes)")
        except BaseException:
            vk.vkDestroyBuffer(dev, buffer, None)
            raise
        try:
            binding.call(vk.vkBindBufferMemory, dev, buffer, memory, 0, what="vkBindBufferMemory")
            mapping = None
            if mapped:
                raw = binding.call(vk.vkMapMemory, dev, memory, 0, req.size, 0, what="vkMapMemory")
                mapping = memoryview(raw)[:size]
        except BaseException:
            vk.vkDestroyBuffer(dev, buffer, None)
            vk.vkFreeMemory(dev, memory, None)
            raise
        return Allocation(buffer, memory, size, int(req.size), mtype, mapping, domain)

    def free(self, a: Allocation) -> None:
        vk, dev = self.vk, self.device.handle
        if a.mapping is not None:
            a.mapping.release()
            a.mapping = None
            vk.vkUnmapMemory(dev, a.memory)
        vk.vkDestroyBuffer(dev, a.buffer, None)
        vk.vkFreeMemory(dev, a.memory, None)

    def write(self, a: Allocation, offset: int, data: memoryview) -> None:
        """Copy ``data`` into ``a`` at ``offset``: a memcpy when mapped, else staged (blocks)."""
        if a.mapping is not None:
            a.mapping[offset : offset + data.nbytes] = data
        elif data.nbytes:
            self.stager().write(a, offset, data)

    def read(self, a: Allocation, offset: int, out: memoryview) -> None:
        """Copy ``out.nbytes`` bytes of ``a`` from ``offset`` into ``out``: a memcpy from a cached mapping
        or a small read, else staged (blocks)."""
        if a.mapping is not None and not (out.nbytes >= STAGED_READ_BYTES and self.uncached(a)):
            out[:] = a.mapping[offset : offset + out.nbytes]
        elif out.nbytes:
            self.stager().read(a, offset, out)

    def uncached(self, a: Allocation) -> bool:
        """True when ``a`` is mapped without host caching and the stager's memory is cached."""
        return not a.memory_type.flags & HOST_CACHED and self._cached_staging

    def stager(self) -> Stager:
        with self._stager_lock:
            if self._stager is None:
                self._stager = Stager(self)
            return self._stager

    def destroy(self) -> None:
        if self._stager is not None:
            self._stager.destroy()
            self._stager = None


class Stager:
    """Moves bytes to and from unmapped buffers through one host-visible staging buffer, a chunk at a
    time, with a copy on the device's queue per chunk; serialised by its own lock."""

    def __init__(self, memory: Memory) -> None:
        device = memory.device
        vk = device.vk
        self.memory = memory
        self.device = device
        self.vk = vk
        self.lock = threading.Lock()
        size = min(STAGING_BYTES, device.limits.max_memory_allocation)
        self.staging = memory.allocate(size, MemoryDomain.HOST)
        dev = device.handle
        pool_info = vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=device.queue_family
        )
        self.pool = binding.call(vk.vkCreateCommandPool, dev, pool_info, None, what="vkCreateCommandPool")
        alloc = vk.VkCommandBufferAllocateInfo(
            commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1
        )
        self.cb = binding.call(vk.vkAllocateCommandBuffers, dev, alloc, what="vkAllocateCommandBuffers")[0]
        self.fence = binding.call(vk.vkCreateFence, dev, vk.VkFenceCreateInfo(), None, what="vkCreateFence")
        self.submit_info = recording.submit_info(vk, [self.cb])

    def _copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, size: int) -> None:
        vk, lib, dev = self.vk, self.vk.lib, self.device.handle
        binding.check(lib.vkResetCommandBuffer(self.cb, 0), "vkResetCommandBuffer")
        recording.begin(vk, self.cb, vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        # Earlier device work on either buffer comes first; the copy's result is for the host.
        recording.global_barrier(
            vk,
            self.cb,
            vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT,
            vk.VK_ACCESS_2_MEMORY_WRITE_BIT,
            vk.VK_PIPELINE_STAGE_2_COPY_BIT,
            vk.VK_ACCESS_2_TRANSFER_READ_BIT | vk.VK_ACCESS_2_TRANSFER_WRITE_BIT,
        )
        recording.copy(vk, self.cb, src, src_offset, dst, dst_offset, size)
        recording.global_barrier(
            vk,
            self.cb,
            vk.VK_PIPELINE_STAGE_2_COPY_BIT,
            vk.VK_ACCESS_2_TRANSFER_WRITE_BIT,
            vk.VK_PIPELINE_STAGE_2_HOST_BIT,
            vk.VK_ACCESS_2_HOST_READ_BIT,
        )
        recording.end(vk, self.cb)
        code = self.device.submit(self.submit_info, self.fence)
        binding.check(code, "vkQueueSubmit2 (staging)")
        fences = vk.ffi.new("VkFence[1]", [self.fence])
        binding.check(lib.vkWaitForFences(dev, 1, fences, 1, 0xFFFFFFFFFFFFFFFF), "vkWaitForFences (staging)")
        binding.check(lib.vkResetFences(dev, 1, fences), "vkResetFences")

    def write(self, a: Allocation, offset: int, data: memoryview) -> None:
        view = self.staging.mapping
        assert view is not None
        with self.lock:
            for start in range(0, data.nbytes, self.staging.size):
                n = min(self.staging.size, data.nbytes - start)
                view[:n] = data[start : start + n]
                self._copy(self.staging.buffer, 0, a.buffer, offset + start, n)

    def read(self, a: Allocation, offset: int, out: memoryview) -> None:
        view = self.staging.mapping
        assert view is not None
        with self.lock:
            for start in range(0, out.nbytes, self.staging.size):
                n = min(self.staging.size, out.nbytes - start)
                self._copy(a.buffer, offset + start, self.staging.buffer, 0, n)
                out[start : start + n] = view[:n]

    def destroy(self) -> None:
        vk, dev = self.vk, self.device.handle
        vk.vkDestroyFence(dev, self.fence, None)
        vk.vkDestroyCommandPool(dev, self.pool, None)
        self.memory.free(self.staging)
