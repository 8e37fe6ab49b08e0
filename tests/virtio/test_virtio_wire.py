"""Protocol 1.0 wire codec against virtio-accel's frozen layout manifest and canonical vectors, and rule by rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ironaccel.virtio import wire as w

PROTOCOL = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "virtio-accel" / "protocol"

if not PROTOCOL.is_dir():
    pytest.skip(f"virtio-accel protocol vectors not found at {PROTOCOL}", allow_module_level=True)

LAYOUT = json.loads((PROTOCOL / "layout.json").read_text())
VECTORS = json.loads((PROTOCOL / "vectors.json").read_text())
FRAMES = {f["name"]: f for f in VECTORS["frames"]}
EDGES = {e["name"]: e for e in VECTORS["edge_cases"]}

RID = 0x0102030405060708
CTX, BUF, PROG, QUEUE, EVENT = (
    0x1112131415161718,
    0x2122232425262728,
    0x3132333435363738,
    0x4142434445464748,
    0x5152535455565758,
)


# ---- layout and constants ------------------------------------------------------------------------
@pytest.mark.parametrize("cls", w.ALL_STRUCTURES, ids=lambda c: c.__name__)
def test_structure_layout_matches_the_manifest(cls):
    entry = LAYOUT["structures"][cls.__name__]
    assert cls.SIZE == entry["size"]
    assert cls.offsets() == entry["fields"]
    assert len(cls().pack()) == cls.SIZE


def test_every_manifest_structure_is_declared():
    assert {c.__name__ for c in w.ALL_STRUCTURES} == set(LAYOUT["structures"])


def test_constants_match_the_manifest():
    assert {o.name: o.value for o in w.Opcode} == {k: int(v, 16) for k, v in LAYOUT["opcodes"].items()}
    assert {s.name: s.value for s in w.Status} == LAYOUT["statuses"]
    assert {s.name: s.value for s in w.EventStateCode} == LAYOUT["event_states"]
    assert {c.name: c.value for c in w.AcceleratorClass} == LAYOUT["accelerator_classes"]
    assert {d.name: d.value for d in w.MemoryDomain} == LAYOUT["memory_domains"]
    assert {a.name: a.value for a in w.Access} == LAYOUT["binding_access"]
    usage = {k: int(v, 16) for k, v in LAYOUT["buffer_usage"].items()}
    assert usage.pop("KNOWN_BITS") == w.KNOWN_USAGE_BITS
    assert {u.name: u.value for u in w.BufferUsage if u.value} == usage
    caps = LAYOUT["capabilities"]
    assert {c.name: c.value for c in w.Capability if c.value} == {k: int(v, 16) for k, v in caps["assigned"].items()}
    assert sum(int(v, 16) for v in caps["reserved"].values()) == w.RESERVED_CAPABILITIES
    features = {k: int(v, 16) for k, v in LAYOUT["features"]["reserved"].items()}
    assert {f.name: f.value for f in w.Feature if f.value} == features
    assert int(LAYOUT["features"]["baseline"], 16) == w.BASELINE_FEATURES
    assert set(LAYOUT["known_flags"].values()) == {0}
    queue = LAYOUT["queue"]
    assert (queue["command_index"], queue["baseline_count"]) == (w.COMMAND_QUEUE, w.BASELINE_COMMAND_QUEUES)
    assert queue["hard_max_chain_descriptors"] == w.HARD_MAX_CHAIN_DESCRIPTORS
    assert (queue["min_max_request_bytes"], queue["min_max_response_bytes"]) == (97, 92)
    assert (queue["hard_max_request_bytes"], queue["hard_max_response_bytes"]) == (16 << 20, 16 << 20)
    assert queue["hard_max_bindings"] == w.HARD_MAX_BINDINGS
    assert (LAYOUT["protocol"]["major"], LAYOUT["protocol"]["minor"]) == (w.PROTOCOL_MAJOR, w.PROTOCOL_MINOR)


# ---- canonical frames ----------------------------------------------------------------------------
CONFIG_FIELDS = {
    "config_minimum": w.WireConfig(1, 0, 1, 2, 97, 92),
    "config_maximum": w.WireConfig(1, 0, 1, 256, 16 << 20, 16 << 20),
}

REQUEST_BODIES = {
    "request_get_device_info": None,
    "request_create_context": w.CreateContextRequest(0, 0),
    "request_destroy_context": w.ObjectPayload(CTX),
    "request_allocate_buffer": w.AllocateBufferRequest(CTX, 4096, 64, 3, bytes(7), 0x0C, 0),
    "request_free_buffer": w.ObjectPayload(BUF),
    "request_write_buffer": w.WriteBuffer(w.TransferBufferRequest(BUF, 4, 4), b"\xde\xad\xbe\xef"),
    "request_read_buffer": w.TransferBufferRequest(BUF, 4, 4),
    "request_load_program": w.LoadProgram(
        w.LoadProgramRequest(CTX, 1, 0, tuple(range(12)), 4, 4096), b"\xa1\xb2\xc3\xd4"
    ),
    "request_unload_program": w.ObjectPayload(PROG),
    "request_create_queue": w.CreateQueueRequest(CTX, 0, 0),
    "request_destroy_queue": w.ObjectPayload(QUEUE),
    "request_submit": w.Submit(
        w.SubmitRequest(QUEUE, PROG, 1, 0, 1_000_000), (w.WireBinding(BUF, 0, 4096, 7, 3, bytes(3)),)
    ),
    "request_poll_event": w.ObjectPayload(EVENT),
    "request_cancel_event": w.ObjectPayload(EVENT),
    "request_destroy_event": w.ObjectPayload(EVENT),
}

MOCK_INFO = w.WireDeviceInfo(
    uuid=b"virtio-accelmock",
    accelerator_class=1,
    vendor_id=0x12345678,
    device_id=0x9ABCDEF0,
    capabilities=0x07,
    max_contexts=64,
    max_buffers_per_context=1024,
    max_programs_per_context=256,
    max_queues_per_context=16,
    max_events_per_context=4096,
    max_bindings_per_submission=256,
    max_buffer_bytes=1 << 30,
    max_artifact_bytes=16 << 20,
)

# name -> (opcode answered, status, body)
RESPONSES = {
    "response_get_device_info": (w.Opcode.GET_DEVICE_INFO, w.Status.OK, MOCK_INFO),
    "response_create_context": (w.Opcode.CREATE_CONTEXT, w.Status.OK, w.ObjectPayload(CTX)),
    "response_destroy_context": (w.Opcode.DESTROY_CONTEXT, w.Status.OK, None),
    "response_allocate_buffer": (w.Opcode.ALLOCATE_BUFFER, w.Status.OK, w.ObjectPayload(BUF)),
    "response_free_buffer": (w.Opcode.FREE_BUFFER, w.Status.OK, None),
    "response_write_buffer": (w.Opcode.WRITE_BUFFER, w.Status.OK, None),
    "response_read_buffer": (w.Opcode.READ_BUFFER, w.Status.OK, b"\xde\xad\xbe\xef"),
    "response_load_program": (w.Opcode.LOAD_PROGRAM, w.Status.OK, w.ObjectPayload(PROG)),
    "response_unload_program": (w.Opcode.UNLOAD_PROGRAM, w.Status.OK, None),
    "response_create_queue": (w.Opcode.CREATE_QUEUE, w.Status.OK, w.ObjectPayload(QUEUE)),
    "response_destroy_queue": (w.Opcode.DESTROY_QUEUE, w.Status.OK, None),
    "response_submit_accepted": (w.Opcode.SUBMIT, w.Status.OK, w.SubmitResponse(EVENT)),
    "response_submit_indeterminate": (w.Opcode.SUBMIT, w.Status.DEVICE_LOST, w.SubmitResponse(EVENT)),
    "response_poll_event_pending": (w.Opcode.POLL_EVENT, w.Status.OK, w.WireEventState(0, 0, 0)),
    "response_poll_event_complete": (w.Opcode.POLL_EVENT, w.Status.OK, w.WireEventState(1, 0, 0)),
    "response_poll_event_failed": (w.Opcode.POLL_EVENT, w.Status.OK, w.WireEventState(2, 9, 0)),
    "response_poll_event_cancelled": (w.Opcode.POLL_EVENT, w.Status.OK, w.WireEventState(3, 0, 0)),
    "response_cancel_event": (w.Opcode.CANCEL_EVENT, w.Status.OK, None),
    "response_destroy_event": (w.Opcode.DESTROY_EVENT, w.Status.OK, None),
    "response_unknown_opcode": (0xDEAD, w.Status.UNSUPPORTED, None),
}


def test_every_vector_frame_has_expectations():
    assert set(FRAMES) == set(CONFIG_FIELDS) | set(REQUEST_BODIES) | set(RESPONSES)
    assert len(FRAMES) == 37


@pytest.mark.parametrize("name", sorted(CONFIG_FIELDS))
def test_config_vector(name):
    frame = bytes.fromhex(FRAMES[name]["hex"])
    config = w.WireConfig.decode(frame)
    assert config == CONFIG_FIELDS[name]
    assert config.pack() == frame


@pytest.mark.parametrize("name", sorted(REQUEST_BODIES))
def test_request_vector_decodes_to_its_fields_and_reencodes(name):
    frame = bytes.fromhex(FRAMES[name]["hex"])
    request = w.decode_request(frame)
    assert request.opcode == w.Opcode[FRAMES[name]["opcode"]]
    assert request.request_id == RID
    assert request.body == REQUEST_BODIES[name]
    assert request.encode() == frame
    # built from typed parts, the same bytes come out
    assert w.Request(request.opcode, RID, REQUEST_BODIES[name]).encode() == frame


@pytest.mark.parametrize("name", sorted(RESPONSES))
def test_response_vector_decodes_to_its_fields_and_reencodes(name):
    frame = bytes.fromhex(FRAMES[name]["hex"])
    opcode, status, body = RESPONSES[name]
    read_bytes = 4 if opcode == w.Opcode.READ_BUFFER else None
    response = w.decode_response(frame, opcode, request_id=RID, read_bytes=read_bytes)
    assert response.status == status == w.Status[FRAMES[name]["status"]]
    assert response.request_id == RID
    assert response.body == body
    assert response.encode() == frame
    assert w.Response(status, RID, body).encode() == frame
    assert response.indeterminate == (name == "response_submit_indeterminate")


def test_vector_event_states_name_their_state():
    for name, code in (("pending", 0), ("complete", 1), ("failed", 2), ("cancelled", 3)):
        frame = bytes.fromhex(FRAMES[f"response_poll_event_{name}"]["hex"])
        state = w.decode_response(frame, w.Opcode.POLL_EVENT).body
        assert w.EventStateCode(state.state).name == name.upper() and state.state == code


# ---- edge cases ----------------------------------------------------------------------------------
def _outcome(edge: dict) -> str:
    frame = bytes.fromhex(edge["hex"])
    try:
        if edge["kind"] == "config":
            config = w.WireConfig.decode(frame)
            return "compatible-baseline" if config.protocol_minor > w.PROTOCOL_MINOR else "accepted"
        if edge["kind"] == "request":
            w.decode_request(frame)
            return "accepted"
        response = w.decode_response(frame, w.Opcode.POLL_EVENT)
        return "opaque-failure" if response.known_status is None and not response.ok else "accepted"
    except w.ConfigError as exc:
        return exc.reason
    except w.FrameTooShort:
        return "Size"
    except w.RequestRejected as exc:
        return exc.status.name
    except w.RecoveryRequired:
        return "recovery"


@pytest.mark.parametrize("name", sorted(EDGES))
def test_edge_case_outcome(name):
    assert _outcome(EDGES[name]) == EDGES[name]["expected"]


def test_edge_cases_echo_the_request_id():
    for name in ("request_unknown_opcode", "request_reserved_flag", "request_trailing_byte"):
        with pytest.raises(w.RequestRejected) as info:
            w.decode_request(bytes.fromhex(EDGES[name]["hex"]))
        assert info.value.request_id == RID


def test_future_minor_config_keeps_its_bytes_and_longer_regions_are_accepted():
    frame = bytes.fromhex(EDGES["config_future_minor_compatible"]["hex"])
    config = w.WireConfig.decode(frame + b"\xff" * 8)  # a later minor's appendix is ignored
    assert config.protocol_minor == 1 and config.pack() == frame


# ---- configuration rules -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (w.WireConfig(1, 0, 2, 2, 97, 92), "CommandQueueCount"),
        (w.WireConfig(1, 0, 1, 1, 97, 92), "ChainDescriptorLimit"),
        (w.WireConfig(1, 0, 1, 2, 96, 92), "RequestLimit"),
        (w.WireConfig(1, 0, 1, 2, (16 << 20) + 1, 92), "RequestLimit"),
        (w.WireConfig(1, 0, 1, 2, 97, 91), "ResponseLimit"),
        (w.WireConfig(0, 0, 1, 2, 97, 92), "Version"),
    ],
)
def test_config_rules(config, reason):
    with pytest.raises(w.ConfigError) as info:
        w.WireConfig.decode(config.pack())
    assert info.value.reason == reason


def test_config_bounds_chains_by_the_queue_size_and_needs_sixteen_bytes():
    with pytest.raises(w.ConfigError, match="ChainDescriptorLimit"):
        w.WireConfig.decode(w.WireConfig.baseline().pack(), queue_size=64)
    assert w.WireConfig.decode(w.WireConfig.baseline(64).pack(), queue_size=64).max_chain_descriptors == 64
    with pytest.raises(w.ConfigError) as info:
        w.WireConfig.decode(bytes(15))
    assert info.value.reason == "Size"
    with pytest.raises(w.ConfigError):
        w.WireConfig.baseline(max_request_bytes=50)


# ---- request rules, one per clause ---------------------------------------------------------------
HARD_LIMITS = w.DecodeLimits()


def _status(body, opcode, limits=HARD_LIMITS, flags=0, rid=9) -> str:
    frame = w.Request(opcode, rid, body, flags).encode()
    try:
        w.decode_request(frame, limits)
    except w.RequestRejected as exc:
        assert exc.request_id == rid
        return exc.status.name
    return "OK"


OP = w.Opcode
GOOD_ALLOC = w.AllocateBufferRequest(CTX, 64, 16, 1, bytes(7), 0x1F, 0)
GOOD_LOAD = w.LoadProgramRequest(CTX, 1, 0, (0,) * 12, 1, 64)
GOOD_BINDING = w.WireBinding(BUF, 0, 16, 0, 3, bytes(3))


def _alloc(**changes) -> w.AllocateBufferRequest:
    import dataclasses

    return dataclasses.replace(GOOD_ALLOC, **changes)


def _submit(*bindings: w.WireBinding, count: int | None = None, **prefix) -> w.Submit:
    import dataclasses

    base = w.SubmitRequest(QUEUE, PROG, len(bindings) if count is None else count, 0, 0)
    return w.Submit(dataclasses.replace(base, **prefix), bindings)


@pytest.mark.parametrize(
    ("opcode", "body", "expected"),
    [
        (OP.GET_DEVICE_INFO, b"\0", "INVALID_ARGUMENT"),
        (OP.CREATE_CONTEXT, w.CreateContextRequest(0, 1), "INVALID_ARGUMENT"),
        (OP.CREATE_CONTEXT, b"\0" * 7, "INVALID_ARGUMENT"),
        (OP.DESTROY_CONTEXT, w.ObjectPayload(0), "INVALID_ARGUMENT"),
        (OP.DESTROY_CONTEXT, b"\1" * 9, "INVALID_ARGUMENT"),
        (OP.ALLOCATE_BUFFER, GOOD_ALLOC, "OK"),
        (OP.ALLOCATE_BUFFER, _alloc(context_id=0), "INVALID_ARGUMENT"),
        (OP.ALLOCATE_BUFFER, _alloc(bytes=0), "INVALID_ARGUMENT"),
        (OP.ALLOCATE_BUFFER, _alloc(alignment=0), "INVALID_ARGUMENT"),
        (OP.ALLOCATE_BUFFER, _alloc(alignment=24), "INVALID_ARGUMENT"),
        (OP.ALLOCATE_BUFFER, _alloc(memory_domain=0), "INVALID_ARGUMENT"),
        (OP.ALLOCATE_BUFFER, _alloc(memory_domain=4), "INVALID_ARGUMENT"),
        (OP.ALLOCATE_BUFFER, _alloc(reserved0=b"\0\0\0\1\0\0\0"), "INVALID_ARGUMENT"),
        (OP.ALLOCATE_BUFFER, _alloc(usage=0), "INVALID_ARGUMENT"),
        (OP.ALLOCATE_BUFFER, _alloc(usage=0x20), "UNSUPPORTED"),
        (OP.ALLOCATE_BUFFER, _alloc(reserved1=1), "INVALID_ARGUMENT"),
        (OP.WRITE_BUFFER, w.WriteBuffer.of(BUF, 0, b"abc"), "OK"),
        (OP.WRITE_BUFFER, w.WriteBuffer(w.TransferBufferRequest(BUF, 0, 4), b"abc"), "INVALID_ARGUMENT"),
        (OP.WRITE_BUFFER, w.WriteBuffer(w.TransferBufferRequest(BUF, 0, 0), b""), "INVALID_ARGUMENT"),
        (OP.WRITE_BUFFER, w.WriteBuffer(w.TransferBufferRequest(0, 0, 1), b"a"), "INVALID_ARGUMENT"),
        (OP.WRITE_BUFFER, w.WriteBuffer(w.TransferBufferRequest(BUF, 2**64 - 1, 1), b"a"), "INVALID_ARGUMENT"),
        (OP.WRITE_BUFFER, b"\0" * 23, "INVALID_ARGUMENT"),
        (OP.READ_BUFFER, w.TransferBufferRequest(BUF, 2**64 - 9, 8), "OK"),
        (OP.READ_BUFFER, w.TransferBufferRequest(BUF, 2**64 - 8, 9), "INVALID_ARGUMENT"),
        (OP.READ_BUFFER, w.TransferBufferRequest(BUF, 0, (16 << 20) - 15), "RESOURCE_LIMIT"),
        (OP.LOAD_PROGRAM, w.LoadProgram(GOOD_LOAD, b"x"), "OK"),
        (OP.LOAD_PROGRAM, w.LoadProgram(w.LoadProgramRequest(0, 1, 0, (0,) * 12, 1, 64), b"x"), "INVALID_ARGUMENT"),
        (OP.LOAD_PROGRAM, w.LoadProgram(w.LoadProgramRequest(CTX, 0, 0, (0,) * 12, 1, 64), b"x"), "INVALID_ARGUMENT"),
        (OP.LOAD_PROGRAM, w.LoadProgram(w.LoadProgramRequest(CTX, 1, 2, (0,) * 12, 1, 64), b"x"), "UNSUPPORTED"),
        (OP.LOAD_PROGRAM, w.LoadProgram(w.LoadProgramRequest(CTX, 1, 0, (0,) * 12, 0, 64), b""), "INVALID_ARGUMENT"),
        (OP.LOAD_PROGRAM, w.LoadProgram(w.LoadProgramRequest(CTX, 1, 0, (0,) * 12, 1, 0), b"x"), "INVALID_ARGUMENT"),
        (OP.LOAD_PROGRAM, w.LoadProgram(GOOD_LOAD, b"xy"), "INVALID_ARGUMENT"),
        (OP.LOAD_PROGRAM, b"\0" * 79, "INVALID_ARGUMENT"),
        (OP.CREATE_QUEUE, w.CreateQueueRequest(CTX, 1, 0), "UNSUPPORTED"),
        (OP.CREATE_QUEUE, w.CreateQueueRequest(CTX, 0, 1), "INVALID_ARGUMENT"),
        (OP.CREATE_QUEUE, w.CreateQueueRequest(0, 0, 0), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(GOOD_BINDING), "OK"),
        (OP.SUBMIT, _submit(), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(GOOD_BINDING, flags=1), "UNSUPPORTED"),
        (OP.SUBMIT, _submit(GOOD_BINDING, queue_id=0), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(GOOD_BINDING, program_id=0), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(GOOD_BINDING, count=2), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(GOOD_BINDING, count=4097), "RESOURCE_LIMIT"),
        (OP.SUBMIT, _submit(GOOD_BINDING, GOOD_BINDING), "INVALID_ARGUMENT"),  # slot 0 twice
        (OP.SUBMIT, _submit(w.WireBinding(BUF, 0, 16, 0, 0, bytes(3))), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(w.WireBinding(BUF, 0, 16, 0, 4, bytes(3))), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(w.WireBinding(BUF, 0, 16, 0, 1, b"\0\0\1")), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(w.WireBinding(BUF, 0, 0, 0, 1, bytes(3))), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(w.WireBinding(0, 0, 16, 0, 1, bytes(3))), "INVALID_ARGUMENT"),
        (OP.SUBMIT, _submit(w.WireBinding(BUF, 2**63, 2**63, 0, 1, bytes(3))), "INVALID_ARGUMENT"),
        (OP.SUBMIT, b"\0" * 31, "INVALID_ARGUMENT"),
        (OP.POLL_EVENT, w.ObjectPayload(0), "INVALID_ARGUMENT"),
        (OP.POLL_EVENT, w.ObjectPayload(EVENT), "OK"),
    ],
)
def test_request_rule(opcode, body, expected):
    assert _status(body, opcode) == expected


def test_header_rules():
    assert _status(None, OP.GET_DEVICE_INFO, rid=0) == "INVALID_ARGUMENT"
    assert _status(None, OP.GET_DEVICE_INFO, flags=0x8000) == "UNSUPPORTED"
    assert _status(None, 0x0504) == "UNSUPPORTED"
    header_only = w.RequestHeader(OP.GET_DEVICE_INFO, 0, 4, 9).pack()
    with pytest.raises(w.RequestRejected, match="announces 20"):
        w.decode_request(header_only)  # the payload the header announces is missing


def test_negotiated_limits_are_applied_before_anything_is_built():
    small = w.DecodeLimits.negotiated(w.WireConfig.baseline(2, 97, 92), MOCK_INFO)
    assert (small.max_bindings, small.max_artifact_bytes) == (256, 16 << 20)
    load = w.LoadProgram(w.LoadProgramRequest(CTX, 1, 0, (0,) * 12, 2, 64), b"xy")
    assert _status(load, OP.LOAD_PROGRAM, small) == "RESOURCE_LIMIT"  # 98 bytes > 97
    assert _status(w.TransferBufferRequest(BUF, 0, 77), OP.READ_BUFFER, small) == "RESOURCE_LIMIT"
    assert _status(w.TransferBufferRequest(BUF, 0, 76), OP.READ_BUFFER, small) == "OK"
    bindings = [w.WireBinding(BUF, 0, 16, slot, 1, bytes(3)) for slot in range(17)]
    limits = w.DecodeLimits(max_bindings=16)
    assert _status(_submit(*bindings), OP.SUBMIT, limits) == "RESOURCE_LIMIT"
    assert _status(_submit(*bindings[:16]), OP.SUBMIT, limits) == "OK"
    one_mib = w.DecodeLimits(max_buffer_bytes=1 << 20)
    assert _status(_alloc(bytes=1 << 30), OP.ALLOCATE_BUFFER, one_mib) == "RESOURCE_LIMIT"
    artifact = w.LoadProgram(w.LoadProgramRequest(CTX, 1, 0, (0,) * 12, 9, 64), b"x" * 9)
    assert _status(artifact, OP.LOAD_PROGRAM, w.DecodeLimits(max_artifact_bytes=8)) == "RESOURCE_LIMIT"


def test_a_count_is_refused_before_its_records_are_read():
    # 0xFFFFFFFF bindings announced in a 48-byte frame: RESOURCE_LIMIT, not a length error or an allocation.
    with pytest.raises(w.RequestRejected) as info:
        w.decode_request(bytes.fromhex(EDGES["request_binding_count_overflow"]["hex"]))
    assert info.value.status is w.Status.RESOURCE_LIMIT


def test_decoded_tails_are_views_into_the_frame():
    frame = bytearray(w.Request(OP.WRITE_BUFFER, 5, w.WriteBuffer.of(BUF, 0, b"abcd")).encode())
    request = w.decode_request(frame)
    assert isinstance(request.body.data, memoryview) and bytes(request.body.data) == b"abcd"
    frame[-1] = ord("z")
    assert bytes(request.body.data) == b"abcz"


def test_response_capacity_per_command():
    assert w.decode_request(bytes.fromhex(FRAMES["request_get_device_info"]["hex"])).response_capacity == 92
    assert w.decode_request(bytes.fromhex(FRAMES["request_read_buffer"]["hex"])).response_capacity == 20
    assert w.decode_request(bytes.fromhex(FRAMES["request_submit"]["hex"])).response_capacity == 24
    assert max(w.RESPONSE_CAPACITY.values()) == 16 + w.WireDeviceInfo.SIZE


# ---- response rules ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("frame", "opcode", "error"),
    [
        (w.ResponseHeader(0, 1, 0, RID).pack(), OP.DESTROY_EVENT, w.ResponseError),  # flags
        (w.ResponseHeader(0, 0, 8, RID).pack(), OP.DESTROY_EVENT, w.ResponseError),  # missing payload
        (w.Response(0, RID, w.ObjectPayload(1)).encode(), OP.DESTROY_EVENT, w.ResponseError),  # unexpected payload
        (w.Response(3, RID, w.ObjectPayload(1)).encode(), OP.CREATE_CONTEXT, w.ResponseError),  # error with payload
        (w.Response(0, RID, w.ObjectPayload(0)).encode(), OP.CREATE_CONTEXT, w.ResponseError),  # id zero
        (w.Response(9, RID, w.SubmitResponse(0)).encode(), OP.SUBMIT, w.ResponseError),
        (w.Response(0, RID, b"\0" * 7).encode(), OP.POLL_EVENT, w.ResponseError),
        (w.Response(0, RID, w.WireEventState(1, 3, 0)).encode(), OP.POLL_EVENT, w.ResponseError),
        (w.Response(0, RID, w.WireEventState(2, 0, 0)).encode(), OP.POLL_EVENT, w.ResponseError),
        (w.Response(0, RID, w.WireEventState(0, 0, 1)).encode(), OP.POLL_EVENT, w.ResponseError),
        (w.Response(0, RID, w.WireEventState(4, 0, 0)).encode(), OP.POLL_EVENT, w.RecoveryRequired),
        (w.Response(0, RID, w.WireDeviceInfo()).encode(), OP.GET_DEVICE_INFO, w.ResponseError),  # zero limits
        (b"\0" * 15, OP.GET_DEVICE_INFO, w.FrameTooShort),
    ],
)
def test_response_rule(frame, opcode, error):
    with pytest.raises(error):
        w.decode_response(frame, opcode)


def test_response_checks_the_request_id_and_read_length():
    frame = w.Response(0, 7, b"abcd").encode()
    assert bytes(w.decode_response(frame, OP.READ_BUFFER, request_id=7, read_bytes=4).body) == b"abcd"
    with pytest.raises(w.ResponseError, match="expected"):
        w.decode_response(frame, OP.READ_BUFFER, request_id=8)
    with pytest.raises(w.ResponseError, match="asked"):
        w.decode_response(frame, OP.READ_BUFFER, read_bytes=5)


def test_failed_event_with_an_unknown_error_status_stays_opaque():
    state = w.decode_response(w.Response(0, 1, w.WireEventState(2, 0x4321, 0)).encode(), OP.POLL_EVENT).body
    assert state.error == 0x4321 and w.status_name(state.error) == "unknown status 0x4321"


def test_pack_refuses_values_wider_than_their_field():
    from ironaccel.core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="RequestHeader"):
        w.RequestHeader(0x10000, 0, 0, 1).pack()
    with pytest.raises(w.FrameTooShort):
        w.SubmitRequest.unpack(b"\0" * 31)
