"""The device (host) side of a split virtqueue: take chains the guest made available, return them used.

Everything the guest wrote is hostile. ``pop`` reads the available index once and checks how far it
moved (never more than the queue size), reads the head once and checks it against the table, then
walks the chain reading each descriptor once (all 16 bytes at one go). The walk enforces, in order:
known flags only; an indirect table only when negotiated, only as the chain's last descriptor, never
nested, its length a non-zero multiple of 16 within the chain bound; no descriptor visited twice (no
loops); 1 to ``max_chain`` descriptors after flattening; non-zero lengths; every region inside guest
memory; all device-readable regions before all device-writable ones; at least one of each; the
readable total within ``max_request``. What comes out is a :class:`Chain` of byte views, so the
command engine never sees an address, an index or a descriptor.

A malformed chain raises ChainError (complete it with ``reject``: used length 0, nothing written);
a broken ring raises RingError.
"""

from __future__ import annotations

import dataclasses

from ..core.errors import OutOfBounds
from .virtqueue import (
    AVAIL_F_NO_INTERRUPT,
    DESC,
    DESC_F_INDIRECT,
    DESC_F_NEXT,
    DESC_F_WRITE,
    DESC_FLAGS_KNOWN,
    DESC_SIZE,
    F_EVENT_IDX,
    F_INDIRECT_DESC,
    MAX_CHAIN,
    USED_ELEM,
    USED_F_NO_NOTIFY,
    ChainError,
    GuestMemory,
    RingAddresses,
    RingError,
    map_ring,
    need_event,
    words16,
)


