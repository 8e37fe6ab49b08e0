"""The shared-memory transport between guest processes and the daemon, with an echo engine.

Covers: set-up and commands over a real socket, memfd and eventfds; several guests (threads and
separate processes) at once; sessions closed when a guest leaves or is killed; bounded, refused
set-up messages; malformed chains answered with used length 0; a broken ring reported to the guest;
whole-device reset; clean daemon shutdown.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel.core.errors import DeviceLost, InvalidArgument, ResourceLimit
from ironaccel.virtio import transport as tp
from ironaccel.virtio.daemon import Daemon
from ironaccel.virtio.daemon_connection import DeviceOptions
from ironaccel.virtio.transport import ProtocolError, Request
from ironaccel.virtio.transport_arena import Arena
from ironaccel.virtio.transport_guest import GuestTransport
from ironaccel.virtio.virtqueue import DESC_F_NEXT, DESC_F_WRITE, F_EVENT_IDX, F_INDIRECT_DESC, F_VERSION_1

SRC = Path(__file__).resolve().parents[2] / "src"


class EchoEngine:
    """Sessions answer b"echo:" + request; the engine remembers which sessions are open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.opened = 0
        self.closed = 0

    def connect(self) -> EchoSession:
        with self.lock:
            self.opened += 1
        return EchoSession(self)

    @property
    def live(self) -> int:
        with self.lock:
            return self.opened - self.closed


class EchoSession:
    def __init__(self, engine: EchoEngine) -> None:
        self.engine = engine

    def process(self, request: bytes, capacity: int) -> bytes:
        if request == b"boom":
            raise RuntimeError("engine fault")
        return (b"echo:" + request)[:capacity]

    def close(self) -> None:
        with self.engine.lock:
            self.engine.closed += 1


@pytest.fixture
def daemon(tmp_path):
    engine = EchoEngine()
    path = str(tmp_path / "accel.sock")
    d = Daemon(path, engine.connect, DeviceOptions(config=bytes(range(16))))
    d.listen()
    thread = threading.Thread(target=d.serve)
    thread.start()
    d.engine = engine
    yield d
    d.stop()
    thread.join(20)
    assert not thread.is_alive(), "the daemon did not stop"
    assert not os.path.exists(path), "the socket file was left behind"
    assert engine.live == 0, "a session outlived the daemon"


