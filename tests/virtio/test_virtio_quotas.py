"""What guests may hold, alone and together, and for how long their work may run: the per-guest quota, the
daemon-wide byte cap (charged before the backend runs, given back by every release), the compute budget of
each submission, and the ``serve`` options that set them."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.cli.serve import parse_size
from ironaccel.conformance.semantic import endless_program
from ironaccel.core.errors import DeadlineExpired, InvalidArgument, ResourceLimit
from ironaccel.runtime import TOSA_FORMAT, ArtifactRef, Binding, BufferDesc, Device, EventState, MemoryDomain
from ironaccel.tosa import DType, ProgramBuilder
from ironaccel.tosa.codec import read, write
from ironaccel.tosa.target import Target
from ironaccel.tosa.working_set import estimate
from ironaccel.virtio import DeviceEngine, GuestQuota, ObjectCounts
from ironaccel.virtio import wire as w
from ironaccel.virtio.daemon import for_engine
from ironaccel.virtio.engine_account import HOST_MEMORY_FRACTION, HostAccount, available_memory, default_max_bytes
from ironaccel.virtio.guest import VirtioAccelerator
from ironaccel.virtio.guest_bound import declared_bound
from ironaccel.virtio.ids import ObjectKind
from virtio_guest import FP_TARGET, ControlledCpu, Guest, add_program, thread_count

OP = w.Opcode
ROOT = Path(__file__).resolve().parents[2]
IRONACCEL = [sys.executable, "-m", "ironaccel.cli.main"]
ZERO = {"context": 0, "buffer": 0, "program": 0, "queue": 0, "event": 0, "prepared": 0, "gate": 0, "buffer_bytes": 0}
ALL_TOSA = Target().encode()  # what a guest sends when its caller names no target


class CountingCpu(ControlledCpu):
    """The CPU backend counting what reaches it: allocations, loads, and each submission's timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.allocations = 0
        self.loads = 0
        self.timeouts: list[float | None] = []

    def allocate_buffer(self, ctx, desc):
        self.allocations += 1
        return super().allocate_buffer(ctx, desc)

    def load_program(self, ctx, artifact):
        self.loads += 1
        return super().load_program(ctx, artifact)

    def submit(self, queue, program, bindings, timeout=None, after=None):
        self.timeouts.append(timeout)
        return super().submit(queue, program, bindings, timeout, after)


def _alloc(guest: Guest, ctx: int, size: int) -> w.Response:
    return guest.call(OP.ALLOCATE_BUFFER, w.AllocateBufferRequest(ctx, size, 64, 3, usage=0x1F))


def _load(guest: Guest, ctx: int, resident: int) -> w.Response:
    return guest.call(OP.LOAD_PROGRAM, w.LoadProgram.of(ctx, TOSA_FORMAT, FP_TARGET, add_program(), resident))


def _charged(engine: DeviceEngine) -> int:
    """What the live sessions' books hold (buffer backing and declared program bytes)."""
    return sum(sum(s._bytes.values()) for s in engine.sessions)


# ---- the daemon-wide cap ---------------------------------------------------------------------------------------


def test_the_daemon_wide_cap_refuses_what_a_guest_quota_would_still_allow(caplog):
    acc = CountingCpu()
    engine = DeviceEngine(acc, quota=GuestQuota(max_total_buffer_bytes=1 << 20), max_bytes=600_000)
    a, b = Guest(engine.connect()), Guest(engine.connect())
    ca, cb = a.context(), b.context()
    first = _alloc(a, ca, 400_000)
    assert first.ok and engine.account.held == 400_064  # the CPU backend's backing: size + alignment
    calls = acc.allocations
    refused = _alloc(b, cb, 400_000)  # within b's own 1 MiB, but not within what is left of the cap
    assert refused.status == w.Status.RESOURCE_LIMIT
    assert acc.allocations == calls, "the backend was called for a refused allocation"
    assert engine.account.held == 400_064
    assert "daemon-wide cap of 600000 bytes" in caplog.text and "--max-bytes" in caplog.text
    assert a.status(OP.FREE_BUFFER, w.ObjectPayload(first.body.object_id)) == "OK"
    assert engine.account.held == 0
    assert _alloc(b, cb, 400_000).ok
    # b's own quota is named when it is b's that runs out.
    assert _alloc(b, cb, 700_000).status == w.Status.RESOURCE_LIMIT
    assert "--guest-bytes" in caplog.text


def test_backing_beyond_the_cap_is_given_back_before_an_id_exists():
    acc = CountingCpu()
    engine = DeviceEngine(acc, max_bytes=400_032)  # 400,000 asked fit; the backend's 400,064 do not
    guest = Guest(engine.connect())
    ctx = guest.context()
    assert _alloc(guest, ctx, 400_000).status == w.Status.RESOURCE_LIMIT
    assert acc.allocations == 1 and acc.live_resources()["buffer"] == 0
    assert engine.account.held == 0
    assert _alloc(guest, ctx, 399_000).ok


