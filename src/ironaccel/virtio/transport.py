"""The control channel between a guest and the daemon: vhost-user messages over a Unix socket.

The guest (the front end) sets the device up with the vhost-user requests a VMM would send: feature
negotiation, the memory table (memfd descriptors passed with SCM_RIGHTS), the queue's size, addresses
and first index, and an eventfd each for kicks (guest to device) and calls (device to guest). After
that the socket carries nothing but teardown; commands travel through the shared ring, and
notifications through the eventfds. Request numbers, flag bits and payload layouts are vhost-user's,
so a VMM front end speaks the same messages (ADR 0010 lists what it would still need).

Message: header {request u32, flags u32, size u32}, then ``size`` bytes of payload; file descriptors
ride on the header's bytes. Everything a peer sends is bounded here before it is used: the payload
size (at most MAX_PAYLOAD) before it is read, the number of descriptors before they are accepted,
each payload's exact length before it is decoded. Descriptors that arrive with a message that is
refused are closed, never leaked.

One message is IronAccel's own, outside vhost-user's request numbers: the daemon's *refusal*
(:data:`REFUSAL`, flags VERSION | REPLY, payload the reason in UTF-8, at most :data:`MAX_REASON`
bytes). A daemon that will not serve a connection (it has ``max_guests`` guests already, or the
connection did not finish set-up in time) writes it once, without blocking, where the guest waits for a
reply, then closes; the guest's :func:`expect_reply` raises :class:`DaemonRefusal` with the reason.
A daemon never reads one: from a guest it is an unsupported request like any other.
"""

from __future__ import annotations

import array
import dataclasses
import enum
import os
import socket
import struct
from collections.abc import Sequence

from ..core.errors import DeviceLost, InvalidArgument, ResourceLimit

# Header flags.
VERSION = 0x1
VERSION_MASK = 0x3
REPLY = 0x4
NEED_REPLY = 0x8

# Virtio transport feature bit telling the front end to negotiate vhost-user protocol features.
F_PROTOCOL_FEATURES = 1 << 30


class Request(enum.IntEnum):
    """The vhost-user requests this transport speaks (numbering as in the vhost-user protocol)."""

    GET_FEATURES = 1
    SET_FEATURES = 2
    SET_OWNER = 3
    RESET_OWNER = 4
    SET_MEM_TABLE = 5
    SET_VRING_NUM = 8
    SET_VRING_ADDR = 9
    SET_VRING_BASE = 10
    GET_VRING_BASE = 11
    SET_VRING_KICK = 12
    SET_VRING_CALL = 13
    SET_VRING_ERR = 14
    GET_PROTOCOL_FEATURES = 15
    SET_PROTOCOL_FEATURES = 16
    GET_QUEUE_NUM = 17
    SET_VRING_ENABLE = 18
    GET_CONFIG = 24
    RESET_DEVICE = 34


class ProtocolFeature(enum.IntFlag):
    MQ = 1 << 0
    REPLY_ACK = 1 << 3
    CONFIG = 1 << 9
    RESET_DEVICE = 1 << 13


HEADER = struct.Struct("<III")
U64 = struct.Struct("<Q")
VRING_STATE = struct.Struct("<II")  # index, num
VRING_ADDR = struct.Struct("<IIQQQQ")  # index, flags, desc, used, avail, log (user addresses)
MEM_REGION = struct.Struct("<QQQQ")  # guest_phys_addr, memory_size, userspace_addr, mmap_offset
CONFIG_HEADER = struct.Struct("<III")  # offset, size, flags

MAX_PAYLOAD = 4096  # the largest message this transport accepts (the biggest legitimate one is ~270 bytes)
MAX_FDS = 8  # descriptors per message (one per memory region at most)
MAX_REGIONS = 8
MAX_CONFIG = 256
VRING_NOFD = 0x100  # in a SET_VRING_KICK/CALL/ERR payload: no descriptor follows (polling)
VRING_INDEX_MASK = 0xFF
REFUSAL = 0x10000  # the daemon's refusal: above every vhost-user request number
MAX_REASON = 256  # bytes of a refusal's reason, cut by the sender and again by the reader


class ProtocolError(InvalidArgument):
    """The peer sent a message that breaks the protocol (size, layout, sequence)."""


class Disconnected(DeviceLost):
    """The peer closed the connection (or it broke)."""


class DaemonRefusal(ResourceLimit):
    """The daemon turned this connection away; the message is its reason."""


def encode_refusal(reason: str) -> bytes:
    """The refusal message for ``reason`` (cut to MAX_REASON bytes of UTF-8)."""
    payload = reason.encode("utf-8", "replace")[:MAX_REASON]
    return HEADER.pack(REFUSAL, VERSION | REPLY, len(payload)) + payload


