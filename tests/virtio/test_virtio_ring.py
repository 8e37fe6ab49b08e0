"""The split virtqueue: layout, driver/device round trips, notification suppression, and a device
side that rejects every hostile ring or chain with a clear error (never a hang, never a stray access).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ironaccel.core.errors import InvalidArgument, OutOfBounds
from ironaccel.virtio.virtqueue import (
    DESC_F_INDIRECT,
    DESC_F_NEXT,
    DESC_F_WRITE,
    F_EVENT_IDX,
    F_INDIRECT_DESC,
    ChainError,
    GuestMemory,
    MemoryRegion,
    QueueFull,
    RingAddresses,
    RingError,
    RingLayout,
    avail_bytes,
    desc_bytes,
    need_event,
    used_bytes,
)
from ironaccel.virtio.virtqueue_device import DeviceQueue
from ironaccel.virtio.virtqueue_driver import DriverQueue, IndirectArea

BASE = 0x4000_0000  # guest address of the region: guest addresses are not offsets
MEM = 1 << 20


class Rig:
    """One region: the ring at its start, indirect tables after it, data from DATA on."""

    DATA = 0x40000

    def __init__(self, size: int = 8, features: int = 0, start: int = 0, max_chain: int = 256) -> None:
        self.buf = bytearray(MEM)
        self.memory = GuestMemory([MemoryRegion(BASE, MEM, memoryview(self.buf))])
        self.layout = RingLayout.of(size)
        self.addrs = RingAddresses.contiguous(BASE, self.layout)
        indirect = IndirectArea(BASE + 0x10000, 16)
        mem, addrs = self.memory, self.addrs
        self.driver = DriverQueue(mem, size, addrs, features=features, indirect=indirect, start_index=start)
        self.device = DeviceQueue(mem, size, addrs, features=features, max_chain=max_chain, next_avail=start)

    def put(self, offset: int, data: bytes) -> int:
        self.buf[self.DATA + offset : self.DATA + offset + len(data)] = data
        return BASE + self.DATA + offset

    def desc(self, index: int, addr: int, length: int, flags: int, nxt: int = 0) -> None:
        struct.pack_into("<QIHH", self.buf, self.layout.desc + 16 * index, addr, length, flags, nxt)

    def make_available(self, *heads: int, idx: int | None = None) -> None:
        """Bypass the driver: write ring entries and the index by hand (a hostile guest)."""
        size = self.layout.size
        for i, head in enumerate(heads):
            struct.pack_into("<H", self.buf, self.layout.avail + 4 + 2 * (i % size), head)
        struct.pack_into("<H", self.buf, self.layout.avail + 2, len(heads) if idx is None else idx)


# ---- layout ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 32, 64, 128, 256])
def test_layout_areas_are_aligned_and_disjoint(size):
    lay = RingLayout.of(size)
    assert lay.desc % 16 == 0 and lay.avail % 2 == 0 and lay.used % 4 == 0
    assert lay.desc + desc_bytes(size) <= lay.avail
    assert lay.avail + avail_bytes(size) <= lay.used
    assert lay.total == lay.used + used_bytes(size)
    assert (desc_bytes(size), avail_bytes(size), used_bytes(size)) == (16 * size, 6 + 2 * size, 6 + 8 * size)


@pytest.mark.parametrize("size", [0, 3, 12, 257, 512, -8, 2.0, "8"])
def test_layout_rejects_sizes_that_are_not_powers_of_two_up_to_256(size):
    with pytest.raises(OutOfBounds, match="power of two"):
        RingLayout.of(size)


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_need_event_is_true_exactly_when_the_event_entry_was_published(event, new, old):
    published = {(old + i) & 0xFFFF for i in range((new - old) & 0xFFFF)}  # entries old .. new-1
    assert need_event(event, new, old) == (event in published)


def test_need_event_fires_exactly_when_the_event_index_is_crossed():
    assert need_event(5, 6, 5)  # entry 5 published
    assert not need_event(5, 5, 4)  # not yet
    assert need_event(5, 9, 3)  # crossed within a batch
    assert not need_event(5, 9, 6)  # crossed earlier, already signalled
    assert need_event(0xFFFF, 1, 0xFFFE)  # across the wrap


def test_guest_memory_checks_every_range():
    mem = GuestMemory([MemoryRegion(0x1000, 0x100, memoryview(bytearray(0x100)))])
    assert len(mem.slice(0x1000, 0x100)) == 0x100
    assert len(mem.slice(0x1100, 0)) == 0
    for addr, length in [(0xFFF, 1), (0x10FF, 2), (0x1000, -1), (0, 16), (2**64 - 1, 2), (0x1100, 1)]:
        with pytest.raises(OutOfBounds):
            mem.slice(addr, length)
    with pytest.raises(OutOfBounds, match="overlaps"):
        GuestMemory([MemoryRegion(0, 16, memoryview(bytearray(16))), MemoryRegion(8, 16, memoryview(bytearray(16)))])
    with pytest.raises(OutOfBounds, match="1 to 8 regions"):
        GuestMemory([])


# ---- round trips ------------------------------------------------------------------------------------

FEATURES = [0, F_EVENT_IDX, F_INDIRECT_DESC, F_EVENT_IDX | F_INDIRECT_DESC]


@pytest.mark.parametrize("features", FEATURES)
def test_one_request_and_response_round_trip(features):
    rig = Rig(features=features)
    req = rig.put(0, b"request!")
    head = rig.driver.post([(req, 8)], [(BASE + Rig.DATA + 64, 32)])
    assert rig.driver.kick_needed()
    chain = rig.device.pop()
    assert chain is not None and chain.head == head
    assert chain.gather() == b"request!" and chain.writable_bytes == 32
    used = chain.scatter(b"response")
    rig.device.complete(chain.head, used)
    assert rig.device.needs_call()
    assert rig.driver.reap() == [(head, 8)]
    assert bytes(rig.buf[Rig.DATA + 64 : Rig.DATA + 72]) == b"response"
    assert rig.device.pop() is None and rig.driver.in_flight == 0


chunks = st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(FEATURES),
    st.sampled_from([0, 0xFFF0, 0xFFFF]),
    st.lists(st.tuples(chunks, st.lists(st.integers(1, 48), min_size=1, max_size=5)), min_size=1, max_size=40),
)
def test_chains_of_any_shape_survive_the_round_trip_across_the_index_wrap(features, start, chains):
    """Requests split over several regions arrive as one byte string; responses scatter in order;
    indices wrap past 0xFFFF; completion order is the device's (here: reversed pairs)."""
    rig = Rig(size=16, features=features, start=start)
    offset = 0
    pending: dict[int, tuple[bytes, list[tuple[int, int]]]] = {}
    for parts, out_lengths in chains:
        readable = []
        for part in parts:
            readable.append((rig.put(offset, part), len(part)))
            offset += len(part)
        writable = [(BASE + Rig.DATA + offset + sum(out_lengths[:i]), n) for i, n in enumerate(out_lengths)]
        offset += sum(out_lengths)
        try:
            head = rig.driver.post(readable, writable)
        except QueueFull:
            _drain(rig, pending)
            head = rig.driver.post(readable, writable)
        pending[head] = (b"".join(parts), writable)
        offset %= 0x20000
    _drain(rig, pending)
    assert rig.driver.in_flight == 0 and rig.driver.free_descriptors == 16


