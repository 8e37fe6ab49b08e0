"""The guest end of the transport: set the device up over the socket, then exchange commands.

    with GuestTransport("/run/ironaccel.sock") as t:
        response = t.request([header, payload], response_capacity)

Set-up, in the order a vhost-user front end uses: negotiate features (VERSION_1, EVENT_IDX and
INDIRECT_DESC when the daemon offers them) and protocol features (REPLY_ACK, CONFIG, RESET_DEVICE),
read the device configuration, create one sealed memfd holding the ring, the indirect tables and
the buffer arena, and hand over the memory table, the queue (size, addresses, first index) and three
eventfds: kick (we signal the device), call (the device signals us), err (the device reports a broken
queue). Every set-up request asks for an acknowledgement, so a refusal fails here, naming the step.

A command is one chain: its request bytes copied into the arena (device-readable), a response block
of the caller's capacity (device-writable). Beside the arena, the region holds a heap of guest memory
that callers keep (``guest_buffer``): a request part that lies there is not copied but posted as a
descriptor of its own, and a response may name such memory as a second writable descriptor (its
*sink*), so the device reads and writes it in place, as it would a real guest's pages.

Any number of threads may have commands in flight at once; one of the waiting threads at a time
collects used chains for all of them. Waiting spins for ``poll_s`` (cheap when the device answers
fast), then sleeps on the call eventfd with the ring's suppression re-armed and checked once more.
A daemon that goes away ends every wait with DeviceLost.

Every command has a deadline: the caller's ``timeout``, else the transport's ``timeout_s`` (default
IRONACCEL_VIRTIO_TIMEOUT, 30 s). A daemon that stops answering (stopped, wedged, overloaded) ends
the wait with DeadlineExpired naming the daemon and the seconds waited; the chains stay the device's
(their arena blocks are freed only when it returns them), so the transport goes on working if the
daemon resumes. Set-up has its own deadline (``setup_timeout_s``, per socket operation).

A daemon that turns the connection away during set-up (full, or set-up took too long) sends one
refusal message with its reason instead of a reply (:data:`transport.REFUSAL`); it is read even when
the daemon closed the socket before our request arrived, and raised as ResourceLimit naming the
daemon's path and its reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import mmap
import os
import select
import socket
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np

from ..core.errors import (
    Busy,
    DeadlineExpired,
    DeviceLost,
    InvalidArgument,
    IronAccelError,
    ResourceLimit,
    Unsupported,
)
from . import transport as tp
from .transport import ProtocolError, ProtocolFeature, Request
from .transport_arena import ALIGN, Arena
from .transport_memory import SharedRegion
from .virtqueue import (
    F_EVENT_IDX,
    F_INDIRECT_DESC,
    F_VERSION_1,
    GuestMemory,
    MemoryRegion,
    QueueFull,
    RingAddresses,
    RingError,
    RingLayout,
)
from .virtqueue_driver import DriverQueue, IndirectArea

GUEST_BASE = 1 << 32  # the region's guest address: a non-zero base keeps addresses and offsets apart
WANTED_FEATURES = F_VERSION_1 | tp.F_PROTOCOL_FEATURES | F_EVENT_IDX | F_INDIRECT_DESC
WANTED_PROTOCOL = ProtocolFeature.REPLY_ACK | ProtocolFeature.CONFIG | ProtocolFeature.RESET_DEVICE
INDIRECT_PER_HEAD = 8
IN_PLACE_MIN_BYTES = 4096  # a heap part smaller than this is copied: a descriptor of its own costs more


class GuestTransport:
    """One guest's connection to the daemon. Thread-safe: ``request`` may be called from any thread."""

    def __init__(
        self,
        path: str,
        *,
        queue_size: int = 256,
        arena_bytes: int = 64 << 20,
        heap_bytes: int = 256 << 20,
        features: int = WANTED_FEATURES,
        config_size: int = 16,
        poll_s: float = 50e-6,
        setup_timeout_s: float = 10.0,
        timeout_s: float | None = None,
    ) -> None:
        self.path = path
        self.poll_s = poll_s
        self.timeout_s = _command_timeout(timeout_s)
        self.in_place_min = IN_PLACE_MIN_BYTES  # heap parts from this size are posted where they lie
        self._setup_timeout = setup_timeout_s
        self._cond = threading.Condition()
        self._lost: str | None = None
        self._reaping = False
        self._tokens = itertools.count(1)
        self._heads: dict[int, int] = {}  # head in flight -> token
        self._done: dict[int, int] = {}  # token -> used length
        self._blocks: dict[int, tuple[int, int]] = {}  # token in flight -> its request and response blocks
        self._abandoned: set[int] = set()  # tokens whose caller stopped waiting
        self._kick = os.eventfd(0, os.EFD_CLOEXEC)
        self._call = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._err = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.region: SharedRegion | None = None
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            self.sock.settimeout(setup_timeout_s)
            self._connect(path, time.monotonic() + setup_timeout_s)
            try:
                self._setup(queue_size, arena_bytes, heap_bytes, features, config_size)
            except (tp.Disconnected, ProtocolError):
                self._raise_refusal()  # what the daemon said before it closed, if it said anything
                raise
            except tp.DaemonRefusal as exc:
                raise ResourceLimit(f"the virtio-accel daemon at {path} refused this guest: {exc}") from exc
            self.sock.settimeout(None)
        except BaseException:
            self._release()
            raise

    # ---- set-up ---------------------------------------------------------------------------------------
    def _connect(self, path: str, deadline: float) -> None:
        """Connect; a daemon whose accept backlog is full (EAGAIN) is tried again until ``deadline``."""
        while True:
            try:
                self.sock.connect(path)
                return
            except BlockingIOError as exc:
                if time.monotonic() >= deadline:
                    raise DeviceLost(f"cannot reach a virtio-accel daemon at {path}: its backlog stayed full") from exc
                time.sleep(0.005)
            except OSError as exc:
                raise DeviceLost(f"cannot reach a virtio-accel daemon at {path}: {exc}") from exc

    def _raise_refusal(self) -> None:
        """Raise ResourceLimit if the daemon's refusal is waiting on the socket (read without blocking)."""
        try:
            self.sock.settimeout(0)
            tp.expect_reply(self.sock, Request.GET_FEATURES)
        except tp.DaemonRefusal as exc:
            raise ResourceLimit(f"the virtio-accel daemon at {self.path} refused this guest: {exc}") from None
        except (OSError, IronAccelError):
            pass

    def _setup(self, queue_size: int, arena_bytes: int, heap_bytes: int, wanted: int, config_size: int) -> None:
        offered = self._get_u64(Request.GET_FEATURES)
        self.features = offered & wanted
        if not self.features & F_VERSION_1:
            raise ProtocolError(f"the daemon offers features {offered:#x}, without VIRTIO_F_VERSION_1")
        tp.send(self.sock, Request.SET_FEATURES, tp.U64.pack(self.features))
        self.protocol_features = 0
        if self.features & tp.F_PROTOCOL_FEATURES:
            self.protocol_features = self._get_u64(Request.GET_PROTOCOL_FEATURES) & WANTED_PROTOCOL
            tp.send(self.sock, Request.SET_PROTOCOL_FEATURES, tp.U64.pack(self.protocol_features))
        self._step(Request.SET_OWNER)
        self.config = self._get_config(config_size) if self.protocol_features & ProtocolFeature.CONFIG else b""

        self.layout = RingLayout.of(queue_size)
        indirect_at = _page(self.layout.total)
        arena_at = _page(indirect_at + IndirectArea.bytes_for(queue_size, INDIRECT_PER_HEAD))
        heap_at = _page(arena_at + arena_bytes)
        total = _page(heap_at + heap_bytes)
        self.region = SharedRegion.create(total)  # a memfd: pages are backed only once touched
        probe = np.frombuffer(self.region.view, np.uint8)
        self._base = probe.ctypes.data  # where the region starts in this process
        del probe
        self.memory = GuestMemory([MemoryRegion(GUEST_BASE, total, self.region.view)])
        table = tp.encode_mem_table([tp.RegionDesc(GUEST_BASE, total, GUEST_BASE, 0)])
        self._step(Request.SET_MEM_TABLE, table, [self.region.fd])
        self.indirect = IndirectArea(GUEST_BASE + indirect_at, INDIRECT_PER_HEAD)
        self.arena = Arena(arena_at, heap_at - arena_at)
        self.heap = Arena(heap_at, total - heap_at) if total > heap_at else None
        self._start_ring()

    def _start_ring(self) -> None:
        """A fresh ring at index 0, handed to the device with its eventfds."""
        size = self.layout.size
        addrs = RingAddresses.contiguous(GUEST_BASE, self.layout)
        self.driver = DriverQueue(self.memory, size, addrs, features=self.features, indirect=self.indirect)
        self._step(Request.SET_VRING_NUM, tp.VRING_STATE.pack(0, size))
        self._step(Request.SET_VRING_ADDR, tp.VRING_ADDR.pack(0, 0, addrs.desc, addrs.used, addrs.avail, 0))
        self._step(Request.SET_VRING_BASE, tp.VRING_STATE.pack(0, 0))
        self._step(Request.SET_VRING_CALL, tp.U64.pack(0), [self._call])
        self._step(Request.SET_VRING_ERR, tp.U64.pack(0), [self._err])
        self._step(Request.SET_VRING_KICK, tp.U64.pack(0), [self._kick])
        if self.features & tp.F_PROTOCOL_FEATURES:
            self._step(Request.SET_VRING_ENABLE, tp.VRING_STATE.pack(0, 1))

    def _get_u64(self, request: Request) -> int:
        tp.send(self.sock, request)
        (value,) = tp.expect_reply(self.sock, request).expect(tp.U64)
        return value

    def _get_config(self, size: int) -> bytes:
        tp.send(self.sock, Request.GET_CONFIG, tp.CONFIG_HEADER.pack(0, size, 0) + bytes(size))
        msg = tp.expect_reply(self.sock, Request.GET_CONFIG)
        if len(msg.payload) != tp.CONFIG_HEADER.size + size:
            expected = tp.CONFIG_HEADER.size + size
            raise ProtocolError(f"GET_CONFIG reply of {len(msg.payload)} bytes, expected {expected}")
        return msg.payload[tp.CONFIG_HEADER.size :]

    def _step(self, request: Request, payload: bytes = b"", fds: Sequence[int] = ()) -> None:
        """Send one set-up request; with REPLY_ACK, wait for its acknowledgement."""
        ack = bool(self.protocol_features & ProtocolFeature.REPLY_ACK)
        tp.send(self.sock, request, payload, fds, tp.VERSION | (tp.NEED_REPLY if ack else 0))
        if ack:
            (status,) = tp.expect_reply(self.sock, request).expect(tp.U64)
            if status:
                raise ProtocolError(f"the daemon refused {request.name} (see its log for why)")

    # ---- guest memory the caller keeps ----------------------------------------------------------------
    def guest_buffer(self, nbytes: int) -> memoryview:
        """``nbytes`` of the heap (64-byte aligned), given back by :meth:`free_guest_buffer`. Raises
        ResourceLimit when the heap has no such room."""
        with self._cond:
            self._check()
            at = None if self.heap is None or nbytes > self.heap.size else self.heap.alloc(max(1, nbytes))
            if at is None:
                room = 0 if self.heap is None else self.heap.size
                raise ResourceLimit(f"no room for {nbytes} bytes in the {room}-byte guest memory heap")
            return self._view[at : at + nbytes]

    def free_guest_buffer(self, view: memoryview) -> None:
        """Give back a ``guest_buffer`` (nothing may be in flight on it). After ``close``, a no-op."""
        with self._cond:
            if self.region is None or self.heap is None:
                return
            at = self.guest_offset(view)
            if at is None:
                raise InvalidArgument("not a buffer of this transport's guest memory heap")
            self.heap.free(at)

    def guest_offset(self, view: memoryview) -> int | None:
        """Where ``view`` starts in the region, if all of it lies in the heap; else None."""
        heap = self.heap
        if heap is None or self.region is None or not view.nbytes:
            return None
        at = np.frombuffer(view, np.uint8).ctypes.data - self._base
        return at if heap.offset <= at and at + view.nbytes <= heap.offset + heap.size else None

    # ---- commands -------------------------------------------------------------------------------------
    def request(
        self, parts: Sequence[bytes | bytearray | memoryview], capacity: int, timeout: float | None = None
    ) -> bytes:
        """Send one command (the concatenation of ``parts``) and return its response bytes."""
        with self.exchange(parts, capacity, timeout) as response:
            return bytes(response)

    @contextlib.contextmanager
    def exchange(
        self, parts: Sequence[bytes | bytearray | memoryview], capacity: int, timeout: float | None = None
    ) -> Iterator[memoryview]:
        """Like ``request``, but yields the response where the device wrote it (valid inside the block)."""
        with self.exchange_batch([(parts, capacity)], timeout) as (response,):
            yield response

    @contextlib.contextmanager
    def exchange_batch(
        self,
        commands: Sequence[tuple[Sequence[bytes | bytearray | memoryview], int] | Command],
        timeout: float | None = None,
    ) -> Iterator[_Answers]:
        """Several commands ``(parts, capacity)`` or ``(parts, capacity, sink)``, served by the device in
        ring order. Each is posted as soon as its request is in shared memory (a kick only where the device
        sleeps), so the device works on one while the next is copied in. Parts lying in the heap are posted
        in place, the others copied into the arena; ``sink`` (heap memory) follows the ``capacity``-byte
        response block as a second writable region. Yields the response blocks where the device wrote them
        (valid inside the block), in the order given; each is waited for when first looked at, so the
        caller may use one while the device still works on the next (``used(i)``: the used length,
        sink included)."""
        plans = [self._plan(command) for command in commands]
        copied = [sum(v.nbytes for v, at in plan.parts if at is None) for plan in plans]
        footprint = sum(_blocks(n) for n in copied) + sum(_blocks(plan.capacity) for plan in plans)
        if not plans or min(p.size for p in plans) <= 0 or min(p.capacity for p in plans) <= 0:
            raise InvalidArgument(
                f"requests of {[p.size for p in plans]} bytes, responses of"
                f" {[p.capacity for p in plans]}: each needs at least one byte of both"
            )
        if footprint > self.arena.size:
            raise InvalidArgument(
                f"requests of {copied} bytes with responses of {[p.capacity for p in plans]} bytes do not fit"
                f" the {self.arena.size}-byte arena"
            )
        deadline = _Deadline.after(self.timeout_s if timeout is None else timeout)
        blocks: list[tuple[int | None, int | None]] = []
        tokens: list[int] = []
        try:
            with self._cond:
                while True:  # all blocks or none: a batch holding half its room could starve another
                    self._check()
                    for size, plan in zip(copied, plans, strict=True):
                        req = self.arena.alloc(size) if size else -1
                        resp = self.arena.alloc(plan.capacity)
                        blocks.append((req, resp))
                        if req is None or resp is None:
                            break
                    if len(blocks) == len(plans) and None not in blocks[-1]:
                        break
                    self._free_blocks(blocks)
                    blocks.clear()
                    self._wait_for_room(deadline)
            view = self._view
            for plan, (req, resp) in zip(plans, blocks, strict=True):
                readable: list[tuple[int, int]] = []
                at = req
                for v, where in plan.parts:  # the copies into shared memory, outside the lock
                    if where is not None:
                        readable.append((GUEST_BASE + where, v.nbytes))
                        continue
                    assert at is not None
                    view[at : at + v.nbytes] = v
                    if readable and readable[-1][0] + readable[-1][1] == GUEST_BASE + at:
                        readable[-1] = (readable[-1][0], readable[-1][1] + v.nbytes)
                    else:
                        readable.append((GUEST_BASE + at, v.nbytes))
                    at += v.nbytes
                writable = [(GUEST_BASE + resp, plan.capacity)]
                if plan.sink is not None:
                    writable.append((GUEST_BASE + plan.sink_at, plan.sink.nbytes))
                with self._cond:
                    while True:
                        self._check()
                        try:
                            head = self.driver.post(readable, writable)
                            break
                        except QueueFull:
                            if self.driver.kick_needed():  # what is posted already may be what frees room
                                os.eventfd_write(self._kick, 1)
                            self._wait_for_room(deadline)
                    token = next(self._tokens)
                    self._heads[head] = token
                    self._blocks[token] = (req, resp)
                    tokens.append(token)
                    if self.driver.kick_needed():
                        os.eventfd_write(self._kick, 1)
            responses = [(resp, plan.capacity) for (_, resp), plan in zip(blocks, plans, strict=True)]
            yield _Answers(self, tokens, responses, deadline)
        finally:
            with self._cond:
                kept = set()
                for token in tokens:
                    if token in self._done:  # came back, but an earlier wait of the batch gave up
                        del self._done[token]
                        self._blocks.pop(token, None)
                    elif token in self._blocks and self._lost is None:
                        # Given up on (a deadline) while the device still owns the chain: its blocks are
                        # freed when it comes back, never while the device may still write into them.
                        self._abandoned.add(token)
                        kept.add(token)
                    else:
                        self._blocks.pop(token, None)
                if self.region is not None:
                    self._free_blocks([p for i, p in enumerate(blocks) if not (i < len(tokens) and tokens[i] in kept)])
                self._cond.notify_all()

    def _plan(self, command: tuple[Sequence[bytes | bytearray | memoryview], int] | Command) -> _Plan:
        parts, capacity, *rest = command
        views = [memoryview(p).cast("B") for p in parts]
        placed = [(v, self.guest_offset(v) if v.nbytes >= self.in_place_min else None) for v in views]
        sink = memoryview(rest[0]).cast("B") if rest and rest[0] is not None else None
        sink_at = None if sink is None else self.guest_offset(sink)
        if sink is not None and sink_at is None:
            raise InvalidArgument("a response sink must lie in the guest memory heap (guest_buffer)")
        return _Plan(placed, sum(v.nbytes for v in views), capacity, sink, sink_at or 0)

    def _free_blocks(self, blocks: Sequence[tuple[int | None, int | None]]) -> None:
        for pair in blocks:
            for block in pair:
                if block is not None and block >= 0:
                    self.arena.free(block)

    @property
    def _view(self) -> memoryview:
        assert self.region is not None
        return self.region.view

    def _check(self) -> None:
        if self._lost is not None:
            raise DeviceLost(self._lost)

    def _wait_for_room(self, deadline: _Deadline) -> None:
        """Room comes back as chains complete (reap them) or as other threads free their blocks."""
        remaining = deadline.left()
        if remaining <= 0:
            raise DeadlineExpired(
                f"no room in the command queue to the virtio-accel daemon at {self.path} within {deadline.seconds:g} s"
            )
        if self._heads and not self._reaping:
            self._reap_once(remaining)
        else:
            self._cond.wait(remaining)

    def _await(self, token: int, deadline: _Deadline) -> int:
        """Called with the lock held; returns the used length of ``token``'s chain."""
        while token not in self._done:
            self._check()
            remaining = deadline.left()
            if remaining <= 0:
                raise DeadlineExpired(
                    f"no answer from the virtio-accel daemon at {self.path} within {deadline.seconds:g} s"
                )
            if self._reaping:
                self._cond.wait(remaining)
            else:
                self._reap_once(remaining)
        self._blocks.pop(token)
        return self._done.pop(token)

    def _reap_once(self, timeout: float | None) -> None:
        """Wait (without the lock) for used chains, then collect them for every waiter."""
        self._reaping = True
        self._cond.release()
        try:
            self._wait_for_used(timeout)
        finally:
            self._cond.acquire()
            self._reaping = False
        if self.region is None:  # closed meanwhile: the waiters see the transport lost
            self._cond.notify_all()
            return
        try:
            for head, length in self.driver.reap():
                token = self._heads.pop(head)
                if token in self._abandoned:
                    self._abandoned.discard(token)
                    self._free_blocks([self._blocks.pop(token)])
                else:
                    self._done[token] = length
        except RingError as exc:
            self._lose(f"the device corrupted the command queue: {exc}")
        self._cond.notify_all()

    def _wait_for_used(self, timeout: float | None) -> None:
        if self._lost is not None:
            return
        driver = self.driver
        end = time.perf_counter() + self.poll_s
        while time.perf_counter() < end:
            if driver.has_used():
                return
        if driver.enable_calls():
            return
        ready, _, _ = select.select([self._call, self._err, self.sock], [], [], timeout)
        if self._call in ready:
            with contextlib.suppress(BlockingIOError):
                os.eventfd_read(self._call)
        if self._err in ready:
            self._lost = "the device stopped the command queue (see the daemon's log)"
        elif self.sock in ready:
            try:
                data = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                data = b"?"
            except OSError:
                data = b""
            if not data:
                self._lost = f"the virtio-accel daemon at {self.path} closed the connection"

    def _lose(self, why: str) -> None:
        self._lost = why

    # ---- teardown -------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Whole-device reset: the daemon releases every object of this guest (a fresh engine session)
        and the queue starts afresh. Only with nothing in flight."""
        if not self.protocol_features & ProtocolFeature.RESET_DEVICE:
            raise Unsupported("the daemon does not offer RESET_DEVICE")
        with self._cond:
            self._check()
            if self._heads:
                raise Busy(f"reset with {len(self._heads)} command(s) in flight")
            self.sock.settimeout(self._setup_timeout)
            try:
                self._step(Request.RESET_DEVICE)
                tp.send(self.sock, Request.SET_FEATURES, tp.U64.pack(self.features))
                self._start_ring()
            finally:
                self.sock.settimeout(None)

    def close(self) -> None:
        with self._cond:
            if self._lost is None:
                self._lost = "the transport was closed"
            self._cond.notify_all()
        self._release()

    def _release(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        for fd in (self._kick, self._call, self._err):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._kick = self._call = self._err = -1
        if self.region is not None:
            self.memory = None  # type: ignore[assignment]
            self.driver = None  # type: ignore[assignment]
            region, self.region = self.region, None
            region.close()

    def __enter__(self) -> GuestTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _command_timeout(timeout_s: float | None) -> float:
    """The per-command deadline a transport uses: ``timeout_s``, else IRONACCEL_VIRTIO_TIMEOUT's."""
    from ..core.settings import settings

    source = "timeout_s" if timeout_s is not None else "IRONACCEL_VIRTIO_TIMEOUT"
    seconds = settings.virtio_timeout_s if timeout_s is None else timeout_s
    if not isinstance(seconds, (int, float)) or not 0 < seconds < math.inf:
        raise InvalidArgument(f"{source} must be a positive, finite number of seconds, got {seconds!r}")
    return float(seconds)


