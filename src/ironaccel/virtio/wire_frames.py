"""Whole frames: typed requests and responses, their exact encodings, and the checks a decoder owes.

A request is a 16-byte header and exactly ``payload_bytes`` of payload. :func:`decode_request` applies,
in the specification's order, everything that needs no device state: the negotiated frame bound, the
exact length, the opcode and header flags, then the command's fixed length, counts, reserved fields and
value namespaces. Every count is compared with its bound before anything is built from it (a binding
count of 0xFFFFFFFF is RESOURCE_LIMIT without a single binding read). Variable tails (write data,
artifacts) are memoryviews into the frame, not copies.

A response is decoded against the opcode it answers (:func:`decode_response`): an unknown status stays a
raw number and counts as failure; an unknown event state raises :class:`RecoveryRequired`.

Encoding writes exactly what the records hold, so tests can build hostile frames from typed parts; the
``of`` constructors fill counts and lengths for well-formed ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from .wire_constants import (
    HARD_MAX_BINDINGS,
    HARD_MAX_REQUEST_BYTES,
    HARD_MAX_RESPONSE_BYTES,
    HEADER_BYTES,
    KNOWN_CONTEXT_FLAGS,
    KNOWN_PROGRAM_FLAGS,
    KNOWN_QUEUE_FLAGS,
    KNOWN_REQUEST_FLAGS,
    KNOWN_SUBMIT_FLAGS,
    KNOWN_USAGE_BITS,
    RESPONSE_CAPACITY,
    U64_MAX,
    Access,
    EventStateCode,
    MemoryDomain,
    Opcode,
    Status,
    status_name,
)
from .wire_errors import FrameTooShort, RecoveryRequired, RequestRejected, ResponseError
from .wire_structs import (
    AllocateBufferRequest,
    CreateContextRequest,
    CreateQueueRequest,
    LoadProgramRequest,
    ObjectPayload,
    Packed,
    RequestHeader,
    ResponseHeader,
    SubmitRequest,
    SubmitResponse,
    TransferBufferRequest,
    WireBinding,
    WireConfig,
    WireDeviceInfo,
    WireEventState,
)

Bytes = bytes | bytearray | memoryview

LOAD_PREFIX = LoadProgramRequest.SIZE
_MEMORY_DOMAINS = frozenset(int(d) for d in MemoryDomain)
_ACCESS = frozenset(int(a) for a in Access)


@dataclasses.dataclass(frozen=True)
class DecodeLimits:
    """The negotiated bounds a decoder enforces: frame sizes from the configuration, counts and sizes
    from the device information. Defaults are protocol 1.0's hard maxima."""

    max_request_bytes: int = HARD_MAX_REQUEST_BYTES
    max_response_bytes: int = HARD_MAX_RESPONSE_BYTES
    max_bindings: int = HARD_MAX_BINDINGS
    max_artifact_bytes: int = HARD_MAX_REQUEST_BYTES - HEADER_BYTES - LOAD_PREFIX
    max_buffer_bytes: int = U64_MAX

    @classmethod
    def negotiated(cls, config: WireConfig, info: WireDeviceInfo | None = None) -> DecodeLimits:
        if info is None:
            return cls(config.max_request_bytes, config.max_response_bytes)
        return cls(
            max_request_bytes=config.max_request_bytes,
            max_response_bytes=config.max_response_bytes,
            max_bindings=min(info.max_bindings_per_submission, HARD_MAX_BINDINGS),
            max_artifact_bytes=info.max_artifact_bytes,
            max_buffer_bytes=info.max_buffer_bytes,
        )


# ---- request bodies with a variable tail ---------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class WriteBuffer:
    transfer: TransferBufferRequest
    data: Bytes  # decoded: a view into the request frame

    @classmethod
    def of(cls, buffer_id: int, offset: int, data: Bytes) -> WriteBuffer:
        return cls(TransferBufferRequest(buffer_id, offset, len(memoryview(data).cast("B"))), data)


