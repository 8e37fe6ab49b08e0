"""Hostile programs through a daemon with tight quotas: hypothesis writes *valid* TOSA programs (nested
COND_IF and WHILE_LOOP, loops that never end, TILEs that ask for up to a gigabyte, deep nesting) and
guests send them to a daemon serving the CPU backend. Whatever a program does, the host keeps its
promises:

- no command answers INTERNAL_ERROR and the device is never lost;
- the daemon's memory stays under its byte cap plus a fixed overhead (peak RSS, VmHWM);
- every guest's objects are released when it leaves, and the daemon's threads go back to baseline.

``make test`` runs a bounded number of examples (25); ``make fuzz-programs`` runs IRONACCEL_FUZZ_EXAMPLES
of them (default 50,000 guests of one to three programs each: about 10^5 programs).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel.core.errors import DeadlineExpired, InvalidArgument, ResourceLimit, Unsupported
from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, BufferUsage, EventState, MemoryDomain
from ironaccel.tosa import ProgramBuilder, write
from ironaccel.virtio import GuestQuota
from ironaccel.virtio.guest import VirtioAccelerator
from virtio_guest import Host, thread_count

EXAMPLES = int(os.environ.get("IRONACCEL_FUZZ_EXAMPLES", "25"))
CAP = 96 << 20  # what all guests together may hold
OVERHEAD = 96 << 20  # the daemon's own growth: compiled programs, interpreter state, allocator slack
RUN_SECONDS = 0.3  # the compute budget of one submission
IO = BufferUsage(0x1F)
# What a guest may be told for a program that breaks a bound; anything else fails the test.
REFUSALS = (ResourceLimit, DeadlineExpired, Unsupported, InvalidArgument)
OUTCOMES: dict[str, int] = {}  # what the programs came to (printed with -s: is the fuzz reaching the bounds?)


def _count(outcome: str) -> None:
    OUTCOMES[outcome] = OUTCOMES.get(outcome, 0) + 1


# ---- valid programs ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One level of a program over an fp32[1] value: ``grow`` (TILE to ``size`` elements, then REDUCE_SUM
    back), ``add``, ``cond`` (COND_IF on v >= 0 around ``inner``), ``loop`` (WHILE_LOOP of ``trips``
    iterations around ``inner``; None: it never ends)."""

    kind: str
    size: int = 1
    trips: int | None = 1
    inner: tuple[Step, ...] = ()


def _steps(depth: int) -> st.SearchStrategy[tuple[Step, ...]]:
    leaf = st.one_of(
        st.builds(Step, st.just("add")),
        # Up to 2^28 elements (1 GiB of fp32): most fit the quota, some cannot.
        st.builds(Step, st.just("grow"), st.integers(0, 28).map(lambda e: 1 << e)),
    )
    if depth == 0:
        return st.lists(leaf, min_size=1, max_size=3).map(tuple)
    inner = _steps(depth - 1)
    node = st.one_of(
        leaf,
        st.builds(Step, st.just("cond"), inner=inner),
        st.builds(Step, st.just("loop"), trips=st.one_of(st.integers(0, 3), st.none()), inner=inner),
    )
    return st.lists(node, min_size=1, max_size=3).map(tuple)


def _emit(g: ProgramBuilder, v, steps: tuple[Step, ...]):
    for step in steps:
        if step.kind == "add":
            v = g.add(v, g.const([1.0], "fp32"))
        elif step.kind == "grow":
            v = g.reduce_sum(g.tile(v, g.const_shape([step.size])), 0)
        elif step.kind == "cond":
            v = g.cond_if(
                g.greater_equal(v, g.const([0.0], "fp32")),
                [v],
                lambda h, w, s=step: _emit(h, w, s.inner),
                lambda h, w: h.negate(w),
            )[0]
        else:
            limit = g.const([step.trips if step.trips is not None else 0], "int32")

            def test(h, w, i, limit=limit, endless=step.trips is None):
                return h.greater_equal(i, i) if endless else h.greater(limit, i)

            v, _ = g.while_loop(
                [v, g.const([0], "int32")],
                test,
                lambda h, w, i, s=step: (_emit(h, w, s.inner), h.add(i, h.const([1], "int32"))),
            )
    return v


def _program(steps: tuple[Step, ...]) -> bytes:
    b = ProgramBuilder()
    b.output(_emit(b, b.input("x", (1,), "fp32"), steps))
    return write(b.build())


