"""virtio-accel's nine protocol 1.0 scenarios replayed through the device engine on the CPU backend.

Each trace entry is checked where the engine can be checked: the descriptor regions it names (readable
before writable, the readable total is exactly the request, the writable total is the response area we
offer), the request bytes (decoded and re-encoded byte for byte), then the answer: status, used length,
header, and payload structure. Object ids are compared symbolically: the traces carry the encoding of
upstream's mock, so each of its ids is bound to ours on first sight, and the binding must stay one to
one for the whole trace. The mock's device identity differs from ours, so device info is compared by
shape only.

Controls are applied where the engine meets them: backend behaviour through :class:`ControlledCpu`,
resets through ``GuestSession.reset`` (released / quarantined counts compared), a short used length by
publishing one byte less. Ring-level controls (notification suppression, backpressure, completion
order) belong to the transport and change nothing the engine sees.

Upstream's mock loads its own artifact format ("KMAV"): one program with a single 16-byte mutable
slot. :class:`MockArtifacts` stands in for it with the equivalent TOSA program (no input, one fp32[4]
output), so every request byte of the traces is replayed unchanged.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from ironaccel.runtime import TOSA_FORMAT, ArtifactRef
from ironaccel.virtio import DeviceEngine, ObjectCounts
from ironaccel.virtio import wire as w
from virtio_guest import FP_TARGET, ControlledCpu, const_program

PROTOCOL = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "virtio-accel" / "protocol"
if not PROTOCOL.is_dir():
    pytest.skip(f"virtio-accel protocol traces not found at {PROTOCOL}", allow_module_level=True)

TRACES = json.loads((PROTOCOL / "scenarios.json").read_text())
SCENARIOS = {s["name"]: s for s in TRACES["scenarios"]}
MOCK_FORMAT = int.from_bytes(b"KMAV", "little")
ZERO = {"context": 0, "buffer": 0, "program": 0, "queue": 0, "event": 0, "prepared": 0, "gate": 0, "buffer_bytes": 0}

# Ring-level controls: the transport's business; the engine sees the same commands either way.
TRANSPORT_ONLY = {
    "complete_next_pair_in_reverse_order",
    "defer_device_service_until_pressure_observed",
    "suppress_available_notifications",
    "service_one_chain",
    "defer_poll_event_then_reset",
}


class MockArtifacts(ControlledCpu):
    """Upstream's mock artifact format, stood in for by the equivalent TOSA program. Like the mock,
    it leaves submitted work pending until a control says otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = True

    def load_program(self, ctx: Any, artifact: ArtifactRef) -> Any:
        if artifact.format == MOCK_FORMAT:
            artifact = ArtifactRef(const_program([1.0, 2.0, 3.0, 4.0]), 1 << 20, FP_TARGET, TOSA_FORMAT)
        return super().load_program(ctx, artifact)


def _counts(control: dict, key: str) -> ObjectCounts:
    return ObjectCounts(**control[key])


