"""Hostile frames: the protocol 1.0 decoders may only return a record or raise their own errors, quickly.

- Round trips (hypothesis): every well-formed request and response built from typed parts encodes,
  decodes to the same record and re-encodes to the same bytes.
- Mutation fuzz: real frames (the canonical vectors and generated ones) with bits flipped, bytes and
  16/32/64-bit fields overwritten with boundary values, truncated, extended and spliced, with the
  header's length fixed up half of the time so mutations reach the payload decoders. The request
  decoder may only return a Request or raise FrameTooShort / RequestRejected; the response decoder a
  Response or FrameTooShort / ResponseError; the configuration decoder a WireConfig or ConfigError.
  Whatever decodes must re-encode to exactly the bytes it came from.

The default run is bounded (hypothesis, a few hundred inputs per property, and 20,000 seeded mutations
per decoder). ``make fuzz-virtio`` runs the slow mode: IRONACCEL_FUZZ_EXAMPLES (default 10^6) mutated
inputs per decoder.
"""

from __future__ import annotations

import json
import os
import random
import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel.virtio import wire as w

PROTOCOL = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "virtio-accel" / "protocol"
LONG_EXAMPLES = int(os.environ.get("IRONACCEL_FUZZ_EXAMPLES", "0") or 0) or 1_000_000
SHORT_EXAMPLES = 20_000
U64 = (1 << 64) - 1
BOUNDARY = [0, 1, 2, 3, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, U64]
SMALL = w.DecodeLimits.negotiated(w.WireConfig.baseline(8, 4096, 4096))


def _vector_frames(kind: str) -> list[bytes]:
    if not PROTOCOL.is_dir():
        return []
    vectors = json.loads((PROTOCOL / "vectors.json").read_text())
    items = vectors["frames"] + vectors["edge_cases"]
    return [bytes.fromhex(f["hex"]) for f in items if f["kind"] == kind]


# ---- strategies for well-formed records ----------------------------------------------------------
ids = st.integers(1, U64)
u32 = st.integers(0, 0xFFFFFFFF)


@st.composite
def _range(draw, max_bytes: int = U64) -> tuple[int, int]:
    length = draw(st.integers(1, max_bytes))
    return draw(st.integers(0, U64 - length)), length


@st.composite
def _write(draw) -> w.WriteBuffer:
    data = draw(st.binary(min_size=1, max_size=64))
    return w.WriteBuffer.of(draw(ids), draw(st.integers(0, U64 - len(data))), data)


@st.composite
def _read(draw) -> w.TransferBufferRequest:
    offset, length = draw(_range((16 << 20) - 16))
    return w.TransferBufferRequest(draw(ids), offset, length)


@st.composite
def _binding(draw, slot: int) -> w.WireBinding:
    offset, length = draw(_range())
    return w.WireBinding(draw(ids), offset, length, slot, draw(st.integers(1, 3)), bytes(3))


@st.composite
def _submit(draw) -> w.Submit:
    slots = draw(st.lists(u32, min_size=1, max_size=8, unique=True))
    bindings = [draw(_binding(slot)) for slot in slots]
    return w.Submit.of(draw(ids), draw(ids), bindings, draw(st.integers(0, U64)))


_allocate = st.builds(
    w.AllocateBufferRequest,
    context_id=ids,
    bytes=st.integers(1, U64),
    alignment=st.integers(0, 63).map(lambda k: 1 << k),
    memory_domain=st.integers(1, 3),
    usage=st.integers(1, w.KNOWN_USAGE_BITS),
)
_load = st.builds(
    lambda ctx, fmt, target, artifact, resident: w.LoadProgram.of(ctx, fmt, target, artifact, resident),
    ids,
    st.integers(1, 0xFFFFFFFF),
    st.lists(u32, min_size=12, max_size=12),
    st.binary(min_size=1, max_size=64),
    ids,
)
_object = st.builds(w.ObjectPayload, ids)

BODIES = {
    w.Opcode.GET_DEVICE_INFO: st.none(),
    w.Opcode.CREATE_CONTEXT: st.just(w.CreateContextRequest()),
    w.Opcode.DESTROY_CONTEXT: _object,
    w.Opcode.ALLOCATE_BUFFER: _allocate,
    w.Opcode.FREE_BUFFER: _object,
    w.Opcode.WRITE_BUFFER: _write(),
    w.Opcode.READ_BUFFER: _read(),
    w.Opcode.LOAD_PROGRAM: _load,
    w.Opcode.UNLOAD_PROGRAM: _object,
    w.Opcode.CREATE_QUEUE: st.builds(w.CreateQueueRequest, ids),
    w.Opcode.DESTROY_QUEUE: _object,
    w.Opcode.SUBMIT: _submit(),
    w.Opcode.POLL_EVENT: _object,
    w.Opcode.CANCEL_EVENT: _object,
    w.Opcode.DESTROY_EVENT: _object,
}
requests = st.sampled_from(list(BODIES)).flatmap(
    lambda op: st.builds(w.Request, st.just(op), ids, BODIES[op])  # type: ignore[arg-type]
)