def _deep(levels: int) -> tuple[Step, ...]:
    steps: tuple[Step, ...] = (Step("add"),)
    for k in range(levels):
        steps = (Step("cond" if k % 2 else "loop", trips=1, inner=steps),)
    return steps


# ---- the host -----------------------------------------------------------------------------------------
def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) << 10
    raise AssertionError(f"{field} not in /proc/self/status")


def _host(path: str) -> Host:
    quota = GuestQuota(
        max_buffer_bytes=16 << 20,
        max_total_buffer_bytes=32 << 20,
        max_total_program_bytes=64 << 20,
        max_programs=8,
        max_run_seconds=RUN_SECONDS,
    )
    return Host(path, quota=quota, max_bytes=CAP, close_wait=2.0)


def _send(guest: VirtioAccelerator, program: bytes) -> None:
    """Load, run and release ``program``; only the bounds' refusals may come back."""
    _count("programs")
    ctx = guest.create_context()
    try:
        try:
            handle = guest.load_program(ctx, ArtifactRef(program, 1 << 62))
        except REFUSALS as exc:
            _count(f"refused at load: {type(exc).__name__}")
            return
        bufs = [guest.allocate_buffer(ctx, BufferDesc(4, MemoryDomain.SHARED, IO)) for _ in range(2)]
        queue = guest.create_queue(ctx)
        guest.write_buffer(bufs[0], 0, np.ones(1, np.float32))
        event = guest.submit(queue, handle, [Binding(i, b, 0, 4) for i, b in enumerate(bufs)], timeout=5)
        state = guest.wait(event, 30)
        assert state is not EventState.PENDING
        if state is EventState.FAILED:
            error = guest.event_error(event)
            assert isinstance(error, REFUSALS), repr(error)
            _count(f"failed: {type(error).__name__}")
        else:
            _count(state.value)
        guest.destroy_event(event)
        guest.destroy_queue(queue)
        for buf in bufs:
            guest.free_buffer(buf)
        guest.unload_program(handle)
    finally:
        guest.destroy_context(ctx)


def _guest_session(host: Host, programs: list[tuple[Step, ...]], leave_early: bool) -> None:
    guest = VirtioAccelerator(host.path)
    try:
        for steps in programs:
            if leave_early:  # the guest goes with its last program running
                _count("programs")
                ctx = guest.create_context()
                try:
                    program = guest.load_program(ctx, ArtifactRef(_program(steps), 1 << 62))
                except REFUSALS:
                    continue
                bufs = [guest.allocate_buffer(ctx, BufferDesc(4, MemoryDomain.SHARED, IO)) for _ in range(2)]
                guest.submit(guest.create_queue(ctx), program, [Binding(i, b, 0, 4) for i, b in enumerate(bufs)])
            else:
                _send(guest, _program(steps))
    finally:
        guest.close()
    assert host.settled() is not None, (host.daemon.guests, host.accelerator.live_resources())


def test_valid_hostile_programs_keep_the_host_within_its_bounds(tmp_path):
    try:
        with open("/proc/self/clear_refs", "w") as f:  # peak RSS counted from here
            f.write("5")
    except OSError:
        pytest.skip("cannot reset the peak RSS here (/proc/self/clear_refs)")
    threads = thread_count()
    host = _host(str(tmp_path / "accel.sock"))
    baseline = _status("VmRSS")

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=EXAMPLES <= 100,  # the bounded run of make test is the same every time
    )
    @given(programs=st.lists(_steps(3), min_size=1, max_size=3), leave_early=st.booleans())
    def sessions(programs: list[tuple[Step, ...]], leave_early: bool) -> None:
        _guest_session(host, programs, leave_early)

    try:
        sessions()
        _guest_session(host, [_deep(120)], leave_early=False)  # nested as deep as programs sensibly go
        peak = _status("VmHWM")
        print(f"\n{EXAMPLES} examples: {dict(sorted(OUTCOMES.items()))}")
        print(f"RSS at start {baseline >> 20} MiB, peak {peak >> 20} MiB; cap {CAP >> 20} MiB + {OVERHEAD >> 20} MiB")
        assert peak <= baseline + CAP + OVERHEAD, f"peak RSS {peak >> 20} MiB, from {baseline >> 20} MiB"
    finally:
        host.stop()
    end = time.monotonic() + 10  # idle CPU queue threads end on their own
    while thread_count() > threads and time.monotonic() < end:
        time.sleep(0.05)
    assert thread_count() <= threads, [t.name for t in threading.enumerate()]