class Replay:
    def __init__(self, scenario: dict) -> None:
        self.scenario = scenario
        self.acc = MockArtifacts()
        self.engine = DeviceEngine(self.acc)
        self.session = self.engine.connect()
        self.ours: dict[int, int] = {}  # upstream id -> ours
        self.theirs: dict[int, int] = {}  # ours -> upstream id
        self.short_next = False
        self.reports: list[Any] = []
        self.before_reset: list[tuple[w.Opcode, Any]] = []

    # ---- controls ---------------------------------------------------------------------------------
    def controls_at(self, at: str) -> None:
        for control in self.scenario["controls"]:
            if control["at"] == at:
                self.apply(control)

    def apply(self, control: dict) -> None:
        action = control["action"]
        if action in TRANSPORT_ONLY:
            return
        if action == "complete_submissions_immediately":
            self.acc.hold, self.acc.finish_during_submit = False, True
        elif action == "reject_finite_timeouts_with_deadline_expired":
            self.acc.reject_finite_timeouts = True
        elif action == "allocate_buffer_error_after_out_of_memory":
            self.acc.fail_allocations = 1
        elif action == "submit_indeterminate_deadline_expired":
            self.acc.indeterminate_submits = 1
        elif action == "poll_event_returns_device_lost":
            self.acc.lose_on_poll = True
        elif action == "publish_used_length_minus_one":
            self.short_next = True
        elif control["kind"] == "reset":
            report = self.session.reset()
            assert report.released == _counts(control, "released"), action
            assert report.quarantined == _counts(control, "quarantined"), action
            assert report.backend_reusable == (action == "backend_reusable")
            self.reports.append(report)
            self.ours.clear()
            self.theirs.clear()
        else:
            raise AssertionError(f"scenario control {action!r} has no replay")

    # ---- ids ----------------------------------------------------------------------------------------
    def bind(self, theirs: int, ours: int) -> None:
        assert self.ours.setdefault(theirs, ours) == ours, f"upstream id {theirs:#x} named two of our objects"
        assert self.theirs.setdefault(ours, theirs) == theirs, f"our id {ours:#x} matched two upstream ids"

    def ours_for(self, theirs: int) -> int:
        assert theirs in self.ours, f"upstream id {theirs:#x} used before any response created it"
        return self.ours[theirs]

    def translate(self, request: w.Request) -> w.Request:
        body = request.body
        if isinstance(body, w.Submit):
            prefix = dataclasses.replace(
                body.prefix,
                queue_id=self.ours_for(body.prefix.queue_id),
                program_id=self.ours_for(body.prefix.program_id),
            )
            bindings = tuple(dataclasses.replace(b, buffer_id=self.ours_for(b.buffer_id)) for b in body.bindings)
            body = w.Submit(prefix, bindings)
        elif isinstance(body, w.WriteBuffer):
            body = w.WriteBuffer(
                dataclasses.replace(body.transfer, buffer_id=self.ours_for(body.transfer.buffer_id)), body.data
            )
        elif isinstance(body, w.LoadProgram):
            body = w.LoadProgram(
                dataclasses.replace(body.prefix, context_id=self.ours_for(body.prefix.context_id)), body.artifact
            )
        elif body is not None:
            ids = {
                f.name: self.ours_for(getattr(body, f.name)) for f in dataclasses.fields(body) if f.name.endswith("_id")
            }
            body = dataclasses.replace(body, **ids)
        return w.Request(request.opcode, request.request_id, body)

    # ---- one trace entry ----------------------------------------------------------------------------
    def step(self, entry: dict) -> None:
        frame = bytes.fromhex(entry["request"])
        readable = [r["bytes"] for r in entry["regions"] if r["direction"] == "readable"]
        writable = [r["bytes"] for r in entry["regions"] if r["direction"] == "writable"]
        directions = [r["direction"] for r in entry["regions"]]
        assert directions == ["readable"] * len(readable) + ["writable"] * len(writable)
        assert 2 <= len(directions) <= w.HARD_MAX_CHAIN_DESCRIPTORS and all(readable) and all(writable)
        assert sum(readable) == len(frame)
        capacity = sum(writable)
        assert entry["used"] <= capacity

        request = w.decode_request(frame)
        assert request.encode() == frame
        assert request.opcode == entry["opcode"] and w.Opcode(request.opcode).name == entry["operation"]
        assert request.request_id == entry["request_id"]
        translated = self.translate(request)
        if request.opcode not in (w.Opcode.GET_DEVICE_INFO, w.Opcode.CREATE_CONTEXT):
            self.before_reset.append((w.Opcode(request.opcode), translated.body))  # commands naming ids

        out = bytes(self.session.process(translated.encode(), capacity))
        used = len(out) - 1 if self.short_next else len(out)
        self.short_next = False
        assert used == entry["used"], entry["operation"]

        theirs = bytes.fromhex(entry["response"])
        assert len(theirs) == used
        header, their_header = w.ResponseHeader.unpack(out), w.ResponseHeader.unpack(theirs)
        assert header == their_header  # status, flags, payload length and request id
        assert header.status == entry["status"]
        if used < len(out):
            return  # a short publication: the driver sees a truncated frame; shape checked by the header
        ours_body = w.decode_response(out, request.opcode, request_id=request.request_id).body
        their_body = w.decode_response(theirs, request.opcode, request_id=request.request_id).body
        self.compare(ours_body, their_body)

    def compare(self, ours: Any, theirs: Any) -> None:
        assert type(ours) is type(theirs) or (isinstance(ours, memoryview) and isinstance(theirs, memoryview))
        if isinstance(ours, w.ObjectPayload):
            self.bind(theirs.object_id, ours.object_id)
        elif isinstance(ours, w.SubmitResponse):
            self.bind(theirs.event_id, ours.event_id)
        elif isinstance(ours, w.WireDeviceInfo):
            pass  # another device's identity and limits: same record, other values
        elif isinstance(ours, memoryview):
            assert bytes(ours) == bytes(theirs)
        else:
            assert ours == theirs

    def run(self) -> None:
        self.controls_at("scenario_start")
        seen: collections.Counter[int] = collections.Counter()
        for entry in self.scenario["trace"]:
            rid = entry["request_id"]
            seen[rid] += 1
            self.controls_at(f"before_request_id:{rid}" if seen[rid] == 1 else f"before_reconfigured_request_id:{rid}")
            self.step(entry)
            self.controls_at(f"after_request_id:{rid}")
        self.controls_at("after_trace")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_replays(name):
    replay = Replay(SCENARIOS[name])
    replay.run()
    assert len(replay.theirs) == len(replay.ours)  # the id binding stayed one to one


