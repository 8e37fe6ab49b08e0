"""The semantic suite's cases on work: events (terminal states, release, deadlines, cancellation), host gates,
prepared submissions and their launches, concurrent submits from several threads, and running work that a
deadline or a cancellation must stop. Registered into :data:`~.semantic_fixtures.CASES` on import
(:mod:`.semantic` imports this).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from ..core.errors import InvalidArgument, OutOfBounds, PermissionDenied
from ..runtime import Accelerator, Binding, EventState, ReleaseRejected
from .semantic_fixtures import Endless, Fixture, Skip, case, expect


@case("event.terminal-stability")
def _terminal(acc: Accelerator) -> None:
    f = Fixture(acc)
    f.write_inputs(np.ones(4), np.ones(4))
    ev = acc.submit(f.queue, f.program, f.bindings())
    assert acc.wait(ev, 30) is EventState.COMPLETE
    for _ in range(5):
        assert acc.poll_event(ev) is EventState.COMPLETE
    if acc.supports_cancellation:
        assert acc.cancel_event(ev) is False, "cancel won against a completed event"
    assert acc.poll_event(ev) is EventState.COMPLETE
    acc.destroy_event(ev)
    expect(InvalidArgument, lambda: acc.poll_event(ev), "poll a destroyed event")
    f.close()


@case("event.pending-not-destroyable")
def _pending(acc: Accelerator) -> None:
    f = Fixture(acc)
    gate = acc.host_gate(f.ctx)
    ev = acc.submit(f.queue, f.program, f.bindings(), after=(gate, 1))
    assert acc.poll_event(ev) is EventState.PENDING
    exc = expect(ReleaseRejected, lambda: acc.destroy_event(ev), "destroy a pending event")
    assert exc.handle is ev
    expect(ReleaseRejected, lambda: acc.free_buffer(f.bufs[0]), "free a buffer bound to pending work")
    gate.signal(1)
    assert acc.wait(ev, 30) is EventState.COMPLETE
    acc.destroy_event(ev)
    f.close()


@case("event.finite-timeout")
def _timeout(acc: Accelerator) -> None:
    f = Fixture(acc)
    gate = acc.host_gate(f.ctx)
    ev = acc.submit(f.queue, f.program, f.bindings(), timeout=0.01, after=(gate, 5))
    time.sleep(0.05)
    gate.signal(5)
    state = acc.wait(ev, 30)
    assert state is EventState.FAILED, state
    from ..core.errors import DeadlineExpired

    assert isinstance(acc.event_error(ev), DeadlineExpired)
    acc.destroy_event(ev)
    f.close()


@case("event.cancel-race")
def _cancel(acc: Accelerator) -> None:
    if not acc.supports_cancellation:
        raise Skip("backend does not cancel submitted work")
    f = Fixture(acc)
    gate = acc.host_gate(f.ctx)
    ev = acc.submit(f.queue, f.program, f.bindings(), after=(gate, 1))
    assert acc.cancel_event(ev) is True
    gate.signal(1)
    assert acc.wait(ev, 30) is EventState.CANCELLED
    acc.destroy_event(ev)
    # Race: many threads cancel while the work runs; exactly one terminal state, never two.
    for _ in range(20):
        ev = acc.submit(f.queue, f.program, f.bindings())
        wins = []
        threads = [threading.Thread(target=lambda e=ev, w=wins: w.append(acc.cancel_event(e))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        state = acc.wait(ev, 30)
        assert sum(wins) <= 1 and (state is EventState.CANCELLED) == (sum(wins) == 1), (wins, state)
        acc.destroy_event(ev)
    f.close()


@case("gate.ordering")
def _gate(acc: Accelerator) -> None:
    f = Fixture(acc)
    gate = acc.host_gate(f.ctx)
    f.write_inputs(np.full(4, 2.0), np.full(4, 3.0))
    ev = acc.submit(f.queue, f.program, f.bindings(), after=(gate, 2))
    gate.signal(1)
    assert acc.poll_event(ev) is EventState.PENDING
    expect(InvalidArgument, lambda: gate.signal(0), "gate values only increase")
    threading.Thread(target=gate.signal, args=(2,)).start()
    assert acc.wait(ev, 30) is EventState.COMPLETE
    np.testing.assert_array_equal(f.output(), np.full(4, 5, np.float32))
    acc.destroy_event(ev)
    f.close()


@case("prepared.launch")
def _prepared(acc: Accelerator) -> None:
    f = Fixture(acc)
    p = acc.prepare(f.queue, f.program, f.bindings())
    expect(ReleaseRejected, lambda: acc.free_buffer(f.bufs[0]), "free a buffer a prepared submission binds")
    expect(ReleaseRejected, lambda: acc.unload_program(f.program), "unload a prepared program")
    expect(ReleaseRejected, lambda: acc.destroy_queue(f.queue), "destroy a queue with a prepared submission")
    for i in range(3):  # inputs written between launches are what the next launch reads
        f.write_inputs(np.arange(4), np.full(4, i))
        ticket = acc.launch(p)
        assert ticket == i + 1, f"launch {i} got ticket {ticket}"
        acc.wait_launch(p, ticket, 30)
        assert acc.poll_launch(p, ticket)
        np.testing.assert_array_equal(f.output(), np.arange(4, dtype=np.float32) + i)
    tickets = [acc.launch(p) for _ in range(8)]
    assert tickets == list(range(4, 12)), tickets
    acc.wait_launch(p, tickets[-1], 30)
    assert all(acc.poll_launch(p, t) for t in tickets), "an earlier ticket unfinished after a later one"
    for bad in (0, -1, tickets[-1] + 1, 1.5, True):
        expect(InvalidArgument, lambda t=bad: acc.poll_launch(p, t), f"ticket {bad!r}")
    acc.release_prepared(p)
    expect(InvalidArgument, lambda: acc.launch(p), "launch a released prepared submission")
    expect(InvalidArgument, lambda: acc.release_prepared(p), "release twice")
    f.write_inputs(np.ones(4), np.ones(4))  # bound buffers are free again
    f.close()


@case("prepared.validation")
def _prepared_validation(acc: Accelerator) -> None:
    f = Fixture(acc)
    wrong = [
        f.bindings()[:2],  # a slot missing
        [Binding(0, f.bufs[0], 0, 16), Binding(0, f.bufs[1], 0, 16), Binding(2, f.bufs[2], 0, 16)],  # repeated
        [Binding(0, f.bufs[0], 0, 16), Binding(1, f.bufs[1], 0, 16), Binding(2, f.bufs[2], 4, 16)],  # out of range
    ]
    for bindings in wrong:
        expect((InvalidArgument, OutOfBounds), lambda b=bindings: acc.prepare(f.queue, f.program, b), "bad bindings")
    other = acc.create_context()
    queue = acc.create_queue(other)
    expect(PermissionDenied, lambda: acc.prepare(queue, f.program, f.bindings()), "a queue of another context")
    assert acc.live_resources()["prepared"] == 0, "a refused prepare left something"
    acc.destroy_queue(queue)
    acc.destroy_context(other)
    f.close()


@case("threads.concurrent-submits")
def _threads(acc: Accelerator) -> None:
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            f = Fixture(acc)
            for i in range(10):
                f.write_inputs(np.full(4, seed), np.full(4, i))
                ev = acc.submit(f.queue, f.program, f.bindings())
                assert acc.wait(ev, 30) is EventState.COMPLETE
                np.testing.assert_array_equal(f.output(), np.full(4, seed + i, np.float32))
                acc.destroy_event(ev)
            f.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the case
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@case("event.deadline-stops-running-work")
def _deadline_running(acc: Accelerator) -> None:
    from ..core.errors import DeadlineExpired

    f = Endless(acc)
    ev = f.submit(timeout=0.2)
    assert acc.wait(ev, 30) is EventState.FAILED, "work that never ends outlived its deadline by 30 s"
    assert isinstance(acc.event_error(ev), DeadlineExpired), acc.event_error(ev)
    acc.destroy_event(ev)
    f.close()


@case("event.cancel-stops-running-work")
def _cancel_running(acc: Accelerator) -> None:
    if not acc.supports_cancellation:
        raise Skip("backend does not cancel submitted work")
    f = Endless(acc)
    ev = f.submit(timeout=30)  # the deadline is only a net: the cancellation must end it first
    time.sleep(0.05)  # let it start
    assert acc.cancel_event(ev) is True, "cancellation lost against work that never ends"
    assert acc.cancel_event(ev) is False, "a second cancellation won too"
    assert acc.wait(ev, 10) is EventState.CANCELLED
    acc.destroy_event(ev)
    f.close()
