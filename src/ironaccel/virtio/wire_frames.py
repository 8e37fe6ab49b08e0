"""Whole frames: the typed requests and responses of protocol 1.0 and their exact encodings.

A request is a 16-byte header and exactly ``payload_bytes`` of payload, its body typed by opcode
(:class:`Request`); a response is a header and, for a command that answers with data, its typed payload
(:class:`Response`). Variable tails (write data, artifacts) stay memoryviews into the frame they were
decoded from, not copies.

Encoding writes exactly what the records hold, so tests can build hostile frames from typed parts; the
``of`` constructors fill counts and lengths for well-formed ones. Decoding, with every check a decoder
owes, lives beside: :func:`~.wire_decode_request.decode_request` (a guest's request, in the device) and
:func:`~.wire_decode_response.decode_response` (the device's answer, in the guest), within the bounds of
:class:`DecodeLimits`.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable

from .wire_constants import (
    HARD_MAX_BINDINGS,
    HARD_MAX_REQUEST_BYTES,
    HARD_MAX_RESPONSE_BYTES,
    HEADER_BYTES,
    RESPONSE_CAPACITY,
    U64_MAX,
    Opcode,
    Status,
)
from .wire_structs import (
    LoadProgramRequest,
    Packed,
    RequestHeader,
    ResponseHeader,
    SubmitRequest,
    SubmitResponse,
    TransferBufferRequest,
    WireBinding,
    WireConfig,
    WireDeviceInfo,
)

Bytes = bytes | bytearray | memoryview

LOAD_PREFIX = LoadProgramRequest.SIZE


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
        return RESPONSE_CAPACITY[self.opcode]  # an Opcode member or its wire value: the same entry


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


def byte_view(frame: Bytes) -> memoryview:
    """``frame`` as a flat view of bytes (no copy)."""
    view = memoryview(frame)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


# ---- responses -----------------------------------------------------------------------------------
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


_RESPONSE_HEADER = ResponseHeader._STRUCT


def response_header(status: int, request_id: int, payload_bytes: int = 0) -> bytes:
    try:  # every answer has one: packed without a record made for it
        return _RESPONSE_HEADER.pack(status, 0, payload_bytes, request_id)
    except struct.error:
        return ResponseHeader(status, 0, payload_bytes, request_id).pack()  # raises InvalidArgument


__all__ = [
    "Body",
    "DecodeLimits",
    "LoadProgram",
    "Request",
    "Response",
    "Submit",
    "WriteBuffer",
    "response_header",
]