_info = st.builds(
    w.WireDeviceInfo,
    uuid=st.binary(min_size=16, max_size=16),
    accelerator_class=st.integers(0, 0xFFFF),
    vendor_id=u32,
    device_id=u32,
    capabilities=st.integers(0, U64),
    max_contexts=st.integers(1, 0xFFFFFFFF),
    max_buffers_per_context=st.integers(1, 0xFFFFFFFF),
    max_programs_per_context=st.integers(1, 0xFFFFFFFF),
    max_queues_per_context=st.integers(1, 0xFFFFFFFF),
    max_events_per_context=st.integers(1, 0xFFFFFFFF),
    max_bindings_per_submission=st.integers(1, 4096),
    max_buffer_bytes=st.integers(1, U64),
    max_artifact_bytes=st.integers(1, U64),
)
_event_state = st.one_of(
    st.builds(w.WireEventState, st.sampled_from([0, 1, 3]), st.just(0)),
    st.builds(w.WireEventState, st.just(2), st.integers(1, 0xFFFF)),
)
OK_BODIES = {
    w.Opcode.GET_DEVICE_INFO: _info,
    w.Opcode.CREATE_CONTEXT: _object,
    w.Opcode.ALLOCATE_BUFFER: _object,
    w.Opcode.LOAD_PROGRAM: _object,
    w.Opcode.CREATE_QUEUE: _object,
    w.Opcode.SUBMIT: st.builds(w.SubmitResponse, ids),
    w.Opcode.POLL_EVENT: _event_state,
    w.Opcode.READ_BUFFER: st.binary(min_size=1, max_size=64),
}


@st.composite
def responses(draw) -> tuple[int, w.Response]:
    opcode = draw(st.sampled_from(list(w.Opcode)))
    rid = draw(ids)
    if draw(st.booleans()):
        body = draw(OK_BODIES.get(opcode, st.none()))
        return opcode, w.Response(w.Status.OK, rid, body)
    status = draw(st.integers(1, 0xFFFF))
    body = draw(st.builds(w.SubmitResponse, ids)) if opcode == w.Opcode.SUBMIT and draw(st.booleans()) else None
    return opcode, w.Response(status, rid, body)


# ---- round trips ---------------------------------------------------------------------------------
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests)
def test_request_round_trip(request):
    frame = request.encode()
    decoded = w.decode_request(frame)
    assert decoded == request
    assert decoded.encode() == frame


@settings(max_examples=300, deadline=None)
@given(responses())
def test_response_round_trip(case):
    opcode, response = case
    frame = response.encode()
    decoded = w.decode_response(frame, opcode, request_id=response.request_id)
    assert decoded == response
    assert decoded.encode() == frame


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=16, max_size=24))
def test_config_decoder_accepts_or_names_the_rule(data):
    try:
        config = w.WireConfig.decode(data)
    except w.ConfigError as exc:
        assert exc.reason in {"Version", "CommandQueueCount", "ChainDescriptorLimit", "RequestLimit", "ResponseLimit"}
    else:
        assert config.pack() == data[:16]


