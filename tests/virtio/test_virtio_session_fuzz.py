"""Hostile guests over the real socket and shared memory: the daemon never crashes, never hangs, never
lets one guest touch another's objects, and leaves nothing on the host once every guest has gone.

A victim guest connects, runs the add program and keeps its result. Attacker guests then connect one
after another, each with its own memfd, ring and engine session, and send what the engine fuzz sends
(``test_virtio_engine_fuzz.Attacker``: every opcode, ids of every kind and owner, bodies past every
bound, byte-mutated frames, short response areas) through the split ring, plus:

- the victim's ids, which must answer PERMISSION_DENIED, and the attacker's own ids after its device
  reset (RESET_DEVICE over the socket), which must answer STALE_OBJECT;
- ring scribbles: random descriptors, available entries and index written over its live queue and
  kicked, after which the daemon must either return chains or stop that queue (err eventfd) in time;
- disconnects at any point, with commands in flight.

After every attacker the victim's result must read back unchanged and a fresh guest must be served; at
the end ``live_resources()`` of the host accelerator is back to zero. The default run is bounded;
``make fuzz-virtio`` runs IRONACCEL_FUZZ_EXAMPLES commands (default 10^6) and prints the rate.
"""

from __future__ import annotations

import os
import random
import select
import struct
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_virtio_engine_fuzz import QUOTA, ZERO, Attacker

from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.core.errors import IronAccelError
from ironaccel.virtio import DeviceEngine
from ironaccel.virtio import wire as w
from ironaccel.virtio.daemon import for_engine
from ironaccel.virtio.transport_guest import GuestTransport
from virtio_guest import Guest

LONG_COMMANDS = int(os.environ.get("IRONACCEL_FUZZ_EXAMPLES", "0") or 0) or 1_000_000
LONG_SECONDS = float(os.environ.get("IRONACCEL_FUZZ_SECONDS", "0") or 0) or 600.0
EXPECTED = np.arange(11, 15, dtype=np.float32).tobytes()


class SocketSession:
    """The engine-session interface the fuzz helpers drive, carried over a real guest transport.

    With ``split``, a share of the commands travels as chains of two regions on either side, as a guest
    sends transfers of its own memory: the request's tail (after its first 32 bytes, the header and
    transfer prefix, or after a random cut) in a heap buffer of its own, or the response area cut into a
    header's room and a heap sink. The daemon must treat every such chain as any other."""

    def __init__(self, path: str, queue_size: int = 16, split: random.Random | None = None) -> None:
        self.transport = GuestTransport(path, queue_size=queue_size, arena_bytes=4 << 20, heap_bytes=1 << 20)
        self.transport.in_place_min = 1
        self.split = split

    def process(self, request: bytes, capacity: int) -> bytes:
        if not request or capacity <= 0:
            return b""  # a descriptor of zero bytes is the driver's own mistake: nothing to send
        rng, transport = self.split, self.transport
        how = rng.randrange(3) if rng is not None and capacity + len(request) < 1 << 19 else 0
        if how == 1 and len(request) > 1:
            cut = 32 if len(request) > 32 and rng.random() < 0.5 else rng.randrange(1, len(request))
            tail = transport.guest_buffer(len(request) - cut)
            try:
                tail[:] = request[cut:]
                return transport.request([request[:cut], tail], capacity, timeout=30)
            finally:
                transport.free_guest_buffer(tail)
        if how == 2 and capacity > w.HEADER_BYTES:
            sink = transport.guest_buffer(capacity - w.HEADER_BYTES)
            try:
                with transport.exchange_batch([([request], w.HEADER_BYTES, sink)], timeout=30) as answers:
                    used = answers.used(0)
                    return bytes(answers[0]) + bytes(sink[: max(0, used - w.HEADER_BYTES)])
            finally:
                transport.free_guest_buffer(sink)
        return transport.request([request], capacity, timeout=30)

    def reset(self) -> None:
        self.transport.reset()

    def close(self) -> None:
        self.transport.close()


class Host:
    """A daemon thread serving one CPU accelerator, with its books readable by the test."""

    def __init__(self, path: str) -> None:
        self.accelerator = CpuAccelerator()
        self.engine = DeviceEngine(self.accelerator, quota=QUOTA, close_wait=10)
        self.daemon = for_engine(path, self.engine)
        self.daemon.listen()
        self.thread = threading.Thread(target=self.daemon.serve, daemon=True)
        self.thread.start()
        self.path = path

    def check_alive(self) -> None:
        assert self.thread.is_alive(), "the daemon stopped"
        assert self.engine.lost is None

    def stop(self) -> None:
        self.daemon.stop()
        self.thread.join(30)
        assert not self.thread.is_alive()


def _victim(host: Host) -> tuple[Guest, list[int], int]:
    guest = Guest(SocketSession(host.path))  # type: ignore[arg-type]
    ctx, bufs, prog, queue = guest.add_setup()
    event = guest.submit(queue, prog, bufs).body.event_id
    guest.wait(event)
    return guest, [ctx, *bufs, prog, queue, event], bufs[2]


def _foreign_and_stale(rng: random.Random, attacker: Attacker, victim_ids: list[int]) -> None:
    """Commands naming the victim's objects answer PERMISSION_DENIED; the attacker's own ids after its
    reset answer STALE_OBJECT."""
    session = attacker.guest.session
    victim_id = rng.choice(victim_ids)
    for op in (w.Opcode.POLL_EVENT, w.Opcode.FREE_BUFFER, w.Opcode.DESTROY_CONTEXT, w.Opcode.UNLOAD_PROGRAM):
        assert attacker.guest.status(op, w.ObjectPayload(victim_id)) == "PERMISSION_DENIED"
    body = w.TransferBufferRequest(victim_id, 0, 16)
    assert attacker.guest.status(w.Opcode.READ_BUFFER, body) == "PERMISSION_DENIED"
    mine = attacker.guest.context()
    session.reset()
    attacker.forget()
    assert attacker.guest.status(w.Opcode.DESTROY_CONTEXT, w.ObjectPayload(mine)) == "STALE_OBJECT"


