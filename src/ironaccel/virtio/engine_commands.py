"""The fifteen commands of protocol 1.0, each mapped onto the runtime for one guest.

A handler receives a decoded (hence valid) request; it resolves the ids the request names, checks the
relationships between their objects (one context), ranges against buffers, usage bits and quotas, and
only then calls the runtime; it returns the response bytes. A refusal before the runtime call raises
:class:`~.engine_policy.Refused` and changes nothing; a runtime error propagates, and the session answers
its status. SUBMIT keeps the rejected / indeterminate distinction on the wire.

Objects a guest releases are accounted here too: a buffer, program or queue retained by a live (not yet
destroyed) event answers BUSY to its release; a context with live children answers BUSY.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.errors import DeadlineExpired, DeviceLost, IronAccelError
from ..runtime import Access, ArtifactRef, Binding, BufferDesc, BufferUsage, EventState, MemoryDomain
from ..runtime.errors import ReleaseIndeterminate, ReleaseRejected, SubmitIndeterminate, SubmitRejected
from ..runtime.types import usage_allows
from .engine_book import GuestBook
from .engine_objects import GuestObject
from .engine_policy import MAX_ALIGNMENT, Refused, status_for
from .ids import ObjectKind
from .wire_constants import EventStateCode, Opcode, Status
from .wire_frames import LoadProgram, Request, Submit, WriteBuffer, response_header
from .wire_structs import (
    AllocateBufferRequest,
    CreateQueueRequest,
    ObjectPayload,
    SubmitResponse,
    TransferBufferRequest,
    WireEventState,
)

if TYPE_CHECKING:
    from .engine import DeviceEngine

_STATE_CODES = {
    EventState.PENDING: EventStateCode.PENDING,
    EventState.COMPLETE: EventStateCode.COMPLETE,
    EventState.FAILED: EventStateCode.FAILED,
    EventState.CANCELLED: EventStateCode.CANCELLED,
}


class CheckedRead:
    """A READ_BUFFER that passed every check: the copy happens straight into the response."""

    def __init__(self, request_id: int, handle: Any, offset: int, length: int) -> None:
        self.request_id, self.handle, self.offset, self.length = request_id, handle, offset, length


class GuestCommands(GuestBook):
    """The handlers of one guest's commands, by opcode in ``_handlers`` (see the module's description)."""

    def __init__(self, engine: DeviceEngine, tag: int) -> None:
        super().__init__(engine, tag)
        # Keyed by the opcode's wire value (an Opcode member looks up the same entry).
        handlers: dict[Opcode, Callable[[Request], bytes | CheckedRead]] = {
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
        self._handlers: dict[int, Callable[[Request], bytes | CheckedRead]] = {int(k): v for k, v in handlers.items()}

    @staticmethod
    def _ok(req: Request, payload: bytes = b"") -> bytes:
        return response_header(Status.OK, req.request_id, len(payload)) + payload

    def _created(self, req: Request, obj: GuestObject) -> bytes:
        return self._ok(req, ObjectPayload(self._insert(obj)).pack())

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
        if not buf.usage & need.value:  # an int test: the flag's own operators are Python enum calls
            raise Refused(Status.PERMISSION_DENIED, f"buffer was not allocated with {need.name}")
        if body.offset + body.bytes > buf.size:
            raise Refused(Status.OUT_OF_BOUNDS, f"[{body.offset}, +{body.bytes}) outside a {buf.size}-byte buffer")
        return buf

    def _write_buffer(self, req: Request) -> bytes:
        body: WriteBuffer = req.body  # type: ignore[assignment]
        buf = self._transfer(body.transfer, BufferUsage.TRANSFER_DESTINATION)
        self.acc.write_buffer(buf.handle, body.transfer.offset, body.data)
        return self._ok(req)

    def _read_buffer(self, req: Request) -> CheckedRead:
        body: TransferBufferRequest = req.body  # type: ignore[assignment]
        buf = self._transfer(body, BufferUsage.TRANSFER_SOURCE)
        return CheckedRead(req.request_id, buf.handle, body.offset, body.bytes)

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


__all__ = ["GuestCommands"]
