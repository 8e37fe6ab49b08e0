"""Fuzz of the split ring from both ends, on mutated real rings.

Chain walker and available index (device side): a driver posts real chains (direct and indirect, of
random shapes), then bytes of the descriptor table, the indirect tables and the available ring
(entries, index) are overwritten at random. Every pop must end, and yield either a chain that obeys
every rule or ChainError (that chain answered empty) or RingError (the queue stops); at most as many
chains as the index moved.

Used index and entries (driver side): the device's used ring is overwritten likewise; ``reap`` must
return only chains that were in flight, each once, with a used length within what the chain could
hold, or raise RingError.

The default run is bounded; ``make fuzz-virtio`` runs IRONACCEL_FUZZ_EXAMPLES inputs (default 10^6) per
target and prints the rate.
"""

from __future__ import annotations

import os
import random
import struct
import time

import pytest

from ironaccel.virtio.virtqueue import (
    F_EVENT_IDX,
    F_INDIRECT_DESC,
    ChainError,
    GuestMemory,
    MemoryRegion,
    QueueFull,
    RingAddresses,
    RingError,
    RingLayout,
)
from ironaccel.virtio.virtqueue_device import DeviceQueue
from ironaccel.virtio.virtqueue_driver import DriverQueue, IndirectArea

LONG = int(os.environ.get("IRONACCEL_FUZZ_EXAMPLES", "0") or 0) or 1_000_000
LONG_SECONDS = float(os.environ.get("IRONACCEL_FUZZ_SECONDS", "0") or 0) or float("inf")
SHORT = 3_000
BASE = 0x4000_0000
MEM = 1 << 16
SIZE = 8
INDIRECT_AT, DATA_AT = 0x1000, 0x2000
MAX_CHAIN = 16
MAX_REQUEST = 4096


class Ring:
    """One region, reused across inputs: the ring, the indirect tables, then data."""

    def __init__(self) -> None:
        self.buf = bytearray(MEM)
        self.memory = GuestMemory([MemoryRegion(BASE, MEM, memoryview(self.buf))])
        self.layout = RingLayout.of(SIZE)
        self.addrs = RingAddresses.contiguous(BASE, self.layout)

    def fresh(self, rng: random.Random) -> tuple[DriverQueue, DeviceQueue, dict[int, int]]:
        """Both ends at a random start index, with real chains posted; returns head -> writable bytes."""
        self.buf[:DATA_AT] = bytes(DATA_AT)
        features = rng.choice([0, F_INDIRECT_DESC, F_EVENT_IDX, F_INDIRECT_DESC | F_EVENT_IDX])
        start = rng.randrange(1 << 16)
        indirect = IndirectArea(BASE + INDIRECT_AT, 8) if features & F_INDIRECT_DESC else None
        driver = DriverQueue(self.memory, SIZE, self.addrs, features=features, indirect=indirect, start_index=start)
        device = DeviceQueue(
            self.memory, SIZE, self.addrs, features=features, max_chain=MAX_CHAIN, next_avail=start,
            max_request=MAX_REQUEST,
        )
        posted: dict[int, int] = {}
        for _ in range(rng.randint(1, SIZE)):
            readable = [(BASE + DATA_AT + 64 * rng.randrange(64), rng.randint(1, 64)) for _ in range(rng.randint(1, 3))]
            writable = [(BASE + DATA_AT + 64 * rng.randrange(64), rng.randint(1, 64)) for _ in range(rng.randint(1, 3))]
            try:
                posted[driver.post(readable, writable)] = sum(n for _, n in writable)
            except QueueFull:
                break
        return driver, device, posted

    def scribble(self, rng: random.Random, start: int, end: int, count: int) -> None:
        for _ in range(count):
            at = rng.randrange(start, end)
            if rng.random() < 0.5:
                self.buf[at] = rng.randrange(256)
            else:  # a whole 16-bit field: an index, a flag word, a head
                value = rng.choice([0, 1, SIZE - 1, SIZE, 0xFFFF, rng.randrange(1 << 16)])
                struct.pack_into("<H", self.buf, at & ~1, value)


