"""The guest's side of vhost-user set-up: the socket, the shared region and the ring, handed to the device.

Set-up, in the order a vhost-user front end uses: negotiate features (VERSION_1, EVENT_IDX and
INDIRECT_DESC when the daemon offers them) and protocol features (REPLY_ACK, CONFIG, RESET_DEVICE),
read the device configuration, create one sealed memfd holding the ring, the indirect tables, the
buffer arena and the heap of guest memory, and hand over the memory table, the queue (size, addresses,
first index) and three eventfds: kick (we signal the device), call (the device signals us), err (the
device reports a broken queue). Every set-up request asks for an acknowledgement, so a refusal fails
here, naming the step. Set-up has its own deadline (``setup_timeout_s``, per socket operation).

A daemon that turns the connection away during set-up (full, or set-up took too long) sends one
refusal message with its reason instead of a reply (:data:`~.transport.REFUSAL`); it is read even when
the daemon closed the socket before our request arrived, and raised as ResourceLimit naming the
daemon's path and its reason.

:class:`GuestSetUp` owns what set-up creates, and releases all of it; the commands that travel over the
ring once it runs are :class:`~.transport_guest.GuestTransport`'s.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import socket
import time
from collections.abc import Sequence

import numpy as np

from ..core.errors import DeviceLost, IronAccelError, ResourceLimit
from . import transport as tp
from .transport import ProtocolError, ProtocolFeature, Request
from .transport_arena import Arena
from .transport_memory import SharedRegion
from .virtqueue import F_EVENT_IDX, F_INDIRECT_DESC, F_VERSION_1, GuestMemory, MemoryRegion, RingAddresses, RingLayout
from .virtqueue_driver import DriverQueue, IndirectArea

GUEST_BASE = 1 << 32  # the region's guest address: a non-zero base keeps addresses and offsets apart
WANTED_FEATURES = F_VERSION_1 | tp.F_PROTOCOL_FEATURES | F_EVENT_IDX | F_INDIRECT_DESC
WANTED_PROTOCOL = ProtocolFeature.REPLY_ACK | ProtocolFeature.CONFIG | ProtocolFeature.RESET_DEVICE
INDIRECT_PER_HEAD = 8


class GuestSetUp:
    """One guest's connection to the daemon, set up and ready for commands (or raising why not).

    Raises DeviceLost when no daemon answers at ``path``, ResourceLimit when it refuses this guest, and
    ProtocolError when it breaks the protocol; whatever was created is released first."""

    def __init__(
        self,
        path: str,
        *,
        queue_size: int,
        arena_bytes: int,
        heap_bytes: int,
        features: int,
        config_size: int,
        setup_timeout_s: float,
    ) -> None:
        self.path = path
        self._setup_timeout = setup_timeout_s
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

    def _reset_device(self) -> None:
        """RESET_DEVICE, the features again and a fresh ring (the caller made sure nothing is in flight)."""
        self.sock.settimeout(self._setup_timeout)
        try:
            self._step(Request.RESET_DEVICE)
            tp.send(self.sock, Request.SET_FEATURES, tp.U64.pack(self.features))
            self._start_ring()
        finally:
            self.sock.settimeout(None)

    @property
    def _view(self) -> memoryview:
        assert self.region is not None
        return self.region.view

    def _release(self) -> None:
        """Close the socket and the eventfds and unmap the region: whatever of them set-up got to create."""
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


def _page(n: int) -> int:
    return (n + mmap.PAGESIZE - 1) & -mmap.PAGESIZE


__all__ = ["GUEST_BASE", "WANTED_FEATURES", "GuestSetUp"]