def _drain(rig: Rig, pending: dict) -> None:
    chains = []
    while (chain := rig.device.pop()) is not None:
        expected, writable = pending[chain.head]
        assert chain.gather() == expected
        assert chain.writable_bytes == sum(n for _, n in writable)
        chains.append(chain)
    answers = {}
    for chain in reversed(chains):  # out of order
        answer = bytes(range(chain.head, chain.head + min(chain.writable_bytes, 7)))
        rig.device.complete(chain.head, chain.scatter(answer))
        answers[chain.head] = answer
    got = rig.driver.reap()
    assert [h for h, _ in got] == [c.head for c in reversed(chains)]
    for head, length in got:
        _, writable = pending.pop(head)
        data = b"".join(bytes(rig.memory.slice(a, n)) for a, n in writable)
        assert data[:length] == answers[head]


def test_a_full_queue_is_backpressure_and_publishes_nothing():
    rig = Rig(size=2)
    req, resp = rig.put(0, b"x"), BASE + Rig.DATA + 16
    rig.driver.post([(req, 1)], [(resp, 1)])
    with pytest.raises(QueueFull):
        rig.driver.post([(req, 1)], [(resp, 1)])
    assert rig.driver.avail_idx == 1 and rig.driver.in_flight == 1
    with pytest.raises(InvalidArgument, match="request and one response"):
        rig.driver.post([(req, 1)], [])


