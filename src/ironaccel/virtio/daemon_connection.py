"""One guest of the daemon: its vhost-user set-up, its command queue, its engine session.

A connection runs on its own thread and owns everything of its guest: the mapped memory, the
eventfds, the DeviceQueue, and one engine session (so object IDs, quotas and cleanup are per guest).
It waits on three things at once: the control socket (set-up and teardown messages), the kick
eventfd (chains are available) and the daemon's stop eventfd. When the guest disconnects, dies or
breaks the protocol, the session is closed (releasing every object the guest owned) and the memory
unmapped.

Bounds (every value is the guest's): one queue, of a power-of-two size up to ``max_queue_size``;
at most 8 memory regions totalling ``max_memory_bytes``; descriptors must be eventfds; the ring must
lie inside the mapped regions. A set-up request that fails is answered with a failure (REPLY_ACK) or,
when no reply was asked for, ends the connection.

Deadlines: a message that starts must finish within ``message_timeout_s``; a connection must have its
command queue running within ``setup_timeout_s`` of being accepted, or it is sent a refusal
(:func:`refuse`, "set-up not finished within N s") and closed, which frees its guest slot. Nothing here
runs on the daemon's accept thread except the constructor, which never touches the socket.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import selectors
import socket
import time
from collections.abc import Callable
from typing import Protocol

from ..core.errors import IronAccelError
from . import transport as tp
from .transport import Disconnected, Message, ProtocolError, ProtocolFeature, Request
from .transport_memory import SharedRegion
from .virtqueue import (
    F_EVENT_IDX,
    F_INDIRECT_DESC,
    F_VERSION_1,
    MAX_CHAIN,
    MAX_QUEUE_SIZE,
    ChainError,
    GuestMemory,
    MemoryRegion,
    RingAddresses,
    RingError,
    is_queue_size,
)
from .virtqueue_device import Chain, DeviceQueue
from .wire_constants import HEADER_BYTES, Opcode
from .wire_structs import TransferBufferRequest

log = logging.getLogger("ironaccel.virtio.daemon")


IN_PLACE_PREFIX = HEADER_BYTES + TransferBufferRequest.SIZE  # a WRITE_BUFFER's header and transfer prefix
IN_PLACE_MIN_BYTES = 64 << 10  # below this a private copy of the request costs less than checking it twice


class Session(Protocol):
    """What the daemon needs of an engine session: one request in, its response out."""

    def process(self, request: bytes, response_capacity: int) -> bytes: ...

    # Optional: ``process_into(request, response, in_place) -> used`` (engine_session.GuestSession).

    def close(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class DeviceOptions:
    """What the daemon offers and how far it trusts a guest."""

    config: bytes = b""  # the device-specific configuration space (GET_CONFIG)
    features: int = F_VERSION_1 | tp.F_PROTOCOL_FEATURES | F_EVENT_IDX | F_INDIRECT_DESC
    protocol_features: int = int(ProtocolFeature.REPLY_ACK | ProtocolFeature.CONFIG | ProtocolFeature.RESET_DEVICE)
    max_queue_size: int = MAX_QUEUE_SIZE
    max_chain: int = MAX_CHAIN
    max_request: int = 16 << 20
    max_response: int = 16 << 20
    max_memory_bytes: int = 1 << 30  # all regions of one guest together
    message_timeout_s: float = 5.0  # a message that starts must finish within this
    setup_timeout_s: float = 10.0  # from accept until the command queue runs; then the slot is taken back
    # After the last chain, keep looking at the ring this long before sleeping on the kick eventfd: a
    # guest's next command then needs no kick and no wakeup of this thread (vhost's busy-loop idea).
    poll_s: float = dataclasses.field(default_factory=lambda: default_poll_s())


def default_poll_s() -> float:
    """50 us where a spare core lets a spinning thread help; 0 on a host of fewer than 4 cores, where
    the spin competes with the very guest it waits for and makes round trips slower, not faster (ADR
    0010, "Consequences")."""
    return 50e-6 if (os.cpu_count() or 1) >= 4 else 0.0


@dataclasses.dataclass
class _Vring:
    size: int = 0
    addrs: tuple[int, int, int] | None = None  # desc, used, avail, as the front end's user addresses
    base: int = 0
    kick: int = -1
    call: int = -1
    err: int = -1
    enabled: bool = False


class GuestConnection:
    """The device side of one guest. ``run`` serves it until it leaves or the daemon stops."""

    def __init__(self, sock: socket.socket, connect: Callable[[], Session], options: DeviceOptions, name: str) -> None:
        self.sock = sock
        self._connect = connect
        self.session = connect()
        self.options = options
        self.name = name
        self.features = 0
        self.protocol_features = 0
        self.regions: list[tuple[tp.RegionDesc, SharedRegion]] = []
        self.memory: GuestMemory | None = None
        self.vring = _Vring()
        self.queue: DeviceQueue | None = None
        self.commands = 0
        self.rejected_chains = 0
        self._protocol_offered = options.protocol_features
        self._setup_by = time.monotonic() + options.setup_timeout_s
        self._started = False  # the command queue ran at least once: set-up is over
        if not options.config:  # nothing to read: do not offer a configuration space
            self._protocol_offered &= ~ProtocolFeature.CONFIG
        self._sel = selectors.DefaultSelector()

    # ---- the loop -------------------------------------------------------------------------------------
    def run(self, stop_fd: int) -> None:
        self._sel.register(self.sock, selectors.EVENT_READ, "socket")
        self._sel.register(stop_fd, selectors.EVENT_READ, "stop")
        try:
            while True:
                wait = None if self._started else self._setup_by - time.monotonic()
                if wait is not None and wait <= 0:
                    limit = f"set-up not finished within {self.options.setup_timeout_s:g} s"
                    log.warning("%s: %s, disconnecting", self.name, limit)
                    refuse(self.sock, limit)
                    return
                for key, _ in self._sel.select(wait):
                    if key.data == "stop":
                        log.info("%s: daemon stopping", self.name)
                        return
                    if key.data == "socket":
                        self.sock.settimeout(self.options.message_timeout_s)
                        self._handle(tp.receive(self.sock))
                        self.sock.settimeout(None)
                    elif key.data == "kick" and self.queue is not None:
                        _drain_eventfd(self.vring.kick)
                        self._drain()
        except Disconnected:
            log.info("%s: disconnected after %d commands", self.name, self.commands)
        except ProtocolError as exc:
            log.warning("%s: protocol error, disconnecting: %s", self.name, exc)
        finally:
            self.close()

    def close(self) -> None:
        self._stop_ring()
        self._sel.close()
        for fd in (self.vring.call, self.vring.err):
            if fd >= 0:
                os.close(fd)
        self.vring.call = self.vring.err = -1
        try:
            self.session.close()
        finally:
            self._unmap()
            self.sock.close()

    # ---- the command queue ----------------------------------------------------------------------------
    def _drain(self) -> None:
        """Serve every available chain, then ask for the next kick and look once more (lost wakeups)."""
        queue = self.queue
        assert queue is not None
        idle_until = time.perf_counter() + self.options.poll_s
        try:
            while True:
                queue.suppress_kicks()
                while True:
                    try:
                        chain = queue.pop()
                    except ChainError as exc:
                        self.rejected_chains += 1
                        log.warning("%s: %s", self.name, exc)
                        queue.reject(exc)
                        self._call()
                        continue
                    if chain is None:
                        break
                    self._serve(queue, chain)
                    idle_until = time.perf_counter() + self.options.poll_s
                if time.perf_counter() < idle_until:
                    continue  # a guest that answers at once is served without a kick (busy polling)
                if not queue.enable_kicks():
                    return
        except RingError as exc:
            log.error("%s: command queue broken, stopped until reset: %s", self.name, exc)
            self._stop_ring()
            if self.vring.err >= 0:
                _signal(self.vring.err)

    def _serve(self, queue: DeviceQueue, chain: Chain) -> None:
        capacity = min(chain.writable_bytes, self.options.max_response)
        into = getattr(self.session, "process_into", None)
        head = chain.readable[0][:IN_PLACE_PREFIX] if len(chain.readable) == 1 else None
        try:
            apart = None if into is None else self._serve_apart(chain, into)
            if apart is not None:
                queue.complete(chain.head, apart)
                self.commands += 1
                self._call()
                return
            if into is not None and len(chain.writable) == 1:
                # The answer (READ_BUFFER data included) is written where the guest reads it: no copy
                # between. A large WRITE_BUFFER is also read where the guest wrote it (see process_into).
                in_place = None
                if head is not None and chain.readable_bytes >= IN_PLACE_MIN_BYTES:
                    in_place = bytes(head)
                    if int.from_bytes(in_place[:2], "little") != Opcode.WRITE_BUFFER:
                        in_place = None
                request = chain.readable[0] if in_place is not None else chain.gather()
                used = into(request, chain.writable[0][:capacity], in_place)
                queue.complete(chain.head, used)
                self.commands += 1
                self._call()
                return
            response = self.session.process(chain.gather(), capacity)
        except Exception:  # an engine fault must not take the other guests down with it
            log.exception("%s: engine failed on a %d-byte request; nothing written", self.name, chain.readable_bytes)
            response = b""
        if len(response) > capacity:
            log.error("%s: engine answered %d bytes into %d; nothing written", self.name, len(response), capacity)
            response = b""
        queue.complete(chain.head, chain.scatter(response))
        self.commands += 1
        self._call()

    def _serve_apart(self, chain: Chain, into: Callable[..., int]) -> int | None:
        """Serve a transfer whose data has a descriptor of its own (the guest's arrays in guest memory,
        ``VirtioAccelerator.host_array``) without gathering it: a WRITE_BUFFER of two readable regions,
        header and prefix then data, is read where the data lies; a READ_BUFFER whose writable regions
        are a header's room then the data is read by the backend straight into the second. Returns the used
        length, or None for any other chain (the general path serves it). The opcode is read from a
        private copy."""
        readable, writable = chain.readable, chain.writable
        if len(readable) == 2 and len(writable) == 1 and len(readable[0]) == IN_PLACE_PREFIX:
            head = bytes(readable[0])
            if int.from_bytes(head[:2], "little") != Opcode.WRITE_BUFFER:
                return None
            return into(head, writable[0][: self.options.max_response], tail=readable[1])
        if len(readable) == 1 and len(writable) == 2 and len(writable[0]) == HEADER_BYTES:
            request = chain.gather()
            if int.from_bytes(request[:2], "little") != Opcode.READ_BUFFER:
                return None
            return into(request, writable[0], sink=writable[1][: max(0, self.options.max_response - HEADER_BYTES)])
        return None

    def _call(self) -> None:
        if self.queue is not None and self.queue.needs_call() and self.vring.call >= 0:
            _signal(self.vring.call)

    # ---- set-up messages ------------------------------------------------------------------------------
    def _handle(self, msg: Message) -> None:
        handler: Callable[[Message], bytes | None] | None = getattr(self, f"_on_{_lower(msg.request)}", None)
        try:
            if handler is None:
                raise ProtocolError(f"unsupported request {msg.request}")
            answer = handler(msg)
        except (ProtocolError, IronAccelError, OSError) as exc:
            msg.close_fds()
            if not self._acks(msg):
                raise ProtocolError(str(exc)) from exc
            log.warning("%s: refused %s: %s", self.name, _lower(msg.request) or msg.request, exc)
            tp.reply(self.sock, msg.request, tp.U64.pack(1))
            return
        msg.close_fds()  # any descriptor a handler did not take
        if answer is not None:
            tp.reply(self.sock, msg.request, answer)
        elif self._acks(msg):
            tp.reply(self.sock, msg.request, tp.U64.pack(0))

    def _acks(self, msg: Message) -> bool:
        return bool(msg.flags & tp.NEED_REPLY and self.protocol_features & ProtocolFeature.REPLY_ACK)

    def _on_get_features(self, msg: Message) -> bytes:
        return tp.U64.pack(self.options.features)

    def _on_set_features(self, msg: Message) -> None:
        (features,) = msg.expect(tp.U64)
        if features & ~self.options.features:
            raise ProtocolError(f"features {features:#x} include bits never offered ({self.options.features:#x})")
        if not features & F_VERSION_1:
            raise ProtocolError("VIRTIO_F_VERSION_1 is required")
        self._not_running("SET_FEATURES")
        self.features = features

    def _on_get_protocol_features(self, msg: Message) -> bytes:
        return tp.U64.pack(self._protocol_offered)

    def _on_set_protocol_features(self, msg: Message) -> None:
        (features,) = msg.expect(tp.U64)
        if features & ~self._protocol_offered:
            raise ProtocolError(f"protocol features {features:#x} include bits never offered")
        self.protocol_features = features

    def _on_set_owner(self, msg: Message) -> None:
        return None

    def _on_get_queue_num(self, msg: Message) -> bytes:
        return tp.U64.pack(1)

    def _on_get_config(self, msg: Message) -> bytes:
        if len(msg.payload) < tp.CONFIG_HEADER.size:
            raise ProtocolError("GET_CONFIG payload is shorter than its header")
        offset, size, _flags = tp.CONFIG_HEADER.unpack_from(msg.payload)
        config = self.options.config
        if size > tp.MAX_CONFIG or len(msg.payload) != tp.CONFIG_HEADER.size + size or offset + size > len(config):
            raise ProtocolError(f"GET_CONFIG of [{offset}, +{size}) outside the {len(config)}-byte configuration")
        return tp.CONFIG_HEADER.pack(offset, size, 0) + config[offset : offset + size]

    def _on_set_mem_table(self, msg: Message) -> None:
        descs = tp.decode_mem_table(msg.payload)
        if len(msg.fds) != len(descs):
            raise ProtocolError(f"SET_MEM_TABLE names {len(descs)} regions but carries {len(msg.fds)} descriptors")
        total = sum(d.size for d in descs)
        if total > self.options.max_memory_bytes:
            raise ProtocolError(f"{total} bytes of guest memory exceed this daemon's {self.options.max_memory_bytes}")
        running = self.queue is not None
        self._stop_ring(keep_kick=True)  # the queue restarts on the new table, from where it stopped
        self._unmap()
        fds, msg.fds = msg.fds, []
        mapped: list[tuple[tp.RegionDesc, SharedRegion]] = []
        try:
            for i, (desc, fd) in enumerate(zip(descs, fds, strict=True)):
                fds[i] = -1
                mapped.append((desc, SharedRegion.attach(fd, desc, self.options.max_memory_bytes)))
            memory = GuestMemory([MemoryRegion(d.guest_addr, d.size, r.view) for d, r in mapped])
        except BaseException:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)
            for _, region in mapped:
                region.close()
            raise
        self.regions, self.memory = mapped, memory
        log.info("%s: mapped %d region(s), %d bytes", self.name, len(mapped), total)
        if running:
            self._maybe_start()

    def _vring_index(self, index: int) -> None:
        if index != 0:
            raise ProtocolError(f"queue {index} does not exist (the device has one command queue)")

    def _on_set_vring_num(self, msg: Message) -> None:
        index, num = msg.expect(tp.VRING_STATE)
        self._vring_index(index)
        self._not_running("SET_VRING_NUM")
        if not is_queue_size(num) or num > self.options.max_queue_size:
            raise ProtocolError(f"queue size {num}: a power of two up to {self.options.max_queue_size} is required")
        self.vring.size = num

    def _on_set_vring_addr(self, msg: Message) -> None:
        index, flags, desc, used, avail, _log = msg.expect(tp.VRING_ADDR)
        self._vring_index(index)
        self._not_running("SET_VRING_ADDR")
        if flags:
            raise ProtocolError(f"vring address flags {flags:#x} (dirty logging) are not supported")
        self.vring.addrs = (desc, used, avail)

    def _on_set_vring_base(self, msg: Message) -> None:
        index, num = msg.expect(tp.VRING_STATE)
        self._vring_index(index)
        self._not_running("SET_VRING_BASE")
        if num > 0xFFFF:
            raise ProtocolError(f"first available index {num} is not a 16-bit ring index")
        self.vring.base = num

    def _on_get_vring_base(self, msg: Message) -> bytes:
        index, _ = msg.expect(tp.VRING_STATE)
        self._vring_index(index)
        base = self.queue.next_avail if self.queue is not None else self.vring.base
        self._stop_ring()
        self.vring.base = base
        return tp.VRING_STATE.pack(0, base)

    def _eventfd(self, msg: Message) -> int:
        (value,) = msg.expect(tp.U64)
        self._vring_index(value & tp.VRING_INDEX_MASK)
        if value & ~(tp.VRING_INDEX_MASK | tp.VRING_NOFD):
            raise ProtocolError(f"eventfd request value {value:#x} has unknown bits")
        if value & tp.VRING_NOFD:
            raise ProtocolError("polling without an eventfd is not supported")
        fd = msg.take_fd()
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target != "anon_inode:[eventfd]":
            os.close(fd)
            raise ProtocolError(f"{Request(msg.request).name} must carry an eventfd, got {target or 'something else'}")
        os.set_blocking(fd, False)  # a counter the guest filled up must not block this thread
        return fd

    def _on_set_vring_kick(self, msg: Message) -> None:
        fd = self._eventfd(msg)
        self._stop_ring()
        self.vring.kick = fd
        self._maybe_start()

    def _on_set_vring_call(self, msg: Message) -> None:
        fd = self._eventfd(msg)
        if self.vring.call >= 0:
            os.close(self.vring.call)
        self.vring.call = fd

    def _on_set_vring_err(self, msg: Message) -> None:
        fd = self._eventfd(msg)
        if self.vring.err >= 0:
            os.close(self.vring.err)
        self.vring.err = fd

    def _on_set_vring_enable(self, msg: Message) -> None:
        index, enable = msg.expect(tp.VRING_STATE)
        self._vring_index(index)
        if enable not in (0, 1):
            raise ProtocolError(f"SET_VRING_ENABLE value {enable} is neither 0 nor 1")
        self.vring.enabled = bool(enable)
        if enable:
            self._maybe_start()
        else:
            self._stop_ring(keep_kick=True)

    def _on_reset_device(self, msg: Message) -> None:
        """Back to the state after connect: rings forgotten, every object of the old session released."""
        self._stop_ring()
        self.vring = _Vring(call=self.vring.call, err=self.vring.err)
        reset = getattr(self.session, "reset", None)
        if reset is not None:
            reset()  # the engine's own reset: every id of this guest goes stale
        else:
            self.session.close()
            self.session = self._connect()
        self.features = 0
        log.info("%s: device reset", self.name)

    _on_reset_owner = _on_reset_device

    # ---- ring start and stop --------------------------------------------------------------------------
    def _not_running(self, what: str) -> None:
        if self.queue is not None:
            raise ProtocolError(f"{what} while the queue runs (stop it with GET_VRING_BASE first)")

    def _maybe_start(self) -> None:
        v = self.vring
        enabled = v.enabled or not self.features & tp.F_PROTOCOL_FEATURES
        if self.queue is not None or self.memory is None or not v.size or v.addrs is None or v.kick < 0:
            return
        if not enabled:
            return
        desc, used, avail = (self._guest_addr(a) for a in v.addrs)
        try:
            self.queue = DeviceQueue(
                self.memory,
                v.size,
                RingAddresses(desc, avail, used),
                features=self.features,
                max_chain=min(self.options.max_chain, MAX_CHAIN),
                max_request=self.options.max_request,
                next_avail=v.base,
            )
        except RingError as exc:
            raise ProtocolError(str(exc)) from exc
        self._sel.register(v.kick, selectors.EVENT_READ, "kick")
        self._started = True
        log.info("%s: command queue of %d entries running (features %#x)", self.name, v.size, self.features)
        self._drain()  # chains posted before the kick descriptor arrived

    def _guest_addr(self, user_addr: int) -> int:
        for desc, _ in self.regions:
            if desc.user_addr <= user_addr < desc.user_addr + desc.size:
                return user_addr - desc.user_addr + desc.guest_addr
        raise ProtocolError(f"ring address {user_addr:#x} is in no memory region")

    def _stop_ring(self, keep_kick: bool = False) -> None:
        if self.queue is not None:
            self.vring.base = self.queue.next_avail
            self.queue = None
        if self.vring.kick >= 0:
            try:
                self._sel.unregister(self.vring.kick)
            except (KeyError, ValueError):
                pass
            if not keep_kick:
                os.close(self.vring.kick)
                self.vring.kick = -1

    def _unmap(self) -> None:
        self.memory = None
        regions, self.regions = self.regions, []
        for _, region in regions:
            region.close()


def refuse(sock: socket.socket, reason: str) -> None:
    """Tell the peer why it is not served (the transport's refusal message), never waiting: the message
    is a few hundred bytes at most, and a peer whose socket buffer is full simply does not get it.
    The caller closes the socket."""
    try:
        sock.settimeout(0)
        sock.send(tp.encode_refusal(reason))
    except OSError:
        pass


def _lower(request: int) -> str:
    try:
        return Request(request).name.lower()
    except ValueError:
        return ""


def _signal(fd: int) -> None:
    try:
        os.eventfd_write(fd, 1)
    except BlockingIOError:
        pass  # the counter is saturated: the peer has a wakeup pending anyway


def _drain_eventfd(fd: int) -> None:
    try:
        os.eventfd_read(fd)
    except BlockingIOError:
        pass