@dataclasses.dataclass(frozen=True)
class _Deadline:
    """When a wait ends (``time.monotonic``) and how many seconds it was given (for the message)."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> _Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def left(self) -> float:
        return self.at - time.monotonic()


def _blocks(n: int) -> int:
    return (n + ALIGN - 1) & -ALIGN


class _Answers(Sequence[memoryview]):
    """The responses of one ``exchange_batch``, each waited for (in order) when first looked at."""

    def __init__(
        self, transport: GuestTransport, tokens: list[int], at: list[tuple[int, int]], deadline: _Deadline
    ) -> None:
        self._transport, self._tokens, self._at, self._deadline = transport, tokens, at, deadline
        self._lengths: list[int] = []

    def __len__(self) -> int:
        return len(self._tokens)

    def __getitem__(self, index: int) -> memoryview:  # type: ignore[override]
        """The response block: its first ``min(used, capacity)`` bytes (what the device wrote there)."""
        used = self.used(index)
        at, capacity = self._at[index % len(self)]
        return self._transport._view[at : at + min(used, capacity)]

    def used(self, index: int) -> int:
        """The chain's used length (a sink's bytes included)."""
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        transport = self._transport
        while len(self._lengths) <= index:
            with transport._cond:
                self._lengths.append(transport._await(self._tokens[len(self._lengths)], self._deadline))
        return self._lengths[index]


@dataclasses.dataclass
class _Plan:
    """One command of a batch: its request parts (with their heap offset where posted in place), its
    response block's size and its sink."""

    parts: list[tuple[memoryview, int | None]]
    size: int
    capacity: int
    sink: memoryview | None
    sink_at: int


Command = tuple[Sequence[bytes | bytearray | memoryview], int, memoryview | None]


def _page(n: int) -> int:
    return (n + mmap.PAGESIZE - 1) & -mmap.PAGESIZE