def test_indirect_chains_take_one_ring_descriptor():
    rig = Rig(size=2, features=F_INDIRECT_DESC)
    req = rig.put(0, b"abcdef")
    regions = [(req + i, 1) for i in range(6)]
    rig.driver.post(regions, [(BASE + Rig.DATA + 64, 4)] * 3)
    rig.driver.post(regions, [(BASE + Rig.DATA + 64, 4)])
    assert rig.driver.free_descriptors == 0
    a, b = rig.device.pop(), rig.device.pop()
    assert a.gather() == b.gather() == b"abcdef" and a.writable_bytes == 12


# ---- notification suppression ----------------------------------------------------------------------


@pytest.mark.parametrize("features", [0, F_EVENT_IDX])
def test_kick_suppression_and_the_recheck_that_prevents_lost_wakeups(features):
    rig = Rig(features=features)
    req, resp = rig.put(0, b"x"), BASE + Rig.DATA + 16
    rig.device.suppress_kicks()
    rig.driver.post([(req, 1)], [(resp, 1)])
    assert rig.driver.kick_needed() is (features == F_EVENT_IDX)  # event idx: the initial event is entry 0
    rig.device.pop()
    rig.driver.post([(req, 1)], [(resp, 1)])  # races with the device going idle
    assert not rig.driver.kick_needed()
    assert rig.device.enable_kicks() is True, "the recheck must see the chain posted meanwhile"
    rig.device.pop()
    assert rig.device.enable_kicks() is False
    rig.driver.post([(req, 1)], [(resp, 1)])
    assert rig.driver.kick_needed()


@pytest.mark.parametrize("features", [0, F_EVENT_IDX])
def test_call_suppression_and_its_recheck(features):
    rig = Rig(features=features)
    req, resp = rig.put(0, b"x"), BASE + Rig.DATA + 16
    for _ in range(3):
        rig.driver.post([(req, 1)], [(resp, 1)])
    chains = [rig.device.pop() for _ in range(3)]
    rig.driver.disable_calls()
    rig.device.complete(chains[0].head, 0)
    if features == 0:
        assert not rig.device.needs_call()
    assert rig.driver.enable_calls() is True  # the entry published meanwhile is seen
    rig.driver.reap()
    assert rig.driver.enable_calls() is False
    rig.device.complete(chains[1].head, 0)
    assert rig.device.needs_call()
    rig.device.complete(chains[2].head, 0)
    assert rig.device.needs_call() is (features == 0)  # event idx: asked once, for the first entry only


# ---- hostile rings and chains: the device side ------------------------------------------------------


def _reject(rig: Rig, match: str) -> ChainError:
    with pytest.raises(ChainError, match=match) as info:
        rig.device.pop()
    rig.device.reject(info.value)
    assert struct.unpack_from("<HHII", rig.buf, rig.layout.used)[1:] == (1, info.value.head, 0)
    return info.value


def test_descriptor_loop_is_rejected():
    rig = Rig(size=8)
    rig.desc(0, BASE + Rig.DATA, 4, DESC_F_NEXT, 1)
    rig.desc(1, BASE + Rig.DATA, 4, DESC_F_NEXT | DESC_F_WRITE, 0)
    rig.make_available(0)
    _reject(rig, "visited twice")


def test_self_loop_in_an_indirect_table_is_rejected():
    rig = Rig(size=8, features=F_INDIRECT_DESC)
    table = BASE + Rig.DATA + 0x1000
    rig.desc(0, table, 32, DESC_F_INDIRECT)
    struct.pack_into("<QIHHQIHH", rig.buf, Rig.DATA + 0x1000, BASE, 4, DESC_F_NEXT, 1, BASE, 4, DESC_F_NEXT, 1)
    rig.make_available(0)
    _reject(rig, "visited twice")


@pytest.mark.parametrize(
    ("addr", "length", "match"),
    [
        (0, 4, "outside guest memory"),
        (BASE - 1, 4, "outside guest memory"),
        (BASE + MEM - 2, 4, "outside guest memory"),
        (2**64 - 2, 4, "outside guest memory"),
        (BASE, 0, "length 0"),
    ],
)
def test_bad_addresses_and_lengths_are_rejected(addr, length, match):
    rig = Rig()
    rig.desc(0, addr, length, DESC_F_NEXT, 1)
    rig.desc(1, BASE + Rig.DATA, 4, DESC_F_WRITE)
    rig.make_available(0)
    _reject(rig, match)