def walk_once(ring: Ring, rng: random.Random) -> None:
    """Device side on a mutated ring."""
    _, device, _ = ring.fresh(rng)
    lay = ring.layout
    areas = [(lay.desc, lay.desc + 16 * SIZE), (lay.avail, lay.avail + 6 + 2 * SIZE), (INDIRECT_AT, DATA_AT)]
    for _ in range(rng.randint(1, 6)):
        lo, hi = rng.choice(areas)
        ring.scribble(rng, lo, hi, 1)
    moved = struct.unpack_from("<H", ring.buf, lay.avail + 2)[0] - device.next_avail & 0xFFFF
    popped = 0
    for _ in range(SIZE + 2):
        try:
            chain = device.pop()
        except ChainError as exc:
            assert 0 <= exc.head < SIZE
            device.reject(exc)
            popped += 1
            continue
        except RingError:
            return
        if chain is None:
            break
        popped += 1
        assert chain.readable and chain.writable
        assert 2 <= len(chain.readable) + len(chain.writable) <= MAX_CHAIN
        assert all(len(r) > 0 for r in chain.readable + chain.writable)
        assert chain.readable_bytes == sum(len(r) for r in chain.readable) <= MAX_REQUEST
        assert chain.writable_bytes == sum(len(r) for r in chain.writable)
        device.complete(chain.head, chain.scatter(b"z" * min(4, chain.writable_bytes)))
    assert popped <= moved <= SIZE


def reap_once(ring: Ring, rng: random.Random) -> None:
    """Driver side on a mutated used ring."""
    driver, device, posted = ring.fresh(rng)
    for _ in range(rng.randint(0, len(posted))):  # the device returns some chains honestly first
        chain = device.pop()
        if chain is None:
            break
        device.complete(chain.head, chain.scatter(b"ok"[: chain.writable_bytes]))
    lay = ring.layout
    ring.scribble(rng, lay.used, lay.used + 6 + 8 * SIZE, rng.randint(1, 4))
    if rng.random() < 0.3:  # a used entry naming any head with any length
        slot = rng.randrange(SIZE)
        struct.pack_into("<II", ring.buf, lay.used + 4 + 8 * slot, rng.randrange(1 << 32), rng.randrange(1 << 32))
    try:
        done = driver.reap()
    except RingError:
        return
    heads = [head for head, _ in done]
    assert len(set(heads)) == len(heads)
    for head, length in done:
        assert head in posted and 0 <= length <= posted[head]


TARGETS = {"chain walker and available index": walk_once, "used index and entries": reap_once}


def run(target: str, count: int, seed: int, seconds: float = float("inf")) -> tuple[int, float]:
    """Inputs run (``count``, or fewer when ``seconds`` ran out first) and the time taken."""
    rng, ring, fn = random.Random(seed), Ring(), TARGETS[target]
    start = time.perf_counter()
    for done in range(count):
        if done % 1000 == 0 and time.perf_counter() - start > seconds:
            return done, time.perf_counter() - start
        fn(ring, rng)
    return count, time.perf_counter() - start


@pytest.mark.parametrize("target", list(TARGETS))
def test_mutated_rings_bounded(target):
    assert run(target, SHORT, seed=11)[0] == SHORT


@pytest.mark.slow
@pytest.mark.parametrize("target", list(TARGETS))
def test_mutated_rings_long(target):
    """IRONACCEL_FUZZ_EXAMPLES inputs, or as many as IRONACCEL_FUZZ_SECONDS allow (no limit by default)."""
    done, seconds = run(target, LONG, seed=2026, seconds=LONG_SECONDS)
    print(f"\nfuzz-virtio ring, {target}: {done} inputs, {seconds:.1f} s ({done / seconds:,.0f}/s)")
    assert done > 0