@dataclasses.dataclass(frozen=True)
class LoadProgram:
    prefix: LoadProgramRequest
    artifact: Bytes  # decoded: a view into the request frame

    @classmethod
    def of(
        cls, context_id: int, format: int, target: Iterable[int], artifact: Bytes, resident_bytes: int
    ) -> LoadProgram:
        words = tuple(target)
        words = words + (0,) * (12 - len(words))
        size = len(memoryview(artifact).cast("B"))
        return cls(LoadProgramRequest(context_id, format, 0, words, size, resident_bytes), artifact)


@dataclasses.dataclass(frozen=True)
class Submit:
    prefix: SubmitRequest
    bindings: tuple[WireBinding, ...]

    @classmethod
    def of(cls, queue_id: int, program_id: int, bindings: Iterable[WireBinding], timeout_ns: int = 0) -> Submit:
        bound = tuple(bindings)
        return cls(SubmitRequest(queue_id, program_id, len(bound), 0, timeout_ns), bound)


Body = Packed | WriteBuffer | LoadProgram | Submit | None


@dataclasses.dataclass(frozen=True)
class Request:
    """A decoded (hence valid) request, or one to encode. ``body`` by opcode: None (GET_DEVICE_INFO),
    CreateContextRequest, ObjectPayload (destroy/free/unload and the event commands),
    AllocateBufferRequest, WriteBuffer, TransferBufferRequest (READ_BUFFER), LoadProgram,
    CreateQueueRequest, Submit."""

    opcode: int
    request_id: int
    body: Body = None
    flags: int = 0

    def encode(self) -> bytes:
        payload = _encode_body(self.body)
        return RequestHeader(self.opcode, self.flags, len(payload), self.request_id).pack() + payload

    @property
    def response_capacity(self) -> int:
        """Writable bytes this command's largest response needs (checked before anything changes)."""
        if self.opcode == Opcode.READ_BUFFER and isinstance(self.body, TransferBufferRequest):
            return HEADER_BYTES + self.body.bytes
        return RESPONSE_CAPACITY[Opcode(self.opcode)]


def _encode_body(body: Body) -> bytes:
    if body is None:
        return b""
    if isinstance(body, Packed):
        return body.pack()
    if isinstance(body, WriteBuffer):
        return body.transfer.pack() + bytes(body.data)
    if isinstance(body, LoadProgram):
        return body.prefix.pack() + bytes(body.artifact)
    if isinstance(body, Submit):
        return body.prefix.pack() + b"".join(b.pack() for b in body.bindings)
    return bytes(body)  # an opaque payload (hostile frames in tests)


# ---- request decoding ----------------------------------------------------------------------------
class _Payload:
    """A request payload and the request id its rejections echo."""

    def __init__(self, view: memoryview, request_id: int, limits: DecodeLimits, tail: memoryview | None = None) -> None:
        self.view = view
        self.request_id = request_id
        self.limits = limits
        self.tail = tail  # WRITE_BUFFER data given apart from the frame (decode_request's ``tail``)

    def reject(self, status: Status, message: str) -> RequestRejected:
        return RequestRejected(status, self.request_id, message)

    def exact(self, cls: type[Packed], what: str) -> Any:
        if len(self.view) != cls.SIZE:
            raise self.reject(Status.INVALID_ARGUMENT, f"{what} payload is {len(self.view)} bytes, not {cls.SIZE}")
        return cls.unpack(self.view)

    def prefix(self, cls: type[Packed], what: str) -> Any:
        if len(self.view) < cls.SIZE:
            raise self.reject(Status.INVALID_ARGUMENT, f"{what} payload of {len(self.view)} bytes lacks its prefix")
        return cls.unpack(self.view)

    def nonzero(self, value: int, what: str) -> None:
        if value == 0:
            raise self.reject(Status.INVALID_ARGUMENT, f"{what} is zero")

    def flags(self, value: int, known: int, what: str) -> None:
        if value & ~known:
            raise self.reject(Status.UNSUPPORTED, f"{what} {value:#x} has bits protocol 1.0 does not assign")

    def reserved(self, value: int | bytes, what: str) -> None:
        if value if isinstance(value, int) else any(value):
            raise self.reject(Status.INVALID_ARGUMENT, f"reserved field {what} is not zero")

    def range(self, offset: int, length: int, what: str) -> None:
        self.nonzero(length, f"{what} byte count")
        if offset + length > U64_MAX:
            raise self.reject(Status.INVALID_ARGUMENT, f"{what} range {offset}+{length} overflows 64 bits")


