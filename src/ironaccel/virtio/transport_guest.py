"""The guest end of the transport: commands exchanged with the device over the shared ring.

    with GuestTransport("/run/ironaccel.sock") as t:
        response = t.request([header, payload], response_capacity)

The connection is set up first, as a vhost-user front end does (:class:`~.transport_guest_setup.GuestSetUp`:
features, the shared region, the ring, the eventfds). A command is one chain: its request bytes copied
into the arena (device-readable), a response block of the caller's capacity (device-writable). Beside the
arena, the region holds a heap of guest memory that callers keep (``guest_buffer``): a request part that
lies there is not copied but posted as a descriptor of its own, and a response may name such memory as a
second writable descriptor (its *sink*), so the device reads and writes it in place, as it would a real
guest's pages (:mod:`.transport_guest_batch` plans each command).

Any number of threads may have commands in flight at once; one of the waiting threads at a time
collects used chains for all of them. Waiting spins for ``poll_s`` (cheap when the device answers
fast), then sleeps on the call eventfd with the ring's suppression re-armed and checked once more.
A daemon that goes away ends every wait with DeviceLost.

Every command has a deadline: the caller's ``timeout``, else the transport's ``timeout_s`` (default
IRONACCEL_VIRTIO_TIMEOUT, 30 s). A daemon that stops answering (stopped, wedged, overloaded) ends
the wait with DeadlineExpired naming the daemon and the seconds waited; the chains stay the device's
(their arena blocks are freed only when it returns them), so the transport goes on working if the
daemon resumes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import socket
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np

from ..core.errors import Busy, DeadlineExpired, DeviceLost, InvalidArgument, ResourceLimit, Unsupported
from .transport import ProtocolFeature
from .transport_guest_batch import Command, Deadline, Plan, arena_room, command_timeout
from .transport_guest_setup import GUEST_BASE, WANTED_FEATURES, GuestSetUp
from .virtqueue import QueueFull, RingError

IN_PLACE_MIN_BYTES = 4096  # a heap part smaller than this is copied: a descriptor of its own costs more
KICK_EACH_BYTES = 256 << 10  # a batch copying this much posts (and kicks) chain by chain
_Chain = tuple[list[tuple[int, int]], list[tuple[int, int]], tuple[int | None, int | None]]


class GuestTransport(GuestSetUp):
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
        self.poll_s = poll_s
        self.timeout_s = command_timeout(timeout_s)
        self.in_place_min = IN_PLACE_MIN_BYTES  # heap parts from this size are posted where they lie
        self._cond = threading.Condition()
        self._lost: str | None = None
        self._reaping = False
        self._tokens = itertools.count(1)
        self._heads: dict[int, int] = {}  # head in flight -> token
        self._done: dict[int, int] = {}  # token -> used length
        self._blocks: dict[int, tuple[int, int]] = {}  # token in flight -> its request and response blocks
        self._abandoned: set[int] = set()  # tokens whose caller stopped waiting
        self._ring_at: dict[int, int] = {}  # token in flight -> its available ring index
        super().__init__(
            path,
            queue_size=queue_size,
            arena_bytes=arena_bytes,
            heap_bytes=heap_bytes,
            features=features,
            config_size=config_size,
            setup_timeout_s=setup_timeout_s,
        )

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
        footprint = sum(arena_room(n) for n in copied) + sum(arena_room(plan.capacity) for plan in plans)
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
        deadline = Deadline.after(self.timeout_s if timeout is None else timeout)
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
            # Small batches (the fast path's commands) are copied in whole, then posted under one lock with
            # one kick at most: a kick per chain is a syscall and a wake-up of the device each. Large ones
            # kick per chain, so that the device copies one piece while the next is copied in.
            eager = sum(copied) >= KICK_EACH_BYTES
            chains = []
            for plan, (req, resp) in zip(plans, blocks, strict=True):
                chains.append(self._copy_in(plan, req, resp))
                if eager:
                    with self._cond:
                        tokens.append(self._post(chains.pop(), deadline))
                        if self.driver.kick_needed():
                            os.eventfd_write(self._kick, 1)
            if chains:
                with self._cond:
                    for chain in chains:
                        tokens.append(self._post(chain, deadline))
                    if self.driver.kick_needed():
                        os.eventfd_write(self._kick, 1)
            responses = [(resp, plan.capacity) for (_, resp), plan in zip(blocks, plans, strict=True)]
            yield _Answers(self, tokens, responses, deadline, together=not eager)
        finally:
            with self._cond:
                kept = set()
                for token in tokens:
                    self._ring_at.pop(token, None)
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

    def _copy_in(self, plan: Plan, req: int | None, resp: int | None) -> _Chain:
        """The request's parts copied into its arena block (outside the lock); the chain's regions."""
        view = self._view
        readable: list[tuple[int, int]] = []
        at = req
        for v, where in plan.parts:
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
        assert resp is not None
        writable = [(GUEST_BASE + resp, plan.capacity)]
        if plan.sink is not None:
            writable.append((GUEST_BASE + plan.sink_at, plan.sink.nbytes))
        return readable, writable, (req, resp)

    def _post(self, chain: _Chain, deadline: Deadline) -> int:
        """Publish one chain (with the lock held); its token. Waits for room while the ring is full."""
        readable, writable, blocks = chain
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
        self._blocks[token] = blocks
        self._ring_at[token] = (self.driver.avail_idx - 1) & 0xFFFF
        return token

    def _plan(self, command: tuple[Sequence[bytes | bytearray | memoryview], int] | Command) -> Plan:
        parts, capacity, *rest = command
        views = [memoryview(p).cast("B") for p in parts]
        placed = [(v, self.guest_offset(v) if v.nbytes >= self.in_place_min else None) for v in views]
        sink = memoryview(rest[0]).cast("B") if rest and rest[0] is not None else None
        sink_at = None if sink is None else self.guest_offset(sink)
        if sink is not None and sink_at is None:
            raise InvalidArgument("a response sink must lie in the guest memory heap (guest_buffer)")
        return Plan(placed, sum(v.nbytes for v in views), capacity, sink, sink_at or 0)

    def _free_blocks(self, blocks: Sequence[tuple[int | None, int | None]]) -> None:
        for pair in blocks:
            for block in pair:
                if block is not None and block >= 0:
                    self.arena.free(block)

    def _check(self) -> None:
        if self._lost is not None:
            raise DeviceLost(self._lost)

    def _wait_for_room(self, deadline: Deadline) -> None:
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

    def _await(self, token: int, deadline: Deadline, last: int | None = None) -> int:
        """Called with the lock held; returns the used length of ``token``'s chain. ``last``: a later
        token of the same batch, whose chain a sleep waits for (one wake-up for the batch)."""
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
                self._reap_once(remaining, self._ring_at.get(token if last is None else last))
        self._blocks.pop(token)
        return self._done.pop(token)

    def _reap_once(self, timeout: float | None, until: int | None = None) -> None:
        """Wait (without the lock) for used chains, then collect them for every waiter. ``until``: the
        available ring index of the chain waited for; a sleep is woken when that one is used, not at
        each chain of a batch before it."""
        self._reaping = True
        self._cond.release()
        try:
            self._wait_for_used(timeout, until)
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

    def _wait_for_used(self, timeout: float | None, until: int | None = None) -> None:
        if self._lost is not None:
            return
        driver = self.driver
        end = time.perf_counter() + self.poll_s
        while time.perf_counter() < end:
            if driver.has_used():
                return
        if driver.enable_calls(until):
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
            self._reset_device()

    def close(self) -> None:
        with self._cond:
            if self._lost is None:
                self._lost = "the transport was closed"
            self._cond.notify_all()
        self._release()

    def __enter__(self) -> GuestTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Answers(Sequence[memoryview]):
    """The responses of one ``exchange_batch``, each waited for (in order) when first looked at."""

    def __init__(
        self,
        transport: GuestTransport,
        tokens: list[int],
        at: list[tuple[int, int]],
        deadline: Deadline,
        together: bool = False,
    ) -> None:
        self._transport, self._tokens, self._at, self._deadline = transport, tokens, at, deadline
        self._lengths: list[int] = []
        # A small batch is used as a whole: a sleep waits for its last chain, not for each in turn.
        self._last = tokens[-1] if together and len(tokens) > 1 else None

    def __len__(self) -> int:
        return len(self._tokens)

    def __getitem__(self, index: int) -> memoryview:  # type: ignore[override]
        """The response block: its first ``min(used, capacity)`` bytes (what the device wrote there)."""
        used = self.used(index)
        at, capacity = self._at[index % len(self)]
        return self._transport._view[at : at + min(used, capacity)]

    def used(self, index: int) -> int:
        """The chain's used length (a sink's bytes included)."""
        n = len(self._tokens)
        if not -n <= index < n:
            raise IndexError(index)
        index %= n
        lengths = self._lengths
        if len(lengths) <= index:
            transport = self._transport
            with transport._cond:  # the waits release it while they sleep
                while len(lengths) <= index:
                    lengths.append(transport._await(self._tokens[len(lengths)], self._deadline, self._last))
        return lengths[index]
