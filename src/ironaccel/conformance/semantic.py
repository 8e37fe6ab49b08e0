"""A backend-independent suite for the execution contract.

``run(factory)`` creates a fresh accelerator per case (``factory()``), runs every case and returns
one :class:`CaseResult` each. Case ids are stable (``memory.shared``, ``buffer.segmented-transfer-bounds``)
so results can be compared across backends and releases. Mandatory cases never skip; a capability
case (cancellation) skips only with a recorded reason. A backend whose capability descriptor admits no
operator (the backend kit's null device) loads no program, so every case that needs one skips with "no
program admitted: " and the refusal; on any other backend a refused program fails the case. Every case
ends by checking that ``live_resources()`` is back to zero.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from collections.abc import Callable, Iterable

import numpy as np

from ..core.errors import (
    Busy,
    Incompatible,
    InvalidArgument,
    OutOfBounds,
    PermissionDenied,
    ResourceLimit,
    Unsupported,
)
from ..runtime import (
    Accelerator,
    Access,
    ArtifactRef,
    Binding,
    BufferDesc,
    BufferUsage,
    Context,
    EventState,
    MemoryDomain,
    Quota,
    ReleaseRejected,
    SubmitRejected,
)
from ..runtime import Program as ProgramHandle
from ..tosa.dtypes import DType
from ..tosa.ir import Block, Operator, Program, Region, Tensor
from ..tosa.operators import Op

IO = (
    BufferUsage.PROGRAM_INPUT
    | BufferUsage.PROGRAM_OUTPUT
    | BufferUsage.TRANSFER_SOURCE
    | BufferUsage.TRANSFER_DESTINATION
)


@dataclasses.dataclass(frozen=True)
class CaseResult:
    id: str
    status: str  # "pass" | "fail" | "skip"
    detail: str = ""


class Skip(Exception):
    """A capability case that does not apply; the message is the recorded reason."""


def add_program(n: int = 4) -> bytes:
    """``c = a + b`` over fp32[n]: the smallest program that reads two buffers and writes one."""
    from ..tosa.codec import write

    tensors = [Tensor(x, (n,), DType.FP32) for x in "abc"]
    block = Block("main", [Operator(Op.ADD, ("a", "b"), ("c",))], tensors, ("a", "b"), ("c",))
    return write(Program((Region("main", (block,)),)))


def admits_nothing(acc: Accelerator) -> bool:
    """Whether ``acc``'s capability descriptor lists no operator: then no program loads, and the cases that
    need one skip instead of failing."""
    return not acc.capabilities().operators


def _load_or_skip(acc: Accelerator, ctx: Context, payload: bytes) -> ProgramHandle:
    """``payload`` loaded into ``ctx``; where the backend admits nothing, the context is destroyed and the
    case skips with the refusal as its reason."""
    try:
        return acc.load_program(ctx, ArtifactRef(payload, 1 << 20))
    except Unsupported as exc:  # LoweringError locally; UNSUPPORTED through a virtio device
        if not admits_nothing(acc):
            raise
        acc.destroy_context(ctx)
        raise Skip(f"no program admitted: {exc}") from exc


def _expect(exc_types: type | tuple[type, ...], fn: Callable[[], object], what: str) -> BaseException:
    try:
        fn()
    except exc_types as exc:
        return exc
    raise AssertionError(f"{what}: expected {exc_types}, nothing raised")


def endless_program() -> bytes:
    """A valid program that never ends: a WHILE_LOOP over one int32 whose condition (i >= i) is always
    true. Only a deadline or a cancellation that reaches running work stops it."""
    from ..tosa.builder import ProgramBuilder
    from ..tosa.codec import write

    b = ProgramBuilder()
    x = b.input("x", (1,), DType.INT32)
    one = b.const([1], DType.INT32)
    (out,) = b.while_loop([x], lambda g, i: g.op(Op.GREATER_EQUAL, [i, i]), lambda g, i: g.op(Op.ADD, [i, one]))
    b.output(out)
    return write(b.build())


class _Endless:
    """A context with :func:`endless_program` loaded (or Skip where the backend refuses control flow)."""

    def __init__(self, acc: Accelerator) -> None:
        self.acc = acc
        self.ctx = acc.create_context()
        try:
            self.program = _load_or_skip(acc, self.ctx, endless_program())
        except Unsupported as exc:  # LoweringError locally; UNSUPPORTED through a virtio device
            acc.destroy_context(self.ctx)
            raise Skip(f"backend does not run WHILE_LOOP: {exc}") from exc
        self.bufs = [acc.allocate_buffer(self.ctx, BufferDesc(4, MemoryDomain.SHARED, IO)) for _ in range(2)]
        self.queue = acc.create_queue(self.ctx)

    def submit(self, timeout: float | None = None) -> object:
        bindings = [Binding(i, b, 0, 4) for i, b in enumerate(self.bufs)]
        return self.acc.submit(self.queue, self.program, bindings, timeout)

    def close(self) -> None:
        for b in self.bufs:
            self.acc.free_buffer(b)
        self.acc.unload_program(self.program)
        self.acc.destroy_queue(self.queue)
        self.acc.destroy_context(self.ctx)


class _Fixture:
    """A context with the ADD program loaded, three 16-byte buffers and a queue."""

    def __init__(self, acc: Accelerator, domain: MemoryDomain = MemoryDomain.SHARED) -> None:
        self.acc = acc
        self.ctx = acc.create_context()
        self.program = _load_or_skip(acc, self.ctx, add_program())
        self.bufs = [acc.allocate_buffer(self.ctx, BufferDesc(16, domain, IO)) for _ in range(3)]
        self.queue = acc.create_queue(self.ctx)

    def bindings(self) -> list[Binding]:
        return [Binding(i, b, 0, 16) for i, b in enumerate(self.bufs)]

    def write_inputs(self, a: np.ndarray, b: np.ndarray) -> None:
        self.acc.write_buffer(self.bufs[0], 0, a.astype(np.float32))
        self.acc.write_buffer(self.bufs[1], 0, b.astype(np.float32))

    def output(self) -> np.ndarray:
        return np.frombuffer(self.acc.read_buffer(self.bufs[2], 0, 16), np.float32)

    def close(self) -> None:
        for b in self.bufs:
            self.acc.free_buffer(b)
        self.acc.unload_program(self.program)
        self.acc.destroy_queue(self.queue)
        self.acc.destroy_context(self.ctx)


CASES: dict[str, Callable[[Accelerator], None]] = {}


def case(name: str) -> Callable[[Callable[[Accelerator], None]], Callable[[Accelerator], None]]:
    def wrap(fn: Callable[[Accelerator], None]) -> Callable[[Accelerator], None]:
        CASES[name] = fn
        return fn

    return wrap


@case("device.info-stable")
def _info_stable(acc: Accelerator) -> None:
    first = acc.device_info()
    assert first == acc.device_info(), "device_info changed between calls"
    assert first.domains, "no memory domain offered"


@case("execute.add")
def _execute(acc: Accelerator) -> None:
    f = _Fixture(acc)
    f.write_inputs(np.arange(4), np.full(4, 0.5))
    ev = acc.submit(f.queue, f.program, f.bindings())
    assert acc.wait(ev, 30) is EventState.COMPLETE, acc.event_error(ev)
    np.testing.assert_array_equal(f.output(), np.arange(4, dtype=np.float32) + 0.5)
    acc.destroy_event(ev)
    f.close()


def _domain_case(domain: MemoryDomain) -> Callable[[Accelerator], None]:
    def run(acc: Accelerator) -> None:
        if domain not in acc.device_info().domains:
            raise Skip(f"{domain.name} memory not offered")
        f = _Fixture(acc, domain)
        info = f.bufs[0].info
        assert info.size == 16 and info.allocation_bytes >= 16, info
        f.write_inputs(np.ones(4), np.ones(4))
        ev = acc.submit(f.queue, f.program, f.bindings())
        assert acc.wait(ev, 30) is EventState.COMPLETE
        np.testing.assert_array_equal(f.output(), np.full(4, 2, np.float32))
        acc.destroy_event(ev)
        f.close()

    return run


for _d in MemoryDomain:
    CASES[f"memory.{_d.name.lower()}"] = _domain_case(_d)


@case("buffer.descriptor-validation")
def _desc(acc: Accelerator) -> None:
    ctx = acc.create_context()
    for bad in (
        BufferDesc(0),
        BufferDesc(16, alignment=3),
        BufferDesc(16, usage=BufferUsage(0)),
        BufferDesc(16, usage=BufferUsage(64)),
    ):
        _expect(InvalidArgument, lambda bad=bad: acc.allocate_buffer(ctx, bad), f"allocate {bad}")
    acc.destroy_context(ctx)


@case("buffer.segmented-transfer-bounds")
def _bounds(acc: Accelerator) -> None:
    ctx = acc.create_context()
    buf = acc.allocate_buffer(ctx, BufferDesc(64, usage=IO))
    for i in range(4):  # four segments reassemble the whole range
        acc.write_buffer(buf, 16 * i, bytes([i]) * 16)
    assert bytes(acc.read_buffer(buf, 0, 64)) == b"".join(bytes([i]) * 16 for i in range(4))
    assert bytes(acc.read_buffer(buf, 60, 4)) == b"\x03" * 4
    _expect(OutOfBounds, lambda: acc.write_buffer(buf, 60, b"x" * 5), "write past the end")
    _expect(OutOfBounds, lambda: acc.read_buffer(buf, 64, 1), "read past the end")
    _expect(OutOfBounds, lambda: acc.read_buffer(buf, -1, 1), "negative offset")
    acc.free_buffer(buf)
    acc.destroy_context(ctx)


@case("buffer.transfer-permissions")
def _perm(acc: Accelerator) -> None:
    ctx = acc.create_context()
    ro = acc.allocate_buffer(ctx, BufferDesc(16, usage=BufferUsage.PROGRAM_INPUT | BufferUsage.TRANSFER_DESTINATION))
    wo = acc.allocate_buffer(ctx, BufferDesc(16, usage=BufferUsage.PROGRAM_OUTPUT | BufferUsage.TRANSFER_SOURCE))
    acc.write_buffer(ro, 0, b"\0" * 16)
    _expect(PermissionDenied, lambda: acc.read_buffer(ro, 0, 16), "read without TRANSFER_SOURCE")
    _expect(PermissionDenied, lambda: acc.write_buffer(wo, 0, b"\0" * 16), "write without TRANSFER_DESTINATION")
    acc.free_buffer(ro)
    acc.free_buffer(wo)
    acc.destroy_context(ctx)


@case("artifact.bounds")
def _artifact(acc: Accelerator) -> None:
    from ..tosa.errors import FormatError

    ctx = acc.create_context()
    good = add_program()
    _expect(Incompatible, lambda: acc.load_program(ctx, ArtifactRef(good, 1 << 20, format=0x1234)), "foreign format")
    _expect(FormatError, lambda: acc.load_program(ctx, ArtifactRef(good[:40], 1 << 20)), "truncated artifact")
    if admits_nothing(acc):  # refused at admission, before its resident bound is weighed
        _expect(Unsupported, lambda: acc.load_program(ctx, ArtifactRef(good, 0)), "a program nothing admits")
        acc.destroy_context(ctx)
        raise Skip("no program admitted: the resident bound is weighed only for an admitted program")
    _expect(ResourceLimit, lambda: acc.load_program(ctx, ArtifactRef(good, 0)), "resident bound of 0 bytes")
    assert acc.live_resources()["program"] == 0
    acc.destroy_context(ctx)


@case("binding.validation")
def _binding(acc: Accelerator) -> None:
    f = _Fixture(acc)
    b = f.bufs
    bad_sets = {
        "missing slot": [Binding(0, b[0]), Binding(1, b[1])],
        "repeated slot": [Binding(0, b[0]), Binding(0, b[1]), Binding(2, b[2])],
        "slot out of range": [Binding(0, b[0]), Binding(1, b[1]), Binding(3, b[2])],
        "short range": [Binding(0, b[0], 0, 12), Binding(1, b[1]), Binding(2, b[2])],
        "range past end": [Binding(0, b[0], 8, 16), Binding(1, b[1]), Binding(2, b[2])],
        "output bound read-only": [Binding(0, b[0]), Binding(1, b[1]), Binding(2, b[2], access=Access.READ)],
    }
    for what, bindings in bad_sets.items():
        exc = _expect(SubmitRejected, lambda bindings=bindings: acc.submit(f.queue, f.program, bindings), what)
        assert isinstance(exc.error, (InvalidArgument, OutOfBounds, PermissionDenied)), (what, exc.error)
    assert acc.live_resources()["event"] == 0, "a rejected submit retained an event"
    ro = acc.allocate_buffer(f.ctx, BufferDesc(16, usage=BufferUsage.PROGRAM_INPUT))
    exc = _expect(
        SubmitRejected,
        lambda: acc.submit(f.queue, f.program, [Binding(0, b[0]), Binding(1, b[1]), Binding(2, ro)]),
        "write to input-only buffer",
    )
    assert isinstance(exc.error, PermissionDenied)
    acc.free_buffer(ro)
    f.close()


@case("context.isolation")
def _isolation(acc: Accelerator) -> None:
    f1, f2 = _Fixture(acc), _Fixture(acc)
    foreign = [Binding(0, f2.bufs[0]), Binding(1, f1.bufs[1]), Binding(2, f1.bufs[2])]
    exc = _expect(SubmitRejected, lambda: acc.submit(f1.queue, f1.program, foreign), "another context's buffer")
    assert isinstance(exc.error, PermissionDenied)
    exc = _expect(SubmitRejected, lambda: acc.submit(f1.queue, f2.program, f1.bindings()), "another context's program")
    assert isinstance(exc.error, PermissionDenied)
    f2.close()
    stale = f2.bufs[0]
    _expect(InvalidArgument, lambda: acc.read_buffer(stale, 0, 4), "stale handle")
    f1.write_inputs(np.ones(4), np.ones(4))
    ev = acc.submit(f1.queue, f1.program, f1.bindings())
    assert acc.wait(ev, 30) is EventState.COMPLETE
    acc.destroy_event(ev)
    f1.close()


@case("context.destroy-nonempty")
def _nonempty(acc: Accelerator) -> None:
    ctx = acc.create_context()
    buf = acc.allocate_buffer(ctx, BufferDesc(16))
    exc = _expect(ReleaseRejected, lambda: acc.destroy_context(ctx), "destroy a context holding a buffer")
    assert exc.handle is ctx and isinstance(exc.error, Busy)
    acc.free_buffer(buf)
    acc.destroy_context(ctx)


@case("event.terminal-stability")
def _terminal(acc: Accelerator) -> None:
    f = _Fixture(acc)
    f.write_inputs(np.ones(4), np.ones(4))
    ev = acc.submit(f.queue, f.program, f.bindings())
    assert acc.wait(ev, 30) is EventState.COMPLETE
    for _ in range(5):
        assert acc.poll_event(ev) is EventState.COMPLETE
    if acc.supports_cancellation:
        assert acc.cancel_event(ev) is False, "cancel won against a completed event"
    assert acc.poll_event(ev) is EventState.COMPLETE
    acc.destroy_event(ev)
    _expect(InvalidArgument, lambda: acc.poll_event(ev), "poll a destroyed event")
    f.close()


@case("event.pending-not-destroyable")
def _pending(acc: Accelerator) -> None:
    f = _Fixture(acc)
    gate = acc.host_gate(f.ctx)
    ev = acc.submit(f.queue, f.program, f.bindings(), after=(gate, 1))
    assert acc.poll_event(ev) is EventState.PENDING
    exc = _expect(ReleaseRejected, lambda: acc.destroy_event(ev), "destroy a pending event")
    assert exc.handle is ev
    _expect(ReleaseRejected, lambda: acc.free_buffer(f.bufs[0]), "free a buffer bound to pending work")
    gate.signal(1)
    assert acc.wait(ev, 30) is EventState.COMPLETE
    acc.destroy_event(ev)
    f.close()


@case("event.finite-timeout")
def _timeout(acc: Accelerator) -> None:
    f = _Fixture(acc)
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
    f = _Fixture(acc)
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
    f = _Fixture(acc)
    gate = acc.host_gate(f.ctx)
    f.write_inputs(np.full(4, 2.0), np.full(4, 3.0))
    ev = acc.submit(f.queue, f.program, f.bindings(), after=(gate, 2))
    gate.signal(1)
    assert acc.poll_event(ev) is EventState.PENDING
    _expect(InvalidArgument, lambda: gate.signal(0), "gate values only increase")
    threading.Thread(target=gate.signal, args=(2,)).start()
    assert acc.wait(ev, 30) is EventState.COMPLETE
    np.testing.assert_array_equal(f.output(), np.full(4, 5, np.float32))
    acc.destroy_event(ev)
    f.close()


@case("prepared.launch")
def _prepared(acc: Accelerator) -> None:
    f = _Fixture(acc)
    p = acc.prepare(f.queue, f.program, f.bindings())
    _expect(ReleaseRejected, lambda: acc.free_buffer(f.bufs[0]), "free a buffer a prepared submission binds")
    _expect(ReleaseRejected, lambda: acc.unload_program(f.program), "unload a prepared program")
    _expect(ReleaseRejected, lambda: acc.destroy_queue(f.queue), "destroy a queue with a prepared submission")
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
        _expect(InvalidArgument, lambda t=bad: acc.poll_launch(p, t), f"ticket {bad!r}")
    acc.release_prepared(p)
    _expect(InvalidArgument, lambda: acc.launch(p), "launch a released prepared submission")
    _expect(InvalidArgument, lambda: acc.release_prepared(p), "release twice")
    f.write_inputs(np.ones(4), np.ones(4))  # bound buffers are free again
    f.close()


@case("prepared.validation")
def _prepared_validation(acc: Accelerator) -> None:
    f = _Fixture(acc)
    wrong = [
        f.bindings()[:2],  # a slot missing
        [Binding(0, f.bufs[0], 0, 16), Binding(0, f.bufs[1], 0, 16), Binding(2, f.bufs[2], 0, 16)],  # repeated
        [Binding(0, f.bufs[0], 0, 16), Binding(1, f.bufs[1], 0, 16), Binding(2, f.bufs[2], 4, 16)],  # out of range
    ]
    for bindings in wrong:
        _expect((InvalidArgument, OutOfBounds), lambda b=bindings: acc.prepare(f.queue, f.program, b), "bad bindings")
    other = acc.create_context()
    queue = acc.create_queue(other)
    _expect(PermissionDenied, lambda: acc.prepare(queue, f.program, f.bindings()), "a queue of another context")
    assert acc.live_resources()["prepared"] == 0, "a refused prepare left something"
    acc.destroy_queue(queue)
    acc.destroy_context(other)
    f.close()


@case("quota.buffer-bytes")
def _quota(acc: Accelerator) -> None:
    ctx = acc.create_context(Quota(buffer_bytes=100))
    a = acc.allocate_buffer(ctx, BufferDesc(64))
    _expect(ResourceLimit, lambda: acc.allocate_buffer(ctx, BufferDesc(64)), "allocation beyond the quota")
    acc.free_buffer(a)
    b = acc.allocate_buffer(ctx, BufferDesc(64))
    acc.free_buffer(b)
    acc.destroy_context(ctx)


@case("threads.concurrent-submits")
def _threads(acc: Accelerator) -> None:
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            f = _Fixture(acc)
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


def run(factory: Callable[[], Accelerator], only: Iterable[str] | None = None) -> list[CaseResult]:
    """Run every case (or those in ``only``) on a fresh accelerator each."""
    results = []
    for name, fn in CASES.items():
        if only is not None and name not in only:
            continue
        acc = factory()
        try:
            fn(acc)
            leaks = {k: v for k, v in acc.live_resources().items() if v}
            if leaks:
                raise AssertionError(f"resources left live: {leaks}")
        except Skip as exc:
            results.append(CaseResult(name, "skip", str(exc)))
        except Exception as exc:  # noqa: BLE001 - each case reports its own failure
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            results.append(CaseResult(name, "fail", detail))
        else:
            results.append(CaseResult(name, "pass"))
    return results


@case("event.deadline-stops-running-work")
def _deadline_running(acc: Accelerator) -> None:
    from ..core.errors import DeadlineExpired

    f = _Endless(acc)
    ev = f.submit(timeout=0.2)
    assert acc.wait(ev, 30) is EventState.FAILED, "work that never ends outlived its deadline by 30 s"
    assert isinstance(acc.event_error(ev), DeadlineExpired), acc.event_error(ev)
    acc.destroy_event(ev)
    f.close()


@case("event.cancel-stops-running-work")
def _cancel_running(acc: Accelerator) -> None:
    if not acc.supports_cancellation:
        raise Skip("backend does not cancel submitted work")
    f = _Endless(acc)
    ev = f.submit(timeout=30)  # the deadline is only a net: the cancellation must end it first
    time.sleep(0.05)  # let it start
    assert acc.cancel_event(ev) is True, "cancellation lost against work that never ends"
    assert acc.cancel_event(ev) is False, "a second cancellation won too"
    assert acc.wait(ev, 10) is EventState.CANCELLED
    acc.destroy_event(ev)
    f.close()