def _no_payload(p: _Payload) -> None:
    if len(p.view):
        raise p.reject(Status.INVALID_ARGUMENT, f"GET_DEVICE_INFO carries no payload, got {len(p.view)} bytes")


def _object(p: _Payload) -> ObjectPayload:
    body = p.exact(ObjectPayload, "object")
    p.nonzero(body.object_id, "object id")
    return body


def _create_context(p: _Payload) -> CreateContextRequest:
    body = p.exact(CreateContextRequest, "CREATE_CONTEXT")
    p.flags(body.flags, KNOWN_CONTEXT_FLAGS, "context flags")
    p.reserved(body.reserved, "reserved")
    return body


def _allocate_buffer(p: _Payload) -> AllocateBufferRequest:
    body = p.exact(AllocateBufferRequest, "ALLOCATE_BUFFER")
    p.nonzero(body.context_id, "context id")
    p.nonzero(body.bytes, "buffer size")
    if body.alignment == 0 or body.alignment & (body.alignment - 1):
        raise p.reject(Status.INVALID_ARGUMENT, f"alignment {body.alignment} is not a power of two")
    if body.memory_domain not in _MEMORY_DOMAINS:
        raise p.reject(Status.INVALID_ARGUMENT, f"memory domain {body.memory_domain} is not assigned")
    p.reserved(body.reserved0, "reserved0")
    p.flags(body.usage, KNOWN_USAGE_BITS, "buffer usage")
    p.nonzero(body.usage, "buffer usage")
    p.reserved(body.reserved1, "reserved1")
    if body.bytes > p.limits.max_buffer_bytes:
        raise p.reject(Status.RESOURCE_LIMIT, f"buffer of {body.bytes} bytes exceeds {p.limits.max_buffer_bytes}")
    return body


def _transfer(p: _Payload, body: TransferBufferRequest) -> None:
    p.nonzero(body.buffer_id, "buffer id")
    p.range(body.offset, body.bytes, "transfer")


def _write_buffer(p: _Payload) -> WriteBuffer:
    prefix = p.prefix(TransferBufferRequest, "WRITE_BUFFER")
    _transfer(p, prefix)
    data = p.view[TransferBufferRequest.SIZE :] if p.tail is None else p.tail
    if p.tail is not None and len(p.view) != TransferBufferRequest.SIZE:
        raise p.reject(Status.INVALID_ARGUMENT, "WRITE_BUFFER data must follow its prefix in one place")
    if len(data) != prefix.bytes:
        raise p.reject(Status.INVALID_ARGUMENT, f"WRITE_BUFFER announces {prefix.bytes} bytes, carries {len(data)}")
    return WriteBuffer(prefix, data)


def _read_buffer(p: _Payload) -> TransferBufferRequest:
    body = p.exact(TransferBufferRequest, "READ_BUFFER")
    _transfer(p, body)
    if HEADER_BYTES + body.bytes > p.limits.max_response_bytes:
        limit = p.limits.max_response_bytes
        raise p.reject(Status.RESOURCE_LIMIT, f"reading {body.bytes} bytes exceeds the {limit}-byte response limit")
    return body


