"""One guest of the daemon: its connection's loop, its command queue served, its engine session.

A connection runs on its own thread and owns everything of its guest: the mapped memory, the
eventfds, the DeviceQueue, and one engine session (so object IDs, quotas and cleanup are per guest).
It waits on three things at once: the control socket (set-up and teardown messages, handled by
:class:`~.daemon_setup.DeviceSetUp`), the kick eventfd (chains are available) and the daemon's stop
eventfd. When the guest disconnects, dies or breaks the protocol, the session is closed (releasing every
object the guest owned) and the memory unmapped.

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

from . import transport as tp
from .daemon_setup import DeviceSetUp
from .transport import Disconnected, ProtocolError, ProtocolFeature
from .virtqueue import F_EVENT_IDX, F_INDIRECT_DESC, F_VERSION_1, MAX_CHAIN, MAX_QUEUE_SIZE, ChainError, RingError
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


class GuestConnection(DeviceSetUp):
    """The device side of one guest. ``run`` serves it until it leaves or the daemon stops."""

    def __init__(self, sock: socket.socket, connect: Callable[[], Session], options: DeviceOptions, name: str) -> None:
        self._connect = connect
        self.session = connect()
        super().__init__(sock, options, name)
        self.commands = 0
        self.rejected_chains = 0
        self._setup_by = time.monotonic() + options.setup_timeout_s

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
                if len(chain.readable) == 1 and chain.readable_bytes >= IN_PLACE_MIN_BYTES:
                    in_place = bytes(chain.readable[0][:IN_PLACE_PREFIX])
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

    def _reset_session(self) -> None:
        reset = getattr(self.session, "reset", None)
        if reset is not None:
            reset()  # the engine's own reset: every id of this guest goes stale
        else:
            self.session.close()
            self.session = self._connect()


def refuse(sock: socket.socket, reason: str) -> None:
    """Tell the peer why it is not served (the transport's refusal message), never waiting: the message
    is a few hundred bytes at most, and a peer whose socket buffer is full simply does not get it.
    The caller closes the socket."""
    try:
        sock.settimeout(0)
        sock.send(tp.encode_refusal(reason))
    except OSError:
        pass


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
