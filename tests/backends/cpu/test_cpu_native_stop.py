"""Native CPU runs stop while they run (backends/cpu/native: control.py, polls.py; ADR 0028).

A queued run of generated code is given a control block: a stop word that a winning cancellation sets,
and the event's deadline. The code polls it between operators and inside every loop whose work can be
large, and returns early; the run then raises what the interpreter raises at its checkpoints
(RunCancelled, DeadlineExpired) and the event ends CANCELLED or FAILED.

Three kinds of evidence:

* the poll planner bounds the work between two polls for any loop nest (hypothesis);
* every lowering that polls stops inside its own loops: with the poll budgets lowered so each loop level
  polls, a run whose deadline has passed (or whose stop word is set) before it starts leaves its single
  operator's output unfinished, and a run without a stop gives the same bits as the code without polls;
* long runs through the execution contract (sizes from a calibration on this machine) end FAILED at a
  0.2 s deadline and CANCELLED soon after a cancel, well before their natural end, which is measured in
  the same test; nothing writes their outputs after the event is terminal; runs that are not stopped
  give the same bits on the queue and the direct paths.
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections.abc import Callable
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.backends.cpu.interpreter import load as interpret
from ironaccel.backends.cpu.native import NativeProgram, polls, toolchain
from ironaccel.backends.cpu.native import compile as compile_native
from ironaccel.backends.cpu.native.control import SAME_CLOCK, STOP_DEADLINE, STOP_REQUESTED, RunControl
from ironaccel.core.errors import DeadlineExpired
from ironaccel.core.settings import Settings
from ironaccel.runtime import ArtifactRef, Binding, BufferDesc
from ironaccel.runtime.event import EventState, RunCancelled
from ironaccel.tosa import Program
from ironaccel.tosa.builder import ProgramBuilder
from ironaccel.tosa.codec import write

pytestmark = [
    pytest.mark.skipif(toolchain.compiler() is None, reason=f"no C compiler: {toolchain.unavailable_reason()}"),
    pytest.mark.skipif(not SAME_CLOCK, reason="Python's monotonic clock is not CLOCK_MONOTONIC here"),
]

RNG = np.random.default_rng(29)
POLLS = re.compile(r"IA_POLL|ia_copy\(")  # what polls inside an operator (prelude.h)
PRELUDE = resources.files("ironaccel.backends.cpu.native").joinpath("prelude.h").read_text()
WAIT_S = 120.0  # a bound, never a delay


@pytest.fixture(autouse=True)
def native_required(monkeypatch) -> None:
    """Every program here must run as native code: a compile failure is an error, not a fallback."""
    monkeypatch.setattr(sys.modules["ironaccel.core.settings"], "settings", Settings(cpu_native="require"))


# -- the planner --------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(1, 1 << 20), min_size=1, max_size=5),
    unit=st.integers(1, 1 << 12),
    budget=st.integers(1, 1 << 24),
)
def test_the_planner_bounds_the_work_between_two_polls(counts, unit, budget):
    nest = polls.plan(counts, budget, unit)
    total = math.prod(counts) * unit
    if nest is None:
        assert total <= budget  # no poll inside: the check after the operator suffices
        return
    assert total > budget
    assert 0 <= nest.level < len(counts) and nest.every >= 1
    assert nest.innermost == (nest.level == len(counts) - 1)
    per_iteration = math.prod(counts[nest.level + 1 :]) * unit
    # Between two polls: `every` iterations of the polled loop, at most a budget unless one iteration of
    # the innermost loop is already over it.
    assert nest.every * per_iteration <= max(budget, unit)
    # The outermost such loop (one iteration of the loop around it is over the budget), and polls no
    # denser than they need be: more than half a budget apart wherever an iteration fits in one.
    if nest.level > 0:
        assert math.prod(counts[nest.level :]) * unit > budget
    if per_iteration <= budget:
        assert nest.every * per_iteration > budget // 2


# -- every lowering stops inside its loops --------------------------------------------------------------
def _floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _int8(*shape: int) -> np.ndarray:
    return RNG.integers(-100, 100, size=shape).astype(np.int8)


def _matmul(integer: bool, constant_b: bool) -> tuple[Program, list[np.ndarray]]:
    make = _int8 if integer else _floats
    a, bm = make(2, 30, 200), make(2, 200, 70)
    b = ProgramBuilder()
    ain = b.input("a", a.shape, "int8" if integer else "fp32")
    bin_ = b.const(bm) if constant_b else b.input("b", bm.shape, "int8" if integer else "fp32")
    b.output(b.matmul(ain, bin_, 0, 0) if integer else b.matmul(ain, bin_))
    return b.build(), [a] if constant_b else [a, bm]


def _conv(integer: bool, pad: tuple[int, int, int, int]) -> tuple[Program, list[np.ndarray]]:
    x = _int8(1, 12, 11, 24) if integer else _floats(1, 12, 11, 24)
    weights = _int8(40, 3, 3, 24) if integer else _floats(40, 3, 3, 24)
    bias = np.arange(40, dtype=np.int32 if integer else np.float32)
    b = ProgramBuilder()
    xin = b.input("x", x.shape, "int8" if integer else "fp32")
    zps = (0, 0) if integer else ()
    b.output(b.conv2d(xin, b.const(weights), b.const(bias), *zps, pad=pad))
    return b.build(), [x]


def _single(build: Callable[[ProgramBuilder, object], object], x: np.ndarray) -> tuple[Program, list[np.ndarray]]:
    b = ProgramBuilder()
    b.output(build(b, b.input("x", x.shape, "fp32")))
    return b.build(), [x]


CASES: dict[str, Callable[[], tuple[Program, list[np.ndarray]]]] = {
    "matmul": lambda: _matmul(False, True),
    "matmul, B packed in the run": lambda: _matmul(False, False),
    "matmul int8": lambda: _matmul(True, True),
    "matmul int8, B packed in the run": lambda: _matmul(True, False),
    "conv2d": lambda: _conv(False, (0, 0, 0, 0)),
    "conv2d, padded in the run": lambda: _conv(False, (1, 1, 2, 0)),
    "conv2d int8": lambda: _conv(True, (1, 0, 0, 1)),
    "depthwise_conv2d": lambda: _single(
        lambda b, v: b.depthwise_conv2d(v, b.const(_floats(3, 3, 16, 1)), b.const(_floats(16))), _floats(2, 9, 10, 16)
    ),
    "max_pool2d": lambda: _single(lambda b, v: b.max_pool2d(v, kernel=(4, 3), stride=(1, 2)), _floats(2, 9, 13, 8)),
    "avg_pool2d": lambda: _single(lambda b, v: b.avg_pool2d(v, kernel=(3, 5), pad=(1, 1, 2, 2)), _floats(1, 8, 9, 8)),
    "add, broadcast": lambda: _single(lambda b, v: b.add(v, b.const(_floats(1, 7, 1))), _floats(30, 7, 40)),
    "exp": lambda: _single(lambda b, v: b.exp(v), _floats(5000)),
    "transpose": lambda: _single(lambda b, v: b.transpose(v, (2, 0, 1)), _floats(20, 30, 9)),
    "pad": lambda: _single(lambda b, v: b.pad(v, [1, 2, 0, 3], -1.5), _floats(40, 50)),
    "tile": lambda: _single(lambda b, v: b.tile(v, [3, 2]), _floats(30, 25)),
    "concat": lambda: _single(lambda b, v: b.concat([v, b.const(_floats(70, 33))], 0), _floats(40, 33)),
    "reduce_sum, along the last axis": lambda: _single(lambda b, v: b.reduce_sum(v, 1), _floats(40, 300)),
    "reduce_max, across rows": lambda: _single(lambda b, v: b.reduce_max(v, 0), _floats(60, 90)),
    "reshape, copied": lambda: _single(lambda b, v: b.reshape(v, (2000,)), _floats(40, 50)),
}
# Budgets that put the polls at every level of the cases' loops: each element or multiply-add, a small
# stretch, a row or a tile.
BUDGETS = (1, 37, 1000)


def _lower_budgets(monkeypatch, products: int, others: int) -> None:
    monkeypatch.setattr(polls, "PRODUCT_WORK", products)
    monkeypatch.setattr(polls, "DEPTHWISE_WORK", products)
    monkeypatch.setattr(polls, "ELEMENT_WORK", others)
    monkeypatch.setattr(polls, "COPY_BYTES", others * 4)


def _sentinel(dtype: np.dtype) -> float | int:
    return np.nan if dtype.kind == "f" else np.iinfo(dtype).max


def _filled(like: np.ndarray) -> np.ndarray:
    return np.full(like.shape, _sentinel(like.dtype), like.dtype)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _stops_inside(program: Program, inputs: list[np.ndarray], plain: np.ndarray) -> None:
    """``program`` (one operator, whose result is the program's output), compiled with the budgets as
    they are now, polls inside its operator, gives ``plain``'s bits when nothing stops it, and stops
    inside its operator at a deadline that passed before the run and at a stop word set before it."""
    polled = compile_native(interpret(program))
    try:
        assert POLLS.search(polled.source.replace(PRELUDE, "")), "the operator's loops do not poll"
        (again,) = polled.run(inputs, destinations=[_filled(plain)], control=RunControl(time.monotonic() + WAIT_S))
        assert _same_bits(again, plain), "polls changed the results"
        # The first poll inside the operator stops it, before it has written its whole output (the check
        # after the operator would come only once it had).
        for control, error in ((RunControl(1e-9), DeadlineExpired), (RunControl(), RunCancelled)):
            if error is RunCancelled:
                control.stop()
            out = _filled(plain)
            with pytest.raises(error, match="stopped inside the run"):
                polled.run(inputs, destinations=[out], control=control)
            assert control.status == (STOP_DEADLINE if error is DeadlineExpired else STOP_REQUESTED)
            assert not _same_bits(out, plain), "the operator ran to its end before it looked"
    finally:
        polled.release()


def _plain(program: Program, inputs: list[np.ndarray]) -> np.ndarray:
    """The result with the default budgets, under which these small shapes never poll inside."""
    plain = compile_native(interpret(program))
    try:
        assert not POLLS.search(plain.source.replace(PRELUDE, ""))
        (result,) = plain.run(inputs)
    finally:
        plain.release()
    assert not (np.isnan(result).any() if result.dtype.kind == "f" else (result == _sentinel(result.dtype)).any())
    return result


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("case", CASES)
def test_every_lowering_polls_inside_its_loops_and_computes_the_same_bits(monkeypatch, case, budget):
    program, inputs = CASES[case]()
    plain = _plain(program, inputs)
    _lower_budgets(monkeypatch, budget, budget)
    _stops_inside(program, inputs, plain)


WITH_PROLOGUES = [name for name in CASES if "in the run" in name or "int8" in name]


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("case", WITH_PROLOGUES)
def test_product_kernels_poll_after_a_prologue_that_does_not(monkeypatch, case, budget):
    # The prologue (padding, packing, converting to bytes) is within its budget and never polls: the
    # products' own loops must stop the run.
    program, inputs = CASES[case]()
    plain = _plain(program, inputs)
    _lower_budgets(monkeypatch, budget, 1 << 40)
    _stops_inside(program, inputs, plain)


KINDS = ("reduce_sum", "reduce_min", "transpose", "add", "max_pool2d", "matmul")


@settings(max_examples=20, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    shape=st.lists(st.integers(1, 23), min_size=3, max_size=3),
    axis=st.integers(0, 2),
    budget=st.integers(1, 400),
    seed=st.integers(0, 2**16),
)
def test_polls_at_any_budget_never_change_a_bit(kind, shape, axis, budget, seed):
    """Whatever the shape, and wherever the budget puts the polls (blocks with a rest, chunks, countdowns),
    every element is computed once and the same way."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    b = ProgramBuilder()
    v = b.input("x", x.shape, "fp32")
    if kind.startswith("reduce"):
        b.output(getattr(b, kind)(v, axis))
    elif kind == "transpose":
        b.output(b.transpose(v, (axis, *(d for d in range(3) if d != axis))))
    elif kind == "add":
        b.output(b.add(v, b.const(rng.standard_normal((1, *shape[1:])).astype(np.float32))))
    elif kind == "max_pool2d":
        b.output(b.max_pool2d(b.reshape(v, (1, *shape)), kernel=(1 + shape[0] // 2, 1)))
    else:
        depth = shape[1] * shape[2]
        weights = b.const(rng.standard_normal((1, depth, 17)).astype(np.float32))
        b.output(b.matmul(b.reshape(v, (1, shape[0], depth)), weights))
    program = b.build()
    plain = _plain(program, [x])
    original = {name: getattr(polls, name) for name in ("PRODUCT_WORK", "DEPTHWISE_WORK", "ELEMENT_WORK", "COPY_BYTES")}
    try:
        for name in original:
            setattr(polls, name, budget)
        polled = compile_native(interpret(program))
    finally:
        for name, value in original.items():
            setattr(polls, name, value)
    try:
        (again,) = polled.run([x], destinations=[_filled(plain)], control=RunControl(time.monotonic() + WAIT_S))
    finally:
        polled.release()
    assert _same_bits(again, plain)


def test_direct_runs_pass_no_control_block_and_nothing_stops_them(monkeypatch):
    _lower_budgets(monkeypatch, 1, 1)
    program, inputs = CASES["exp"]()
    polled = compile_native(interpret(program))
    try:
        out = _filled(inputs[0])
        polled.run_into(inputs, [out])  # the exe(x) path: a NULL block, polls that never stop
        assert _same_bits(out, compile_native(interpret(program)).run(inputs)[0])
    finally:
        polled.release()


# -- long runs through the contract ------------------------------------------------------------------
def _matmul_chain(n: int, links: int) -> Program:
    b = ProgramBuilder()
    x = b.input("x", (1, n, n), "fp32")
    w = b.input("w", (1, n, n), "fp32")
    y = x
    for _ in range(links):
        y = b.matmul(y, w)
    b.output(y)
    return b.build()


def _seconds(runner: NativeProgram, inputs: list[np.ndarray]) -> float:
    start = time.perf_counter()
    runner.run(inputs)
    return time.perf_counter() - start


def _chain_for(target_s: float) -> tuple[bytes, list[np.ndarray], int]:
    """A chain of fp32 MATMULs that runs for about ``target_s`` on this machine: one link of 512 is timed,
    the link size is grown by the cube root of what is missing (at most 2048), then links are added."""
    n = 512
    inputs = [(RNG.standard_normal((1, n, n)) / math.sqrt(n)).astype(np.float32) for _ in range(2)]
    probe = compile_native(interpret(_matmul_chain(n, 1)))
    try:
        _seconds(probe, inputs)
        link = min(_seconds(probe, inputs) for _ in range(2))
    finally:
        probe.release()
    grow = min(4.0, (target_s / 8 / link) ** (1 / 3))
    n = max(256, int(n * grow) // 64 * 64)
    links = max(2, math.ceil(target_s / (link * (n / 512) ** 3)))
    inputs = [(RNG.standard_normal((1, n, n)) / math.sqrt(n)).astype(np.float32) for _ in range(2)]
    return write(_matmul_chain(n, links)), inputs, links


class _Loaded:
    """One program loaded through the contract, with its buffers and a queue."""

    def __init__(self, artifact: bytes, inputs: list[np.ndarray]) -> None:
        self.acc = acc = CpuAccelerator()
        self.ctx = acc.create_context()
        self.program = acc.load_program(self.ctx, ArtifactRef(artifact, 1 << 34))
        runner = acc._objects[self.program.id].native.compiled
        assert isinstance(runner, NativeProgram), "the program was not compiled to native code"
        self.shape = inputs[0].shape
        self.buffers = [acc.allocate_buffer(self.ctx, BufferDesc(inputs[0].nbytes)) for _ in range(len(inputs) + 1)]
        for buffer, value in zip(self.buffers, inputs, strict=False):
            acc.write_buffer(buffer, 0, value)
        self.queue = acc.create_queue(self.ctx)

    def submit(self, timeout: float | None = None):
        bindings = [Binding(i, b) for i, b in enumerate(self.buffers)]
        return self.acc.submit(self.queue, self.program, bindings, timeout)

    def output(self) -> np.ndarray:
        raw = self.acc.read_buffer(self.buffers[-1], 0, int(np.prod(self.shape)) * 4)
        return np.frombuffer(raw, np.float32).reshape(self.shape).copy()

    def clear_output(self) -> None:
        self.acc.write_buffer(self.buffers[-1], 0, np.full(self.shape, np.nan, np.float32))

    def close(self) -> None:
        for buffer in self.buffers:
            self.acc.free_buffer(buffer)
        self.acc.unload_program(self.program)
        self.acc.destroy_queue(self.queue)
        self.acc.destroy_context(self.ctx)


def _terminal(loaded: _Loaded, event) -> tuple[EventState, float]:
    start = time.monotonic()
    state = loaded.acc.wait(event, WAIT_S)
    return state, time.monotonic() - start


def _still(loaded: _Loaded) -> None:
    """The output is not written any more: no thread of the stopped run is left inside it."""
    before = loaded.output()
    time.sleep(0.05)
    assert _same_bits(loaded.output(), before), "the output changed after the event was terminal"


def test_a_long_native_run_stops_at_its_deadline_and_when_cancelled_and_is_unchanged_otherwise():
    artifact, inputs, links = _chain_for(2.0)
    loaded = _Loaded(artifact, inputs)
    try:
        # Its natural end, through the queue with a deadline far away (the clock is read all along).
        start = time.monotonic()
        event = loaded.submit(timeout=WAIT_S)
        assert loaded.acc.wait(event, WAIT_S) is EventState.COMPLETE, loaded.acc.event_error(event)
        natural = time.monotonic() - start
        loaded.acc.destroy_event(event)
        queued = loaded.output()
        want = inputs[0][:, :16]  # rows of x W^links depend only on the same rows of x
        for _ in range(links):
            want = want @ inputs[1]
        np.testing.assert_allclose(queued[:, :16], want, atol=1e-3 * float(np.abs(want).max()))
        assert natural > 0.5, f"the calibrated program ran only {natural:.2f} s"

        loaded.clear_output()
        event = loaded.submit(timeout=0.2)
        state, took = _terminal(loaded, event)
        assert state is EventState.FAILED and isinstance(loaded.acc.event_error(event), DeadlineExpired)
        assert took < natural / 2, f"stopped {took:.2f} s after submission; its natural end is {natural:.2f} s"
        loaded.acc.destroy_event(event)
        _still(loaded)
        assert np.isnan(loaded.output()).any(), "the run finished before its deadline"

        loaded.clear_output()
        event = loaded.submit()
        time.sleep(0.1)
        assert loaded.acc.cancel_event(event) is True
        state, took = _terminal(loaded, event)
        assert state is EventState.CANCELLED, loaded.acc.event_error(event)
        assert took < natural / 2, f"stopped {took:.2f} s after the cancel; its natural end is {natural:.2f} s"
        loaded.acc.destroy_event(event)
        _still(loaded)

        # After the stops, the direct path (no control block: nothing can stop it) gives the queue's bits.
        direct = np.empty_like(queued)
        loaded.acc.run_direct(loaded.program, inputs, [direct])
        assert _same_bits(queued, direct), "the queue and the direct paths disagree"
    finally:
        loaded.close()