def _load_program(p: _Payload) -> LoadProgram:
    prefix = p.prefix(LoadProgramRequest, "LOAD_PROGRAM")
    p.nonzero(prefix.context_id, "context id")
    p.nonzero(prefix.format, "artifact format")
    p.flags(prefix.flags, KNOWN_PROGRAM_FLAGS, "program flags")
    p.nonzero(prefix.payload_bytes, "artifact size")
    p.nonzero(prefix.resident_bytes, "resident bytes")
    if prefix.payload_bytes > p.limits.max_artifact_bytes:
        limit = p.limits.max_artifact_bytes
        raise p.reject(Status.RESOURCE_LIMIT, f"artifact of {prefix.payload_bytes} bytes exceeds {limit}")
    if len(p.view) - LOAD_PREFIX != prefix.payload_bytes:
        carried = len(p.view) - LOAD_PREFIX
        raise p.reject(Status.INVALID_ARGUMENT, f"artifact announced as {prefix.payload_bytes} bytes, {carried} sent")
    return LoadProgram(prefix, p.view[LOAD_PREFIX:])


def _create_queue(p: _Payload) -> CreateQueueRequest:
    body = p.exact(CreateQueueRequest, "CREATE_QUEUE")
    p.nonzero(body.context_id, "context id")
    p.flags(body.flags, KNOWN_QUEUE_FLAGS, "queue flags")
    p.reserved(body.reserved, "reserved")
    return body


def _submit(p: _Payload) -> Submit:
    prefix = p.prefix(SubmitRequest, "SUBMIT")
    p.nonzero(prefix.queue_id, "queue id")
    p.nonzero(prefix.program_id, "program id")
    p.flags(prefix.flags, KNOWN_SUBMIT_FLAGS, "submit flags")
    count = prefix.binding_count
    p.nonzero(count, "binding count")
    limit = min(p.limits.max_bindings, HARD_MAX_BINDINGS)
    if count > limit:
        raise p.reject(Status.RESOURCE_LIMIT, f"{count} bindings exceed the limit {limit}")
    expected = SubmitRequest.SIZE + count * WireBinding.SIZE
    if len(p.view) != expected:
        raise p.reject(Status.INVALID_ARGUMENT, f"{count} bindings need a {expected}-byte payload, got {len(p.view)}")
    bindings = []
    slots: set[int] = set()
    for i in range(count):
        b = WireBinding.unpack(p.view, SubmitRequest.SIZE + i * WireBinding.SIZE)
        p.nonzero(b.buffer_id, f"binding {i} buffer id")
        p.range(b.offset, b.bytes, f"binding {i}")
        if b.access not in _ACCESS:
            raise p.reject(Status.INVALID_ARGUMENT, f"binding {i} access {b.access} is not assigned")
        p.reserved(b.reserved, f"binding {i} reserved")
        if b.slot in slots:
            raise p.reject(Status.INVALID_ARGUMENT, f"slot {b.slot} is bound twice")
        slots.add(b.slot)
        bindings.append(b)
    return Submit(prefix, tuple(bindings))


_DECODERS: dict[Opcode, Callable[[_Payload], Body]] = {
    Opcode.GET_DEVICE_INFO: _no_payload,
    Opcode.CREATE_CONTEXT: _create_context,
    Opcode.DESTROY_CONTEXT: _object,
    Opcode.ALLOCATE_BUFFER: _allocate_buffer,
    Opcode.FREE_BUFFER: _object,
    Opcode.WRITE_BUFFER: _write_buffer,
    Opcode.READ_BUFFER: _read_buffer,
    Opcode.LOAD_PROGRAM: _load_program,
    Opcode.UNLOAD_PROGRAM: _object,
    Opcode.CREATE_QUEUE: _create_queue,
    Opcode.DESTROY_QUEUE: _object,
    Opcode.SUBMIT: _submit,
    Opcode.POLL_EVENT: _object,
    Opcode.CANCEL_EVENT: _object,
    Opcode.DESTROY_EVENT: _object,
}


