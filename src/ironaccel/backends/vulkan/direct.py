"""Recordings of a program whose inputs and outputs are the caller's buffers: no copies per submission.

The program's own command buffer (:mod:`.program`) reads its inputs from, and writes its outputs to,
places in its arena, so every submission copies the bound ranges in and out (:mod:`.submit`): 2 extra
command buffers recorded in Python per submission, and twice the tensors' bytes moved. Callers mostly
bind the same buffers again and again (a serving loop, a benchmark), so the first submission with a
given set of bound ranges records, once, the whole graph with those ranges in the kernels' descriptors
in place of the arena places; later submissions with the same ranges replay it alone.

A set of ranges is recorded only when doing so cannot change a result, else the copying path runs:
- every range's offset meets minStorageBufferOffsetAlignment and is a multiple of 16 (kernels may move
  vec4s, as they do in the arena, whose places are 256-byte aligned), and its length is whole 32-bit
  words (the kernels address words; a partial word would spill into the caller's neighbouring bytes);
- no output range overlaps another bound range, and no two graph inputs/outputs share arena bytes (a
  graph output that is a view of an input, or an input returned as an output, relies on the copies);
- every binding that touches an input's or output's arena bytes lies inside them (a view), so it maps
  onto the caller's buffer at the same relative offset.

The recordings of a program are a small LRU cache keyed by the bound allocations (the objects, held by
the entry, so a freed and reused VkBuffer handle can never match) with their offsets and lengths. An
entry in flight is never evicted; the ring counts its submissions.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...runtime.accelerator import BoundRange
from . import binding
from .ops.common import Dispatch, Place
from .recording import descriptor_sets, record_graph, submit_info

if TYPE_CHECKING:
    from .device import Device
    from .kernels import Pipeline
    from .plan import Plan

Resolve = Callable[[Place], tuple[Any, int, int]]  # a place -> (VkBuffer, offset, descriptor range)

ENTRIES = 8  # recordings kept per program
VECTOR_ALIGNMENT = 16  # bytes: the widest load a kernel issues (vec4 / uvec4)


class Recording:
    """One recorded command buffer with its descriptor pool; ``in_flight`` counts its submissions."""

    __slots__ = ("cb", "descriptor_pool", "in_flight", "key", "submit_info")

    def __init__(self, key: tuple, cb: Any, descriptor_pool: Any, submit_info: Any) -> None:
        self.key = key  # holds the bound allocations alive (see the module doc)
        self.cb = cb
        self.submit_info = submit_info  # VkSubmitInfo2 of ``cb`` alone, built once
        self.descriptor_pool = descriptor_pool
        self.in_flight = 0


class DirectRecordings:
    """The recordings of one loaded program (the ring's lock serialises every call): its ``plan``, the
    ``pipelines`` of its dispatches, and ``resolve``, where each place of the program's own buffers is."""

    def __init__(self, device: Device, plan: Plan, pipelines: list[Pipeline], resolve: Resolve) -> None:
        self.device = device
        self.plan = plan
        self.pipelines = pipelines
        self.resolve_own = resolve
        self.entries: OrderedDict[tuple, Recording] = OrderedDict()
        self.command_pool: Any = None
        io = [*plan.inputs, *plan.outputs]
        arena_io = [p for p in io if p.buffer == "arena"]
        self.usable = (
            len(arena_io) == len(io) and not _any_overlap([(p.offset, p.size) for p in io]) and self._views_map(io)
        )

    def _views_map(self, io: list[Place]) -> bool:
        """Whether every binding touching an input's or output's bytes lies inside them at an aligned
        offset. Bound ranges start aligned (:meth:`_mapping`), so this depends on the plan alone and is
        settled once here, not per submission."""
        align = _alignment(self.device)
        for step in self.plan.steps:
            for place in (*step.reads, *step.writes):
                if place.buffer != "arena":
                    continue
                for home in io:
                    if home.offset <= place.offset and place.offset + place.size <= home.offset + home.size:
                        if (place.offset - home.offset) % align:
                            return False
                        break
                    if _overlap((home.offset, home.size), (place.offset, place.size)):
                        return False
        return True

    def lookup(self, ranges: Sequence[BoundRange]) -> Recording | None:
        """The recording for ``ranges``, recorded now if it can and may be (None: copy instead)."""
        if not self.usable:
            return None
        key = tuple((r.slot, r.native, r.offset, r.length) for r in sorted(ranges, key=lambda r: r.slot))
        found = self.entries.get(key)
        if found is not None:
            self.entries.move_to_end(key)
            return found
        mapping = self._mapping(ranges)
        if mapping is None:
            return None
        if len(self.entries) >= ENTRIES and not self._evict_one():
            return None
        recording = self._record(key, self._resolver(mapping))
        self.entries[key] = recording
        return recording

    def _mapping(self, ranges: Sequence[BoundRange]) -> dict[int, tuple[Place, BoundRange]] | None:
        plan = self.plan
        n_in = len(plan.inputs)
        if len(ranges) != n_in + len(plan.outputs) or len({r.slot for r in ranges}) != len(ranges):
            return None
        align = _alignment(self.device)
        mapping = {}
        for r in ranges:
            place = plan.inputs[r.slot] if r.slot < n_in else plan.outputs[r.slot - n_in]
            if r.offset % align or r.length % 4 or r.length != place.size:
                return None
            mapping[r.slot] = (place, r)
        outputs = [r for r in ranges if r.slot >= n_in]
        for out in outputs:
            for other in ranges:
                if (
                    other is not out
                    and other.native is out.native
                    and _overlap((out.offset, out.length), (other.offset, other.length))
                ):
                    return None
        return mapping

    def _resolver(self, mapping: dict[int, tuple[Place, BoundRange]]) -> Resolve:
        resolve_own = self.resolve_own
        io = list(mapping.values())

        def resolve(place: Place) -> tuple[Any, int, int]:
            if place.buffer == "arena":  # a view inside at most one io place (checked at load)
                for home, r in io:
                    if home.offset <= place.offset and place.offset + place.size <= home.offset + home.size:
                        return r.native.buffer, r.offset + place.offset - home.offset, max(4, -(-place.size // 4) * 4)
            return resolve_own(place)

        return resolve

    def record_apart(
        self, ranges: Sequence[BoundRange], command_pool: Any, leading_barrier: bool = True
    ) -> Recording | None:
        """A recording for ``ranges`` from the caller's ``command_pool``, kept out of the cache (a prepared
        submission owns it and frees it with its pool; its descriptor pool too); None where the copying path
        must run. ``leading_barrier``: see :func:`.recording.record_graph`."""
        mapping = self._mapping(ranges) if self.usable else None
        if mapping is None:
            return None
        return self._record((), self._resolver(mapping), command_pool, leading_barrier)

    def _record(
        self,
        key: tuple,
        resolve: Resolve,
        command_pool: Any = None,
        leading_barrier: bool = True,
    ) -> Recording:
        vk, dev = self.device.vk, self.device.handle
        if command_pool is None:
            if self.command_pool is None:
                info = vk.VkCommandPoolCreateInfo(queueFamilyIndex=self.device.queue_family)
                self.command_pool = binding.call(vk.vkCreateCommandPool, dev, info, None, what="vkCreateCommandPool")
            command_pool = self.command_pool
        dispatches = [s for s in self.plan.steps if isinstance(s, Dispatch)]
        pool, sets = (None, []) if not dispatches else descriptor_sets(vk, dev, dispatches, self.pipelines, resolve)
        try:
            alloc = vk.VkCommandBufferAllocateInfo(
                commandPool=command_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1
            )
            cb = binding.call(vk.vkAllocateCommandBuffers, dev, alloc, what="vkAllocateCommandBuffers")[0]
            try:
                record_graph(vk, cb, self.plan, self.pipelines, sets, resolve, None, leading_barrier)
            except BaseException:
                vk.vkFreeCommandBuffers(dev, command_pool, 1, [cb])
                raise
        except BaseException:
            if pool is not None:
                vk.vkDestroyDescriptorPool(dev, pool, None)
            raise
        return Recording(key, cb, pool, submit_info(vk, [cb]))

    def _evict_one(self) -> bool:
        for key, entry in self.entries.items():  # oldest first
            if entry.in_flight == 0:
                del self.entries[key]
                self._destroy(entry)
                return True
        return False

    def _destroy(self, entry: Recording) -> None:
        vk, dev = self.device.vk, self.device.handle
        vk.vkFreeCommandBuffers(dev, self.command_pool, 1, [entry.cb])
        if entry.descriptor_pool is not None:
            vk.vkDestroyDescriptorPool(dev, entry.descriptor_pool, None)

    def destroy(self) -> None:
        """Free every recording (nothing may be in flight)."""
        for entry in self.entries.values():
            self._destroy(entry)
        self.entries.clear()
        if self.command_pool is not None:
            self.device.vk.vkDestroyCommandPool(self.device.handle, self.command_pool, None)
            self.command_pool = None


def _alignment(device: Device) -> int:
    limit = device.limits.min_storage_buffer_offset_alignment
    return limit * VECTOR_ALIGNMENT // math.gcd(limit, VECTOR_ALIGNMENT)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


def _any_overlap(spans: list[tuple[int, int]]) -> bool:
    return any(_overlap(a, b) for i, a in enumerate(spans) for b in spans[i + 1 :] if a[1] and b[1])