@pytest.mark.parametrize(
    ("descs", "match"),
    [
        ([(DESC_F_WRITE | DESC_F_NEXT, 1), (0, 0)], "follows a device-writable"),
        ([(0, 0)], "no device-writable"),
        ([(DESC_F_WRITE, 0)], "no device-readable"),
        ([(DESC_F_NEXT, 9), (DESC_F_WRITE, 0)], "outside the descriptor table"),
        ([(DESC_F_NEXT | 8, 1), (DESC_F_WRITE, 0)], "unknown flags"),
        ([(DESC_F_INDIRECT, 0)], "not negotiated"),
    ],
)
def test_wrong_directions_and_bad_links_are_rejected(descs, match):
    rig = Rig(size=8)
    for i, (flags, nxt) in enumerate(descs):
        rig.desc(i, BASE + Rig.DATA, 4, flags, nxt)
    rig.make_available(0)
    _reject(rig, match)


@pytest.mark.parametrize(
    ("length", "flags", "inner_flags", "match"),
    [
        (24, DESC_F_INDIRECT, 0, "multiple of 16"),
        (0, DESC_F_INDIRECT, 0, "multiple of 16"),
        (32, DESC_F_INDIRECT | DESC_F_NEXT, 0, "NEXT set"),
        (32, DESC_F_INDIRECT, DESC_F_INDIRECT, "inside an indirect table"),
        (16 * 300, DESC_F_INDIRECT, 0, "exceed the limit"),
    ],
)
def test_malformed_indirect_tables_are_rejected(length, flags, inner_flags, match):
    rig = Rig(size=8, features=F_INDIRECT_DESC)
    table = BASE + Rig.DATA + 0x1000
    rig.desc(0, table, length, flags, 1)
    struct.pack_into("<QIHH", rig.buf, Rig.DATA + 0x1000, table, 32, inner_flags, 0)
    rig.make_available(0)
    _reject(rig, match)


def test_chain_length_bound_counts_descriptors_after_flattening():
    rig = Rig(size=8, features=F_INDIRECT_DESC, max_chain=4)
    table = BASE + Rig.DATA + 0x1000
    rig.desc(0, BASE + Rig.DATA, 4, DESC_F_NEXT, 1)
    rig.desc(1, table, 16 * 4, DESC_F_INDIRECT)  # 1 direct + 4 indirect = 5 > 4
    for i in range(4):
        struct.pack_into("<QIHH", rig.buf, Rig.DATA + 0x1000 + 16 * i, BASE, 4, DESC_F_WRITE | DESC_F_NEXT, i + 1)
    rig.make_available(0)
    _reject(rig, "exceed the limit 4")


def test_request_bytes_are_bounded():
    rig = Rig()
    rig.device.max_request = 100
    rig.desc(0, BASE, 64, DESC_F_NEXT, 1)
    rig.desc(1, BASE, 64, DESC_F_NEXT, 2)
    rig.desc(2, BASE, 4, DESC_F_WRITE)
    rig.make_available(0)
    _reject(rig, "exceed 100 bytes")


def test_an_available_index_that_jumps_breaks_the_ring():
    rig = Rig(size=8)
    rig.make_available(0, idx=9)
    with pytest.raises(RingError, match="9 entries ahead"):
        rig.device.pop()


def test_a_head_outside_the_table_breaks_the_ring():
    rig = Rig(size=8)
    rig.make_available(8)
    with pytest.raises(RingError, match="names descriptor 8"):
        rig.device.pop()


def test_a_ring_outside_guest_memory_is_refused():
    buf = bytearray(4096)
    mem = GuestMemory([MemoryRegion(BASE, 4096, memoryview(buf))])
    with pytest.raises(RingError, match="used ring"):
        DeviceQueue(mem, 256, RingAddresses(BASE, BASE, BASE + 4000))
    with pytest.raises(RingError, match="aligned"):
        DeviceQueue(mem, 8, RingAddresses(BASE + 8, BASE + 1024, BASE + 2048))