def _byte_view(frame: Bytes) -> memoryview:
    view = memoryview(frame)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def decode_request(frame: Bytes, limits: DecodeLimits = DecodeLimits(), tail: Bytes | None = None) -> Request:
    """Decode one request. Raises FrameTooShort (no header: answer nothing) or RequestRejected (answer
    its status with an empty payload); nothing else.

    ``tail``: the request's last bytes, held apart from ``frame`` (a chain whose WRITE_BUFFER data sits
    in a descriptor of its own, read where it lies); only a WRITE_BUFFER may have one, and its frame
    then ends with the transfer prefix."""
    view = _byte_view(frame)
    extra = None if tail is None else _byte_view(tail)
    if len(view) < HEADER_BYTES:
        raise FrameTooShort(f"a request header is {HEADER_BYTES} bytes, got {len(view)}")
    header = RequestHeader.unpack(view)
    rid = header.request_id
    total = HEADER_BYTES + header.payload_bytes
    size = len(view) + (0 if extra is None else len(extra))
    if max(total, size) > limits.max_request_bytes:
        size = max(total, size)
        raise RequestRejected(Status.RESOURCE_LIMIT, rid, f"{size}-byte request exceeds {limits.max_request_bytes}")
    if size != total:
        raise RequestRejected(Status.INVALID_ARGUMENT, rid, f"header announces {total} bytes, the request has {size}")
    try:
        opcode = Opcode(header.opcode)
    except ValueError:
        raise RequestRejected(Status.UNSUPPORTED, rid, f"unknown opcode {header.opcode:#06x}") from None
    if header.flags & ~KNOWN_REQUEST_FLAGS:
        raise RequestRejected(Status.UNSUPPORTED, rid, f"request flags {header.flags:#x} are reserved")
    if rid == 0:
        raise RequestRejected(Status.INVALID_ARGUMENT, rid, "request id is zero")
    if extra is not None and opcode is not Opcode.WRITE_BUFFER:
        raise RequestRejected(Status.INVALID_ARGUMENT, rid, f"{opcode.name} carries no detached data")
    body = _DECODERS[opcode](_Payload(view[HEADER_BYTES:], rid, limits, extra))
    return Request(opcode, rid, body)


# ---- responses -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Response:
    """A response. ``status`` stays a raw integer: a value this version does not know is a failure.
    ``body``: the typed payload of an OK response (WireDeviceInfo, ObjectPayload, WireEventState,
    SubmitResponse, or the bytes READ_BUFFER read), SubmitResponse for an indeterminate SUBMIT, else None."""

    status: int
    request_id: int
    body: Packed | Bytes | None = None
    flags: int = 0

    def encode(self) -> bytes:
        payload = _encode_body(self.body)
        return ResponseHeader(self.status, self.flags, len(payload), self.request_id).pack() + payload

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def known_status(self) -> Status | None:
        try:
            return Status(self.status)
        except ValueError:
            return None

    @property
    def indeterminate(self) -> bool:
        """A SUBMIT whose acceptance is unknown: the event id in ``body`` owns the bound resources."""
        return not self.ok and isinstance(self.body, SubmitResponse)


def response_header(status: int, request_id: int, payload_bytes: int = 0) -> bytes:
    return ResponseHeader(status, 0, payload_bytes, request_id).pack()


_OBJECT_RESPONSES = frozenset({Opcode.CREATE_CONTEXT, Opcode.ALLOCATE_BUFFER, Opcode.LOAD_PROGRAM, Opcode.CREATE_QUEUE})


def _event_state(view: memoryview) -> WireEventState:
    state = WireEventState.unpack(view)
    try:
        code = EventStateCode(state.state)
    except ValueError:
        raise RecoveryRequired(f"unknown event state {state.state:#06x}: keep the event and reset") from None
    if state.reserved:
        raise ResponseError("event state reserved field is not zero")
    if (code is EventStateCode.FAILED) != (state.error != Status.OK):
        raise ResponseError(f"event state {code.name} with error {status_name(state.error)}")
    return state


