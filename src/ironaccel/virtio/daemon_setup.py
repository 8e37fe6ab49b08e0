"""The device's side of vhost-user set-up for one guest: every set-up message checked, then applied.

The front end sets the device up with the requests a VMM would send, in whatever order it likes:
features, protocol features, the memory table (memfds, mapped here), the queue's size, addresses and
first index, and eventfds for kicks, calls and errors. :class:`DeviceSetUp` keeps that state for one
connection and starts the command queue once it has all it needs (``_maybe_start``); a new memory table
or kick eventfd restarts the queue where it stopped, GET_VRING_BASE stops it.

Bounds (every value is the guest's): one queue, of a power-of-two size up to ``max_queue_size``; at most
8 memory regions totalling ``max_memory_bytes``; descriptors must be eventfds; the ring must lie inside
the mapped regions. A set-up request that fails is answered with a failure (REPLY_ACK) or, when no reply
was asked for, ends the connection (ProtocolError).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import selectors
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core.errors import IronAccelError
from . import transport as tp
from .transport import Message, ProtocolError, ProtocolFeature, Request
from .transport_memory import SharedRegion
from .virtqueue import F_VERSION_1, MAX_CHAIN, GuestMemory, MemoryRegion, RingAddresses, RingError, is_queue_size
from .virtqueue_device import DeviceQueue

if TYPE_CHECKING:
    from .daemon_connection import DeviceOptions

log = logging.getLogger("ironaccel.virtio.daemon")


@dataclasses.dataclass
class _Vring:
    """The command queue as the front end described it (what ``_maybe_start`` starts it from)."""

    size: int = 0
    addrs: tuple[int, int, int] | None = None  # desc, used, avail, as the front end's user addresses
    base: int = 0
    kick: int = -1
    call: int = -1
    err: int = -1
    enabled: bool = False


class DeviceSetUp:
    """The set-up state of one guest connection and the handler of each set-up message (``_on_<request>``).

    What the connection does with a running queue is its own: :meth:`_drain` serves the chains available
    (called as soon as the queue starts), :meth:`_reset_session` gives the guest a fresh engine session."""

    def __init__(self, sock: socket.socket, options: DeviceOptions, name: str) -> None:
        self.sock = sock
        self.options = options
        self.name = name
        self.features = 0
        self.protocol_features = 0
        self.regions: list[tuple[tp.RegionDesc, SharedRegion]] = []
        self.memory: GuestMemory | None = None
        self.vring = _Vring()
        self.queue: DeviceQueue | None = None
        self._protocol_offered = options.protocol_features
        self._started = False  # the command queue ran at least once: set-up is over
        if not options.config:  # nothing to read: do not offer a configuration space
            self._protocol_offered &= ~ProtocolFeature.CONFIG
        self._sel = selectors.DefaultSelector()

    # ---- what the connection does with them -----------------------------------------------------------
    def _drain(self) -> None:
        """Serve every chain available on the running queue."""
        raise NotImplementedError

    def _reset_session(self) -> None:
        """Release every object of the guest's engine session; its ids go stale."""
        raise NotImplementedError

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
        self._reset_session()
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


def _lower(request: int) -> str:
    try:
        return Request(request).name.lower()
    except ValueError:
        return ""


__all__ = ["DeviceSetUp"]