def _scribble(session: SocketSession, table: bytes, heads: list[int], idx: int) -> None:
    """Arbitrary descriptors and available entries over the live ring, then a kick; the daemon must
    answer with chains or stop the queue within 10 s."""
    guest = session.transport
    drv = guest.driver
    drv._desc[: len(table)] = table
    for i, head in enumerate(heads[: drv.size]):
        struct.pack_into("<H", drv._avail, 4 + 2 * i, head)
    before = drv._used_w[1]
    struct.pack_into("<H", drv._avail, 2, idx)
    os.eventfd_write(guest._kick, 1)
    if (idx - drv.avail_idx) & 0xFFFF:
        end = time.monotonic() + 10
        while drv._used_w[1] == before and not select.select([guest._err], [], [], 0.001)[0]:
            assert time.monotonic() < end, "the daemon neither answered nor stopped the queue"


def attack(host: Host, rng: random.Random, victim_ids: list[int], commands: int, scribble: tuple | None) -> int:
    """One attacker connection; returns the commands it sent."""
    session = SocketSession(host.path, split=random.Random(rng.random()))
    attacker = Attacker(rng, Guest(session), victim_ids)  # type: ignore[arg-type]
    sent = 0
    try:
        if rng.random() < 0.3:
            _foreign_and_stale(rng, attacker, victim_ids)
        for _ in range(commands):
            attacker.command()
            sent += 1
            if rng.random() < 0.005:
                session.reset()
                attacker.forget()
        if scribble is not None:
            _scribble(session, *scribble)
    except IronAccelError:
        pass  # the attacker's own transport broken (a stopped queue): only it is affected
    finally:
        if rng.random() < 0.2 and sent:
            # leave with a command in flight: the daemon must close the session all the same
            with_flight = threading.Thread(target=_quietly, args=(attacker, session), daemon=True)
            with_flight.start()
            time.sleep(rng.random() * 1e-3)
        session.close()
    return sent


def _quietly(attacker: Attacker, session: SocketSession) -> None:
    try:
        attacker.command()
    except (IronAccelError, AssertionError, OSError):
        pass


def _settle(host: Host) -> None:
    end = time.monotonic() + 30
    while time.monotonic() < end and (host.daemon.guests > 1 or len(host.engine.sessions) > 1):
        time.sleep(0.01)
    assert host.daemon.guests == 1 and len(host.engine.sessions) == 1, "an attacker's session outlived it"


def _finish(host: Host, victim: Guest, result: int) -> None:
    assert victim.read(result, 16) == EXPECTED
    victim.session.close()
    end = time.monotonic() + 30
    while time.monotonic() < end and (host.daemon.guests or host.accelerator.live_resources() != ZERO):
        host.engine.reclaim()
        time.sleep(0.01)
    assert host.daemon.guests == 0 and host.accelerator.live_resources() == ZERO
    assert host.engine.orphaned().total == 0 and host.engine.lost is None


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    host = Host(str(tmp_path_factory.mktemp("fuzz") / "fuzz.sock"))
    victim, ids, result = _victim(host)
    yield host, victim, ids, result
    _finish(host, victim, result)
    host.stop()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    commands=st.integers(0, 60),
    scribble=st.none()
    | st.tuples(
        st.binary(min_size=0, max_size=16 * 16),
        st.lists(st.integers(0, 0xFFFF), max_size=16),
        st.integers(0, 0xFFFF),
    ),
)
def test_hostile_guests_over_the_socket_never_reach_the_victim(hosted, seed, commands, scribble):
    host, victim, ids, result = hosted
    attack(host, random.Random(seed), ids, commands, scribble)
    host.check_alive()
    _settle(host)
    assert victim.read(result, 16) == EXPECTED
    with GuestTransport(host.path, queue_size=8) as fresh:  # the daemon still serves newcomers
        assert len(fresh.request([w.Request(w.Opcode.GET_DEVICE_INFO, 1).encode()], 128)) > 16


@pytest.mark.slow
def test_hostile_guests_over_the_socket_long(tmp_path):
    """IRONACCEL_FUZZ_EXAMPLES commands or IRONACCEL_FUZZ_SECONDS (default 600 s), whichever ends first."""
    rng = random.Random(2026)
    host = Host(str(tmp_path / "fuzz.sock"))
    victim, ids, result = _victim(host)
    start = time.perf_counter()
    done = sessions = 0
    while done < LONG_COMMANDS and time.perf_counter() - start < LONG_SECONDS:
        scribble = None
        if rng.random() < 0.2:
            heads = [rng.randrange(1 << 16) for _ in range(8)]
            scribble = (rng.randbytes(16 * rng.randint(0, 16)), heads, rng.randrange(1 << 16))
        done += attack(host, rng, ids, rng.randint(50, 400), scribble)
        sessions += 1
        host.check_alive()
        _settle(host)
        assert victim.read(result, 16) == EXPECTED
    seconds = time.perf_counter() - start
    _finish(host, victim, result)
    host.stop()
    print(
        f"\nfuzz-virtio socket sessions: {done} commands in {sessions} attacker connections,"
        f" {seconds:.1f} s ({done / seconds:,.0f}/s)"
    )
    assert done > 0
