"""Prepared submissions on Vulkan: a launch is one vkQueueSubmit2, its completion a semaphore or a host word.

``Accelerator.prepare`` checks the bindings once; this launcher then builds, once, everything a launch
submits: the program recorded with the prepared buffers in its descriptors (:mod:`.direct`, a recording
of its own, never evicted) or, where such a recording cannot be used, copy-in and copy-out command
buffers recorded around the program's own. Every launch signals the launcher's timeline semaphore with
its ticket. A launch may also be *marked*: a small command buffer at its end copies the ticket (which the
host wrote into one of ``MARKS`` slots of host memory just before the submit) into a word of host
memory. A launch picks its submit info, sets the signal value and submits: no fence to reset, no slot to
find, no event to create.

A ticket's run has finished when the semaphore's counter has reached it (vkGetSemaphoreCounterValue:
every poll while a read is cheap or the word cannot show the ticket, else at most every
SEMAPHORE_EVERY_S) or when the word shows it or a later marked ticket, whichever is seen first. Neither
signal is always the sooner: how late a driver reports a semaphore signal can change from one session of
the same machine to the next, while the word is seen as soon as the device writes it, and the mark that
writes it is device work an unmarked launch saves (ADRs 0016, 0017 and 0021 give the figures). Neither
route's own signals can settle which is sooner, since a marked launch's semaphore is signalled after its
mark, so each route's launches are timed as the caller sees them, from the submit to the look that saw
them finished (:class:`RouteTimes`, ADR 0021). Only launches submitted onto an idle launcher, and looked
at by a caller that was already looking, are timed: otherwise the time holds earlier launches or the
caller's own pauses. Launches take the faster route, and one in PROBE_EVERY takes the other, to notice
when it becomes the faster. Until both are timed, launches alternate.

The word is written after the program's final barrier, which makes its results visible to the host, so
a host that sees it may read them, or write its inputs again. Only the semaphore says that the submission
has left the device: ``wait_launch`` blocks on it, and a release waits for it (microseconds after the
word) before freeing.

Launches go to the device's one queue, whose recordings begin with a barrier on everything earlier, so
they run one after another and in order with every other submission (ADR 0016, ADR 0017). A direct
recording also ends with a barrier that orders everything after it; when the queue's last submission
ended that way (``Device.ordered_tail``), a launch submits a second recording without the first barrier,
which would order nothing more.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from ...core.errors import Busy, DeviceLost, InvalidArgument, IronAccelError
from ...runtime.accelerator import BoundRange
from ...runtime.prepared import check_ticket
from ...runtime.types import MemoryDomain
from . import binding, recording
from .device import Device
from .memory import Memory
from .program import LoadedProgram
from .submit import SPIN_S, record_copies  # waits spin as long as the ring's do

IN_FLIGHT = 64  # launches of one prepared submission running at once, as many as a ring's slots
SEMAPHORE_EVERY_S = 20e-6  # how often a poll that does not see the word asks a slow-to-read semaphore
CHEAP_READ_S = 2e-6  # a counter read faster than this is made on every poll
MARKS = 2 * IN_FLIGHT  # ticket slots, one per mark command buffer: a slot is rewritten only after its run ended
PROBE_EVERY = 64  # one launch in this many takes the route not chosen, so that its time stays known
EXPLORE_EVERY = 2  # until both routes are timed, every other launch takes the other one
# A look this soon after the last one that missed its ticket times it (RouteTimes). A poll loop looks
# every 1-3 us; on a host with fewer cores than busy threads (a software device's workers, say) the look
# that sees a finish often comes after the poller was descheduled, so the bound is loose: the pause
# delays both routes alike.
ATTENTIVE_S = 50e-6
_WORD = 0xFFFFFFFF  # the word holds a ticket modulo 2^32 (unambiguous: see _shown)
# Marked launches come at most this far apart even with marking pinned off: IN_FLIGHT + 1 such gaps stay
# below 2^32, which keeps the word unambiguous (_shown).
_MARK_AT_LEAST = 1 << 25
_SLOT0 = 16  # the slots' first 32-bit index in the mark allocation: the word has 64 bytes to itself
_NS = 1_000_000_000
WINDOW = 15  # the latest times of each route that count (odd: a median is one of them)
DECIDE_EVERY = 8  # times added between two decisions, so a launch pays for a sort only now and then


class RouteTimes:
    """The latest submit -> seen times of marked and of unmarked launches, in seconds."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.times: tuple[deque[float], deque[float]] = (deque(maxlen=window), deque(maxlen=window))
        self.added = 0

    def add(self, marked: bool, seconds: float) -> bool:
        """Record one launch's time; whether a decision is due."""
        self.times[marked].append(seconds)
        self.added += 1
        return self.added % DECIDE_EVERY == 0

    def known(self) -> bool:
        """Both routes have a full window of times."""
        return all(len(t) == self.window for t in self.times)

    def median(self, marked: bool) -> float | None:
        times = sorted(self.times[marked])
        return times[len(times) // 2] if times else None

    def marked_is_faster(self) -> bool | None:
        """Whether marked launches were seen finished sooner (median against median); None until both
        routes are known. A tie keeps launches unmarked: the mark is device work."""
        if not self.known():
            return None
        marked, plain = self.median(True), self.median(False)
        assert marked is not None and plain is not None
        return marked < plain


class Launcher:
    """The native form of one prepared submission (thread-safe; :class:`~ironaccel.runtime.prepared.Launcher`)."""

    def __init__(self, device: Device, memory: Memory, program: LoadedProgram, ranges: Sequence[BoundRange]) -> None:
        self.device = device
        self.memory = memory
        self.vk = vk = device.vk
        self.lock = threading.Lock()
        self.closed = False
        self.lost = False  # closed by the accelerator's close, not by a release
        self.issued = 0  # the last ticket handed out
        self.waiters = 0  # threads blocked in wait()
        self.last_read = 0.0  # time.perf_counter() after the last read of the semaphore's counter
        self.read_every = 0.0  # seconds between counter reads: 0 while reads are cheap
        self.reached_value = 0  # the last ticket seen finished (by the word or the counter)
        self.last_marked = 0  # the newest marked ticket
        self.last_plain = 0  # the newest unmarked ticket
        self.marked_launches = 0  # how many launches were marked (a benchmark reports it)
        self.marking = True  # the chosen route: marked, until the times say otherwise
        self.pinned: bool | None = None  # marking fixed by pin_marking (a benchmark's comparison)
        self.probe_every = EXPLORE_EVERY
        self.route_times = RouteTimes()
        # Per ticket slot: when the launch was submitted, if onto an idle launcher (else 0: not timed),
        # and whether it was marked.
        self.submitted_at = [0.0] * MARKS
        self.was_marked = [False] * MARKS
        self.missed_ticket = 0  # the ticket the last look did not see finished ...
        self.missed_at = 0.0  # ... and when that look ended
        self.bare_launches = 0  # launches submitted without the recording's first barrier (see launch)
        self.program = program  # pinned by the runtime while prepared
        self.command_pool: Any = None
        self.semaphore: Any = None
        self.descriptor_pools: list[Any] = []
        self.mark: Any = None  # host memory: the word a marked launch's ticket is copied into, then the slots
        self.words: Any = None
        ffi, dev = vk.ffi, device.handle
        try:
            info = vk.VkCommandPoolCreateInfo(queueFamilyIndex=device.queue_family)
            self.command_pool = binding.call(vk.vkCreateCommandPool, dev, info, None, what="vkCreateCommandPool")
            replay = program.direct.record_apart(ranges, self.command_pool) if program.direct else None
            if replay is not None:
                self.descriptor_pools.append(replay.descriptor_pool)
                assert program.direct is not None
                bare = program.direct.record_apart(ranges, self.command_pool, leading_barrier=False)
                assert bare is not None  # the same ranges as the recording above
                self.descriptor_pools.append(bare.descriptor_pool)
                self.route = "direct"
                buffers, bare_buffers = [replay.cb], [bare.cb]
            else:
                alloc = vk.VkCommandBufferAllocateInfo(
                    commandPool=self.command_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=2
                )
                made = binding.call(vk.vkAllocateCommandBuffers, dev, alloc, what="vkAllocateCommandBuffers")
                copy_in, copy_out = made
                reuse = vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT
                record_copies(vk, copy_in, copy_out, program, ranges, reuse)
                self.route = "copies"
                buffers = bare_buffers = [copy_in, program.cb, copy_out]
            self.mark = memory.allocate(4 * (_SLOT0 + MARKS), MemoryDomain.HOST)
            self.words = ffi.from_buffer("uint32_t[]", self.mark.mapping)
            self.words[0] = 0  # ticket 0: nothing launched
            marks = self._record_marks(last_barrier=self.route == "copies")
            kind = ffi.new("VkSemaphoreTypeCreateInfo *")
            kind.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO
            kind.semaphoreType = vk.VK_SEMAPHORE_TYPE_TIMELINE
            create = ffi.new("VkSemaphoreCreateInfo *")
            create.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO
            create.pNext = kind
            out = ffi.new("VkSemaphore *")
            binding.check(vk.lib.vkCreateSemaphore(dev, create, ffi.NULL, out), "vkCreateSemaphore")
            self.semaphore = out[0]
        except BaseException:
            self._free()
            raise
        self.signal = ffi.new("VkSemaphoreSubmitInfo *")
        self.signal.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO
        self.signal.semaphore = self.semaphore
        self.signal.stageMask = vk.VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT
        # Submit infos per route: [0] with the recording's first barrier, [1] without it (for the copying
        # route, whose copy-in begins with its own barrier, both are the same).
        self.infos = [
            [self._signalling(recording.submit_info(vk, [*b, cb])) for cb in marks] for b in (buffers, bare_buffers)
        ]
        self.plain = [self._signalling(recording.submit_info(vk, b)) for b in (buffers, bare_buffers)]
        # What the queue's tail is after one of these launches: a direct recording's last barrier, then at
        # most the mark's copy (which touches the launcher's own word only) ...
        self.orders_tail = self.route == "direct"
        self.seen = ffi.new("uint64_t *")
        # Bound once: the hot path below makes no attribute lookups into the package.
        self._submit2 = vk.lib.vkQueueSubmit2
        self._counter = vk.lib.vkGetSemaphoreCounterValue
        self._queue, self._handle, self._null = device.queue, dev, ffi.NULL
        self._submit_lock = device.submit_lock

    # -- the hot path: launch and observe ---------------------------------------------------------
    def launch(self) -> int:
        with self.lock:
            if self.closed:
                raise self._gone()
            ticket = self.issued + 1
            if ticket - self.reached_value > IN_FLIGHT:  # look again before refusing (both raise reached_value)
                self._word()
                self._read()
                if ticket - self.reached_value > IN_FLIGHT:
                    raise Busy(f"{IN_FLIGHT} launches of this prepared submission are running")
            self.signal.value = ticket
            if self.marking:
                marked = self.pinned is not None or ticket - self.last_plain < self.probe_every
            else:
                marked = ticket - self.last_marked >= self.probe_every
            slot = ticket % MARKS
            if marked:
                self.words[_SLOT0 + slot] = ticket & _WORD  # visible to the copy: the submit orders host writes
            device = self.device
            idle = self.reached_value == self.issued
            start = time.perf_counter()
            with self._submit_lock:
                # ... so a launch after such a tail needs no first barrier of its own: that last barrier
                # already orders its work after everything earlier and makes earlier writes visible to it.
                bare = self.orders_tail and device.ordered_tail
                info = self.infos[bare][slot] if marked else self.plain[bare]
                code = self._submit2(self._queue, 1, info, self._null)
                if not code:
                    device.ordered_tail = self.orders_tail
            if code:
                raise binding.result_error(code, "vkQueueSubmit2")  # not accepted: the ticket is not used
            self.issued = ticket
            self.submitted_at[slot] = start if idle else 0.0
            self.was_marked[slot] = marked
            if marked:
                self.last_marked = ticket
                self.marked_launches += 1
            else:
                self.last_plain = ticket
            if bare:
                self.bare_launches += 1
            return ticket

    def reached(self, ticket: int) -> bool:
        if type(ticket) is int and 0 < ticket <= self.reached_value:
            return True  # seen finished before: no lock, no driver call
        with self.lock:
            issued = self.issued
            if type(ticket) is not int or not 0 < ticket <= issued:
                check_ticket(ticket, issued)
            if self.closed:
                raise self._gone()
            return self._look(ticket)

    def _look(self, ticket: int) -> bool:
        """One look at whether ``ticket``'s run finished: the word, then the semaphore's counter when a read
        is due. The counter is read on every look while reading it is cheap; in some driver states a read
        took tens of microseconds and delayed the looks that would have seen the word, and then it is read
        only every SEMAPHORE_EVERY_S, while the word can show the ticket (a marked launch at or after it);
        for a later ticket only the counter can, so it is read on every look.

        A look that sees the ticket finished, just after a look that missed it, times its launch
        (``_timed``): the caller was looking all along, so the time is the route's, not the caller's."""
        start = time.perf_counter()
        if ticket <= self._word():
            done = True
        elif start - self.last_read < self.read_every and ticket <= self.last_marked:
            done = False  # the word will show it: spare the slow read
        else:
            done = ticket <= self._read()
            self.last_read = end = time.perf_counter()
            self.read_every = 0.0 if end - start < CHEAP_READ_S else SEMAPHORE_EVERY_S
        if not done:
            self.missed_ticket, self.missed_at = ticket, time.perf_counter()
        elif ticket == self.missed_ticket and start - self.missed_at < ATTENTIVE_S:
            self._timed(ticket)
        return done

    def _timed(self, ticket: int) -> None:
        """Add the submit -> seen time of ``ticket``'s launch, if it was submitted onto an idle launcher,
        and choose the route again when a choice is due."""
        slot = ticket % MARKS
        submitted = self.submitted_at[slot]
        if not submitted:
            return
        self.submitted_at[slot] = 0.0
        if self.route_times.add(self.was_marked[slot], time.perf_counter() - submitted) and self.pinned is None:
            self._choose()

    def _choose(self) -> None:
        faster = self.route_times.marked_is_faster()
        if faster is None:
            self.marking, self.probe_every = True, EXPLORE_EVERY
        else:
            self.marking, self.probe_every = faster, PROBE_EVERY

    def _shown(self) -> int:
        """The ticket the word shows finished: the newest marked ticket not above ``last_marked`` that is
        congruent to the word modulo 2^32. Marked tickets after the word's one are still running (at most
        IN_FLIGHT) and come at most ``probe_every`` (<= _MARK_AT_LEAST) apart, so that ticket is the word's
        own. ``last_marked`` is read first: a word newer than it gives a negative value, an under-count."""
        marked = self.last_marked
        return marked - ((marked - self.words[0]) & _WORD)

    def _word(self) -> int:
        """The last ticket known finished, after reading the word."""
        shown = self._shown()
        if shown > self.reached_value:
            self.reached_value = shown
        return self.reached_value

    def _read(self) -> int:
        code = self._counter(self._handle, self.semaphore, self.seen)
        if code:
            raise binding.result_error(code, "vkGetSemaphoreCounterValue")
        value = int(self.seen[0])
        if value > self.reached_value:
            self.reached_value = value
        return value

    def pin_marking(self, marking: bool | None) -> None:
        """Mark every launch (True), none (False: in fact one in _MARK_AT_LEAST, so that the word stays
        unambiguous), or choose by the routes' times (None, the default). For comparing the two routes
        on a device. Launches made while pinned are timed too."""
        with self.lock:
            self.pinned = marking
            if marking is None:
                self._choose()
            else:
                self.marking, self.probe_every = marking, _MARK_AT_LEAST

    def wait(self, ticket: int, timeout: float | None) -> bool:
        with self.lock:
            check_ticket(ticket, self.issued)
            if self.closed:
                raise self._gone()
            if ticket <= self.reached_value:
                return True
            self.waiters += 1  # what the wait reads outlives it: ``idle`` is False, ``destroy`` waits
        try:
            # Outside the lock: launches and polls go on meanwhile. First a short spin, then the driver.
            spun = SPIN_S if timeout is None else min(SPIN_S, timeout)
            if self._spin(ticket, spun):
                return True
            if self.closed:
                raise self._gone()
            left = None if timeout is None else max(0, int((timeout - spun) * _NS))
            code = self._wait_value(ticket, left)
        finally:
            with self.lock:
                self.waiters -= 1
        if code == binding.VK_TIMEOUT:
            return False
        if code:
            raise binding.result_error(code, "vkWaitSemaphores")
        # The counter reached the ticket: that is the answer. A look here could skip the counter (one was
        # read moments ago, in the spin) and not see an unmarked ticket finished.
        with self.lock:
            if ticket > self.reached_value:
                self.reached_value = ticket
        return True

    def _spin(self, ticket: int, seconds: float) -> bool:
        """Look (as ``reached`` does) for up to ``seconds``: whether the run finished. A blocking wait may
        wake tens of microseconds after the finish, as long as a small run takes; a spin sees it at once,
        and most small runs end within SPIN_S. Runs without the lock (the caller is a waiter, so nothing it
        reads is freed). A racing ``reached`` or ``launch`` may overwrite the counter's buffer or the cached
        values meanwhile: each holds something the counter or word showed, so it stays a lower bound, and a
        wrong guess about marking costs one launch's route, never a result."""
        clock = time.perf_counter
        end = clock() + seconds
        while not self.closed:
            if self._look(ticket):
                return True
            if clock() >= end:
                return False
        return False

    def _wait_value(self, value: int, ns: int | None) -> int:
        vk, ffi = self.vk, self.vk.ffi
        semaphores = ffi.new("VkSemaphore[1]", [self.semaphore])
        values = ffi.new("uint64_t[1]", [value])
        info = ffi.new("VkSemaphoreWaitInfo *")
        info.sType = vk.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO
        info.semaphoreCount = 1
        info.pSemaphores = semaphores
        info.pValues = values
        return int(vk.lib.vkWaitSemaphores(self._handle, info, 0xFFFFFFFFFFFFFFFF if ns is None else ns))

    def _gone(self) -> IronAccelError:
        if self.lost:
            return DeviceLost("the Vulkan accelerator was closed")
        return InvalidArgument("this prepared submission was released")

    def idle(self) -> bool:
        if not self.waiters and self.issued <= self.reached_value:
            return True  # every launch seen finished (the common case, checked before each input write)
        with self.lock:
            if self.closed:
                return True
            return not self.waiters and (self.issued <= self._word() or self.issued <= self._read())

    # -- release --------------------------------------------------------------------------------
    def destroy(self, lost: bool = False) -> None:
        """Free everything (nothing launched is running: the runtime checked, or the device is idle).
        ``lost``: the accelerator is closing, and later calls say DeviceLost instead of released."""
        with self.lock:
            if self.closed:
                return
            self.closed, self.lost = True, lost
        # Waiters see ``closed`` and leave: a spinning one at its next look, a blocked one once the
        # semaphore is reached (the device is idle when the accelerator closes, and a release is refused
        # while anyone waits). Bounded, for a driver that never returns.
        give_up = time.monotonic() + 5.0
        while self.waiters and time.monotonic() < give_up:
            time.sleep(0)
        with self.lock:
            if not lost and self.issued:
                # The host word may show the last run finished a moment before its submission signals;
                # nothing a submission uses may be freed until then (a lost device returns at once).
                self._wait_value(self.issued, None)
            self._free()

    def _signalling(self, info: Any) -> Any:
        info.signalSemaphoreInfoCount = 1
        info.pSignalSemaphoreInfos = self.signal
        return info

    def _record_marks(self, last_barrier: bool) -> list[Any]:
        """MARKS command buffers, the one of slot v copying slot v into the word. After a direct recording,
        whose final barrier already orders everything after its kernels and makes their writes visible to
        the host, the copy needs nothing before it; after a copy-out, whose barrier reaches the host only, a
        barrier first orders the copy after the copies."""
        vk = self.vk
        alloc = vk.VkCommandBufferAllocateInfo(
            commandPool=self.command_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=MARKS
        )
        marks = binding.call(vk.vkAllocateCommandBuffers, self.device.handle, alloc, what="vkAllocateCommandBuffers")
        copy, write = vk.VK_PIPELINE_STAGE_2_COPY_BIT, vk.VK_ACCESS_2_TRANSFER_WRITE_BIT
        for slot, cb in enumerate(marks):
            recording.begin(vk, cb, vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT)
            if last_barrier:
                recording.global_barrier(vk, cb, copy, write, copy, write)
            recording.copy(vk, cb, self.mark.buffer, 4 * (_SLOT0 + slot), self.mark.buffer, 0, 4)
            recording.global_barrier(vk, cb, copy, write, vk.VK_PIPELINE_STAGE_2_HOST_BIT, vk.VK_ACCESS_2_HOST_READ_BIT)
            recording.end(vk, cb)
        return list(marks)

    def _free(self) -> None:
        vk, dev = self.vk, self.device.handle
        if self.words is not None:
            vk.ffi.release(self.words)  # the mapping is released with the allocation
            self.words = None
        if self.mark is not None:
            self.memory.free(self.mark)
            self.mark = None
        if self.semaphore is not None:
            vk.vkDestroySemaphore(dev, self.semaphore, None)
            self.semaphore = None
        if self.command_pool is not None:
            vk.vkDestroyCommandPool(dev, self.command_pool, None)  # frees its command buffers
            self.command_pool = None
        for pool in self.descriptor_pools:
            if pool is not None:
                vk.vkDestroyDescriptorPool(dev, pool, None)
        self.descriptor_pools = []


__all__ = ["DECIDE_EVERY", "IN_FLIGHT", "WINDOW", "Launcher", "RouteTimes"]