def decode_response(
    frame: Bytes,
    opcode: int,
    *,
    request_id: int | None = None,
    read_bytes: int | None = None,
    tail: Bytes | None = None,
) -> Response:
    """Decode the response to a request of ``opcode`` (``read_bytes``: what a READ_BUFFER asked for).
    ``tail``: the payload, where it was written apart from the header (a READ_BUFFER into the guest's
    own memory); ``frame`` is then the header alone. Raises FrameTooShort, ResponseError or
    RecoveryRequired."""
    view = _byte_view(frame)
    if len(view) < HEADER_BYTES:
        raise FrameTooShort(f"a response header is {HEADER_BYTES} bytes, got {len(view)}")
    header = ResponseHeader.unpack(view)
    if header.flags:
        raise ResponseError(f"response flags {header.flags:#x} are not zero")
    if tail is not None and len(view) != HEADER_BYTES:
        raise ResponseError(f"a response with its payload apart has a {HEADER_BYTES}-byte frame, got {len(view)}")
    payload = view[HEADER_BYTES:] if tail is None else _byte_view(tail)
    if len(payload) != header.payload_bytes:
        raise ResponseError(f"response announces {header.payload_bytes} payload bytes, has {len(payload)}")
    if request_id is not None and header.request_id != request_id:
        raise ResponseError(f"response to request {header.request_id:#x}, expected {request_id:#x}")
    rid = header.request_id
    if header.status != Status.OK:
        if opcode == Opcode.SUBMIT and len(payload) == SubmitResponse.SIZE:
            return Response(header.status, rid, _nonzero_id(SubmitResponse.unpack(payload), "event_id"))
        if len(payload):
            raise ResponseError(f"{status_name(header.status)} response carries {len(payload)} payload bytes")
        return Response(header.status, rid)
    body: Packed | Bytes | None
    if opcode == Opcode.GET_DEVICE_INFO:
        body = _device_info(_exact(payload, WireDeviceInfo))
    elif opcode in _OBJECT_RESPONSES:
        body = _nonzero_id(_exact(payload, ObjectPayload), "object_id")
    elif opcode == Opcode.SUBMIT:
        body = _nonzero_id(_exact(payload, SubmitResponse), "event_id")
    elif opcode == Opcode.POLL_EVENT:
        _exact(payload, WireEventState)
        body = _event_state(payload)
    elif opcode == Opcode.READ_BUFFER:
        if read_bytes is not None and len(payload) != read_bytes:
            raise ResponseError(f"READ_BUFFER returned {len(payload)} bytes, {read_bytes} were asked for")
        body = payload
    else:
        if len(payload):
            raise ResponseError(f"OK response to opcode {opcode:#06x} carries {len(payload)} payload bytes")
        body = None
    return Response(header.status, rid, body)


def _exact(payload: memoryview, cls: type[Packed]) -> Any:
    if len(payload) != cls.SIZE:
        raise ResponseError(f"{cls.__name__} is {cls.SIZE} bytes, the response carries {len(payload)}")
    return cls.unpack(payload)


def _nonzero_id(record: Any, field: str) -> Any:
    if getattr(record, field) == 0:
        raise ResponseError(f"response names object id zero ({field})")
    return record


def _device_info(info: WireDeviceInfo) -> WireDeviceInfo:
    if info.reserved:
        raise ResponseError("device info reserved field is not zero")
    counts = (
        info.max_contexts,
        info.max_buffers_per_context,
        info.max_programs_per_context,
        info.max_queues_per_context,
        info.max_events_per_context,
        info.max_buffer_bytes,
        info.max_artifact_bytes,
    )
    if not all(counts) or not 1 <= info.max_bindings_per_submission <= HARD_MAX_BINDINGS:
        raise ResponseError("device info advertises a zero limit or a binding limit outside 1..4096")
    return info


__all__ = [
    "Body",
    "DecodeLimits",
    "LoadProgram",
    "Request",
    "Response",
    "Submit",
    "WriteBuffer",
    "decode_request",
    "decode_response",
    "response_header",
]
