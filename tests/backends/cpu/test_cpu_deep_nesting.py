"""COND_IF and WHILE_LOOP nested as deep as TOSA allows run on the CPU backend, with the right values.

The validator accepts control-flow operators nested up to MAX_NESTING = 256 levels (level "none"); the
CPU interpreter must run every program it accepts, whatever the caller's own stack looks like (a thread
of its own, or code already close to Python's recursion limit), and one level more is refused by the
validator. Programs are built with the ProgramBuilder, written to bytes and loaded through the
execution contract, as a guest's would be.

A nested program here is described by a string of levels, outermost first: ``c`` a COND_IF, ``w`` a
WHILE_LOOP. Every level adds one to the int32 value it is given and hands it to the next level; the
innermost graph adds one more. A COND_IF takes its then graph (the next level) when the value is at
least zero, else its else graph subtracts 1000 and stops. A WHILE_LOOP runs its body (the next level)
``trips`` times, counting in an extra state tensor.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.backends.cpu.interpreter import load as interpret
from ironaccel.core.errors import ResourceLimit
from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, EventState
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor
from ironaccel.tosa.attributes import ATTRIBUTE_OF
from ironaccel.tosa.builder import ProgramBuilder
from ironaccel.tosa.codec import write
from ironaccel.tosa.errors import ValidationError
from ironaccel.tosa.validate import validate
from nested_graphs import calls_block, step_block

MAX_NESTING = 256  # level "none" (tosa/spec/tosa-1.0.2.json)
RESIDENT = 64 << 20
JOIN_S = 60.0  # a bound, never a delay


@contextlib.contextmanager
def _recursion_limit(limit: int) -> Iterator[None]:
    """The builder nests a Python call per graph (its callbacks), so building, and only building, a
    256-deep program needs more than the default limit; every run below is under the default one."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def _nested(levels: str, trips: tuple[int, ...] = ()) -> Program:
    """The program of ``levels`` (see the module docstring); ``trips[k]`` is the trip count of level k
    when it is a WHILE_LOOP (1 where not given)."""

    def level(g: ProgramBuilder, v, k: int):
        one = g.const([1], "int32")
        if k == len(levels):
            return g.add(v, one)
        v = g.add(v, one)
        if levels[k] == "c":
            return g.cond_if(
                g.greater_equal(v, g.const([0], "int32")),
                [v],
                lambda h, w: level(h, w, k + 1),
                lambda h, w: h.sub(w, h.const([1000], "int32")),
            )[0]
        count = trips[k] if k < len(trips) else 1
        out, _ = g.while_loop(
            [v, g.const([0], "int32")],
            lambda h, w, i: h.greater(h.const([count], "int32"), i),
            lambda h, w, i: (level(h, w, k + 1), h.add(i, h.const([1], "int32"))),
        )
        return out

    with _recursion_limit(10_000):
        b = ProgramBuilder()
        b.output(level(b, b.input("x", (1,), "int32"), 0))
        return b.build(validate=False)


def _expected(levels: str, trips: tuple[int, ...], x: int) -> int:
    """What :func:`_nested` computes, evaluated directly (innermost first)."""
    # f_k(v) = the value level k returns for v.
    f = lambda v: v + 1  # noqa: E731 - the innermost graph
    for k in reversed(range(len(levels))):
        inner = f
        if levels[k] == "c":
            f = lambda v, inner=inner: inner(v + 1) if v + 1 >= 0 else v + 1 - 1000  # noqa: E731
        else:
            count = trips[k] if k < len(trips) else 1

            def f(v, inner=inner, count=count):
                v += 1
                for _ in range(count):
                    v = inner(v)
                return v

    return f(x)


