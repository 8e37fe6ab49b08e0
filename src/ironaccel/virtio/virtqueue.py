"""The virtio 1.x split virtqueue: its layout, the guest memory it lives in, and the shared rules.

A split queue of ``size`` entries (a power of two, at most 256 here) is three areas of guest memory,
all little-endian:

    descriptor table  size x {addr u64, len u32, flags u16, next u16}             16-byte aligned
    available ring    flags u16, idx u16, ring[size] u16, used_event u16          2-byte aligned
    used ring         flags u16, idx u16, ring[size] {id u32, len u32},           4-byte aligned
                      avail_event u16

The driver (the guest) owns the descriptor table and the available ring; the device (the host) owns
the used ring. Addresses in descriptors and ring setup are guest addresses, translated through a
:class:`GuestMemory` table of mapped regions, so the same code serves a memfd shared between two
processes and, later, a VM's memory map.

Design choices:
1. Every value the other side wrote is read once, into a local, and checked before use: an index
   against the queue size, an address range against the mapped regions, a count against its bound.
   A value the peer changes afterwards changes nothing already decided.
2. Two kinds of failure. :class:`ChainError` is one malformed descriptor chain: the device returns
   its head with used length 0 and goes on. :class:`RingError` is a broken ring (an index that
   jumped, a head outside the table): the queue cannot continue and needs a reset.
3. Nothing loops on a guest-controlled count: a chain walk visits each descriptor at most once and
   at most ``max_chain`` of them; an indirect table's length is checked before it is read.
4. Memory ordering: every index and flag is moved with one 16-bit access (:func:`words16`), never
   byte by byte, so the peer never sees a torn value. Stores to the shared mapping are made in program
   order (ring entry before the index that publishes it). x86-64 keeps stores in order and loads in
   order, which is what the publish/consume pairs need; the eventfd write that notifies the peer is a
   system call and a full barrier on every architecture. A weakly ordered CPU polling without
   notifications would need explicit fences, which Python cannot issue: see ADR 0010.
"""

from __future__ import annotations

import dataclasses
import struct
import sys
from collections.abc import Sequence

from ..core.errors import Busy, IronAccelError, OutOfBounds, Unsupported

# Descriptor flags (virtio 1.x 2.7.5).
DESC_F_NEXT = 1
DESC_F_WRITE = 2
DESC_F_INDIRECT = 4
DESC_FLAGS_KNOWN = DESC_F_NEXT | DESC_F_WRITE | DESC_F_INDIRECT

AVAIL_F_NO_INTERRUPT = 1  # driver to device: do not signal used buffers
USED_F_NO_NOTIFY = 1  # device to driver: do not kick for available buffers

# Feature bits (virtio 1.x 6) the ring code knows.
F_INDIRECT_DESC = 1 << 28
F_EVENT_IDX = 1 << 29
F_VERSION_1 = 1 << 32

MAX_QUEUE_SIZE = 256
MIN_CHAIN = 2  # one device-readable request region and one device-writable response region
MAX_CHAIN = 256  # protocol 1.0's hard maximum of descriptors per chain, counted after flattening

DESC_SIZE = 16
DESC = struct.Struct("<QIHH")
USED_ELEM = struct.Struct("<II")


class RingError(IronAccelError):
    """The ring itself is unusable (an index jumped, a head lies outside the table, the ring lies
    outside guest memory). The queue stops; only a reset makes it usable again."""


class ChainError(IronAccelError):
    """One descriptor chain is malformed. The device completes ``head`` with used length 0, writes
    nothing into the chain, and carries on with the next chain."""

    def __init__(self, head: int, message: str) -> None:
        self.head = head
        super().__init__(f"descriptor chain {head}: {message}")


class QueueFull(Busy):
    """The driver has no free descriptors (or buffer space) for the chain: nothing was published, and
    the same chain may be posted again once the device has returned some."""


def words16(area: memoryview) -> memoryview:
    """The 16-bit words of a ring area, each read or written with one aligned access.

    The indices and flags are read by one side while the other stores them. The struct module moves
    a "<H" one byte at a time, so a reader could see half an old index and half a new one; an item of
    a native "H" memoryview is a single 16-bit load or store. The ring is little-endian, as the host
    must then be."""
    if sys.byteorder != "little":
        raise Unsupported("the split ring is little-endian; this host is big-endian")
    return area.cast("H")


def is_queue_size(size: object) -> bool:
    return isinstance(size, int) and 1 <= size <= MAX_QUEUE_SIZE and size & (size - 1) == 0


