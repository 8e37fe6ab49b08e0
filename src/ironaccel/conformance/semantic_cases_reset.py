"""The semantic suite's cases on context reset (``Accelerator.reset_context``): an idle context holding one
object of every kind, work parked on a host gate, a second context left untouched, running work that never
ends, and admission refused while a reset runs. Registered into :data:`~.semantic_fixtures.CASES` on import
(:mod:`.semantic` imports this).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from ..core.errors import Busy, InvalidArgument, Unsupported
from ..runtime import Accelerator, ArtifactRef, Binding, BufferDesc, Event, EventState, MemoryDomain, SubmitRejected
from .semantic_fixtures import IO, Endless, Fixture, Skip, add_program, admits_nothing, case, expect


def _stale(what: str, fn: Callable[[], object]) -> None:
    expect(InvalidArgument, fn, f"{what} after the reset of its context")


def _works(acc: Accelerator) -> None:
    """A new context runs work once a reset is over (where the backend admits a program)."""
    if admits_nothing(acc):
        ctx = acc.create_context()
        acc.destroy_queue(acc.create_queue(ctx))
        acc.destroy_context(ctx)
        return
    f = Fixture(acc)
    f.add(np.arange(4), np.full(4, 10))
    f.close()


def _endless_cancellable(acc: Accelerator) -> Endless:
    """The Endless fixture (Skip where the backend runs no WHILE_LOOP), where the backend cancels work."""
    f = Endless(acc)
    if not acc.supports_cancellation:
        f.close()
        raise Skip("backend does not cancel submitted work")
    return f


@case("reset.idle-context")
def _idle(acc: Accelerator) -> None:
    baseline = acc.live_resources()
    ctx = acc.create_context()
    bufs = [acc.allocate_buffer(ctx, BufferDesc(16, MemoryDomain.SHARED, IO)) for _ in range(3)]
    queue = acc.create_queue(ctx)
    gate = acc.host_gate(ctx)
    try:
        program = acc.load_program(ctx, ArtifactRef(add_program(), 1 << 20))
    except Unsupported:  # the backend kit's null device: every other kind still goes
        if not admits_nothing(acc):
            raise
        program = None
    stale: dict[str, Callable[[], object]] = {}
    expected = {"buffer": 3, "queue": 1, "gate": 1, "context": 1}
    if program is not None:
        bindings = [Binding(i, b, 0, 16) for i, b in enumerate(bufs)]
        event = acc.submit(queue, program, bindings)
        assert acc.wait(event, 30) is EventState.COMPLETE
        prepared = acc.prepare(queue, program, bindings)
        acc.wait_launch(prepared, acc.launch(prepared), 30)
        expected |= {"event": 1, "prepared": 1, "program": 1}
        stale |= {
            "poll_event": lambda: acc.poll_event(event),
            "destroy_event": lambda: acc.destroy_event(event),
            "launch": lambda: acc.launch(prepared),
            "release_prepared": lambda: acc.release_prepared(prepared),
            "unload_program": lambda: acc.unload_program(program),
        }
    report = acc.reset_context(ctx)
    assert report.complete, report
    for kind, n in expected.items():
        assert report.released[kind] == n, (kind, report)
    assert acc.live_resources() == baseline, (acc.live_resources(), baseline)
    stale |= {
        "free_buffer": lambda: acc.free_buffer(bufs[0]),
        "read_buffer": lambda: acc.read_buffer(bufs[1], 0, 4),
        "destroy_queue": lambda: acc.destroy_queue(queue),
        "signal": lambda: gate.signal(1),
        "allocate_buffer": lambda: acc.allocate_buffer(ctx, BufferDesc(16, MemoryDomain.SHARED, IO)),
        "host_gate": lambda: acc.host_gate(ctx),
        "destroy_context": lambda: acc.destroy_context(ctx),
        "reset_context": lambda: acc.reset_context(ctx),
    }
    for what, fn in stale.items():
        _stale(what, fn)
    _works(acc)


@case("reset.parked-work-cancelled")
def _parked(acc: Accelerator) -> None:
    baseline = acc.live_resources()
    f = Fixture(acc)
    gate = acc.host_gate(f.ctx)
    events = [acc.submit(f.queue, f.program, f.bindings(), after=(gate, v)) for v in (1, 2)]
    report = acc.reset_context(f.ctx)
    assert report.complete and report.cancelled == 2, report
    assert report.released["event"] == 2, report
    assert acc.live_resources() == baseline
    _stale("signal of its host gate", lambda: gate.signal(2))  # starts nothing: the work was cancelled
    for ev in events:
        _stale("poll_event", lambda e=ev: acc.poll_event(e))
    assert acc.live_resources() == baseline
    _works(acc)


@case("reset.other-context-untouched")
def _other(acc: Accelerator) -> None:
    kept = Fixture(acc)
    kept.write_inputs(np.full(4, 2.0), np.full(4, 3.0))
    kept_gate = acc.host_gate(kept.ctx)
    kept_event = acc.submit(kept.queue, kept.program, kept.bindings(), after=(kept_gate, 1))
    gone = Fixture(acc)
    gone.write_inputs(np.full(4, 7.0), np.full(4, 7.0))
    gone_gate = acc.host_gate(gone.ctx)
    acc.submit(gone.queue, gone.program, gone.bindings(), after=(gone_gate, 1))
    before = acc.live_resources()
    report = acc.reset_context(gone.ctx)
    assert report.complete and report.cancelled == 1, report
    after = acc.live_resources()
    assert {k: before[k] - after[k] for k in ("context", "buffer", "program", "queue", "event")} == {
        "context": 1,
        "buffer": 3,
        "program": 1,
        "queue": 1,
        "event": 1,
    }, (before, after)
    assert acc.poll_event(kept_event) is EventState.PENDING
    a = np.frombuffer(acc.read_buffer(kept.bufs[0], 0, 16), np.float32)
    np.testing.assert_array_equal(a, np.full(4, 2, np.float32))
    kept_gate.signal(1)
    assert acc.wait(kept_event, 30) is EventState.COMPLETE, acc.event_error(kept_event)
    np.testing.assert_array_equal(kept.output(), np.full(4, 5, np.float32))
    acc.destroy_event(kept_event)
    kept.close()


@case("reset.ends-running-work")
def _running(acc: Accelerator) -> None:
    baseline = acc.live_resources()
    f = _endless_cancellable(acc)
    event = f.submit()
    time.sleep(0.05)  # let it start
    report = acc.reset_context(f.ctx, wait=10)
    assert report.complete and report.cancelled == 1, report
    assert acc.live_resources() == baseline, acc.live_resources()
    _stale("poll_event", lambda: acc.poll_event(event))
    _works(acc)


@case("reset.admission-stops")
def _admission(acc: Accelerator) -> None:
    """While a reset cancels running work (it does so through ``cancel_event``, wrapped here for the moment),
    another thread's submit, allocation, queue and gate on that context get Busy; other contexts admit."""
    f = _endless_cancellable(acc)
    other = acc.create_context()
    running: Event = f.submit()
    time.sleep(0.05)
    seen: dict[str, BaseException | None] = {}
    cancel = acc.cancel_event

    def attempts() -> None:
        tries: dict[str, Callable[[], object]] = {
            "submit": f.submit,
            "allocate_buffer": lambda: acc.allocate_buffer(f.ctx, BufferDesc(4, MemoryDomain.SHARED, IO)),
            "create_queue": lambda: acc.create_queue(f.ctx),
            "host_gate": lambda: acc.host_gate(f.ctx),
        }
        for what, fn in tries.items():
            try:
                fn()
                seen[what] = None
            except BaseException as exc:  # noqa: BLE001 - checked by the case
                seen[what] = exc
        queue = acc.create_queue(other)  # another context is not being reset
        acc.destroy_queue(queue)

    def during_reset(event: Event) -> bool:
        if event is running and not seen:
            worker = threading.Thread(target=attempts)
            worker.start()
            worker.join(30)
        return cancel(event)

    acc.cancel_event = during_reset  # type: ignore[method-assign]
    try:
        report = acc.reset_context(f.ctx, wait=10)
    finally:
        del acc.cancel_event
    assert report.complete, report
    assert set(seen) == {"submit", "allocate_buffer", "create_queue", "host_gate"}, seen
    for what, exc in seen.items():
        cause = exc.error if isinstance(exc, SubmitRejected) else exc
        assert isinstance(cause, Busy) and "reset" in str(cause), (what, exc)
    acc.destroy_context(other)