class _Loaded:
    """A program loaded through the execution contract of a CPU accelerator, with one queue and buffers."""

    def __init__(self, acc: CpuAccelerator, program: Program) -> None:
        self.acc = acc
        self.ctx = acc.create_context()
        self.program = acc.load_program(self.ctx, ArtifactRef(write(program), RESIDENT))
        self.queue = acc.create_queue(self.ctx)
        self.bufs = [acc.allocate_buffer(self.ctx, BufferDesc(64)) for _ in range(2)]

    def submit(self, x: int) -> int:
        """One run through the queue (its worker thread), from buffers."""
        acc = self.acc
        acc.write_buffer(self.bufs[0], 0, np.array([x], np.int32).tobytes())
        event = acc.submit(self.queue, self.program, [Binding(0, self.bufs[0], 0, 4), Binding(1, self.bufs[1], 0, 4)])
        assert acc.wait(event, JOIN_S) is EventState.COMPLETE, acc.event_error(event)
        acc.destroy_event(event)
        return int(np.frombuffer(bytes(acc.read_buffer(self.bufs[1], 0, 4)), np.int32)[0])

    def direct(self, x: int) -> int:
        """One run on the calling thread."""
        out = np.zeros(1, np.int32)
        self.acc.run_direct(self.program, [np.array([x], np.int32)], [out])
        return int(out[0])

    def close(self) -> None:
        acc = self.acc
        for buf in self.bufs:
            acc.free_buffer(buf)
        acc.destroy_queue(self.queue)
        acc.unload_program(self.program)
        acc.destroy_context(self.ctx)


@pytest.fixture(scope="module")
def acc() -> Iterator[CpuAccelerator]:
    accelerator = CpuAccelerator()
    yield accelerator
    assert accelerator.live_resources()["program"] == 0


def _frames() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def _at_depth(headroom: int, fn):
    """``fn()`` called with only ``headroom`` frames left below the recursion limit."""

    def descend() -> object:
        if sys.getrecursionlimit() - _frames() > headroom:
            return descend()
        return fn()

    return descend()


def _in_thread(fn, stack_bytes: int = 512 << 10):
    """``fn()`` on a new thread with a small C stack; its result, or its exception re-raised."""
    result: list[object] = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            errors.append(exc)

    previous = threading.stack_size(stack_bytes)
    try:
        thread = threading.Thread(target=body, daemon=True)
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join(JOIN_S)
    assert not thread.is_alive(), "the run did not finish"
    if errors:
        raise errors[0]
    return result[0]


