"""The device engine on the CPU backend: commands, ids and isolation, quotas, failures, reset and close."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ironaccel.conformance.faults import Fault, FaultyAccelerator
from ironaccel.core.errors import DeviceLost, InvalidArgument, OutOfMemory
from ironaccel.runtime import TOSA_FORMAT
from ironaccel.runtime.backends import factory
from ironaccel.virtio import DeviceEngine, GuestQuota, GuestSession, ObjectCounts
from ironaccel.virtio import wire as w
from ironaccel.virtio.engine_policy import MAX_ALIGNMENT, status_for
from virtio_guest import FP_TARGET, ControlledCpu, Guest, add_program

OP = w.Opcode
ZERO = {"context": 0, "buffer": 0, "program": 0, "queue": 0, "event": 0, "prepared": 0, "gate": 0, "buffer_bytes": 0}


def _engine(acc=None, **kwargs) -> DeviceEngine:
    return DeviceEngine(acc if acc is not None else factory("cpu")(), **kwargs)


def _f32(values) -> bytes:
    return np.asarray(values, dtype=np.float32).tobytes()


# ---- the interface -------------------------------------------------------------------------------
def test_lifecycle_runs_a_program_and_releases_everything():
    engine = _engine()
    guest = Guest(engine.connect())
    ctx, bufs, prog, queue = guest.add_setup()
    event = guest.submit(queue, prog, bufs).body.event_id
    state = guest.wait(event)
    assert (state.state, state.error) == (w.EventStateCode.COMPLETE, w.Status.OK)
    assert np.frombuffer(guest.read(bufs[2], 16), np.float32).tolist() == [11, 12, 13, 14]
    assert guest.read(bufs[0], 8, offset=8) == _f32([3, 4])
    for opcode, oid in [(OP.DESTROY_EVENT, event), (OP.DESTROY_QUEUE, queue), (OP.UNLOAD_PROGRAM, prog)]:
        assert guest.status(opcode, w.ObjectPayload(oid)) == "OK"
    for buf in bufs:
        assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(buf)) == "OK"
    assert guest.status(OP.DESTROY_CONTEXT, w.ObjectPayload(ctx)) == "OK"
    assert engine.accelerator.live_resources() == ZERO
    assert guest.session.live_objects() == ObjectCounts()


def test_package_exports_the_engine_interface():
    import ironaccel.virtio as virtio

    assert virtio.DeviceEngine is DeviceEngine and virtio.GuestSession is GuestSession
    doc = virtio.engine.__doc__
    for name in ("DeviceEngine(accelerator, limits=None)", "engine.connect()", "session.process(", "session.close()"):
        assert name in doc


def test_device_info_reflects_the_backend_and_the_quota():
    engine = _engine(quota=GuestQuota(max_contexts=3, max_buffer_bytes=1 << 20))
    info = Guest(engine.connect()).ok(OP.GET_DEVICE_INFO)
    assert info == engine.info
    assert info.accelerator_class == w.AcceleratorClass.OTHER
    assert info.capabilities == int(
        w.Capability.HOST_VISIBLE_MEMORY
        | w.Capability.DEVICE_LOCAL_MEMORY
        | w.Capability.SHARED_MEMORY
        | w.Capability.EVENT_CANCELLATION
    )
    assert (info.max_contexts, info.max_buffer_bytes) == (3, 1 << 20)
    assert info.max_artifact_bytes == engine.config.max_request_bytes - 96
    assert 1 <= info.max_bindings_per_submission <= 4096


def test_config_is_the_negotiated_block():
    engine = _engine(limits=w.WireConfig.baseline(64, 1 << 16, 1 << 16))
    assert w.WireConfig.decode(engine.config.pack()) == engine.config
    assert engine.info.max_artifact_bytes == (1 << 16) - 96
    with pytest.raises(w.ConfigError):
        _engine(limits=w.WireConfig(1, 0, 1, 300, 97, 92))
    with pytest.raises(InvalidArgument, match="minor"):
        _engine(limits=w.WireConfig(1, 1, 1, 2, 97, 92))
    with pytest.raises(InvalidArgument):
        GuestQuota(max_events=0)


# ---- framing -------------------------------------------------------------------------------------
def test_unanswerable_frames_and_short_response_areas_write_nothing():
    engine = _engine()
    session = engine.connect()
    guest = Guest(session)
    info = w.Request(OP.GET_DEVICE_INFO, 1).encode()
    assert session.process(info[:15], 92) == b""  # truncated header
    assert session.process(info, 15) == b""  # no room for a header
    assert session.process(info, 91) == b""  # no room for the device info
    assert len(session.process(info, 92)) == 92
    ctx = guest.context()
    buf = guest.buffer(ctx, 64)
    read = w.Request(OP.READ_BUFFER, 5, w.TransferBufferRequest(buf, 0, 64)).encode()
    assert session.process(read, 79) == b""
    assert len(session.process(read, 80)) == 80
    create = w.Request(OP.CREATE_CONTEXT, 6, w.CreateContextRequest()).encode()
    assert session.process(create, 23) == b""
    assert engine.accelerator.live_resources()["context"] == 1  # nothing was created by the short one


def test_malformed_requests_get_a_sixteen_byte_answer_with_their_id():
    session = _engine().connect()
    cases = {
        w.Request(0x0999, 77).encode(): w.Status.UNSUPPORTED,
        w.Request(OP.GET_DEVICE_INFO, 77, flags=1).encode(): w.Status.UNSUPPORTED,
        w.Request(OP.GET_DEVICE_INFO, 77).encode() + b"\0": w.Status.INVALID_ARGUMENT,
        w.Request(OP.CREATE_CONTEXT, 77, w.CreateContextRequest(1)).encode(): w.Status.UNSUPPORTED,
        w.Request(OP.FREE_BUFFER, 77, w.ObjectPayload(0)).encode(): w.Status.INVALID_ARGUMENT,
    }
    for frame, status in cases.items():
        out = session.process(frame, 16)
        assert out == w.Response(status, 77).encode()


def test_frames_above_the_negotiated_request_limit_are_resource_limit():
    session = _engine(limits=w.WireConfig.baseline(8, 256, 256)).connect()
    guest = Guest(session)
    ctx = guest.context()
    buf = guest.buffer(ctx, 512)
    assert guest.write(buf, bytes(216)) == "OK"  # 16 + 24 + 216 = 256
    assert guest.write(buf, bytes(217)) == "RESOURCE_LIMIT"
    assert guest.status(OP.READ_BUFFER, w.TransferBufferRequest(buf, 0, 241)) == "RESOURCE_LIMIT"


# ---- ids and isolation ---------------------------------------------------------------------------
def _objects(guest: Guest) -> dict[str, int]:
    ctx, bufs, prog, queue = guest.add_setup()
    event = guest.submit(queue, prog, bufs).body.event_id
    guest.wait(event)
    return {"ctx": ctx, "buf": bufs[0], "out": bufs[2], "prog": prog, "queue": queue, "event": event}


def _every_use(ids: dict[str, int]) -> list[tuple[w.Opcode, object]]:
    ctx, buf, prog, queue, event = ids["ctx"], ids["buf"], ids["prog"], ids["queue"], ids["event"]
    binding = w.WireBinding(buf, 0, 16, 0, 1)
    return [
        (OP.ALLOCATE_BUFFER, w.AllocateBufferRequest(ctx, 16, 64, 3, usage=0x1F)),
        (OP.LOAD_PROGRAM, w.LoadProgram.of(ctx, TOSA_FORMAT, FP_TARGET, add_program(), 1 << 20)),
        (OP.CREATE_QUEUE, w.CreateQueueRequest(ctx)),
        (OP.WRITE_BUFFER, w.WriteBuffer.of(buf, 0, b"\xff" * 4)),
        (OP.READ_BUFFER, w.TransferBufferRequest(buf, 0, 4)),
        (OP.SUBMIT, w.Submit.of(queue, prog, [binding])),
        (OP.POLL_EVENT, w.ObjectPayload(event)),
        (OP.CANCEL_EVENT, w.ObjectPayload(event)),
        (OP.DESTROY_EVENT, w.ObjectPayload(event)),
        (OP.FREE_BUFFER, w.ObjectPayload(buf)),
        (OP.UNLOAD_PROGRAM, w.ObjectPayload(prog)),
        (OP.DESTROY_QUEUE, w.ObjectPayload(queue)),
        (OP.DESTROY_CONTEXT, w.ObjectPayload(ctx)),
    ]


def test_a_guest_cannot_touch_another_guests_objects():
    engine = _engine()
    alice, mallory = Guest(engine.connect()), Guest(engine.connect())
    ids = _objects(alice)
    mallory_ctx = mallory.context()
    before = engine.accelerator.live_resources()
    for opcode, body in _every_use(ids):
        assert mallory.status(opcode, body) == "PERMISSION_DENIED", opcode.name
    # and mixed with the intruder's own objects
    mbuf = mallory.buffer(mallory_ctx)
    mixed = w.Submit.of(ids["queue"], ids["prog"], [w.WireBinding(mbuf, 0, 16, 0, 1)])
    assert mallory.status(OP.SUBMIT, mixed) == "PERMISSION_DENIED"
    after = engine.accelerator.live_resources()
    assert after["buffer"] == before["buffer"] + 1 and after["event"] == before["event"]
    # Alice's objects are untouched: her result and input are still there.
    assert np.frombuffer(alice.read(ids["out"], 16), np.float32).tolist() == [11, 12, 13, 14]
    assert alice.read(ids["buf"], 4) == _f32([1])
    assert alice.status(OP.DESTROY_EVENT, w.ObjectPayload(ids["event"])) == "OK"


def test_stale_wrong_kind_and_cross_context_ids_are_stale_object():
    guest = Guest(_engine().connect())
    ctx, bufs, prog, queue = guest.add_setup()
    other_ctx = guest.context()
    other_buf = guest.buffer(other_ctx)
    other_queue = guest.queue(other_ctx)
    assert guest.status(OP.DESTROY_CONTEXT, w.ObjectPayload(bufs[0])) == "STALE_OBJECT"  # a buffer named as context
    assert guest.status(OP.POLL_EVENT, w.ObjectPayload(queue)) == "STALE_OBJECT"
    assert guest.status(OP.READ_BUFFER, w.TransferBufferRequest(ctx, 0, 4)) == "STALE_OBJECT"

    def bindings(buffers):
        return [w.WireBinding(b, 0, 16, slot, 1 if slot < 2 else 2) for slot, b in enumerate(buffers)]

    mixed = bindings([bufs[0], other_buf, bufs[2]])
    assert guest.status(OP.SUBMIT, w.Submit.of(queue, prog, mixed)) == "STALE_OBJECT"
    assert guest.status(OP.SUBMIT, w.Submit.of(other_queue, prog, bindings(bufs))) == "STALE_OBJECT"
    assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(other_buf)) == "OK"
    assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(other_buf)) == "STALE_OBJECT"
    assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(other_buf ^ (1 << 40))) == "STALE_OBJECT"  # forged slot
    assert guest.session.engine.accelerator.live_resources()["event"] == 0


def test_ids_never_come_back():
    guest = Guest(_engine().connect())
    ctx = guest.context()
    seen = set()
    for _ in range(300):
        buf = guest.buffer(ctx)
        assert buf not in seen
        seen.add(buf)
        assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(buf)) == "OK"
    assert all(guest.status(OP.READ_BUFFER, w.TransferBufferRequest(b, 0, 1)) == "STALE_OBJECT" for b in seen)


def test_reset_makes_every_id_stale_and_releases_everything():
    engine = _engine()
    guest = Guest(engine.connect())
    ids = _objects(guest)
    report = guest.session.reset()
    assert report.released == ObjectCounts(contexts=1, buffers=3, programs=1, queues=1, events=1)
    assert report.quarantined == ObjectCounts() and report.backend_reusable
    assert engine.accelerator.live_resources() == ZERO
    for opcode, body in _every_use(ids):
        assert guest.status(opcode, body) == "STALE_OBJECT", opcode.name  # stale, not another guest's
    _objects(guest)  # the device works again after reset
    assert engine.reset().released.total == 7


# ---- quotas --------------------------------------------------------------------------------------
def test_guest_quotas_refuse_before_the_backend_runs():
    quota = GuestQuota(
        max_contexts=2,
        max_buffers_per_context=3,
        max_buffers=4,
        max_queues_per_context=1,
        max_events_per_context=1,
        max_programs=1,
        max_total_buffer_bytes=1 << 16,
        max_total_program_bytes=1 << 21,
    )
    engine = _engine(quota=quota)
    guest = Guest(engine.connect())
    c1, c2 = guest.context(), guest.context()
    assert guest.status(OP.CREATE_CONTEXT, w.CreateContextRequest()) == "RESOURCE_LIMIT"
    bufs = [guest.buffer(c1) for _ in range(3)]
    alloc = w.AllocateBufferRequest(c1, 16, 64, 3, usage=0x1F)
    assert guest.status(OP.ALLOCATE_BUFFER, alloc) == "RESOURCE_LIMIT"  # three per context
    guest.buffer(c2)
    assert guest.status(OP.ALLOCATE_BUFFER, w.AllocateBufferRequest(c2, 16, 64, 3, usage=0x1F)) == "RESOURCE_LIMIT"
    assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(bufs[1])) == "OK"
    big = w.AllocateBufferRequest(c2, 1 << 16, 64, 3, usage=0x1F)
    assert guest.status(OP.ALLOCATE_BUFFER, big) == "RESOURCE_LIMIT"  # bytes: the budget is nearly used
    prog = guest.program(c1)
    load = w.LoadProgram.of(c1, TOSA_FORMAT, FP_TARGET, add_program(), 1 << 20)
    assert guest.status(OP.LOAD_PROGRAM, load) == "RESOURCE_LIMIT"  # one program per guest
    queue = guest.queue(c1)
    assert guest.status(OP.CREATE_QUEUE, w.CreateQueueRequest(c1)) == "RESOURCE_LIMIT"
    bufs[1] = guest.buffer(c1)
    assert guest.submit(queue, prog, bufs).ok
    assert guest.submit(queue, prog, bufs).status == w.Status.RESOURCE_LIMIT  # one live event per context
    live = engine.accelerator.live_resources()
    assert (live["context"], live["buffer"], live["program"], live["queue"], live["event"]) == (2, 4, 1, 1, 1)
    guest.session.close()
    assert engine.accelerator.live_resources() == ZERO


def test_program_bytes_are_charged_as_declared():
    engine = _engine(quota=GuestQuota(max_total_program_bytes=3 << 20))
    guest = Guest(engine.connect())
    ctx = guest.context()
    guest.program(ctx, resident=2 << 20)
    load = w.LoadProgram.of(ctx, TOSA_FORMAT, FP_TARGET, add_program(), 2 << 20)
    assert guest.status(OP.LOAD_PROGRAM, load) == "RESOURCE_LIMIT"
    guest.program(ctx, resident=1 << 20)


def test_backing_above_the_budget_is_given_back_before_an_id_exists():
    engine = _engine(quota=GuestQuota(max_total_buffer_bytes=1000))
    guest = Guest(engine.connect())
    ctx = guest.context()
    # 990 logical bytes fit, but the CPU backend allocates size + alignment = 1054
    assert guest.status(OP.ALLOCATE_BUFFER, w.AllocateBufferRequest(ctx, 990, 64, 3, usage=0x1F)) == "RESOURCE_LIMIT"
    assert engine.accelerator.live_resources()["buffer"] == 0
    assert guest.status(OP.ALLOCATE_BUFFER, w.AllocateBufferRequest(ctx, 900, 64, 3, usage=0x1F)) == "OK"


def test_alignment_is_bounded():
    guest = Guest(_engine().connect())
    ctx = guest.context()
    huge = w.AllocateBufferRequest(ctx, 1, MAX_ALIGNMENT * 2, 3, usage=0x1F)
    assert guest.status(OP.ALLOCATE_BUFFER, huge) == "UNSUPPORTED"
    assert guest.buffer(ctx, 1, alignment=MAX_ALIGNMENT)


# ---- usage, ranges, programs ---------------------------------------------------------------------
def test_usage_bits_and_ranges_are_checked():
    guest = Guest(_engine().connect())
    ctx = guest.context()
    src_only = guest.buffer(ctx, 16, usage=int(w.BufferUsage.TRANSFER_SOURCE | w.BufferUsage.PROGRAM_INPUT))
    dst_only = guest.buffer(ctx, 16, usage=int(w.BufferUsage.TRANSFER_DESTINATION | w.BufferUsage.PROGRAM_OUTPUT))
    assert guest.write(src_only, b"x") == "PERMISSION_DENIED"
    assert guest.status(OP.READ_BUFFER, w.TransferBufferRequest(dst_only, 0, 1)) == "PERMISSION_DENIED"
    assert guest.write(dst_only, b"x" * 4, offset=13) == "OUT_OF_BOUNDS"
    assert guest.status(OP.READ_BUFFER, w.TransferBufferRequest(src_only, 16, 1)) == "OUT_OF_BOUNDS"
    prog, queue = guest.program(ctx), guest.queue(ctx)
    binding = [w.WireBinding(dst_only, 0, 16, 0, 1), w.WireBinding(src_only, 0, 16, 1, 1)]
    out = w.WireBinding(guest.buffer(ctx), 0, 16, 2, 2)
    assert guest.status(OP.SUBMIT, w.Submit.of(queue, prog, [*binding, out])) == "PERMISSION_DENIED"
    outside = w.WireBinding(src_only, 8, 16, 0, 1)
    assert guest.status(OP.SUBMIT, w.Submit.of(queue, prog, [outside, binding[1], out])) == "OUT_OF_BOUNDS"
    short = w.WireBinding(src_only, 0, 8, 0, 1)
    assert guest.status(OP.SUBMIT, w.Submit.of(queue, prog, [short, binding[1], out])) == "INVALID_ARGUMENT"
    assert guest.status(OP.SUBMIT, w.Submit.of(queue, prog, [binding[1], out])) == "INVALID_ARGUMENT"  # slots
    assert guest.session.engine.accelerator.live_resources()["event"] == 0


def test_program_loading_failures_keep_their_meaning():
    guest = Guest(_engine().connect())
    ctx = guest.context()

    def load(fmt=TOSA_FORMAT, target=FP_TARGET, artifact=None, resident=1 << 20):
        body = w.LoadProgram.of(ctx, fmt, target, artifact or add_program(), resident)
        return guest.status(OP.LOAD_PROGRAM, body)

    assert load(artifact=b"not a flatbuffer") == "INVALID_ARGUMENT"
    assert load(fmt=0x4B4D4156) == "INCOMPATIBLE"
    assert load(target=(0,) * 12) == "INCOMPATIBLE"
    assert load(resident=16) == "RESOURCE_LIMIT"  # the backend keeps more than the artifact allows
    assert load() == "OK"
    assert guest.session.engine.accelerator.live_resources()["program"] == 1


def test_programs_are_admitted_against_the_backends_capabilities_at_load():
    import dataclasses

    from ironaccel.tosa.capability import descriptor_for_all_of_tosa_1_0
    from ironaccel.tosa.operators import Op

    full = descriptor_for_all_of_tosa_1_0()
    without_add = dataclasses.replace(full, operators={op: s for op, s in full.operators.items() if op is not Op.ADD})
    acc = factory("cpu")()
    acc._capabilities = lambda: without_add  # a backend that cannot run ADD
    guest = Guest(_engine(acc).connect())
    ctx = guest.context()
    load = w.LoadProgram.of(ctx, TOSA_FORMAT, FP_TARGET, add_program(), 1 << 20)
    assert guest.status(OP.LOAD_PROGRAM, load) == "UNSUPPORTED"
    assert acc.live_resources()["program"] == 0


# ---- submission and events -----------------------------------------------------------------------
def test_a_poll_waits_for_fresh_work_only_within_the_linger_once():
    acc = ControlledCpu()
    acc.hold = True
    guest = Guest(_engine(acc, poll_linger=0.5).connect())
    _, bufs, prog, queue = guest.add_setup()
    submitted = time.perf_counter()
    event = guest.submit(queue, prog, bufs).body.event_id
    assert guest.poll(event).state == w.EventStateCode.PENDING
    assert 0.45 < time.perf_counter() - submitted < 5.0  # waited out the linger, then answered
    start = time.perf_counter()
    assert guest.poll(event).state == w.EventStateCode.PENDING
    assert time.perf_counter() - start < 0.25  # an event's linger is spent once
    acc.release(acc.held)
    assert guest.wait(event).state == w.EventStateCode.COMPLETE


def test_the_first_poll_of_a_small_program_finds_it_done():
    guest = Guest(_engine(poll_linger=1.0).connect())
    _, bufs, prog, queue = guest.add_setup()
    for _ in range(20):
        event = guest.submit(queue, prog, bufs).body.event_id
        assert guest.poll(event).state == w.EventStateCode.COMPLETE
        assert guest.status(OP.DESTROY_EVENT, w.ObjectPayload(event)) == "OK"
    assert np.frombuffer(guest.read(bufs[2], 16), np.float32).tolist() == [11, 12, 13, 14]


@pytest.mark.parametrize("linger", [-1e-6, 1.5])
def test_a_poll_linger_outside_zero_to_one_second_is_refused(linger):
    with pytest.raises(InvalidArgument, match="poll_linger"):
        _engine(poll_linger=linger)


def test_submit_and_poll_never_wait_long_and_retained_objects_are_busy():
    acc = ControlledCpu()
    acc.hold = True
    engine = _engine(acc)
    guest = Guest(engine.connect())
    ctx, bufs, prog, queue = guest.add_setup()
    start = time.perf_counter()
    event = guest.submit(queue, prog, bufs).body.event_id
    assert guest.poll(event).state == w.EventStateCode.PENDING
    assert time.perf_counter() - start < 1.0
    busy = [
        (OP.FREE_BUFFER, bufs[0]),
        (OP.UNLOAD_PROGRAM, prog),
        (OP.DESTROY_QUEUE, queue),
        (OP.DESTROY_CONTEXT, ctx),
        (OP.DESTROY_EVENT, event),
    ]
    for opcode, oid in busy:
        assert guest.status(opcode, w.ObjectPayload(oid)) == "BUSY", opcode.name
    assert guest.write(bufs[0], b"\0" * 4) == "BUSY"  # pending work reads it
    assert guest.status(OP.CANCEL_EVENT, w.ObjectPayload(event)) == "OK"
    assert guest.poll(event).state == w.EventStateCode.CANCELLED
    assert guest.status(OP.CANCEL_EVENT, w.ObjectPayload(event)) == "BUSY"  # already terminal
    assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(bufs[0])) == "BUSY"  # until the event is destroyed
    assert guest.status(OP.DESTROY_EVENT, w.ObjectPayload(event)) == "OK"
    assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(bufs[0])) == "OK"
    acc.release(acc.held)  # the cancelled job never runs


def test_cancel_is_unsupported_without_the_capability():
    acc = factory("cpu")()
    acc.supports_cancellation = False
    engine = _engine(acc)
    assert not engine.info.capabilities & w.Capability.EVENT_CANCELLATION
    guest = Guest(engine.connect())
    _ctx, bufs, prog, queue = guest.add_setup()
    event = guest.submit(queue, prog, bufs).body.event_id
    assert guest.status(OP.CANCEL_EVENT, w.ObjectPayload(event)) == "UNSUPPORTED"
    assert guest.wait(event).state == w.EventStateCode.COMPLETE


def test_a_finite_timeout_that_passes_before_the_work_starts_fails_the_event():
    acc = ControlledCpu()
    acc.hold = True
    guest = Guest(_engine(acc).connect())
    _ctx, bufs, prog, queue = guest.add_setup()
    event = guest.submit(queue, prog, bufs, timeout_ns=1000).body.event_id
    time.sleep(0.01)
    acc.release(acc.held)
    state = guest.wait(event)
    assert (state.state, state.error) == (w.EventStateCode.FAILED, w.Status.DEADLINE_EXPIRED)


def test_a_rejected_submission_retains_nothing():
    acc = FaultyAccelerator(factory("cpu")(), [Fault("submit", OutOfMemory("no command buffers"))])
    engine = _engine(acc)
    guest = Guest(engine.connect())
    ctx, bufs, prog, queue = guest.add_setup()
    response = guest.submit(queue, prog, bufs)
    assert response.status == w.Status.OUT_OF_MEMORY and response.body is None
    assert acc.live_resources()["event"] == 0
    assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(bufs[0])) == "OK"  # nothing retains it
    event = guest.submit(queue, prog, [guest.buffer(ctx), bufs[1], bufs[2]]).body.event_id
    assert guest.wait(event).state == w.EventStateCode.COMPLETE


def test_an_indeterminate_submission_hands_over_its_event():
    acc = ControlledCpu()
    acc.indeterminate_submits = 1
    engine = _engine(acc)
    guest = Guest(engine.connect())
    _ctx, bufs, prog, queue = guest.add_setup()
    response = guest.submit(queue, prog, bufs)
    assert response.status == w.Status.DEADLINE_EXPIRED and response.indeterminate
    event = response.body.event_id
    assert guest.poll(event).state == w.EventStateCode.PENDING
    assert guest.status(OP.CANCEL_EVENT, w.ObjectPayload(event)) == "OK"  # the runtime can still cancel it
    report = guest.session.reset()
    assert report.backend_reusable and report.released.events == 1


def test_reset_never_waits_and_quarantines_what_it_cannot_end():
    acc = ControlledCpu()
    acc.hold = acc.start_held = True  # the work has started: cancellation loses
    engine = _engine(acc)
    guest = Guest(engine.connect())
    ctx, bufs, prog, queue = guest.add_setup()
    guest.buffer(ctx)  # a spare buffer no work holds
    guest.submit(queue, prog, bufs)
    start = time.perf_counter()
    report = guest.session.reset()
    assert time.perf_counter() - start < 1.0
    assert report.released == ObjectCounts(buffers=1)  # the spare buffer; everything else is held by the work
    assert report.quarantined == ObjectCounts(contexts=1, buffers=3, programs=1, queues=1, events=1)
    assert not report.backend_reusable and guest.session.quarantined().total == 7
    acc.release(acc.held)  # the work ends
    guest.status(OP.GET_DEVICE_INFO)  # the next command reclaims what it held
    assert guest.session.quarantined() == ObjectCounts()
    assert acc.live_resources() == ZERO


def test_quarantined_objects_stay_charged_to_the_guest():
    acc = ControlledCpu()
    acc.hold = acc.start_held = True
    guest = Guest(_engine(acc, quota=GuestQuota(max_contexts=1)).connect())
    _ctx, bufs, prog, queue = guest.add_setup()
    guest.submit(queue, prog, bufs)
    guest.session.reset()
    assert guest.status(OP.CREATE_CONTEXT, w.CreateContextRequest()) == "RESOURCE_LIMIT"
    acc.release(acc.held)
    assert guest.context()


# ---- device loss and backend faults --------------------------------------------------------------
def test_device_loss_is_sticky_and_teardown_makes_no_backend_call():
    acc = ControlledCpu()
    acc.hold = True
    engine = _engine(acc)
    guest, other = Guest(engine.connect()), Guest(engine.connect())
    ctx, bufs, prog, queue = guest.add_setup()
    event = guest.submit(queue, prog, bufs).body.event_id
    acc.lose_on_poll = True
    assert guest.status(OP.POLL_EVENT, w.ObjectPayload(event)) == "DEVICE_LOST"
    assert isinstance(engine.lost, DeviceLost) and guest.session.needs_reset and other.session.needs_reset
    assert guest.status(OP.GET_DEVICE_INFO) == "OK"
    for opcode, body in _every_use({"ctx": ctx, "buf": bufs[0], "prog": prog, "queue": queue, "event": event}):
        assert guest.status(opcode, body) == "DEVICE_LOST", opcode.name
    assert other.status(OP.CREATE_CONTEXT, w.CreateContextRequest()) == "DEVICE_LOST"
    report = guest.session.reset()
    assert report.released == ObjectCounts() and not report.backend_reusable
    assert report.quarantined == ObjectCounts(contexts=1, buffers=3, programs=1, queues=1, events=1)


def test_a_failed_release_of_unknown_outcome_is_device_loss():
    acc = FaultyAccelerator(factory("cpu")(), [Fault("free", OutOfMemory("driver gave up midway"))])
    engine = _engine(acc)
    guest = Guest(engine.connect())
    ctx = guest.context()
    buf = guest.buffer(ctx)
    assert guest.status(OP.FREE_BUFFER, w.ObjectPayload(buf)) == "DEVICE_LOST"
    assert engine.lost is not None
    assert guest.status(OP.READ_BUFFER, w.TransferBufferRequest(buf, 0, 1)) == "DEVICE_LOST"


def test_a_rejected_release_keeps_the_id():
    fault = Fault("destroy_queue", OutOfMemory("try again"), reject_release=True)
    acc = FaultyAccelerator(factory("cpu")(), [fault])
    guest = Guest(_engine(acc).connect())
    queue = guest.queue(guest.context())
    assert guest.status(OP.DESTROY_QUEUE, w.ObjectPayload(queue)) == "OUT_OF_MEMORY"
    assert guest.status(OP.DESTROY_QUEUE, w.ObjectPayload(queue)) == "OK"


def test_allocation_failures_map_and_change_nothing():
    acc = ControlledCpu()
    acc.fail_allocations = 1
    guest = Guest(_engine(acc).connect())
    ctx = guest.context()
    assert guest.status(OP.ALLOCATE_BUFFER, w.AllocateBufferRequest(ctx, 16, 64, 3, usage=0x1F)) == "OUT_OF_MEMORY"
    assert guest.session.live_objects() == ObjectCounts(contexts=1)
    assert guest.buffer(ctx)


def test_an_engine_defect_answers_internal_error_and_asks_for_reset(monkeypatch):
    session = _engine().connect()
    guest = Guest(session)

    def broken(req):
        raise RuntimeError("defect")

    monkeypatch.setitem(session._handlers, OP.CREATE_CONTEXT, broken)
    assert guest.status(OP.CREATE_CONTEXT, w.CreateContextRequest()) == "INTERNAL_ERROR"
    assert session.needs_reset
    session.reset()
    assert not session.needs_reset


def test_error_mapping_covers_the_contract():
    from ironaccel.core import errors as e
    from ironaccel.tosa.errors import LoweringError, NotTosa10Error

    assert status_for(NotTosa10Error("x")) is w.Status.INCOMPATIBLE
    assert status_for(LoweringError("x")) is w.Status.UNSUPPORTED
    assert status_for(e.NativeError("vk", -4)) is w.Status.INTERNAL_ERROR
    assert status_for(e.PermissionDenied("x")) is w.Status.PERMISSION_DENIED
    assert status_for(None) is w.Status.INTERNAL_ERROR


# ---- close ---------------------------------------------------------------------------------------
def test_close_releases_pending_and_running_work():
    acc = ControlledCpu()
    engine = _engine(acc)
    guest = Guest(engine.connect())
    _ctx, bufs, prog, queue = guest.add_setup()
    acc.hold = True
    guest.submit(queue, prog, bufs)  # pending: cancelled at close
    _ctx2, bufs2, prog2, queue2 = guest.add_setup()
    acc.start_held = True
    guest.submit(queue2, prog2, bufs2)  # started: close waits for it
    threading.Timer(0.2, acc.release, [acc.held[1:]]).start()
    report = guest.session.close(wait=10)
    assert report.released.events == 1 and report.quarantined.events == 1
    assert acc.live_resources() == ZERO and engine.orphaned() == ObjectCounts()
    assert guest.session.closed and guest.session.process(w.Request(OP.GET_DEVICE_INFO, 1).encode(), 92) == b""
    assert engine.sessions == ()


def test_work_that_outlives_close_is_reclaimed_by_the_engine():
    acc = ControlledCpu()
    acc.indeterminate_submits = 1
    engine = _engine(acc)
    guest = Guest(engine.connect())
    _ctx, bufs, prog, queue = guest.add_setup()
    assert guest.submit(queue, prog, bufs).indeterminate
    guest.session.close(wait=0.05)
    assert engine.orphaned() == ObjectCounts(contexts=1, buffers=3, programs=1, queues=1, events=1)
    acc.release(acc.parked)
    deadline = time.monotonic() + 10
    while engine.reclaim().total and time.monotonic() < deadline:
        time.sleep(0.01)
    assert acc.live_resources() == ZERO


def test_two_guests_in_parallel():
    engine = _engine()
    errors: list[BaseException] = []

    def run(seed: int) -> None:
        try:
            guest = Guest(engine.connect())
            for round_ in range(5):
                _ctx, bufs, prog, queue = guest.add_setup()
                x = np.full(4, seed * 100 + round_, np.float32)
                assert guest.write(bufs[0], x.tobytes()) == "OK"
                event = guest.submit(queue, prog, bufs).body.event_id
                assert guest.wait(event).state == w.EventStateCode.COMPLETE
                assert np.array_equal(np.frombuffer(guest.read(bufs[2], 16), np.float32), x + 10)
            guest.session.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert engine.accelerator.live_resources() == ZERO


def test_connection_tags_are_reused_only_after_close():
    engine = _engine()
    first = engine.connect()
    tags = {first.tag}
    for _ in range(3):
        tags.add(engine.connect().tag)
    assert len(tags) == 4
    first.close()
    assert engine.connect().tag != first.tag  # tags cycle forward; a closed tag returns only after a full lap


def test_process_into_writes_answers_and_read_data_straight_into_the_response_area():
    engine = _engine()
    guest = Guest(engine.connect())
    ctx = guest.context()
    buf = guest.buffer(ctx, size=64)
    assert guest.write(buf, bytes(range(64))) == "OK"
    area = bytearray(b"\xee" * 128)
    request = w.Request(OP.READ_BUFFER, 77, w.TransferBufferRequest(buf, 8, 32)).encode()
    used = guest.session.process_into(request, memoryview(area))
    assert used == 48 and bytes(area[16:48]) == bytes(range(8, 40)) and area[48:] == b"\xee" * 80
    assert w.decode_response(bytes(area[:used]), OP.READ_BUFFER, request_id=77, read_bytes=32).ok
    small = memoryview(bytearray(40))  # shorter than 16 + 32: nothing written, nothing changed
    assert guest.session.process_into(request, small) == 0 and bytes(small) == bytes(40)
    other = w.Request(OP.READ_BUFFER, 78, w.TransferBufferRequest(buf, 60, 8)).encode()
    assert guest.session.process_into(other, memoryview(area)) == 16  # out of bounds: a bare header
    assert w.status_name(w.ResponseHeader.unpack(area).status) == "OUT_OF_BOUNDS"
    guest.session.close()
    assert engine.accelerator.live_resources() == ZERO


def test_transfers_with_their_data_in_a_descriptor_of_its_own():
    """A WRITE_BUFFER whose data is a separate descriptor (the guest's own memory) is decoded from the
    private copy of its header and prefix with the data as the tail; only a WRITE_BUFFER may have one,
    its frame must end at the prefix, and the tail must be exactly what the prefix announces. A
    READ_BUFFER with a sink reads into it and answers the header in the first region; a sink too small
    for the data gets no answer at all (a short response area), and nothing changes."""
    engine = _engine()
    guest = Guest(engine.connect())
    ctx = guest.context()
    buf = guest.buffer(ctx, size=64)
    response = memoryview(bytearray(16))

    def status() -> str:
        return w.status_name(w.ResponseHeader.unpack(response).status)

    def write_head(rid: int, n: int, offset: int = 0) -> bytes:
        body = w.TransferBufferRequest(buf, offset, n).pack()
        return w.RequestHeader(int(OP.WRITE_BUFFER), 0, len(body) + n, rid).pack() + body

    data = memoryview(bytearray(range(1, 33)))
    assert guest.session.process_into(write_head(5, 32, 8), response, tail=data) == 16 and status() == "OK"
    assert guest.read(buf, 64) == bytes(8) + bytes(range(1, 33)) + bytes(24)
    assert guest.session.process_into(write_head(6, 32), response, tail=data[:31]) == 16  # short tail
    assert status() == "INVALID_ARGUMENT"
    padded = write_head(7, 32) + b"\x00"  # one data byte in the frame, the other 31 as the tail
    assert guest.session.process_into(padded, response, tail=data[:31]) == 16 and status() == "INVALID_ARGUMENT"
    read = w.Request(OP.READ_BUFFER, 8, w.TransferBufferRequest(buf, 8, 32)).encode()
    assert guest.session.process_into(read, response, tail=data) == 16  # only a write carries a tail
    assert status() == "INVALID_ARGUMENT"
    assert guest.read(buf, 64) == bytes(8) + bytes(range(1, 33)) + bytes(24)
    sink = memoryview(bytearray(40))
    assert guest.session.process_into(read, response, sink=sink) == 16 + 32 and status() == "OK"
    assert bytes(sink[:32]) == bytes(range(1, 33)) and bytes(sink[32:]) == bytes(8)
    assert guest.session.process_into(read, response, sink=sink[:31]) == 0  # no room for the data
    guest.session.close()
    assert engine.accelerator.live_resources() == ZERO


def test_a_write_buffer_changed_while_read_in_place_is_refused():
    """A large WRITE_BUFFER is decoded where the guest wrote it; it runs only if what was decoded equals
    the private copy of its header and prefix taken first (the guest cannot swap a checked value)."""
    engine = _engine()
    guest = Guest(engine.connect())
    ctx = guest.context()
    buf, other = guest.buffer(ctx, size=64), guest.buffer(ctx, size=64)
    frame = bytearray(w.Request(OP.WRITE_BUFFER, 5, w.WriteBuffer.of(buf, 0, b"\x01" * 64)).encode())
    head = bytes(frame[:40])
    response = memoryview(bytearray(64))
    assert guest.session.process_into(memoryview(frame), response, head) == 16
    assert w.status_name(w.ResponseHeader.unpack(response).status) == "OK"
    assert guest.read(buf, 64) == b"\x01" * 64
    swapped = bytearray(frame)
    swapped[16:24] = other.to_bytes(8, "little")  # the buffer id changed after the private copy
    swapped[40:] = b"\x02" * 64
    assert guest.session.process_into(memoryview(swapped), response, head) == 16
    assert w.status_name(w.ResponseHeader.unpack(response).status) == "INVALID_ARGUMENT"
    assert guest.read(other, 64) == bytes(64) and guest.read(buf, 64) == b"\x01" * 64
    read = bytearray(w.Request(OP.READ_BUFFER, 6, w.TransferBufferRequest(buf, 0, 16)).encode())
    assert guest.session.process_into(memoryview(read), response, head) == 16  # not a WRITE_BUFFER at all
    assert w.status_name(w.ResponseHeader.unpack(response).status) == "INVALID_ARGUMENT"
    guest.session.close()
    assert engine.accelerator.live_resources() == ZERO
