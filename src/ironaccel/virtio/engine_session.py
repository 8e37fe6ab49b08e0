"""One guest connection: its object ids, its quota, and the fifteen commands mapped onto the runtime.

Order of work for each request (virtqueue contract section 5): a frame shorter than a header, or a
response area shorter than one, is answered with nothing (used length 0); the frame is decoded (every
check that needs no state); a response area too small for the command's largest answer gets nothing;
then ids are resolved, relationships, ranges and quotas checked, and only then the runtime called. Any
refusal before the runtime call changes nothing. A runtime error maps to its status; SUBMIT keeps the
rejected / indeterminate distinction on the wire.

Objects a guest releases are also accounted here: a buffer, program or queue retained by a live
(not yet destroyed) event answers BUSY to its release; a context with live children answers BUSY.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.errors import DeadlineExpired, DeviceLost, IronAccelError
from ..runtime import Access, ArtifactRef, Binding, BufferDesc, BufferUsage, EventState, MemoryDomain
from ..runtime.errors import ReleaseIndeterminate, ReleaseRejected, SubmitIndeterminate, SubmitRejected
from ..runtime.types import usage_allows
from .engine_objects import GuestObject, ObjectCounts, ResetReport, Teardown
from .engine_policy import MAX_ALIGNMENT, Refused, status_for
from .ids import ObjectError, ObjectKind, ObjectTable
from .wire_constants import HEADER_BYTES, EventStateCode, Opcode, Status
from .wire_decode_request import decode_request
from .wire_errors import FrameTooShort, RequestRejected
from .wire_frames import LoadProgram, Request, Submit, WriteBuffer, response_header
from .wire_structs import (
    AllocateBufferRequest,
    CreateQueueRequest,
    ObjectPayload,
    RequestHeader,
    SubmitResponse,
    TransferBufferRequest,
    WireEventState,
)

if TYPE_CHECKING:
    from .engine import DeviceEngine

log = logging.getLogger("ironaccel.virtio.engine")

_STATE_CODES = {
    EventState.PENDING: EventStateCode.PENDING,
    EventState.COMPLETE: EventStateCode.COMPLETE,
    EventState.FAILED: EventStateCode.FAILED,
    EventState.CANCELLED: EventStateCode.CANCELLED,
}


class _Read:
    """A READ_BUFFER that passed every check: the copy happens straight into the response."""

    def __init__(self, request_id: int, handle: Any, offset: int, length: int) -> None:
        self.request_id, self.handle, self.offset, self.length = request_id, handle, offset, length


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


class GuestSession:
    """The device as one guest sees it. Create with :meth:`DeviceEngine.connect`.

    Thread safety: commands of one session run one at a time (a lock); sessions run in parallel."""

    def __init__(self, engine: DeviceEngine, tag: int) -> None:
        self.engine = engine
        self.acc = engine.accelerator
        self.tag = tag
        self._lock = threading.Lock()
        self._table = ObjectTable(tag)
        self._used: collections.Counter[ObjectKind] = collections.Counter()  # live + quarantined, by kind
        self._bytes: collections.Counter[ObjectKind] = collections.Counter()  # charged bytes, by kind
        self._quarantine: list[GuestObject] = []
        self._closed = False
        self._limits_logged: set[str] = set()
        self._broken = False  # an engine defect left this session's book in doubt: reset needed
        self._handlers: dict[Opcode, Callable[[Request], bytes | _Read]] = {
            Opcode.GET_DEVICE_INFO: self._get_device_info,
            Opcode.CREATE_CONTEXT: self._create_context,
            Opcode.DESTROY_CONTEXT: self._destroy_context,
            Opcode.ALLOCATE_BUFFER: self._allocate_buffer,
            Opcode.FREE_BUFFER: self._free_buffer,
            Opcode.WRITE_BUFFER: self._write_buffer,
            Opcode.READ_BUFFER: self._read_buffer,
            Opcode.LOAD_PROGRAM: self._load_program,
            Opcode.UNLOAD_PROGRAM: self._unload_program,
            Opcode.CREATE_QUEUE: self._create_queue,
            Opcode.DESTROY_QUEUE: self._destroy_queue,
            Opcode.SUBMIT: self._submit,
            Opcode.POLL_EVENT: self._poll_event,
            Opcode.CANCEL_EVENT: self._cancel_event,
            Opcode.DESTROY_EVENT: self._destroy_event,
        }

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
            if isinstance(reply, _Read):
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
            if isinstance(reply, _Read):
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
            response[:head] = reply[:head]
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

    def live_objects(self) -> ObjectCounts:
        """Objects the guest can name now (quarantined ones excluded)."""
        with self._lock:
            return ObjectCounts.of(obj for _, _, obj in self._table.items())

    def quarantined(self) -> ObjectCounts:
        with self._lock:
            return ObjectCounts.of(self._quarantine)

    # ---- dispatch ---------------------------------------------------------------------------------
    def _run(
        self,
        request: bytes | bytearray | memoryview,
        capacity: int,
        in_place: bytes | None = None,
        tail: memoryview | None = None,
    ) -> bytes | _Read:
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
            return self._handlers[Opcode(req.opcode)](req)
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

    def _fill(self, read: _Read, out: memoryview) -> Status:
        try:
            self.acc.read_buffer(read.handle, read.offset, read.length, out=out)
        except IronAccelError as exc:
            status = status_for(exc)
            if status is Status.DEVICE_LOST:
                self.engine.lose_device(exc)
            return status
        return Status.OK

    @staticmethod
    def _ok(req: Request, payload: bytes = b"") -> bytes:
        return response_header(Status.OK, req.request_id, len(payload)) + payload

    # ---- book-keeping -----------------------------------------------------------------------------
    def _get(self, object_id: int, kind: ObjectKind) -> GuestObject:
        return self._table.get(object_id, kind)

    def _admit(self, kind: ObjectKind, context: GuestObject | None = None) -> None:
        """Count quotas before anything is created: guest-wide, then per context (the advertised limit)."""
        quota = self.engine.quota
        if self._used[kind] >= quota.total(kind):
            raise Refused(Status.RESOURCE_LIMIT, f"guest holds {self._used[kind]} {kind.name.lower()}s (its quota)")
        if context is not None:
            limit = self.engine.per_context_limit(kind)
            if context.children[kind] >= limit:
                raise Refused(Status.RESOURCE_LIMIT, f"context holds {limit} {kind.name.lower()}s (the limit)")
        self._table.reserve()

    def _insert(self, obj: GuestObject) -> int:
        """Give ``obj`` an id and charge it (only after the runtime created it)."""
        object_id = self._table.insert(obj.kind, obj)
        self._used[obj.kind] += 1
        self._bytes[obj.kind] += obj.charge
        obj.attach()
        return object_id

    def _created(self, req: Request, obj: GuestObject) -> bytes:
        return self._ok(req, ObjectPayload(self._insert(obj)).pack())

    def _uncharge(self, obj: GuestObject) -> None:
        self._used[obj.kind] -= 1
        self._bytes[obj.kind] -= obj.charge
        if obj.charge:
            self.engine.account.release(obj.charge)

    def _refuse_bytes(self, limit: str, message: str) -> Refused:
        """A byte limit's refusal (RESOURCE_LIMIT), logged for the host's operator once per limit and
        session: the wire carries only the status."""
        message = f"{message} (limit: {limit})"
        if limit not in self._limits_logged:
            self._limits_logged.add(limit)
            log.warning("guest %d: %s; further refusals by this limit are not logged", self.tag, message)
        return Refused(Status.RESOURCE_LIMIT, message)

    def _charge_host(self, nbytes: int, what: str) -> None:
        """Charge the daemon-wide account, before the backend runs (RESOURCE_LIMIT when over its cap)."""
        try:
            self.engine.account.charge(nbytes, what)
        except Refused as exc:
            raise self._refuse_bytes("--max-bytes", str(exc)) from None

    def _release(self, req: Request, kind: ObjectKind, release: Callable[[Any], None]) -> bytes:
        object_id = req.body.object_id  # type: ignore[union-attr]
        obj = self._get(object_id, kind)
        if obj.refs:
            raise Refused(Status.BUSY, f"{kind.name.lower()} is retained by {obj.refs} event(s) not yet destroyed")
        if obj.has_children:
            raise Refused(Status.BUSY, f"context still holds {sum(obj.children.values())} object(s)")
        try:
            release(obj.handle)
        except ReleaseRejected as exc:
            raise Refused(status_for(exc), f"release refused: {exc.error}") from exc  # the id stays valid
        except ReleaseIndeterminate:
            # The id is invalid from now on; what the backend holds is unknown, so the object stays charged.
            self._table.remove(object_id, kind)
            self._quarantine.append(obj)
            raise
        self._table.remove(object_id, kind)
        obj.detach()
        self._uncharge(obj)
        return self._ok(req)

    # ---- contexts ---------------------------------------------------------------------------------
    def _get_device_info(self, req: Request) -> bytes:
        return self._ok(req, self.engine.info_payload)

    def _create_context(self, req: Request) -> bytes:
        self._admit(ObjectKind.CONTEXT)
        handle = self.acc.create_context(self.engine.quota.context_quota())
        return self._created(req, GuestObject(ObjectKind.CONTEXT, handle))

    def _destroy_context(self, req: Request) -> bytes:
        return self._release(req, ObjectKind.CONTEXT, self.acc.destroy_context)

    # ---- buffers ----------------------------------------------------------------------------------
    def _allocate_buffer(self, req: Request) -> bytes:
        body: AllocateBufferRequest = req.body  # type: ignore[assignment]
        ctx = self._get(body.context_id, ObjectKind.CONTEXT)
        self._admit(ObjectKind.BUFFER, ctx)
        if body.alignment > MAX_ALIGNMENT:
            raise Refused(Status.UNSUPPORTED, f"alignment {body.alignment} above {MAX_ALIGNMENT}")
        quota = self.engine.quota.max_total_buffer_bytes
        budget = quota - self._bytes[ObjectKind.BUFFER]
        if body.bytes > budget:
            raise self._refuse_bytes(
                "--guest-bytes", f"ALLOCATE_BUFFER: {body.bytes} bytes, {budget} left of the guest's {quota}"
            )
        account = self.engine.account
        self._charge_host(body.bytes, "ALLOCATE_BUFFER")
        charged = body.bytes
        try:
            desc = BufferDesc(body.bytes, MemoryDomain(body.memory_domain), BufferUsage(body.usage), body.alignment)
            handle = self.acc.allocate_buffer(ctx.handle, desc)
            charge = max(handle.info.allocation_bytes, body.bytes)
            try:
                if charge > budget:
                    raise self._refuse_bytes(
                        "--guest-bytes", f"ALLOCATE_BUFFER: backing of {charge} bytes, {budget} left of {quota}"
                    )
                self._charge_host(charge - charged, "ALLOCATE_BUFFER backing")
                charged = charge
            except Refused:
                # The backend took more than either budget has left: give it back before any id exists.
                # If even that fails, ownership of the allocation is unknown: the device is lost.
                try:
                    self.acc.free_buffer(handle)
                except IronAccelError as exc:
                    raise DeviceLost(f"could not release an over-budget allocation: {exc}") from exc
                raise
        except BaseException:
            account.release(charged)
            raise
        obj = GuestObject(ObjectKind.BUFFER, handle, ctx, charge=charge, size=body.bytes, usage=body.usage)
        return self._created(req, obj)

    def _free_buffer(self, req: Request) -> bytes:
        return self._release(req, ObjectKind.BUFFER, self.acc.free_buffer)

    def _transfer(self, body: TransferBufferRequest, need: BufferUsage) -> GuestObject:
        buf = self._get(body.buffer_id, ObjectKind.BUFFER)
        if not buf.usage & need:
            raise Refused(Status.PERMISSION_DENIED, f"buffer was not allocated with {need.name}")
        if body.offset + body.bytes > buf.size:
            raise Refused(Status.OUT_OF_BOUNDS, f"[{body.offset}, +{body.bytes}) outside a {buf.size}-byte buffer")
        return buf

    def _write_buffer(self, req: Request) -> bytes:
        body: WriteBuffer = req.body  # type: ignore[assignment]
        buf = self._transfer(body.transfer, BufferUsage.TRANSFER_DESTINATION)
        self.acc.write_buffer(buf.handle, body.transfer.offset, body.data)
        return self._ok(req)

    def _read_buffer(self, req: Request) -> _Read:
        body: TransferBufferRequest = req.body  # type: ignore[assignment]
        buf = self._transfer(body, BufferUsage.TRANSFER_SOURCE)
        return _Read(req.request_id, buf.handle, body.offset, body.bytes)

    # ---- programs and queues ----------------------------------------------------------------------
    def _load_program(self, req: Request) -> bytes:
        body: LoadProgram = req.body  # type: ignore[assignment]
        prefix = body.prefix
        ctx = self._get(prefix.context_id, ObjectKind.CONTEXT)
        self._admit(ObjectKind.PROGRAM, ctx)
        quota = self.engine.quota.max_total_program_bytes
        budget = quota - self._bytes[ObjectKind.PROGRAM]
        if prefix.resident_bytes > budget:
            raise self._refuse_bytes(
                "--guest-program-bytes",
                f"LOAD_PROGRAM: {prefix.resident_bytes} resident bytes declared, {budget} left of the guest's {quota}",
            )
        self._charge_host(prefix.resident_bytes, "LOAD_PROGRAM")
        try:
            artifact = ArtifactRef(bytes(body.artifact), prefix.resident_bytes, prefix.target, prefix.format)
            handle = self.acc.load_program(ctx.handle, artifact)
        except BaseException:
            self.engine.account.release(prefix.resident_bytes)
            raise
        return self._created(req, GuestObject(ObjectKind.PROGRAM, handle, ctx, charge=prefix.resident_bytes))

    def _unload_program(self, req: Request) -> bytes:
        return self._release(req, ObjectKind.PROGRAM, self.acc.unload_program)

    def _create_queue(self, req: Request) -> bytes:
        body: CreateQueueRequest = req.body  # type: ignore[assignment]
        ctx = self._get(body.context_id, ObjectKind.CONTEXT)
        self._admit(ObjectKind.QUEUE, ctx)
        handle = self.acc.create_queue(ctx.handle)
        return self._created(req, GuestObject(ObjectKind.QUEUE, handle, ctx))

    def _destroy_queue(self, req: Request) -> bytes:
        return self._release(req, ObjectKind.QUEUE, self.acc.destroy_queue)

    # ---- submission and events --------------------------------------------------------------------
    def _submit(self, req: Request) -> bytes:
        body: Submit = req.body  # type: ignore[assignment]
        queue = self._get(body.prefix.queue_id, ObjectKind.QUEUE)
        program = self._get(body.prefix.program_id, ObjectKind.PROGRAM)
        ctx = queue.context
        if program.context is not ctx:
            raise Refused(Status.STALE_OBJECT, "program and queue belong to different contexts")
        bound: list[GuestObject] = []
        bindings: list[Binding] = []
        for i, b in enumerate(body.bindings):
            buf = self._get(b.buffer_id, ObjectKind.BUFFER)
            if buf.context is not ctx:
                raise Refused(Status.STALE_OBJECT, f"binding {i}: buffer of another context")
            if b.offset + b.bytes > buf.size:
                raise Refused(Status.OUT_OF_BOUNDS, f"binding {i}: [{b.offset}, +{b.bytes}) outside {buf.size} bytes")
            access = Access(b.access)
            if not usage_allows(BufferUsage(buf.usage), access):
                raise Refused(Status.PERMISSION_DENIED, f"binding {i}: buffer usage does not allow {access.name}")
            bound.append(buf)
            bindings.append(Binding(b.slot, buf.handle, b.offset, b.bytes, access))
        self._admit(ObjectKind.EVENT, ctx)
        # The guest's compute budget: no run may go on longer, whatever (or nothing) the guest asked.
        budget = self.engine.quota.max_run_seconds
        timeout = budget if body.prefix.timeout_ns == 0 else min(body.prefix.timeout_ns / 1e9, budget)
        retains = (queue, program, *bound)
        try:
            handle = self.acc.submit(queue.handle, program.handle, bindings, timeout)
        except SubmitRejected as exc:
            raise Refused(status_for(exc), f"submission rejected: {exc.error}") from exc
        except SubmitIndeterminate as exc:
            # Acceptance unknown: the event owns the resources, and the guest must get its id.
            status = status_for(exc)
            if status is Status.DEVICE_LOST:
                self.engine.lose_device(exc.error)
            if exc.event is None:
                raise DeviceLost(f"indeterminate submission without an event: {exc.error}") from exc
            obj = GuestObject(ObjectKind.EVENT, exc.event, ctx, retains=retains, indeterminate=True)
            payload = SubmitResponse(self._insert(obj)).pack()
            return response_header(status, req.request_id, len(payload)) + payload
        settle_by = time.perf_counter() + self.engine.poll_linger
        event_id = self._insert(GuestObject(ObjectKind.EVENT, handle, ctx, retains=retains, settle_by=settle_by))
        return self._ok(req, SubmitResponse(event_id).pack())

    def _poll_event(self, req: Request) -> bytes:
        event = self._get(req.body.object_id, ObjectKind.EVENT)  # type: ignore[union-attr]
        left = event.settle_by - time.perf_counter()
        if left > 0:
            # Fresh work: wait for it a little before answering. The wait lets the backend's threads
            # run (this thread would otherwise hold the interpreter while the guest polls again and
            # again), and a small program's poll then answers terminal at once. Bounded per event, so
            # polling many pending events never adds up.
            try:
                self.acc.wait(event.handle, left)
            except DeadlineExpired:
                pass
            event.settle_by = 0.0
        state = self.acc.poll_event(event.handle)
        error = Status.OK
        if state is EventState.FAILED:
            error = status_for(self.acc.event_error(event.handle))
            if error is Status.DEVICE_LOST:
                self.engine.lose_device(DeviceLost("an event failed with device loss"))
        return self._ok(req, WireEventState(_STATE_CODES[state], error).pack())

    def _cancel_event(self, req: Request) -> bytes:
        if not self.acc.supports_cancellation:
            raise Refused(Status.UNSUPPORTED, "this device does not cancel submitted work")
        event = self._get(req.body.object_id, ObjectKind.EVENT)  # type: ignore[union-attr]
        if not self.acc.cancel_event(event.handle):
            raise Refused(Status.BUSY, "the work already started or finished")
        return self._ok(req)

    def _destroy_event(self, req: Request) -> bytes:
        return self._release(req, ObjectKind.EVENT, self.acc.destroy_event)

    # ---- teardown ---------------------------------------------------------------------------------
    def _teardown(self) -> ResetReport:
        objects = [obj for _, obj in self._table.clear()]
        pass_ = self._pass()
        kept = pass_.run(objects, cancel=True)
        self._quarantine.extend(kept)
        self._broken = False
        reusable = not self._quarantine and self.engine.lost is None
        return ResetReport(ObjectCounts.of(pass_.released), ObjectCounts.of(kept), reusable)

    def _reclaim(self) -> None:
        self._quarantine = self._pass().run(self._quarantine, cancel=False)

    def _drain(self, wait: float) -> None:
        """Give quarantined work up to ``wait`` seconds to end, then reclaim what it held."""
        end = time.monotonic() + wait
        for obj in self._quarantine:
            remaining = end - time.monotonic()
            if obj.kind is not ObjectKind.EVENT or remaining <= 0 or self.engine.lost is not None:
                continue
            try:
                self.acc.wait(obj.handle, remaining)
            except IronAccelError:
                continue  # still pending, or gone with the device: left to the engine
        if self._quarantine:
            self._reclaim()

    def _pass(self) -> Teardown:
        return Teardown(self.acc, self._uncharge, self.engine.lose_device, self.engine.lost is not None)


__all__ = ["GuestSession"]
