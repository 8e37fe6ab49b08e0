"""Submission: a bounded ring of slots per contract queue, completion observed through fences.

A slot is two small command buffers (copy-in, copy-out) and a fence. ``submit`` takes a free slot and
makes one vkQueueSubmit2 that signals the slot's fence: of the program's recording bound to the
caller's buffers (:mod:`.direct`: no copies, nothing recorded when the same buffers come again), or,
where such a recording cannot be used, of [copy-in, the program's own command buffer, copy-out] with
the copies of the bound ranges into and out of the program's arena recorded now. It never waits:
with no free slot it raises Busy (the caller may retry once earlier work is observed complete).

There is no worker thread. Completion is observed when someone asks: ``poll_event`` reads the fence
(vkGetFenceStatus), ``wait`` polls it for SPIN_S and then blocks in vkWaitForFences, and both retire
what they find finished (the runtime calls :meth:`Ring.collect` / :meth:`Ring.wait` through the
accelerator's ``_progress`` hook). Retiring frees the slot and hands the event back to the caller, who
completes it outside every lock here: completing runs the runtime's callbacks, which take the
runtime's lock, and the runtime calls into the ring while holding it, so holding the ring's lock then
would invert the order.

A fence is reset only when its slot is reused, and never while a thread waits on it (slots count their
waiters), because vkResetFences needs the fence externally synchronised.

Ordering: every contract queue feeds the device's one VkQueue, and each copy-in command buffer starts
with a barrier on all earlier memory writes and accesses, so submissions run as if one after another:
one program's arena is never used by two submissions at once, and a buffer written by one submission
is seen by the next.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any

from ...core.errors import Busy, InternalError
from ...runtime.accelerator import BoundRange
from ...runtime.event import EventCore
from . import binding, recording
from .device import Device
from .direct import Recording
from .program import LoadedProgram

SLOTS = 64
SPIN_S = 200e-6  # a wait polls the fence this long before it blocks in vkWaitForFences
_FOREVER_NS = 0xFFFFFFFFFFFFFFFF


@dataclasses.dataclass
class _Slot:
    index: int
    copy_in: Any
    copy_out: Any
    fence: Any
    event: EventCore | None = None  # the submission in flight, until retired
    waiters: int = 0
    used: bool = False  # the fence has been submitted since its creation (needs a reset before reuse)
    recording: Recording | None = None  # the direct recording in flight, if the submission used one
    fences: Any = None  # VkFence[1] holding ``fence``, for vkResetFences without a new array per call


class Ring:
    """The slots of one contract queue (thread-safe)."""

    def __init__(self, device: Device, slots: int = SLOTS) -> None:
        self.device = device
        self.vk = vk = device.vk
        self.lock = threading.Lock()
        self.slots: list[_Slot] = []
        self.in_flight: dict[EventCore, _Slot] = {}  # the slot of each submission in flight
        dev = device.handle
        info = vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=device.queue_family
        )
        self.pool = binding.call(vk.vkCreateCommandPool, dev, info, None, what="vkCreateCommandPool")
        try:
            alloc = vk.VkCommandBufferAllocateInfo(
                commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=2 * slots
            )
            cbs = binding.call(vk.vkAllocateCommandBuffers, dev, alloc, what="vkAllocateCommandBuffers")
            for i in range(slots):
                fence = binding.call(vk.vkCreateFence, dev, vk.VkFenceCreateInfo(), None, what="vkCreateFence")
                self.slots.append(_Slot(i, cbs[2 * i], cbs[2 * i + 1], fence, fences=vk.ffi.new("VkFence[1]", [fence])))
        except BaseException:
            self.destroy()
            raise

    # -- submission -----------------------------------------------------------------------------
    def submit(self, program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore) -> None:
        """Launch ``program`` with ``ranges`` for ``event``. Raises Busy when every slot is in flight
        (:meth:`collect` first retires finished ones), or the error of a failed vkQueueSubmit2 (nothing
        was accepted). If the event was cancelled or its deadline passed before it could start, nothing
        is submitted."""
        with self.lock:
            slot = self._free_slot()
            if slot is None:
                raise Busy(f"all {len(self.slots)} submission slots of this queue are in flight")
            replay = program.direct.lookup(ranges) if program.direct is not None else None
            if replay is None:
                self._record(slot, program, ranges)
                info = recording.submit_info(self.vk, [slot.copy_in, program.cb, slot.copy_out])
            else:
                info = replay.submit_info
            if not event.try_start():
                return  # the event is already terminal (cancelled, or failed on its deadline)
            vk, dev = self.vk, self.device.handle
            if slot.used:
                binding.check(vk.lib.vkResetFences(dev, 1, slot.fences), "vkResetFences")
            code = self.device.submit(info, slot.fence)
            slot.used = True
            if code != binding.VK_SUCCESS:
                # Not accepted: the slot stays free (its unsignalled fence is reset on reuse) and the
                # runtime fails the event; device loss poisons the accelerator.
                raise binding.result_error(code, "vkQueueSubmit2")
            slot.event = event
            self.in_flight[event] = slot
            if replay is not None:
                replay.in_flight += 1
                slot.recording = replay

    def full(self) -> bool:
        with self.lock:
            return self._free_slot() is None

    def _free_slot(self) -> _Slot | None:
        return next((s for s in self.slots if s.event is None and s.waiters == 0), None)

    def _record(self, slot: _Slot, program: LoadedProgram, ranges: Sequence[BoundRange]) -> None:
        vk = self.vk
        for cb in (slot.copy_in, slot.copy_out):
            binding.check(vk.lib.vkResetCommandBuffer(cb, 0), "vkResetCommandBuffer")
        once = vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT
        record_copies(vk, slot.copy_in, slot.copy_out, program, ranges, once)

    # -- completion -----------------------------------------------------------------------------
    def collect(self, event: EventCore | None = None) -> list[EventCore]:
        """Retire finished submissions (only ``event``'s when given) without blocking; returns their events."""
        with self.lock:
            return self._collect_locked(event)

    def _collect_locked(self, event: EventCore | None) -> list[EventCore]:
        if event is None:
            slots = list(self.in_flight.values())
        else:
            found = self.in_flight.get(event)
            slots = [] if found is None else [found]
        done = []
        for slot in slots:
            code = self.vk.lib.vkGetFenceStatus(self.device.handle, slot.fence)
            if code == binding.VK_SUCCESS:
                assert slot.event is not None
                done.append(slot.event)
                del self.in_flight[slot.event]
                slot.event = None
                if slot.recording is not None:
                    slot.recording.in_flight -= 1
                    slot.recording = None
            elif code != binding.VK_NOT_READY:
                raise binding.result_error(code, "vkGetFenceStatus")
        return done

    def holds(self, event: EventCore) -> bool:
        with self.lock:
            return event in self.in_flight

    def wait(self, event: EventCore, timeout: float | None) -> list[EventCore]:
        """Block until ``event``'s submission finishes or ``timeout`` seconds pass; returns the
        events retired (``event``'s when it finished)."""
        vk = self.vk
        with self.lock:
            slot = self.in_flight.get(event)
            if slot is None:
                return []
            slot.waiters += 1
        try:
            # A short spin first: vkWaitForFences may wake tens of microseconds after the fence where a poll
            # sees it at once (ADR 0016), and most small submissions end within SPIN_S.
            lib, dev, clock = vk.lib, self.device.handle, time.perf_counter
            start = clock()
            spin = SPIN_S if timeout is None else min(SPIN_S, timeout)
            code = lib.vkGetFenceStatus(dev, slot.fence)
            while code == binding.VK_NOT_READY and clock() - start < spin:
                code = lib.vkGetFenceStatus(dev, slot.fence)
            if code == binding.VK_NOT_READY:
                left = None if timeout is None else timeout - (clock() - start)
                ns = _FOREVER_NS if left is None else max(0, int(left * 1e9))
                code = lib.vkWaitForFences(dev, 1, slot.fences, 1, ns)
        finally:
            with self.lock:
                slot.waiters -= 1
        if code not in (binding.VK_SUCCESS, binding.VK_TIMEOUT):
            raise binding.result_error(code, "vkWaitForFences")
        return self.collect(event)

    def idle(self) -> bool:
        with self.lock:
            return all(s.event is None and s.waiters == 0 for s in self.slots)

    def destroy(self) -> None:
        vk, dev = self.vk, self.device.handle
        with self.lock:
            if any(s.event is not None or s.waiters for s in self.slots):
                raise InternalError("a submission ring was destroyed with work in flight")
            for s in self.slots:
                vk.vkDestroyFence(dev, s.fence, None)
            self.slots = []
            if self.pool is not None:
                vk.vkDestroyCommandPool(dev, self.pool, None)
                self.pool = None


def record_copies(
    vk: Any, copy_in: Any, copy_out: Any, program: LoadedProgram, ranges: Sequence[BoundRange], usage: int
) -> None:
    """Record the copies of the bound input ranges into ``program``'s arena (``copy_in``) and of its outputs
    back out (``copy_out``), the command buffers that go before and after the program's own."""
    n_in = len(program.plan.inputs)
    everything = vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT
    copy = vk.VK_PIPELINE_STAGE_2_COPY_BIT
    recording.begin(vk, copy_in, usage)
    # Whatever ran before on the queue (another submission of this program reading its arena, a
    # kernel writing a buffer bound here) happens-before this submission.
    recording.global_barrier(
        vk,
        copy_in,
        everything,
        vk.VK_ACCESS_2_MEMORY_WRITE_BIT,
        everything,
        vk.VK_ACCESS_2_MEMORY_READ_BIT | vk.VK_ACCESS_2_MEMORY_WRITE_BIT,
    )
    for r in ranges:
        if r.slot < n_in and r.length:
            place = program.plan.inputs[r.slot]
            recording.copy(vk, copy_in, r.native.buffer, r.offset, program.buffer(place), place.offset, r.length)
    recording.end(vk, copy_in)
    recording.begin(vk, copy_out, usage)
    for r in ranges:
        if r.slot >= n_in and r.length:
            place = program.plan.outputs[r.slot - n_in]
            recording.copy(vk, copy_out, program.buffer(place), place.offset, r.native.buffer, r.offset, r.length)
    # Device writes made available to the host, for read_buffer after the fence.
    recording.global_barrier(
        vk,
        copy_out,
        copy,
        vk.VK_ACCESS_2_TRANSFER_WRITE_BIT,
        vk.VK_PIPELINE_STAGE_2_HOST_BIT,
        vk.VK_ACCESS_2_HOST_READ_BIT,
    )
    recording.end(vk, copy_out)