@dataclasses.dataclass
class Message:
    request: int
    flags: int
    payload: bytes
    fds: list[int] = dataclasses.field(default_factory=list)

    def close_fds(self) -> None:
        for fd in self.fds:
            _close(fd)
        self.fds = []

    def take_fd(self) -> int:
        """The single descriptor this message must carry (ProtocolError otherwise)."""
        if len(self.fds) != 1:
            count = len(self.fds)
            self.close_fds()
            raise ProtocolError(f"{_name(self.request)} must carry exactly one file descriptor, got {count}")
        fd = self.fds.pop()
        return fd

    def expect(self, layout: struct.Struct) -> tuple:
        if len(self.payload) != layout.size:
            raise ProtocolError(f"{_name(self.request)} payload is {len(self.payload)} bytes, expected {layout.size}")
        return layout.unpack(self.payload)


def _name(request: int) -> str:
    try:
        return Request(request).name
    except ValueError:
        return f"request {request}"


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def send(
    sock: socket.socket, request: int, payload: bytes = b"", fds: Sequence[int] = (), flags: int = VERSION
) -> None:
    """One message; descriptors ride on its first bytes. Raises Disconnected if the peer is gone."""
    data = HEADER.pack(int(request), flags, len(payload)) + payload
    try:
        if fds:
            sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            if sent < len(data):
                sock.sendall(data[sent:])
        else:
            sock.sendall(data)
    except OSError as exc:
        raise Disconnected(f"control socket: {exc}") from exc


def receive(sock: socket.socket, max_payload: int = MAX_PAYLOAD) -> Message:
    """One message, bounded: Disconnected at end of stream, ProtocolError for a malformed one."""
    try:
        data, fds, msg_flags, _ = socket.recv_fds(sock, HEADER.size, MAX_FDS)
    except OSError as exc:
        raise Disconnected(f"control socket: {exc}") from exc
    if not data:
        for fd in fds:
            _close(fd)
        raise Disconnected("the peer closed the control socket")
    msg = Message(0, 0, b"", list(fds))
    try:
        if msg_flags & socket.MSG_CTRUNC:
            raise ProtocolError(f"more than {MAX_FDS} file descriptors in one message")
        header = data + _read_exact(sock, HEADER.size - len(data))
        msg.request, msg.flags, size = HEADER.unpack(header)
        if msg.flags & VERSION_MASK != VERSION:
            raise ProtocolError(f"message version {msg.flags & VERSION_MASK}, expected {VERSION}")
        if size > max_payload:
            raise ProtocolError(f"{_name(msg.request)} declares a {size}-byte payload; the limit is {max_payload}")
        msg.payload = _read_exact(sock, size)
    except BaseException:
        msg.close_fds()
        raise
    return msg


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:])
        except TimeoutError:
            raise ProtocolError(f"message stalled after {got} of {n} bytes") from None
        except OSError as exc:
            raise Disconnected(f"control socket: {exc}") from exc
        if k == 0:
            raise Disconnected(f"the peer closed the control socket mid-message ({got} of {n} bytes)")
        got += k
    return bytes(buf)


def reply(sock: socket.socket, request: int, payload: bytes) -> None:
    send(sock, request, payload, flags=VERSION | REPLY)


def expect_reply(sock: socket.socket, request: int) -> Message:
    """The reply to ``request`` (ProtocolError if something else arrives; DaemonRefusal for a refusal)."""
    msg = receive(sock)
    if msg.request == REFUSAL and msg.flags & REPLY:
        msg.close_fds()
        reason = msg.payload[:MAX_REASON].decode("utf-8", "replace")
        raise DaemonRefusal("".join(c if c.isprintable() else "?" for c in reason) or "no reason given")
    if msg.fds:
        msg.close_fds()
        raise ProtocolError(f"reply to {_name(request)} carries file descriptors")
    if msg.request != request or not msg.flags & REPLY:
        raise ProtocolError(f"expected the reply to {_name(request)}, got {_name(msg.request)} flags {msg.flags:#x}")
    return msg


@dataclasses.dataclass(frozen=True)
class RegionDesc:
    """One memory-table entry: guest address, size, the address the front end uses, offset in the fd."""

    guest_addr: int
    size: int
    user_addr: int
    mmap_offset: int


def encode_mem_table(regions: Sequence[RegionDesc]) -> bytes:
    body = b"".join(MEM_REGION.pack(r.guest_addr, r.size, r.user_addr, r.mmap_offset) for r in regions)
    return struct.pack("<II", len(regions), 0) + body


def decode_mem_table(payload: bytes) -> list[RegionDesc]:
    if len(payload) < 8:
        raise ProtocolError(f"SET_MEM_TABLE payload of {len(payload)} bytes is too short")
    count, _padding = struct.unpack_from("<II", payload)
    if not 1 <= count <= MAX_REGIONS:
        raise ProtocolError(f"SET_MEM_TABLE names {count} regions; 1 to {MAX_REGIONS} are allowed")
    if len(payload) != 8 + count * MEM_REGION.size:
        raise ProtocolError(f"SET_MEM_TABLE of {count} regions must be {8 + count * MEM_REGION.size} bytes")
    return [RegionDesc(*MEM_REGION.unpack_from(payload, 8 + i * MEM_REGION.size)) for i in range(count)]