def need_event(event_idx: int, new_idx: int, old_idx: int) -> bool:
    """Event-index suppression: has the index moved past ``event_idx`` going from ``old`` to ``new``?

    All arithmetic is on wrapping 16-bit ring indices."""
    return ((new_idx - event_idx - 1) & 0xFFFF) < ((new_idx - old_idx) & 0xFFFF)


@dataclasses.dataclass(frozen=True)
class RingLayout:
    """Where the three areas of a queue of ``size`` entries sit in one contiguous block (offsets from
    the block's start), each at its required alignment, as a driver lays them out."""

    size: int
    desc: int
    avail: int
    used: int
    total: int

    @classmethod
    def of(cls, size: int) -> RingLayout:
        if not is_queue_size(size):
            raise OutOfBounds(f"queue size must be a power of two from 1 to {MAX_QUEUE_SIZE}, got {size!r}")
        avail = desc_bytes(size)
        used = _align(avail + avail_bytes(size), 4)
        return cls(size, 0, avail, used, used + used_bytes(size))


def desc_bytes(size: int) -> int:
    return DESC_SIZE * size


def avail_bytes(size: int) -> int:
    """flags, idx, ring[size], used_event."""
    return 6 + 2 * size


def used_bytes(size: int) -> int:
    """flags, idx, ring[size] of {id, len}, avail_event."""
    return 6 + 8 * size


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) & -alignment


@dataclasses.dataclass(frozen=True)
class MemoryRegion:
    """``size`` bytes of guest memory at guest address ``guest_addr``, mapped here as ``view``."""

    guest_addr: int
    size: int
    view: memoryview


class GuestMemory:
    """A small table of mapped regions that turns a guest (address, length) into a byte view.

    Every translation is checked: a range must lie wholly inside one region, with no arithmetic
    overflow; otherwise OutOfBounds names the range. The table is fixed at construction."""

    MAX_REGIONS = 8

    def __init__(self, regions: Sequence[MemoryRegion]) -> None:
        if not 1 <= len(regions) <= self.MAX_REGIONS:
            raise OutOfBounds(f"guest memory needs 1 to {self.MAX_REGIONS} regions, got {len(regions)}")
        ordered = sorted(regions, key=lambda r: r.guest_addr)
        end = -1
        for r in ordered:
            if r.size <= 0 or r.guest_addr < 0 or r.guest_addr + r.size > 1 << 64 or len(r.view) != r.size:
                raise OutOfBounds(f"bad memory region at {r.guest_addr:#x} of {r.size} bytes")
            if r.guest_addr < end:
                raise OutOfBounds(f"memory region at {r.guest_addr:#x} overlaps the one before it")
            end = r.guest_addr + r.size
        self.regions = tuple(ordered)

    def slice(self, addr: int, length: int) -> memoryview:
        """The view of guest bytes [addr, addr + length); length may be 0 (an empty view)."""
        if length >= 0:
            for r in self.regions:
                offset = addr - r.guest_addr
                if 0 <= offset and offset + length <= r.size:
                    return r.view[offset : offset + length]
        raise OutOfBounds(f"guest range [{addr:#x}, +{length}) is not inside guest memory")

    def contains(self, addr: int, length: int) -> bool:
        """Whether [addr, addr + length) lies inside one region (no view is made)."""
        if length >= 0:
            for r in self.regions:
                offset = addr - r.guest_addr
                if 0 <= offset and offset + length <= r.size:
                    return True
        return False


@dataclasses.dataclass(frozen=True)
class RingAddresses:
    """Guest addresses of a queue's three areas, as the driver configured them."""

    desc: int
    avail: int
    used: int

    @classmethod
    def contiguous(cls, base: int, layout: RingLayout) -> RingAddresses:
        return cls(base + layout.desc, base + layout.avail, base + layout.used)


def map_ring(memory: GuestMemory, size: int, addrs: RingAddresses) -> tuple[memoryview, memoryview, memoryview]:
    """Views of the descriptor table, available ring and used ring, after checking the size, each
    area's alignment and that each lies inside guest memory (RingError otherwise)."""
    if not is_queue_size(size):
        raise RingError(f"queue size must be a power of two from 1 to {MAX_QUEUE_SIZE}, got {size!r}")
    areas = (
        ("descriptor table", addrs.desc, desc_bytes(size), 16),
        ("available ring", addrs.avail, avail_bytes(size), 2),
        ("used ring", addrs.used, used_bytes(size), 4),
    )
    views = []
    for name, addr, length, alignment in areas:
        if not isinstance(addr, int) or addr % alignment:
            raise RingError(f"{name} address {addr!r} is not {alignment}-byte aligned")
        try:
            views.append(memory.slice(addr, length))
        except OutOfBounds as exc:
            raise RingError(f"{name} of a {size}-entry queue: {exc}") from None
    return views[0], views[1], views[2]
