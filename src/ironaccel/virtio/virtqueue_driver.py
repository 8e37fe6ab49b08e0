"""The driver (guest) side of a split virtqueue: post chains, kick when asked to, reclaim used chains.

The driver keeps its own books: which descriptors are free, which heads are in flight and how many
writable bytes each offered. It never trusts what the device wrote back: a used entry must name a
head in flight and a length within that chain's writable bytes, and the used index may not run
ahead of the chains in flight; anything else is a RingError (the device is broken).

A chain of several regions goes into one indirect table when indirect descriptors were negotiated
(one ring descriptor per chain, however long); otherwise it takes one descriptor per region. When
the ring has too few free descriptors, ``post`` raises QueueFull and publishes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import InvalidArgument
from .virtqueue import (
    AVAIL_F_NO_INTERRUPT,
    DESC,
    DESC_F_INDIRECT,
    DESC_F_NEXT,
    DESC_F_WRITE,
    DESC_SIZE,
    F_EVENT_IDX,
    F_INDIRECT_DESC,
    MAX_CHAIN,
    USED_ELEM,
    USED_F_NO_NOTIFY,
    GuestMemory,
    QueueFull,
    RingAddresses,
    RingError,
    map_ring,
    need_event,
    words16,
)

Region = tuple[int, int]  # (guest address, length)


class IndirectArea:
    """Guest memory reserved for indirect tables: ``per_head`` descriptors for each ring head."""

    def __init__(self, addr: int, per_head: int) -> None:
        if not 2 <= per_head <= MAX_CHAIN:
            raise InvalidArgument(f"indirect tables hold 2 to {MAX_CHAIN} descriptors, got {per_head}")
        self.addr = addr
        self.per_head = per_head

    def table_addr(self, head: int) -> int:
        return self.addr + head * self.per_head * DESC_SIZE

    @staticmethod
    def bytes_for(size: int, per_head: int) -> int:
        return size * per_head * DESC_SIZE


class DriverQueue:
    """The driver's view of one split queue it laid out in its own memory. Not thread-safe."""

    def __init__(
        self,
        memory: GuestMemory,
        size: int,
        addrs: RingAddresses,
        *,
        features: int = 0,
        indirect: IndirectArea | None = None,
        start_index: int = 0,
    ) -> None:
        self._desc, self._avail, self._used = map_ring(memory, size, addrs)
        self.memory = memory
        self.size = size
        self.event_idx = bool(features & F_EVENT_IDX)
        self.indirect = indirect if features & F_INDIRECT_DESC else None
        if self.indirect is not None:
            memory.slice(self.indirect.addr, IndirectArea.bytes_for(size, self.indirect.per_head))
        self._free = list(range(size - 1, -1, -1))  # a stack of free descriptor indices
        self._inflight: dict[int, tuple[list[int], int]] = {}  # head -> (descriptors, writable bytes)
        # A fresh ring: no flags, no events requested, both indices at ``start_index`` (the device is
        # told the same value as its first available index).
        self.avail_idx = self.last_used = self._kicked_at = start_index & 0xFFFF
        self._avail_w, self._used_w = words16(self._avail), words16(self._used)
        for words in (self._avail_w, self._used_w):
            words[:] = memoryview(bytes(2 * len(words))).cast("H")
            words[1] = self.avail_idx
            words[len(words) - 1] = self.avail_idx  # used_event / avail_event

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    @property
    def free_descriptors(self) -> int:
        return len(self._free)

    def post(self, readable: Sequence[Region], writable: Sequence[Region]) -> int:
        """Publish one chain: request regions (device-readable), then response regions
        (device-writable). Returns its head. QueueFull: nothing was published; retry later."""
        regions = [(a, n, 0) for a, n in readable] + [(a, n, DESC_F_WRITE) for a, n in writable]
        if not readable or not writable:
            raise InvalidArgument("a chain needs at least one request and one response region")
        contains = self.memory.contains
        for addr, length, _ in regions:
            if not 0 < length < 1 << 32:
                raise InvalidArgument(f"region length {length} is outside 1 .. 2**32 - 1")
            if not contains(addr, length):  # our own mistake would otherwise surface as a device error
                self.memory.slice(addr, length)  # raises OutOfBounds naming the range
        wbytes = sum(n for _, n in writable)
        use_indirect = self.indirect is not None and 1 < len(regions) <= self.indirect.per_head
        needed = 1 if use_indirect else len(regions)
        if needed > self.size:
            raise InvalidArgument(f"a chain of {needed} descriptors cannot fit a queue of {self.size}")
        if needed > len(self._free):
            raise QueueFull(f"{needed} descriptors needed, {len(self._free)} free")
        descs = [self._free.pop() for _ in range(needed)]
        if use_indirect:
            assert self.indirect is not None
            table_addr = self.indirect.table_addr(descs[0])
            table = self.memory.slice(table_addr, len(regions) * DESC_SIZE)
            _write_chain(table, list(range(len(regions))), regions)
            DESC.pack_into(self._desc, DESC_SIZE * descs[0], table_addr, len(regions) * DESC_SIZE, DESC_F_INDIRECT, 0)
        else:
            _write_chain(self._desc, descs, regions)
        head = descs[0]
        self._inflight[head] = (descs, wbytes)
        slot = self.avail_idx & (self.size - 1)
        self._avail_w[2 + slot] = head
        self.avail_idx = (self.avail_idx + 1) & 0xFFFF
        self._avail_w[1] = self.avail_idx  # publish after the entry
        return head

    def kick_needed(self) -> bool:
        """After posting: does the device want a kick? Reads its suppression once."""
        new, old = self.avail_idx, self._kicked_at
        self._kicked_at = new
        if new == old:
            return False
        if self.event_idx:
            return need_event(self._used_w[2 + 4 * self.size], new, old)
        return not self._used_w[0] & USED_F_NO_NOTIFY

    def has_used(self) -> bool:
        return self._used_w[1] != self.last_used

    def reap(self) -> list[tuple[int, int]]:
        """Every chain the device returned since the last call: (head, used length), in used order."""
        used_idx = self._used_w[1]
        count = (used_idx - self.last_used) & 0xFFFF
        if count > len(self._inflight):
            raise RingError(f"device published {count} used entries with {len(self._inflight)} chains in flight")
        done = []
        for _ in range(count):
            slot = self.last_used & (self.size - 1)
            head, length = USED_ELEM.unpack_from(self._used, 4 + 8 * slot)
            record = self._inflight.pop(head, None)
            if record is None:
                raise RingError(f"device returned head {head}, which is not in flight")
            descs, wbytes = record
            if length > wbytes:
                raise RingError(f"device claims {length} bytes written into a chain offering {wbytes}")
            self._free.extend(reversed(descs))
            self.last_used = (self.last_used + 1) & 0xFFFF
            done.append((head, length))
        return done

    def disable_calls(self) -> None:
        """Ask the device not to signal used chains (the driver is polling)."""
        if not self.event_idx:
            self._avail_w[0] = AVAIL_F_NO_INTERRUPT

    def enable_calls(self, until: int | None = None) -> bool:
        """Ask for a signal at the next used chain (with EVENT_IDX and ``until``, the available ring index
        of a chain in flight: at the used entry of that index, which is that chain's where the device
        returns chains in order, and a later one's otherwise), then look again: True means chains were
        returned meanwhile (reap them instead of sleeping)."""
        if self.event_idx:
            at = self.last_used
            if until is not None and (until - at) & 0xFFFF < len(self._inflight):
                at = until
            self._avail_w[2 + self.size] = at
        else:
            self._avail_w[0] = 0
        return self.has_used()


def _write_chain(table: memoryview, indices: Sequence[int], regions: Sequence[tuple[int, int, int]]) -> None:
    last = len(indices) - 1
    for i, (index, (addr, length, flags)) in enumerate(zip(indices, regions, strict=True)):
        nxt = indices[i + 1] if i < last else 0
        DESC.pack_into(table, DESC_SIZE * index, addr, length, flags | (DESC_F_NEXT if i < last else 0), nxt)
