"""One guest connection: the transport's interface to the device engine, and the dispatch of each command.

Order of work for each request (virtqueue contract section 5): a frame shorter than a header, or a
response area shorter than one, is answered with nothing (used length 0); the frame is decoded (every
check that needs no state); a response area too small for the command's largest answer gets nothing;
then the command's handler (:mod:`.engine_commands`) resolves ids, checks relationships, ranges and
quotas, and only then calls the runtime. Any refusal before the runtime call changes nothing. A runtime
error maps to its status; an engine defect answers INTERNAL_ERROR and asks the guest to reset. What the
guest holds is booked by :mod:`.engine_book`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..core.errors import IronAccelError
from ..runtime.errors import ReleaseIndeterminate
from .engine_commands import CheckedRead, GuestCommands
from .engine_objects import ResetReport
from .engine_policy import Refused, status_for
from .ids import ObjectError
from .wire_constants import HEADER_BYTES, Opcode, Status
from .wire_decode_request import decode_request
from .wire_errors import FrameTooShort, RequestRejected
from .wire_frames import Request, WriteBuffer, response_header
from .wire_structs import RequestHeader, TransferBufferRequest

if TYPE_CHECKING:
    from .engine import DeviceEngine

log = logging.getLogger("ironaccel.virtio.engine")


def _same_write(req: Request, head: bytes) -> bool:
    """Whether ``req`` is the WRITE_BUFFER whose header and transfer prefix ``head`` holds."""
    if req.opcode != Opcode.WRITE_BUFFER or len(head) < IN_PLACE_PREFIX:
        return False
    header = RequestHeader.unpack(head)
    body: WriteBuffer = req.body  # type: ignore[assignment]
    return (
        header.opcode == req.opcode
        and header.request_id == req.request_id
        and header.payload_bytes == TransferBufferRequest.SIZE + len(body.data)
        and TransferBufferRequest.unpack(head[HEADER_BYTES:IN_PLACE_PREFIX]) == body.transfer
    )


IN_PLACE_PREFIX = HEADER_BYTES + TransferBufferRequest.SIZE  # what process_into's in_place must hold


class GuestSession(GuestCommands):
    """The device as one guest sees it. Create with :meth:`DeviceEngine.connect`.

    Thread safety: commands of one session run one at a time (a lock); sessions run in parallel."""

    def __init__(self, engine: DeviceEngine, tag: int) -> None:
        super().__init__(engine, tag)
        self._closed = False

    # ---- the transport's interface ----------------------------------------------------------------
    def process(self, request: bytes | bytearray | memoryview, response_capacity: int) -> bytes | bytearray:
        """Run one command; returns the response bytes (at most ``response_capacity``) to write at the
        start of the chain's writable area. Empty: complete the chain with used length 0. A READ_BUFFER
        answer is a bytearray (the data is read into it once); every other answer is bytes."""
        with self._lock:
            if self._closed:
                return b""
            if self._quarantine:
                self._reclaim()
            reply = self._run(request, response_capacity)
            if isinstance(reply, CheckedRead):
                out = bytearray(HEADER_BYTES + reply.length)
                status = self._fill(reply, memoryview(out)[HEADER_BYTES:])
                if status is not Status.OK:
                    return response_header(status, reply.request_id)
                out[:HEADER_BYTES] = response_header(Status.OK, reply.request_id, reply.length)
                return out
            return reply

    def process_into(
        self,
        request: bytes | bytearray | memoryview,
        response: memoryview,
        in_place: bytes | None = None,
        *,
        tail: memoryview | None = None,
        sink: memoryview | None = None,
    ) -> int:
        """``process`` writing the answer straight into ``response`` (the chain's writable area); returns
        the used length. READ_BUFFER data goes from the backend into ``response`` with no copy between.

        ``in_place``: ``request`` is live guest memory, not a private copy, and ``in_place`` is a private
        copy of its first bytes (header and transfer prefix). Only a WRITE_BUFFER is served so: its data
        is only data (a guest changing it meanwhile changes only what it writes), and the command runs
        only if the header and prefix decoded from ``request`` equal the private copy's, so no value
        that was checked can change. Anything else answers INVALID_ARGUMENT.

        ``tail``: a WRITE_BUFFER whose data is a descriptor of its own: ``request`` is the private copy
        of its header and prefix, ``tail`` the data in guest memory, read where it lies (only data, as
        above). ``sink``: the chain's writable area is two regions, ``response`` (a header's room) and then
        ``sink``, filled in that order; a READ_BUFFER's data goes from the backend into ``sink``."""
        with self._lock:
            if self._closed:
                return 0
            if self._quarantine:
                self._reclaim()
            reply = self._run(request, response.nbytes + (0 if sink is None else sink.nbytes), in_place, tail)
            if isinstance(reply, CheckedRead):
                if sink is None:
                    data = response[HEADER_BYTES : HEADER_BYTES + reply.length]
                else:  # as the chain's bytes in order: the header fills ``response``, the data follows
                    data = sink[: reply.length]
                status = self._fill(reply, data)
                if status is not Status.OK:
                    response[:HEADER_BYTES] = response_header(status, reply.request_id)
                    return HEADER_BYTES
                response[:HEADER_BYTES] = response_header(Status.OK, reply.request_id, reply.length)
                return HEADER_BYTES + reply.length
            head = min(len(reply), response.nbytes)
            response[:head] = reply if head == len(reply) else reply[:head]
            if head < len(reply):  # only with a sink, which _run's capacity check counted
                assert sink is not None
                sink[: len(reply) - head] = reply[head:]
            return len(reply)

    def reset(self) -> ResetReport:
        """The guest reset its device: every id it holds goes stale, its objects are released child
        before parent without waiting; work that cannot be ended now is quarantined (and still charged
        to this guest) until the runtime finishes it. Ids keep counting up, so none comes back."""
        with self._lock:
            return self._teardown()

    def close(self, wait: float | None = None) -> ResetReport:
        """The guest is gone: release everything it owned. Work still running is given up to ``wait``
        seconds (default: the engine's ``close_wait``) to finish; whatever is still held after that is
        handed to the engine, which reclaims it when the work ends."""
        with self._lock:
            if self._closed:
                return ResetReport()
            report = self._teardown()
            self._drain(self.engine.close_wait if wait is None else wait)
            self._closed = True
            leftover, self._quarantine = self._quarantine, []
        self.engine._detach(self, leftover)
        return report

    @property
    def needs_reset(self) -> bool:
        """The virtio DEVICE_NEEDS_RESET condition: the device is lost or this session's book is in doubt."""
        return self._broken or self.engine.lost is not None

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- dispatch ---------------------------------------------------------------------------------
    def _run(
        self,
        request: bytes | bytearray | memoryview,
        capacity: int,
        in_place: bytes | None = None,
        tail: memoryview | None = None,
    ) -> bytes | CheckedRead:
        if capacity < HEADER_BYTES:
            return b""
        try:
            req = decode_request(request, self.engine.decode_limits, tail)
        except FrameTooShort:
            return b""
        except RequestRejected as exc:
            return response_header(exc.status, exc.request_id)
        if in_place is not None and not _same_write(req, in_place):
            return response_header(Status.INVALID_ARGUMENT, req.request_id)
        if capacity < req.response_capacity:
            return b""  # a short success area is the driver's error: nothing is written, nothing changes
        rid = req.request_id
        if self.engine.lost is not None and req.opcode != Opcode.GET_DEVICE_INFO:
            return response_header(Status.DEVICE_LOST, rid)
        try:
            return self._handlers[req.opcode](req)
        except (Refused, ObjectError) as exc:
            return response_header(exc.status, rid)
        except ReleaseIndeterminate as exc:
            self.engine.lose_device(exc)
            return response_header(Status.DEVICE_LOST, rid)
        except IronAccelError as exc:
            status = status_for(exc)
            if status is Status.DEVICE_LOST:
                self.engine.lose_device(exc)
            return response_header(status, rid)
        except Exception:  # an engine defect must not take the device down; the guest resets
            log.exception("guest %d: internal error in %s", self.tag, Opcode(req.opcode).name)
            self._broken = True
            return response_header(Status.INTERNAL_ERROR, rid)

    def _fill(self, read: CheckedRead, out: memoryview) -> Status:
        try:
            self.acc.read_buffer(read.handle, read.offset, read.length, out=out)
        except IronAccelError as exc:
            status = status_for(exc)
            if status is Status.DEVICE_LOST:
                self.engine.lose_device(exc)
            return status
        return Status.OK


__all__ = ["GuestSession"]