def test_declared_program_bytes_count_against_the_daemon_wide_cap():
    acc = CountingCpu()
    engine = DeviceEngine(acc, max_bytes=3 << 20)
    a, b = Guest(engine.connect()), Guest(engine.connect())
    ca, cb = a.context(), b.context()
    first = _load(a, ca, 2 << 20)
    assert first.ok and engine.account.held == 2 << 20
    loads = acc.loads
    assert _load(b, cb, 2 << 20).status == w.Status.RESOURCE_LIMIT
    assert acc.loads == loads, "the backend parsed a program the cap refused"
    assert _load(b, cb, 1 << 20).ok and engine.account.held == 3 << 20
    assert a.status(OP.UNLOAD_PROGRAM, w.ObjectPayload(first.body.object_id)) == "OK"
    assert engine.account.held == 1 << 20


def test_a_load_the_backend_refuses_gives_its_charge_back():
    engine = DeviceEngine(CountingCpu(), max_bytes=4 << 20)
    guest = Guest(engine.connect())
    ctx = guest.context()
    garbage = w.LoadProgram.of(ctx, TOSA_FORMAT, FP_TARGET, b"not a tosa file at all", 2 << 20)
    assert not guest.call(OP.LOAD_PROGRAM, garbage).ok
    assert engine.account.held == 0


def test_reset_close_and_reclaim_give_every_byte_back():
    acc = ControlledCpu()
    engine = DeviceEngine(acc, max_bytes=64 << 20)
    guest = Guest(engine.connect())
    guest.add_setup()
    held = engine.account.held
    assert held == _charged(engine) > 1 << 20  # three buffers and the program's declared 1 MiB
    guest.session.reset()
    assert engine.account.held == 0

    # Work whose admission is indeterminate is never cancelled: its objects outlive the guest.
    acc.indeterminate_submits = 1
    _ctx, bufs, prog, queue = guest.add_setup()
    assert guest.submit(queue, prog, bufs).indeterminate
    guest.session.close(wait=0.05)
    assert engine.orphaned() == ObjectCounts(contexts=1, buffers=3, programs=1, queues=1, events=1)
    assert engine.account.held == held, "orphans are still charged to the daemon"
    acc.release(acc.parked)
    deadline = time.monotonic() + 10
    while engine.reclaim().total and time.monotonic() < deadline:
        time.sleep(0.01)
    assert acc.live_resources() == ZERO and engine.account.held == 0


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["alloc", "alloc", "free", "load", "unload", "reset", "close"]),
        st.integers(0, 2),  # which guest
        st.integers(1, 300_000),  # bytes
    ),
    max_size=30,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_OPS)
def test_what_all_guests_hold_never_passes_the_cap(ops):
    cap = 700_000
    acc = CpuAccelerator()
    quota = GuestQuota(max_total_buffer_bytes=400_000, max_total_program_bytes=400_000)
    engine = DeviceEngine(acc, quota=quota, max_bytes=cap)
    guests = [Guest(engine.connect()) for _ in range(3)]
    ctxs = [g.context() for g in guests]
    owned: list[list[tuple[w.Opcode, int]]] = [[], [], []]
    for op, who, size in ops:
        guest = guests[who]
        if op == "alloc":
            response = _alloc(guest, ctxs[who], size)
            if response.ok:
                owned[who].append((OP.FREE_BUFFER, response.body.object_id))
        elif op == "load":
            response = _load(guest, ctxs[who], size)
            if response.ok:
                owned[who].append((OP.UNLOAD_PROGRAM, response.body.object_id))
        elif op in ("free", "unload") and owned[who]:
            release, oid = owned[who].pop(size % len(owned[who]))
            assert guest.status(release, w.ObjectPayload(oid)) == "OK"
        elif op in ("reset", "close"):
            if op == "reset":
                guest.session.reset()
            else:
                guest.session.close()
                guests[who] = guest = Guest(engine.connect())
            ctxs[who], owned[who] = guest.context(), []
        assert engine.account.held <= cap
        assert engine.account.held == _charged(engine)
    for guest in guests:
        guest.session.close()
    assert engine.account.held == 0 and acc.live_resources() == ZERO