@dataclasses.dataclass
class Chain:
    """One validated chain: the head to return, the request regions, the response regions."""

    head: int
    readable: list[memoryview]
    writable: list[memoryview]
    readable_bytes: int
    writable_bytes: int

    def gather(self) -> bytes:
        """The request as one private copy: later guest writes to the regions cannot change it."""
        if len(self.readable) == 1:
            return bytes(self.readable[0])
        return b"".join(self.readable)

    def scatter(self, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` across the writable regions in order; returns the bytes written (the used length)."""
        view = memoryview(data).cast("B")
        if view.nbytes > self.writable_bytes:
            raise OutOfBounds(f"response of {view.nbytes} bytes exceeds the chain's {self.writable_bytes} writable")
        done = 0
        for region in self.writable:
            if done == view.nbytes:
                break
            n = min(len(region), view.nbytes - done)
            region[:n] = view[done : done + n]
            done += n
        return done


class DeviceQueue:
    """The device's view of one split queue in guest memory. Not thread-safe: one owner at a time."""

    def __init__(
        self,
        memory: GuestMemory,
        size: int,
        addrs: RingAddresses,
        *,
        features: int = 0,
        max_chain: int = MAX_CHAIN,
        max_request: int = 16 << 20,
        next_avail: int = 0,
    ) -> None:
        self._desc, self._avail, self._used = map_ring(memory, size, addrs)
        if not 2 <= max_chain <= MAX_CHAIN:
            raise OutOfBounds(f"max_chain must be 2 to {MAX_CHAIN}, got {max_chain}")
        self.memory = memory
        self.size = size
        self.max_chain = max_chain
        self.max_request = max_request
        self.indirect = bool(features & F_INDIRECT_DESC)
        self.event_idx = bool(features & F_EVENT_IDX)
        self.next_avail = next_avail & 0xFFFF
        self._avail_w, self._used_w = words16(self._avail), words16(self._used)
        self.used_idx = self._used_w[1]  # the driver's initial value; only the device writes it after
        self._signalled = self.used_idx
        self._used_event = 2 + size  # word index of used_event in the available ring
        self._avail_event = 2 + 4 * size  # word index of avail_event in the used ring

    # ---- consuming available chains ---------------------------------------------------------------
    def _pending(self) -> int:
        avail_idx = self._avail_w[1]
        pending = (avail_idx - self.next_avail) & 0xFFFF
        if pending > self.size:
            raise RingError(
                f"available index {avail_idx} is {pending} entries ahead of {self.next_avail};"
                f" a queue of {self.size} holds at most {self.size}"
            )
        return pending

    def has_work(self) -> bool:
        return self._pending() > 0

    def pop(self) -> Chain | None:
        """The next available chain, or None when there is none. ChainError: a malformed chain (its
        head is consumed; ``reject`` it). RingError: the queue is broken."""
        if self._pending() == 0:
            return None
        slot = self.next_avail & (self.size - 1)
        head = self._avail_w[2 + slot]
        if head >= self.size:
            raise RingError(f"available ring slot {slot} names descriptor {head}; the table has {self.size}")
        self.next_avail = (self.next_avail + 1) & 0xFFFF
        return self._walk(head)

    def _walk(self, head: int) -> Chain:
        readable: list[memoryview] = []
        writable: list[memoryview] = []
        rbytes = wbytes = count = 0
        table, entries, index = self._desc, self.size, head
        seen = bytearray(entries)
        in_indirect = False
        while True:
            if index >= entries:
                where = "indirect table" if in_indirect else "descriptor table"
                raise ChainError(head, f"next index {index} is outside the {where} of {entries}")
            if seen[index]:
                raise ChainError(head, f"descriptor {index} is visited twice (a loop)")
            seen[index] = 1
            addr, length, flags, nxt = DESC.unpack_from(table, DESC_SIZE * index)
            if flags & ~DESC_FLAGS_KNOWN:
                raise ChainError(head, f"descriptor {index} has unknown flags {flags:#x}")
            if flags & DESC_F_INDIRECT:
                if not self.indirect:
                    raise ChainError(head, "indirect descriptor, but indirect descriptors were not negotiated")
                if in_indirect:
                    raise ChainError(head, "indirect descriptor inside an indirect table")
                if flags & DESC_F_NEXT:
                    raise ChainError(head, "indirect descriptor with NEXT set (it must end the chain)")
                if length == 0 or length % DESC_SIZE:
                    raise ChainError(head, f"indirect table of {length} bytes is not a non-zero multiple of 16")
                n = length // DESC_SIZE
                if count + n > self.max_chain:
                    raise ChainError(head, f"{count} + {n} indirect descriptors exceed the limit {self.max_chain}")
                table = self._region(head, addr, length, "indirect table")
                entries, index, seen, in_indirect = n, 0, bytearray(n), True
                continue
            count += 1
            if count > self.max_chain:
                raise ChainError(head, f"more than {self.max_chain} descriptors")
            if length == 0:
                raise ChainError(head, f"descriptor {index} has length 0")
            region = self._region(head, addr, length, f"descriptor {index}")
            if flags & DESC_F_WRITE:
                writable.append(region)
                wbytes += length
            else:
                if writable:
                    raise ChainError(head, f"device-readable descriptor {index} follows a device-writable one")
                readable.append(region)
                rbytes += length
                if rbytes > self.max_request:
                    raise ChainError(head, f"request regions exceed {self.max_request} bytes")
            if not flags & DESC_F_NEXT:
                break
            index = nxt
        if not readable:
            raise ChainError(head, "no device-readable (request) region")
        if not writable:
            raise ChainError(head, "no device-writable (response) region")
        return Chain(head, readable, writable, rbytes, wbytes)

    def _region(self, head: int, addr: int, length: int, what: str) -> memoryview:
        try:
            return self.memory.slice(addr, length)
        except OutOfBounds:
            raise ChainError(head, f"{what} [{addr:#x}, +{length}) lies outside guest memory") from None

    # ---- returning used chains --------------------------------------------------------------------
    def complete(self, head: int, length: int) -> None:
        """Publish ``head`` as used with ``length`` bytes written: the element first, then the index."""
        slot = self.used_idx & (self.size - 1)
        USED_ELEM.pack_into(self._used, 4 + 8 * slot, head, length)
        self.used_idx = (self.used_idx + 1) & 0xFFFF
        self._used_w[1] = self.used_idx

    def reject(self, error: ChainError) -> None:
        """Return a malformed chain with used length 0 and nothing written."""
        self.complete(error.head, 0)

    # ---- notifications ----------------------------------------------------------------------------
    def needs_call(self) -> bool:
        """After publishing used entries: should the driver be signalled? Reads the driver's
        suppression (NO_INTERRUPT flag, or used_event with EVENT_IDX) once."""
        new, old = self.used_idx, self._signalled
        self._signalled = new
        if new == old:
            return False
        if self.event_idx:
            return need_event(self._avail_w[self._used_event], new, old)
        return not self._avail_w[0] & AVAIL_F_NO_INTERRUPT

    def suppress_kicks(self) -> None:
        """Ask the driver not to kick while the device is draining the queue anyway."""
        if not self.event_idx:
            self._used_w[0] = USED_F_NO_NOTIFY

    def enable_kicks(self) -> bool:
        """Ask for a kick at the next available chain, then look again: True means work arrived
        meanwhile (drain it instead of sleeping, or a wakeup is lost)."""
        if self.event_idx:
            self._used_w[self._avail_event] = self.next_avail
        else:
            self._used_w[0] = 0
        return self.has_work()