@settings(max_examples=400, deadline=1000)
@given(
    st.sampled_from([0, F_INDIRECT_DESC]),
    st.lists(
        st.tuples(
            st.sampled_from([BASE, BASE + 100, BASE + MEM - 8, 0, 2**64 - 1, BASE + Rig.DATA]),
            st.sampled_from([0, 1, 8, 16, 48, 2**32 - 1]),
            st.integers(0, 0xFFFF),
            st.integers(0, 0xFFFF),
        ),
        min_size=8,
        max_size=8,
    ),
    st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=8),
    st.integers(0, 0xFFFF),
    st.binary(min_size=0, max_size=128),
)
def test_hostile_tables_never_hang_and_never_escape_guest_memory(features, descs, heads, idx, table_bytes):
    """Arbitrary descriptors, heads, indices and indirect tables: every pop either yields a chain
    that obeys every rule or raises ChainError/RingError; the walk always ends."""
    rig = Rig(size=8, features=features)
    for i, (addr, length, flags, nxt) in enumerate(descs):
        rig.desc(i, addr, length, flags, nxt)
    rig.buf[Rig.DATA : Rig.DATA + len(table_bytes)] = table_bytes
    rig.make_available(*heads, idx=idx)
    for _ in range(10):
        try:
            chain = rig.device.pop()
        except ChainError as exc:
            assert 0 <= exc.head < 8
            rig.device.reject(exc)
            continue
        except RingError:
            return
        if chain is None:
            return
        assert chain.readable and chain.writable
        assert 2 <= len(chain.readable) + len(chain.writable) <= 256
        assert chain.readable_bytes == sum(len(r) for r in chain.readable)
        assert all(len(r) > 0 for r in chain.readable + chain.writable)
        rig.device.complete(chain.head, chain.scatter(b"z" * min(4, chain.writable_bytes)))


# ---- the driver distrusts the device -------------------------------------------------------------------


def test_driver_rejects_used_entries_it_did_not_post():
    rig = Rig(size=4)
    head = rig.driver.post([(rig.put(0, b"x"), 1)], [(BASE + Rig.DATA + 16, 2)])
    rig.device.pop()
    rig.device.complete(3, 1)  # not in flight
    with pytest.raises(RingError, match="not in flight"):
        rig.driver.reap()
    rig = Rig(size=4)
    head = rig.driver.post([(rig.put(0, b"x"), 1)], [(BASE + Rig.DATA + 16, 2)])
    rig.device.pop()
    rig.device.complete(head, 3)
    with pytest.raises(RingError, match="claims 3 bytes"):
        rig.driver.reap()
    rig = Rig(size=4)
    struct.pack_into("<H", rig.buf, rig.layout.used + 2, 2)
    with pytest.raises(RingError, match="2 used entries with 0"):
        rig.driver.reap()


# ---- two processes polling one ring --------------------------------------------------------------------

DRIVER_PROCESS = """
import mmap, sys
sys.path.insert(0, {src!r})
from ironaccel.virtio.virtqueue import GuestMemory, MemoryRegion, RingAddresses, RingLayout, QueueFull
from ironaccel.virtio.virtqueue_driver import DriverQueue
fd, count = {fd}, {count}
view = memoryview(mmap.mmap(fd, {size}))
mem = GuestMemory([MemoryRegion({base}, {size}, view)])
lay = RingLayout.of(16)
drv = DriverQueue(mem, 16, RingAddresses.contiguous({base}, lay))
view[{go}] = 1
posted = done = 0
while done < count:
    while posted < count:
        try:
            drv.post([({base} + 0x1000, 4)], [({base} + 0x2000, 4)])
        except QueueFull:
            break
        posted += 1
    done += len(drv.reap())
print(done)
"""


def test_indices_never_tear_while_both_sides_poll(tmp_path):
    """The driver (another process) and the device (this one) poll the same ring without any
    notification: every index either side reads must be one the other really wrote."""
    import mmap
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    size, count, go = 1 << 16, 30000, 0x8000
    fd = os.memfd_create("ring")
    os.ftruncate(fd, size)
    view = memoryview(mmap.mmap(fd, size))
    src = str(Path(__file__).resolve().parents[2] / "src")
    script = DRIVER_PROCESS.format(src=src, fd=fd, count=count, size=size, base=BASE, go=go)
    proc = subprocess.Popen([sys.executable, "-c", script], pass_fds=[fd], stdout=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while not view[go] and time.monotonic() < end:
            time.sleep(0.001)
        mem = GuestMemory([MemoryRegion(BASE, size, view)])
        device = DeviceQueue(mem, 16, RingAddresses.contiguous(BASE, RingLayout.of(16)))
        served = 0
        end = time.monotonic() + 120
        while served < count and time.monotonic() < end:
            chain = device.pop()  # RingError here would be a torn available index
            if chain is not None:
                device.complete(chain.head, 1)
                served += 1
        out, _ = proc.communicate(timeout=60)
        assert served == count and proc.returncode == 0 and out.strip() == str(count)
    finally:
        proc.kill()
        proc.wait()
        view.release()
        os.close(fd)