# ---- mutation fuzz -------------------------------------------------------------------------------
def _fix_length(frame: bytearray) -> None:
    if len(frame) >= 16:
        struct.pack_into("<I", frame, 4, len(frame) - 16)


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    frame = bytearray(rng.choice(seeds))
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        if kind == 0 and frame:
            i = rng.randrange(len(frame) * 8)
            frame[i // 8] ^= 1 << (i % 8)
        elif kind == 1 and frame:
            frame[rng.randrange(len(frame))] = rng.randrange(256)
        elif kind == 2:
            fmt = rng.choice("HIQ")
            size = struct.calcsize(fmt)
            if len(frame) >= size:
                at = rng.randrange(len(frame) - size + 1)
                struct.pack_into("<" + fmt, frame, at, rng.choice(BOUNDARY) & ((1 << (8 * size)) - 1))
        elif kind == 3:
            del frame[rng.randrange(len(frame) + 1) :]
        elif kind == 4:
            frame += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        elif kind == 5:
            other = rng.choice(seeds)
            at = rng.randrange(len(frame) + 1)
            frame[at:] = other[rng.randrange(len(other) + 1) :]
        elif kind == 6 and len(frame) > 16:
            start = rng.randrange(16, len(frame))
            del frame[start : start + rng.randint(1, 32)]
    if rng.random() < 0.5:
        _fix_length(frame)
    return bytes(frame)


def _request_seeds() -> list[bytes]:
    rng = random.Random(1)
    seeds = _vector_frames("request")
    simple = {
        w.Opcode.GET_DEVICE_INFO: None,
        w.Opcode.CREATE_CONTEXT: w.CreateContextRequest(),
        w.Opcode.ALLOCATE_BUFFER: w.AllocateBufferRequest(1, 64, 64, 3, usage=0x1F),
        w.Opcode.READ_BUFFER: w.TransferBufferRequest(1, 8, 8),
        w.Opcode.CREATE_QUEUE: w.CreateQueueRequest(1),
    }
    for op in w.Opcode:
        seeds.append(w.Request(op, 7, simple.get(op, w.ObjectPayload(0x1234))).encode())
    for _ in range(64):
        bindings = [w.WireBinding(rng.randrange(1, U64), 0, 16, slot, 3) for slot in range(rng.randint(1, 6))]
        seeds.append(w.Request(w.Opcode.SUBMIT, 7, w.Submit.of(1, 2, bindings)).encode())
    seeds.append(w.Request(w.Opcode.LOAD_PROGRAM, 7, w.LoadProgram.of(1, 5, range(12), b"a" * 40, 64)).encode())
    seeds.append(w.Request(w.Opcode.WRITE_BUFFER, 7, w.WriteBuffer.of(1, 0, b"b" * 40)).encode())
    return seeds


def _response_seeds() -> list[tuple[int, bytes]]:
    frames = _vector_frames("response")
    seeds = [(op, f) for f in frames for op in (w.Opcode.POLL_EVENT, w.Opcode.SUBMIT, w.Opcode.GET_DEVICE_INFO)]
    seeds += [(op, w.Response(0, 3, b"xyz" if op == w.Opcode.READ_BUFFER else None).encode()) for op in w.Opcode]
    return seeds


def check_request(frame: bytes, limits: w.DecodeLimits) -> bool:
    try:
        request = w.decode_request(frame, limits)
    except w.FrameTooShort:
        assert len(frame) < 16
        return False
    except w.RequestRejected as exc:
        assert isinstance(exc.status, w.Status) and exc.status is not w.Status.OK
        return False
    assert request.encode() == frame
    assert len(frame) <= limits.max_request_bytes
    if isinstance(request.body, w.Submit):
        assert 1 <= len(request.body.bindings) == request.body.prefix.binding_count <= limits.max_bindings
    return True


def check_response(opcode: int, frame: bytes) -> bool:
    try:
        response = w.decode_response(frame, opcode)
    except (w.FrameTooShort, w.ResponseError):
        return False
    assert response.encode() == frame
    if response.ok and opcode == w.Opcode.POLL_EVENT:
        assert response.body.state in {0, 1, 2, 3}
    return True


def check_config(frame: bytes) -> bool:
    try:
        config = w.WireConfig.decode(frame)
    except w.ConfigError:
        return False
    assert config.pack() == frame[:16]
    return True


def _run_requests(n: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    seeds = _request_seeds()
    accepted = 0
    for i in range(n):
        frame = mutate(rng, seeds)
        accepted += check_request(frame, SMALL if i % 4 == 0 else w.DecodeLimits())
    return n, accepted


def _run_responses(n: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    seeds = _response_seeds()
    frames = [f for _, f in seeds]
    accepted = 0
    for _ in range(n):
        opcode = rng.choice(seeds)[0] if rng.random() < 0.9 else rng.randrange(0x10000)
        accepted += check_response(opcode, mutate(rng, frames))
    return n, accepted


def _run_configs(n: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    seeds = _vector_frames("config") or [w.WireConfig.baseline().pack()]
    accepted = 0
    for _ in range(n):
        frame = mutate(rng, seeds)
        frame = frame if rng.random() < 0.1 else frame[:16].ljust(16, b"\0")
        accepted += check_config(frame)
    return n, accepted


RUNNERS = {"request": _run_requests, "response": _run_responses, "config": _run_configs}


@pytest.mark.parametrize("target", list(RUNNERS))
def test_mutated_frames_bounded(target):
    n, accepted = RUNNERS[target](SHORT_EXAMPLES, seed=12345)
    assert n == SHORT_EXAMPLES
    assert 0 < accepted < n  # the mutations reach both outcomes


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests, st.randoms(use_true_random=False))
def test_mutated_generated_requests(request, rng):
    frame = request.encode()
    for _ in range(20):
        check_request(mutate(rng, [frame]), w.DecodeLimits())


@pytest.mark.slow
@pytest.mark.parametrize("target", list(RUNNERS))
def test_mutated_frames_long(target):
    start = time.perf_counter()
    n, accepted = RUNNERS[target](LONG_EXAMPLES, seed=2026)
    seconds = time.perf_counter() - start
    print(f"\nfuzz-virtio {target}: {n} inputs, {accepted} decoded, {seconds:.1f} s ({n / seconds:,.0f}/s)")
    assert n >= LONG_EXAMPLES and 0 < accepted < n