def test_all_nine_scenarios_are_replayed():
    assert set(SCENARIOS) == {
        "complete_lifecycle",
        "out_of_order",
        "backpressure",
        "notification_suppression",
        "short_response",
        "timeout",
        "indeterminate_recovery",
        "reset_inflight",
        "device_loss",
    }


def test_lifecycle_leaves_nothing_and_its_two_events_are_distinct():
    replay = Replay(SCENARIOS["complete_lifecycle"])
    replay.run()
    # context, buffer, program, queue and two events: six upstream ids, six distinct ids of ours
    assert len(set(replay.ours.values())) == len(replay.ours) == 6
    assert replay.acc.live_resources() == ZERO
    assert replay.session.close() == replay.session.close()  # closing twice is harmless


def test_reset_inflight_makes_the_old_ids_stale():
    replay = Replay(SCENARIOS["reset_inflight"])
    replay.run()
    assert replay.acc.live_resources() == ZERO
    for opcode, body in replay.before_reset:
        out = replay.session.process(w.Request(opcode, 99, body).encode(), 1 << 10)
        assert w.ResponseHeader.unpack(out).status == w.Status.STALE_OBJECT, opcode.name


def test_indeterminate_recovery_quarantines_until_the_work_ends():
    replay = Replay(SCENARIOS["indeterminate_recovery"])
    replay.run()
    (report,) = replay.reports
    assert not report.backend_reusable
    assert replay.session.quarantined() == ObjectCounts(contexts=1, buffers=1, programs=1, queues=1, events=1)
    replay.acc.release(replay.acc.parked)  # the backend finally resolves the uncertain submission
    replay.session.close(wait=10)
    assert replay.acc.live_resources() == ZERO


def test_timeout_rejection_retains_nothing():
    replay = Replay(SCENARIOS["timeout"])
    replay.run()
    assert replay.acc.live_resources() == ZERO


def test_device_loss_answers_device_lost_from_then_on():
    replay = Replay(SCENARIOS["device_loss"])
    replay.run()
    assert replay.engine.lost is not None and replay.session.needs_reset
    info = replay.session.process(w.Request(w.Opcode.GET_DEVICE_INFO, 50).encode(), 92)
    assert w.ResponseHeader.unpack(info).status == w.Status.OK
    create = replay.session.process(w.Request(w.Opcode.CREATE_CONTEXT, 51, w.CreateContextRequest()).encode(), 24)
    assert w.ResponseHeader.unpack(create).status == w.Status.DEVICE_LOST
    report = replay.session.reset()
    assert not report.backend_reusable and report.released == ObjectCounts()
    assert report.quarantined == ObjectCounts(contexts=1, buffers=1, programs=1, queues=1, events=1)
