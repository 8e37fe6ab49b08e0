"""Decoding the device's answer in the guest: a response checked against the request it answers.

:func:`decode_response` checks the header (flags zero, the payload length it announces, the request id
echoed), then the payload against the opcode answered: exact record lengths, object ids not zero, a
READ_BUFFER's data exactly what was asked for. A status this version does not know stays a raw number and
counts as failure; an unknown event state raises :class:`~.wire_errors.RecoveryRequired` (the guest keeps
the event and resets). Everything else malformed is a :class:`~.wire_errors.ResponseError`.
"""

from __future__ import annotations

from typing import Any

from .wire_constants import HARD_MAX_BINDINGS, HEADER_BYTES, EventStateCode, Opcode, Status, status_name
from .wire_errors import FrameTooShort, RecoveryRequired, ResponseError
from .wire_frames import Bytes, Response, byte_view
from .wire_structs import ObjectPayload, Packed, ResponseHeader, SubmitResponse, WireDeviceInfo, WireEventState

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
    view = byte_view(frame)
    if len(view) < HEADER_BYTES:
        raise FrameTooShort(f"a response header is {HEADER_BYTES} bytes, got {len(view)}")
    header = ResponseHeader.unpack(view)
    if header.flags:
        raise ResponseError(f"response flags {header.flags:#x} are not zero")
    if tail is not None and len(view) != HEADER_BYTES:
        raise ResponseError(f"a response with its payload apart has a {HEADER_BYTES}-byte frame, got {len(view)}")
    payload = view[HEADER_BYTES:] if tail is None else byte_view(tail)
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


__all__ = ["decode_response"]
