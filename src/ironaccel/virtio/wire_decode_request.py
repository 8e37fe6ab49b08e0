"""Decoding a guest's request: every check that needs no device state, in the specification's order.

:func:`decode_request` applies the negotiated frame bound, the exact length, the opcode and header flags,
then the command's fixed length, counts, reserved fields and value namespaces, and returns a typed
:class:`~.wire_frames.Request` or raises the status to answer. Every count is compared with its bound
before anything is built from it (a binding count of 0xFFFFFFFF is RESOURCE_LIMIT without a single
binding read). Variable tails (write data, artifacts) are memoryviews into the frame, not copies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .wire_constants import (
    HARD_MAX_BINDINGS,
    HEADER_BYTES,
    KNOWN_CONTEXT_FLAGS,
    KNOWN_PROGRAM_FLAGS,
    KNOWN_QUEUE_FLAGS,
    KNOWN_REQUEST_FLAGS,
    KNOWN_SUBMIT_FLAGS,
    KNOWN_USAGE_BITS,
    U64_MAX,
    Access,
    MemoryDomain,
    Opcode,
    Status,
)
from .wire_errors import FrameTooShort, RequestRejected
from .wire_frames import LOAD_PREFIX, Body, Bytes, DecodeLimits, LoadProgram, Request, Submit, WriteBuffer, byte_view
from .wire_structs import (
    AllocateBufferRequest,
    CreateContextRequest,
    CreateQueueRequest,
    LoadProgramRequest,
    ObjectPayload,
    Packed,
    RequestHeader,
    SubmitRequest,
    TransferBufferRequest,
    WireBinding,
)

_MEMORY_DOMAINS = frozenset(int(d) for d in MemoryDomain)
_ACCESS = frozenset(int(a) for a in Access)
_HARD_MAXIMA = DecodeLimits()  # protocol 1.0's own bounds: what a decoder applies before any negotiation
_HEADER = RequestHeader._STRUCT  # read straight into locals: no record per request


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

# The opcode's wire value to its member and decoder: one lookup, and a miss is an unknown opcode.
_BY_CODE: dict[int, tuple[Opcode, Callable[[_Payload], Body]]] = {int(op): (op, fn) for op, fn in _DECODERS.items()}


def decode_request(frame: Bytes, limits: DecodeLimits = _HARD_MAXIMA, tail: Bytes | None = None) -> Request:
    """Decode one request. Raises FrameTooShort (no header: answer nothing) or RequestRejected (answer
    its status with an empty payload); nothing else.

    ``tail``: the request's last bytes, held apart from ``frame`` (a chain whose WRITE_BUFFER data sits
    in a descriptor of its own, read where it lies); only a WRITE_BUFFER may have one, and its frame
    then ends with the transfer prefix."""
    view = byte_view(frame)
    extra = None if tail is None else byte_view(tail)
    if len(view) < HEADER_BYTES:
        raise FrameTooShort(f"a request header is {HEADER_BYTES} bytes, got {len(view)}")
    code, flags, payload_bytes, rid = _HEADER.unpack_from(view)
    total = HEADER_BYTES + payload_bytes
    size = len(view) + (0 if extra is None else len(extra))
    if max(total, size) > limits.max_request_bytes:
        size = max(total, size)
        raise RequestRejected(Status.RESOURCE_LIMIT, rid, f"{size}-byte request exceeds {limits.max_request_bytes}")
    if size != total:
        raise RequestRejected(Status.INVALID_ARGUMENT, rid, f"header announces {total} bytes, the request has {size}")
    known = _BY_CODE.get(code)
    if known is None:
        raise RequestRejected(Status.UNSUPPORTED, rid, f"unknown opcode {code:#06x}")
    opcode, decoder = known
    if flags & ~KNOWN_REQUEST_FLAGS:
        raise RequestRejected(Status.UNSUPPORTED, rid, f"request flags {flags:#x} are reserved")
    if rid == 0:
        raise RequestRejected(Status.INVALID_ARGUMENT, rid, "request id is zero")
    if extra is not None and opcode is not Opcode.WRITE_BUFFER:
        raise RequestRejected(Status.INVALID_ARGUMENT, rid, f"{opcode.name} carries no detached data")
    body = decoder(_Payload(view[HEADER_BYTES:], rid, limits, extra))
    return Request(opcode, rid, body)


__all__ = ["decode_request"]
