"""What the semantic suite's cases share: the case table, the programs they load and the fixtures they run on.

A case is a function of a fresh Accelerator, registered by :func:`case` under a stable id in :data:`CASES`
(the suite's order is the order of registration). It passes by returning, fails by raising, and raises
:class:`Skip` with the reason where a capability does not apply. A case ends with nothing of its own left
live: it closes what it made. :class:`Fixture` (the ADD program, three buffers and a queue) and
:class:`Endless` (a program that never ends) skip the case where the backend admits no program.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..core.errors import Unsupported
from ..runtime import (
    Accelerator,
    ArtifactRef,
    Binding,
    BufferDesc,
    BufferUsage,
    Context,
    EventState,
    MemoryDomain,
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


def load_or_skip(acc: Accelerator, ctx: Context, payload: bytes) -> ProgramHandle:
    """``payload`` loaded into ``ctx``; where the backend admits nothing, the context is destroyed and the
    case skips with the refusal as its reason."""
    try:
        return acc.load_program(ctx, ArtifactRef(payload, 1 << 20))
    except Unsupported as exc:  # LoweringError locally; UNSUPPORTED through a virtio device
        if not admits_nothing(acc):
            raise
        acc.destroy_context(ctx)
        raise Skip(f"no program admitted: {exc}") from exc


def expect(exc_types: type | tuple[type, ...], fn: Callable[[], object], what: str) -> BaseException:
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


class Endless:
    """A context with :func:`endless_program` loaded (or Skip where the backend refuses control flow)."""

    def __init__(self, acc: Accelerator) -> None:
        self.acc = acc
        self.ctx = acc.create_context()
        try:
            self.program = load_or_skip(acc, self.ctx, endless_program())
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


class Fixture:
    """A context with the ADD program loaded, three 16-byte buffers and a queue."""

    def __init__(self, acc: Accelerator, domain: MemoryDomain = MemoryDomain.SHARED) -> None:
        self.acc = acc
        self.ctx = acc.create_context()
        self.program = load_or_skip(acc, self.ctx, add_program())
        self.bufs = [acc.allocate_buffer(self.ctx, BufferDesc(16, domain, IO)) for _ in range(3)]
        self.queue = acc.create_queue(self.ctx)

    def bindings(self) -> list[Binding]:
        return [Binding(i, b, 0, 16) for i, b in enumerate(self.bufs)]

    def write_inputs(self, a: np.ndarray, b: np.ndarray) -> None:
        self.acc.write_buffer(self.bufs[0], 0, a.astype(np.float32))
        self.acc.write_buffer(self.bufs[1], 0, b.astype(np.float32))

    def output(self) -> np.ndarray:
        return np.frombuffer(self.acc.read_buffer(self.bufs[2], 0, 16), np.float32)

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        """Run ADD on ``a`` and ``b`` to completion and check its sum; the event is destroyed after."""
        self.write_inputs(a, b)
        ev = self.acc.submit(self.queue, self.program, self.bindings())
        assert self.acc.wait(ev, 30) is EventState.COMPLETE, self.acc.event_error(ev)
        np.testing.assert_array_equal(self.output(), (a + b).astype(np.float32))
        self.acc.destroy_event(ev)

    def close(self) -> None:
        for b in self.bufs:
            self.acc.free_buffer(b)
        self.acc.unload_program(self.program)
        self.acc.destroy_queue(self.queue)
        self.acc.destroy_context(self.ctx)


CASES: dict[str, Callable[[Accelerator], None]] = {}


def case(name: str) -> Callable[[Callable[[Accelerator], None]], Callable[[Accelerator], None]]:
    """Register the decorated function as the case ``name``."""

    def wrap(fn: Callable[[Accelerator], None]) -> Callable[[Accelerator], None]:
        CASES[name] = fn
        return fn

    return wrap