def _eventually(predicate, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# ---- the happy path -------------------------------------------------------------------------------------


ALL_FEATURES = F_VERSION_1 | F_EVENT_IDX | F_INDIRECT_DESC | tp.F_PROTOCOL_FEATURES


@pytest.mark.parametrize("features", [F_VERSION_1, ALL_FEATURES])
def test_commands_round_trip_through_shared_memory(daemon, features):
    with GuestTransport(daemon.path, features=features, queue_size=8) as guest:
        assert guest.features == features
        if features & tp.F_PROTOCOL_FEATURES:
            assert guest.config == bytes(range(16))
        assert guest.request([b"hel", b"lo"], 64) == b"echo:hello"
        assert guest.request([b"abcdef"], 7) == b"echo:ab"  # the device writes no more than offered
        for i in range(50):  # more commands than the queue has entries: descriptors are recycled
            assert guest.request([bytes([i]) * i or b"-"], 300) == b"echo:" + (bytes([i]) * i or b"-")
        big = os.urandom(3 << 20)
        assert guest.request([big], len(big) + 5) == b"echo:" + big
    assert _eventually(lambda: daemon.engine.live == 0), "disconnecting did not close the session"


def test_many_threads_share_one_guest_connection(daemon):
    errors = []
    with GuestTransport(daemon.path, queue_size=4, arena_bytes=1 << 20) as guest:

        def work(k: int) -> None:
            try:
                for i in range(100):
                    msg = f"{k}:{i}".encode() * (1 + i % 7)
                    assert guest.request([msg], 4096) == b"echo:" + msg
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors, errors[0]


def test_an_engine_fault_completes_the_chain_empty_and_the_guest_goes_on(daemon):
    with GuestTransport(daemon.path) as guest:
        assert guest.request([b"boom"], 64) == b""
        assert guest.request([b"next"], 64) == b"echo:next"


def test_requests_larger_than_the_arena_are_refused_before_anything_is_sent(daemon):
    with GuestTransport(daemon.path, arena_bytes=1 << 16) as guest:
        with pytest.raises(InvalidArgument, match="arena"):
            guest.request([bytes(1 << 16)], 64)
        assert guest.request([b"ok"], 8) == b"echo:ok"


GUEST_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {src!r})
    from ironaccel.virtio.transport_guest import GuestTransport
    with GuestTransport({path!r}) as guest:
        for i in range(300):
            msg = b"%d:%d" % ({k}, i) * 50
            assert guest.request([msg], 8192) == b"echo:" + msg, i
        print("ok", {k})
    """
)


def test_two_guest_processes_are_served_at_once(daemon):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GUEST_SCRIPT.format(src=str(SRC), path=daemon.path, k=k)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (1, 2)
    ]
    assert _eventually(lambda: daemon.engine.opened >= 2 or any(p.poll() is not None for p in procs))
    for k, p in zip((1, 2), procs, strict=True):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == f"ok {k}"
    assert daemon.engine.opened == 2
    assert _eventually(lambda: daemon.engine.live == 0)


def test_a_guest_that_dies_has_its_session_closed(daemon):
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(SRC)!r})
        from ironaccel.virtio.transport_guest import GuestTransport
        guest = GuestTransport({daemon.path!r})
        guest.request([b"hi"], 16)
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert daemon.engine.live == 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert _eventually(lambda: daemon.engine.live == 0), "a dead guest's session stayed open"
        assert _eventually(lambda: daemon.guests == 0)
    finally:
        proc.kill()
        proc.wait()


def test_reset_gives_a_fresh_session_and_a_fresh_ring(daemon):
    with GuestTransport(daemon.path) as guest:
        guest.request([b"a"], 16)
        guest.reset()
        assert daemon.engine.opened == 2 and daemon.engine.live == 1
        assert guest.request([b"b"], 16) == b"echo:b"


def test_a_daemon_that_goes_away_is_device_lost_for_the_guest(tmp_path):
    engine = EchoEngine()
    d = Daemon(str(tmp_path / "s"), engine.connect)
    d.listen()
    thread = threading.Thread(target=d.serve)
    thread.start()
    guest = GuestTransport(d.path)
    assert guest.request([b"x"], 8) == b"echo:x"
    d.stop()
    thread.join(20)
    with pytest.raises(DeviceLost):
        guest.request([b"y"], 8)
    guest.close()
    with pytest.raises(DeviceLost, match="cannot reach"):
        GuestTransport(d.path)


# ---- a hostile front end over the socket ------------------------------------------------------------------


def _raw(daemon) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(daemon.path)
    sock.settimeout(10)
    tp.send(sock, Request.SET_FEATURES, tp.U64.pack(F_VERSION_1 | tp.F_PROTOCOL_FEATURES))
    tp.send(sock, Request.SET_PROTOCOL_FEATURES, tp.U64.pack(tp.ProtocolFeature.REPLY_ACK))
    return sock


def _refused(sock: socket.socket, request: int, payload: bytes = b"", fds=()) -> None:
    """The daemon answers the request with a failure acknowledgement (and stays up)."""
    tp.send(sock, request, payload, fds, tp.VERSION | tp.NEED_REPLY)
    (status,) = tp.expect_reply(sock, request).expect(tp.U64)
    assert status != 0


def _memfd(size: int, seal: bool = True) -> int:
    fd = os.memfd_create("t", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def test_hostile_set_up_messages_are_refused_and_the_daemon_serves_others(daemon, tmp_path):
    sock = _raw(daemon)
    table = lambda size, offset=0: tp.encode_mem_table([tp.RegionDesc(1 << 32, size, 1 << 32, offset)])  # noqa: E731
    fds = []
    try:
        unsealed = _memfd(1 << 16, seal=False)
        small = _memfd(4096)
        fds += [unsealed, small]
        _refused(sock, Request.SET_MEM_TABLE, table(1 << 16), [unsealed])  # can be truncated under the daemon
        _refused(sock, Request.SET_MEM_TABLE, table(1 << 16), [small])  # region larger than the file
        _refused(sock, Request.SET_MEM_TABLE, table(4096, 100), [small])  # unaligned offset
        _refused(sock, Request.SET_MEM_TABLE, table(2 << 30), [small])  # beyond the daemon's bound
        _refused(sock, Request.SET_MEM_TABLE, table(4096), [])  # no descriptor
        plain = tmp_path / "plain"
        plain.write_bytes(bytes(4096))
        with open(plain, "rb") as f:
            _refused(sock, Request.SET_MEM_TABLE, table(4096), [f.fileno()])  # a plain file, not a sealed memfd
        bad_count = struct.pack("<II", 9, 0) + bytes(9 * 32)
        _refused(sock, Request.SET_MEM_TABLE, bad_count, [small])
        _refused(sock, Request.SET_VRING_NUM, tp.VRING_STATE.pack(0, 100))  # not a power of two
        _refused(sock, Request.SET_VRING_NUM, tp.VRING_STATE.pack(0, 512))
        _refused(sock, Request.SET_VRING_NUM, tp.VRING_STATE.pack(1, 8))  # a second queue
        _refused(sock, Request.SET_VRING_BASE, tp.VRING_STATE.pack(0, 1 << 16))
        _refused(sock, Request.SET_VRING_ADDR, tp.VRING_ADDR.pack(0, 1, 0, 0, 0, 0))  # dirty logging
        r, w = os.pipe()
        fds += [r, w]
        _refused(sock, Request.SET_VRING_KICK, tp.U64.pack(0), [r])  # a pipe is not an eventfd
        _refused(sock, Request.SET_VRING_CALL, tp.U64.pack(tp.VRING_NOFD))
        _refused(sock, Request.GET_CONFIG, tp.CONFIG_HEADER.pack(8, 16, 0) + bytes(16))  # past the config
        _refused(sock, Request.SET_FEATURES, tp.U64.pack(1 << 40))  # never offered
        _refused(sock, 999)  # unknown request
        # The ring must lie inside guest memory.
        mem = _memfd(1 << 16)
        fds.append(mem)
        tp.send(sock, Request.SET_MEM_TABLE, table(1 << 16), [mem], tp.VERSION | tp.NEED_REPLY)
        assert tp.expect_reply(sock, Request.SET_MEM_TABLE).expect(tp.U64) == (0,)
        tp.send(sock, Request.SET_VRING_NUM, tp.VRING_STATE.pack(0, 256))
        past_end = tp.VRING_ADDR.pack(0, 0, (1 << 32) + 0xF000, (1 << 32) + 0xF800, 1 << 32, 0)
        tp.send(sock, Request.SET_VRING_ADDR, past_end)
        tp.send(sock, Request.SET_VRING_ENABLE, tp.VRING_STATE.pack(0, 1))
        kick = os.eventfd(0)
        fds.append(kick)
        _refused(sock, Request.SET_VRING_KICK, tp.U64.pack(0), [kick])
    finally:
        for fd in fds:
            os.close(fd)
    with GuestTransport(daemon.path) as guest:  # everybody else is still served
        assert guest.request([b"fine"], 16) == b"echo:fine"
    # Without REPLY_ACK, a refused message ends that connection (and only it).
    sock2 = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock2.connect(daemon.path)
    sock2.settimeout(10)
    tp.send(sock2, Request.SET_VRING_NUM, tp.VRING_STATE.pack(0, 3))
    assert sock2.recv(1) == b""
    sock.close()
    sock2.close()
    assert _eventually(lambda: daemon.engine.live == 0)


def test_oversized_and_truncated_messages_end_the_connection(daemon):
    for data in (
        tp.HEADER.pack(Request.SET_OWNER, tp.VERSION, 1 << 30),  # declares a 1 GiB payload
        tp.HEADER.pack(Request.SET_OWNER, 0x2, 0),  # wrong version
    ):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(daemon.path)
        sock.settimeout(10)
        sock.sendall(data)
        assert sock.recv(1) == b"", "the daemon kept a connection that broke the protocol"
        sock.close()
    with GuestTransport(daemon.path) as guest:
        assert guest.request([b"still"], 16) == b"echo:still"


def test_too_many_descriptors_in_one_message_are_closed_not_leaked(daemon):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(daemon.path)
    sock.settimeout(10)
    fds = [os.eventfd(0) for _ in range(12)]
    try:
        tp.send(sock, Request.SET_OWNER, b"", fds)
        assert sock.recv(1) == b""
    finally:
        for fd in fds:
            os.close(fd)
        sock.close()


# ---- a hostile driver on the ring ---------------------------------------------------------------------------


def test_malformed_chains_come_back_empty_and_later_chains_are_served(daemon):
    with GuestTransport(daemon.path, features=F_VERSION_1 | tp.F_PROTOCOL_FEATURES, queue_size=8) as guest:
        drv = guest.driver
        base = 1 << 32
        # Hand-build a looping chain (desc 0 -> 1 -> 0) and publish it with the driver's books updated.
        struct.pack_into("<QIHH", drv._desc, 0, base + guest.arena.offset, 4, DESC_F_NEXT, 1)
        struct.pack_into("<QIHH", drv._desc, 16, base + guest.arena.offset, 4, DESC_F_NEXT | DESC_F_WRITE, 0)
        with guest._cond:
            drv._free.remove(0)
            drv._free.remove(1)
            drv._inflight[0] = ([0, 1], 4)
            guest._heads[0] = -1
            guest._blocks[-1] = (guest.arena.alloc(64), guest.arena.alloc(64))
            guest._abandoned.add(-1)
            struct.pack_into("<H", drv._avail, 4 + 2 * (drv.avail_idx % 8), 0)
            drv.avail_idx += 1
            struct.pack_into("<H", drv._avail, 2, drv.avail_idx)
            os.eventfd_write(guest._kick, 1)
        assert guest.request([b"after"], 16) == b"echo:after"
        assert _eventually(lambda: drv.free_descriptors == 8)


def test_a_broken_ring_stops_the_queue_and_the_guest_learns_it(daemon):
    guest = GuestTransport(daemon.path, queue_size=8)
    try:
        struct.pack_into("<H", guest.driver._avail, 2, 100)  # 100 entries ahead of the device: impossible
        os.eventfd_write(guest._kick, 1)
        guest.driver.avail_idx = 100
        with pytest.raises(DeviceLost, match="stopped the command queue"):
            guest.request([b"x"], 16, timeout=20)
    finally:
        guest.close()


# ---- the arena -----------------------------------------------------------------------------------------------


def test_arena_first_fit_merges_neighbours():
    arena = Arena(4096, 1024)
    a, b, c = arena.alloc(100), arena.alloc(64), arena.alloc(1)
    assert (a, b, c) == (4096, 4096 + 128, 4096 + 192)
    arena.free(b)
    assert arena.alloc(65) == 4096 + 256  # 128 bytes do not fit the 64-byte hole
    assert arena.alloc(64) == b  # but 64 do
    for block in (a, b, c, 4096 + 256):
        arena.free(block)
    assert arena.free_bytes == 1024 and arena.alloc(1024) == 4096
    with pytest.raises(InvalidArgument):
        arena.alloc(0)
    with pytest.raises(InvalidArgument):
        arena.alloc(2048)


@given(st.lists(st.tuples(st.booleans(), st.integers(1, 300)), max_size=60))
def test_arena_blocks_never_overlap_and_every_byte_comes_back(ops):
    arena = Arena(0, 4096)
    live: dict[int, int] = {}
    for is_alloc, n in ops:
        if is_alloc or not live:
            start = arena.alloc(n)
            if start is not None:
                size = (n + 63) & -64
                assert start % 64 == 0 and 0 <= start and start + size <= 4096
                assert all(start + size <= s or s + m <= start for s, m in live.items())
                live[start] = size
        else:
            start = sorted(live)[n % len(live)]
            arena.free(start)
            del live[start]
        assert arena.free_bytes == 4096 - sum(live.values())
    for start in list(live):
        arena.free(start)
    assert arena.alloc(4096) == 0


def test_protocol_errors_name_the_request():
    msg = tp.Message(Request.SET_VRING_NUM, tp.VERSION, b"\0" * 3)
    with pytest.raises(ProtocolError, match="SET_VRING_NUM payload is 3 bytes, expected 8"):
        msg.expect(tp.VRING_STATE)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.binary(min_size=16 * 8, max_size=16 * 8),
    st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=8),
    st.integers(0, 0xFFFF),
)
def test_a_guest_scribbling_on_its_live_ring_harms_only_itself(daemon, table, heads, idx):
    """Arbitrary descriptors, ring entries and index written over a running queue, then a kick: the
    daemon answers with empty chains or stops that queue; it never crashes, hangs or stops serving."""
    guest = GuestTransport(daemon.path, queue_size=8)
    try:
        drv = guest.driver
        drv._desc[:] = table
        for i, head in enumerate(heads):
            struct.pack_into("<H", drv._avail, 4 + 2 * i, head)
        struct.pack_into("<H", drv._avail, 2, idx)
        os.eventfd_write(guest._kick, 1)
        if idx:  # something is pending: the device must either return chains or report the ring broken
            end = time.monotonic() + 10
            while drv._used_w[1] == 0 and not select.select([guest._err], [], [], 0.001)[0]:
                assert time.monotonic() < end, "the daemon neither answered nor stopped the queue"
    finally:
        guest.close()
    with GuestTransport(daemon.path, queue_size=8) as other:
        assert other.request([b"still here"], 32) == b"echo:still here"


def test_a_new_memory_table_while_running_restarts_the_queue_where_it_stopped(daemon):
    with GuestTransport(daemon.path, queue_size=8) as guest:
        for i in range(5):
            assert guest.request([b"%d" % i], 16) == b"echo:%d" % i
        size = guest.region.size
        table = tp.encode_mem_table([tp.RegionDesc(1 << 32, size, 1 << 32, 0)])
        with guest._cond:
            guest._step(Request.SET_MEM_TABLE, table, [guest.region.fd])
        for i in range(20):  # indices continue from 5, across the ring's wrap
            assert guest.request([b"again %d" % i], 16) == b"echo:again %d" % i


def test_the_socket_is_private_and_guests_beyond_the_limit_are_turned_away(tmp_path):
    """Mode 0600 (the file system decides who connects); at most ``max_guests`` connections at once, the
    rest told the daemon is full and closed at accept; a place frees when a guest leaves."""
    engine = EchoEngine()
    path = str(tmp_path / "few.sock")
    d = Daemon(path, engine.connect, DeviceOptions(config=bytes(range(16))), max_guests=2)
    d.listen()
    thread = threading.Thread(target=d.serve)
    thread.start()
    try:
        assert os.stat(path).st_mode & 0o777 == 0o600
        first, second = GuestTransport(path), GuestTransport(path)
        with pytest.raises(ResourceLimit, match=r"daemon full \(2 guests\)"):
            GuestTransport(path, setup_timeout_s=5)
        assert first.request([b"a"], 16) == b"echo:a" and second.request([b"b"], 16) == b"echo:b"
        first.close()
        assert _eventually(lambda: d.guests == 1)
        with GuestTransport(path) as third:
            assert third.request([b"c"], 16) == b"echo:c"
        second.close()
    finally:
        d.stop()
        thread.join(20)
    assert not thread.is_alive() and engine.live == 0


def test_a_message_that_stalls_midway_ends_only_its_connection(tmp_path):
    """A guest that starts a message and stops sending is cut off after ``message_timeout_s``; others are
    served meanwhile."""
    engine = EchoEngine()
    path = str(tmp_path / "stall.sock")
    d = Daemon(path, engine.connect, DeviceOptions(config=bytes(range(16)), message_timeout_s=0.5))
    d.listen()
    thread = threading.Thread(target=d.serve)
    thread.start()
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        sock.settimeout(10)
        sock.sendall(tp.HEADER.pack(Request.SET_OWNER, tp.VERSION, 8)[:6])  # half a header, then nothing
        with GuestTransport(path) as other:
            assert other.request([b"meanwhile"], 32) == b"echo:meanwhile"
        start = time.monotonic()
        assert sock.recv(1) == b"", "the daemon kept a stalled connection"
        assert time.monotonic() - start < 5
        sock.close()
    finally:
        d.stop()
        thread.join(20)
    assert not thread.is_alive()