def test_the_default_cap_is_a_fraction_of_available_memory(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n")
    assert available_memory(str(meminfo)) == 20_000_000 * 1024
    assert default_max_bytes(str(meminfo)) == int(20_000_000 * 1024 * HOST_MEMORY_FRACTION)
    assert default_max_bytes(str(tmp_path / "missing")) is None
    meminfo.write_text("MemTotal: 1 kB\n")
    assert default_max_bytes(str(meminfo)) is None
    here = available_memory()
    if here is not None:
        cap = DeviceEngine(CpuAccelerator()).account.cap
        assert cap is not None and abs(cap - here * HOST_MEMORY_FRACTION) < here * 0.1
    with pytest.raises(InvalidArgument, match="cap must be a positive integer"):
        HostAccount(0)


# ---- the compute budget ----------------------------------------------------------------------------------------


def test_every_submission_reaches_the_backend_with_a_timeout_within_the_budget():
    acc = CountingCpu()
    guest = Guest(DeviceEngine(acc, quota=GuestQuota(max_run_seconds=2.0)).connect())
    _ctx, bufs, prog, queue = guest.add_setup()
    for asked in (0, 10 * 10**9, 500 * 10**6):
        event = guest.submit(queue, prog, bufs, timeout_ns=asked).body.event_id
        assert guest.wait(event).state == w.EventStateCode.COMPLETE
        assert guest.status(OP.DESTROY_EVENT, w.ObjectPayload(event)) == "OK"
    assert acc.timeouts == [2.0, 2.0, 0.5]


def _endless(guest: Guest) -> tuple[int, list[int], int, int]:
    ctx = guest.context()
    bufs = [guest.buffer(ctx, 4) for _ in range(2)]
    prog = guest.ok(OP.LOAD_PROGRAM, w.LoadProgram.of(ctx, TOSA_FORMAT, ALL_TOSA, endless_program(), 1 << 20))
    return ctx, bufs, prog.object_id, guest.queue(ctx)


def test_work_without_a_timeout_is_stopped_by_the_budget():
    guest = Guest(DeviceEngine(CpuAccelerator(), quota=GuestQuota(max_run_seconds=0.3)).connect())
    _ctx, bufs, prog, queue = _endless(guest)
    start = time.monotonic()
    event = guest.submit(queue, prog, bufs, size=4).body.event_id
    state = guest.wait(event, tries=1000)  # up to 5 s of polls
    assert (state.state, state.error) == (w.EventStateCode.FAILED, w.Status.DEADLINE_EXPIRED)
    assert time.monotonic() - start < 5
    guest.session.close()


def test_a_guest_that_leaves_has_its_running_work_stopped_and_threads_come_back(tmp_path):
    """Through the daemon: an endless run, no timeout, the guest disconnects. The teardown's cancellation
    stops the run; everything is released and the daemon's threads go back to what they were."""
    acc = CpuAccelerator()
    engine = DeviceEngine(acc)  # the default budget (60 s): the disconnect, not the budget, ends the run
    daemon = for_engine(str(tmp_path / "a.sock"), engine)
    daemon.listen()
    serving = threading.Thread(target=daemon.serve)
    serving.start()
    try:
        baseline = thread_count()
        guest = VirtioAccelerator(daemon.path)
        ctx = guest.create_context()
        program = guest.load_program(ctx, ArtifactRef(endless_program(), 1 << 20))
        bufs = [guest.allocate_buffer(ctx, BufferDesc(4, MemoryDomain.SHARED)) for _ in range(2)]
        queue = guest.create_queue(ctx)
        event = guest.submit(queue, program, [Binding(i, b, 0, 4) for i, b in enumerate(bufs)])
        time.sleep(0.2)
        assert guest.poll_event(event) is EventState.PENDING
        guest.close()
        start = time.monotonic()
        deadline = start + 10
        while time.monotonic() < deadline and (acc.live_resources() != ZERO or daemon.guests):
            time.sleep(0.02)
        released = time.monotonic() - start
        assert acc.live_resources() == ZERO and daemon.guests == 0, acc.live_resources()
        assert released < 3, f"the run outlived its guest by {released:.1f} s"
        while time.monotonic() < deadline and thread_count() > baseline:
            time.sleep(0.05)
        assert thread_count() <= baseline, [t.name for t in threading.enumerate()]
        assert engine.account.held == 0
    finally:
        daemon.stop()
        serving.join(30)


# ---- what a guest declares --------------------------------------------------------------------------------------


def _tile_program(n: int) -> bytes:
    """fp32[1] tiled to fp32[n], then summed: an n * 4-byte intermediate from a 1-element input."""
    b = ProgramBuilder()
    x = b.input("x", (1,), DType.FP32)
    b.output(b.reduce_sum(b.tile(x, [n], name="tiled"), 0))
    return write(b.build())


def test_a_guest_without_a_bound_declares_what_its_program_needs(tmp_path):
    """No resident bound from the caller (the user API's default): the guest declares twice the working set
    plus the artifact and 1 MiB, not 64 MiB for every program. Small programs take little of the guest's
    budget and the daemon's cap; one whose intermediates pass 64 MiB is declared large enough to load."""
    acc = CpuAccelerator()
    engine = DeviceEngine(acc)
    daemon = for_engine(str(tmp_path / "b.sock"), engine)
    daemon.listen()
    serving = threading.Thread(target=daemon.serve)
    serving.start()
    try:
        dev = Device(VirtioAccelerator(daemon.path), "virtio")
        model = (ROOT / "src" / "ironaccel" / "models" / "cnn_fp32.tosa").read_bytes()
        exe = dev.compile(model)
        program_bytes = sum(session._bytes[ObjectKind.PROGRAM] for session in engine.sessions)
        need = estimate(read(model))
        assert program_bytes == 2 * need.total_bytes + len(model) + (1 << 20) < 2 << 20
        x = np.random.default_rng(0).standard_normal(exe.inputs[0].shape).astype(np.float32)
        with Device(CpuAccelerator(), "cpu") as local:
            np.testing.assert_array_equal(exe(x)[0], local.compile(model)(x)[0])

        big = _tile_program(1 << 25)  # a 128 MiB intermediate
        kept = dev.compile(big)  # held: a collected executable gives its program back
        charged = sum(session._bytes[ObjectKind.PROGRAM] for session in engine.sessions) - program_bytes
        assert charged == declared_bound(read(big), len(big)) > 256 << 20
        del kept
        dev.close()
    finally:
        daemon.stop()
        serving.join(30)
    assert engine.account.held == 0


# ---- serve's options -------------------------------------------------------------------------------------------


def test_sizes_take_binary_units():
    assert [parse_size(s) for s in ("4096", "512M", "4G", "1.5GiB", "2k", "1T")] == [
        4096,
        512 << 20,
        4 << 30,
        3 << 29,
        2048,
        1 << 40,
    ]
    for bad in ("", "lots", "-1", "0", "4Q", "1e9"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_size(bad)


def test_serve_applies_the_quota_options(tmp_path):
    path = tmp_path / "quota.sock"
    daemon = subprocess.Popen(
        [
            *IRONACCEL,
            "serve",
            "--device",
            "cpu",
            "--socket",
            str(path),
            "--guest-bytes",
            "1M",
            "--guest-program-bytes",
            "3M",
            "--guest-programs",
            "1",
            "--max-bytes",
            "4M",
            "--max-run-seconds",
            "0.3",
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    guests: list[VirtioAccelerator] = []
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        a, b = VirtioAccelerator(str(path)), VirtioAccelerator(str(path))
        guests += [a, b]
        ca, cb = a.create_context(), b.create_context()
        a.allocate_buffer(ca, BufferDesc(1_000_000))
        with pytest.raises(ResourceLimit):  # --guest-bytes: a's 1 MiB is nearly used
            a.allocate_buffer(ca, BufferDesc(100_000))
        program = a.load_program(ca, ArtifactRef(endless_program(), 2 << 20))
        with pytest.raises(ResourceLimit):  # --guest-programs 1
            a.load_program(ca, ArtifactRef(add_program(), 1 << 20))
        b.allocate_buffer(cb, BufferDesc(900_000))
        with pytest.raises(ResourceLimit):  # --max-bytes: 1 MB + 2 MiB + 0.9 MB held, 2 MiB more would pass 4 MiB
            b.load_program(cb, ArtifactRef(add_program(), 2 << 20))
        # --max-run-seconds: a run without a timeout fails once the budget has passed.
        bufs = [a.allocate_buffer(ca, BufferDesc(4, MemoryDomain.SHARED)) for _ in range(2)]
        event = a.submit(a.create_queue(ca), program, [Binding(i, buf, 0, 4) for i, buf in enumerate(bufs)])
        assert a.wait(event, 10) is EventState.FAILED
        assert isinstance(a.event_error(event), DeadlineExpired)
    finally:
        for guest in guests:
            guest.close()
        daemon.terminate()
        _, log = daemon.communicate(timeout=30)
    assert re.search(
        r"limits: all guests together 4\.0 MiB \(--max-bytes\); per guest 1\.0 MiB of buffers,"
        r" 3\.0 MiB of programs \(1 programs\), 0\.3 s per submission",
        log,
    ), log
    assert "--guest-bytes" in log and "daemon-wide cap of 4194304 bytes" in log


def test_serve_refuses_bad_quota_options(capsys):
    from ironaccel.cli.main import main

    for argv in (["--max-bytes", "lots"], ["--guest-programs", "0"], ["--max-run-seconds", "-1"]):
        with pytest.raises(SystemExit) as exit_:
            main(["serve", "--socket", "/nonexistent/x.sock", *argv])
        assert exit_.value.code == 2
        assert argv[0] in capsys.readouterr().err