DEEPEST = {
    "cond_if": ("c" * MAX_NESTING, ()),
    "while_loop": ("w" * MAX_NESTING, (2, 1, 3)),  # the outer loop runs the whole chain twice
    "alternating": ("cw" * (MAX_NESTING // 2), (1, 2)),
}


@pytest.mark.parametrize("name", list(DEEPEST))
def test_programs_nested_as_deep_as_the_validator_allows_run_with_the_right_value(acc, name):
    levels, trips = DEEPEST[name]
    program = _nested(levels, trips)
    validate(program)  # 256 levels: the deepest level "none" admits
    loaded = _Loaded(acc, program)
    try:
        for x in (0, 5, -1):
            want = _expected(levels, trips, x)
            assert loaded.submit(x) == want
            assert loaded.direct(x) == want
        # Where the caller's stack already holds most of what Python allows, and on a thread of its own.
        assert _at_depth(60, lambda: loaded.direct(3)) == _expected(levels, trips, 3)
        assert _in_thread(lambda: loaded.direct(7)) == _expected(levels, trips, 7)
        assert _in_thread(lambda: _at_depth(60, lambda: loaded.direct(-2))) == _expected(levels, trips, -2)
    finally:
        loaded.close()


def test_one_level_deeper_is_refused_by_validation_with_the_max_nesting_rule(acc):
    program = _nested("c" * (MAX_NESTING + 1))
    with pytest.raises(ValidationError, match="nesting depth 256 reaches MAX_NESTING = 256"):
        validate(program)
    ctx = acc.create_context()
    try:
        with pytest.raises(ValidationError, match="MAX_NESTING"):
            acc.load_program(ctx, ArtifactRef(write(program), RESIDENT))
        assert acc.live_resources()["program"] == 0
    finally:
        acc.destroy_context(ctx)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    levels=st.text(alphabet="cw", min_size=1, max_size=24),
    trips=st.lists(st.integers(0, 2), max_size=24).map(tuple),
    x=st.integers(-3, 3),
)
def test_any_mix_of_nested_control_flow_computes_what_it_describes(levels, trips, x):
    # Trip counts of 0 to 2 on random levels: loops that never run their body, and bodies run twice.
    if np.prod([t for t, kind in zip(trips, levels, strict=False) if kind == "w"] or [1]) > 64:
        trips = ()  # keeps the work small: at most 64 runs of the innermost graph
    compiled = interpret(_nested(levels, trips))
    assert int(compiled.run([np.array([x], np.int32)])[0][0]) == _expected(levels, trips, x)


# -- graphs that run themselves, and loops without operators -------------------------------------------
def test_graphs_that_run_each_other_in_a_cycle_are_refused_at_load(acc):
    # main -> a -> b -> a: each graph's own path is acyclic, but together they would nest without end.
    program = Program(
        (Region("main", (calls_block("main", "a", "b"), calls_block("a", "b", "b"), calls_block("b", "a", "a"))),)
    )
    with pytest.raises(ValidationError, match="recursive graph"):
        interpret(program)
    ctx = acc.create_context()
    try:
        # Through the contract it is refused before the backend sees it, or by the interpreter's check.
        with pytest.raises((ValidationError, ResourceLimit), match=r"recursive graph|runs itself"):
            acc.load_program(ctx, ArtifactRef(write(program), RESIDENT))
        assert acc.live_resources()["program"] == 0
    finally:
        acc.destroy_context(ctx)


def test_a_graph_reached_at_two_depths_runs_at_the_deeper_one_past_max_nesting():
    # main -> c0 -> ... -> c199 -> d0 -> ... -> d199, where main also names d0 (its else graph): the
    # graphs are each checked once, at their shallowest depth, so 401 levels at run time. Whatever the
    # validator makes of it, the interpreter has no depth of its own to run out of.
    n = 200
    c, d = [f"c{i}" for i in range(n)], [f"d{i}" for i in range(n)]
    blocks = [step_block("main", c[0], d[0])]
    blocks += [step_block(c[i], c[i + 1] if i + 1 < n else d[0], d[0]) for i in range(n)]
    blocks += [step_block(d[i], d[i + 1] if i + 1 < n else None) for i in range(n)]
    compiled = interpret(Program((Region("main", tuple(blocks)),)))
    assert compiled.run([np.zeros(1, np.int32)])[0].tolist() == [2 * n + 1]
    assert _in_thread(lambda: compiled.run([np.full(1, 5, np.int32)])[0].tolist()) == [2 * n + 6]


def test_a_loop_whose_graphs_have_no_operators_can_still_be_stopped():
    # cond passes its bool input through, body returns its inputs: no operator ever runs, so only the
    # check made on entry to every graph can stop it.
    b, i = DType.BOOL, DType.INT32
    cond = Block("cond", (), (Tensor("go", (1,), b), Tensor("v", (1,), i)), ("go", "v"), ("go",))
    body = Block("body", (), (Tensor("go", (1,), b), Tensor("v", (1,), i)), ("go", "v"), ("go", "v"))
    graphs = ATTRIBUTE_OF[Op.WHILE_LOOP](cond_graph="cond", body_graph="body")
    loop = Operator(Op.WHILE_LOOP, ("go", "v"), ("g2", "v2"), graphs)
    tensors = tuple(Tensor(n, (1,), t) for n, t in (("go", b), ("v", i), ("g2", b), ("v2", i)))
    program = Program((Region("main", (Block("main", (loop,), tensors, ("go", "v"), ("v2",)), cond, body)),))
    validate(program)
    calls: list[int] = []

    def check() -> None:
        calls.append(1)
        if len(calls) > 100:
            raise TimeoutError("stopped")

    compiled = interpret(program)
    with pytest.raises(TimeoutError):  # on a thread of its own: a loop nobody can stop fails, not hangs, the test
        _in_thread(lambda: compiled.run([np.array([True]), np.zeros(1, np.int32)], check=check))
    assert compiled.run([np.array([False]), np.full(1, 4, np.int32)])[0].tolist() == [4]
