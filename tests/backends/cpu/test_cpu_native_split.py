"""Elementwise operators, last-axis reductions, TRANSPOSE and CONCAT of the native code cut into units
that threads share: the same bits as the interpreter's (within the ulps its float functions allow),
whatever the shapes and broadcasts, on one thread or several."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel.backends.cpu import native
from ironaccel.backends.cpu.interpreter import load as interpret
from ironaccel.backends.cpu.native import pool, toolchain
from ironaccel.backends.cpu.native.ops import data_layout, elementwise, reduction
from ironaccel.tosa.builder import ProgramBuilder

pytestmark = pytest.mark.skipif(toolchain.compiler() is None, reason=f"no C compiler: {toolchain.unavailable_reason()}")

RNG = np.random.default_rng(31)


def _program(shape_a: tuple[int, ...], shape_b: tuple[int, ...]):
    """Binary, ternary, comparison, unary and reduction operators over two broadcast fp32 inputs."""
    b = ProgramBuilder()
    x, y = b.input("x", shape_a, "fp32"), b.input("y", shape_b, "fp32")
    total = b.add(x, y)
    b.output(
        b.mul(total, y),
        b.select(b.greater(x, y), x, y),
        b.erf(total),
        b.exp(b.sub(x, y)),
        b.reduce_sum(total, len(shape_a) - 1),
        b.reduce_max(total, len(shape_a) - 1),
    )
    return b.build()


def _agree(program, inputs, ulps_of: set[int]) -> native.NativeProgram:
    compiled = interpret(program)
    nat = native.compile(compiled)
    for index, (want, got) in enumerate(zip(compiled.run(inputs), nat.run(inputs), strict=True)):
        assert got.shape == want.shape and got.dtype == want.dtype
        if index in ulps_of:  # erf and exp: the native functions are within an ulp of numpy's float64 ones
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            finite = ~np.isnan(want)
            assert np.all(np.abs(got[finite] - want[finite]) <= np.spacing(np.abs(want[finite])))
        elif index == 4:  # a double sum in another order: the float32 rounding may differ in ties
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)
    return nat


@pytest.mark.parametrize(
    ("shape_a", "shape_b"),
    [
        ((1, 128, 3072), (1, 128, 3072)),  # one contiguous run: chunks of it
        ((1, 12, 128, 128), (1, 12, 128, 1)),  # short rows, a per-row operand
        ((3, 5, 7000), (3, 1, 7000)),  # long rows that do not divide into chunks
        ((70001,), (1,)),  # a scalar against a long vector, a partial last chunk
        ((2, 300, 257), (1, 300, 1)),
    ],
)
def test_large_operators_split_into_units_and_agree_with_the_interpreter(shape_a, shape_b):
    x = RNG.standard_normal(shape_a).astype(np.float32)
    y = RNG.standard_normal(shape_b).astype(np.float32)
    x.reshape(-1)[::997] = np.nan
    nat = _agree(_program(shape_a, shape_b), [x, y], {2, 3})
    assert (
        len(re.findall(r"ia_parallel\(ia_unit_\d", nat.source)) >= 6
    )  # every elementwise operator, and the reductions


def test_a_split_gives_the_same_bits_on_one_thread_and_on_several():
    x = RNG.standard_normal((4, 96, 1000)).astype(np.float32)
    y = RNG.standard_normal((1, 96, 1)).astype(np.float32)
    nat = native.compile(interpret(_program(x.shape, y.shape)))
    many = nat.run([x, y])
    real = pool.split_threads
    pool.split_threads = lambda: 1
    try:
        one = nat.run([x, y])
    finally:
        pool.split_threads = real
        pool.update_limit()
    for a, b in zip(many, one, strict=True):
        np.testing.assert_array_equal(a, b)


def test_small_operators_are_not_split():
    nat = native.compile(interpret(_program((4, 50), (4, 1))))
    assert not re.search(r"ia_parallel\(ia_unit_\d", nat.source)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), rank=st.integers(1, 4))
def test_units_cover_every_shape_and_broadcast(data, rank):
    """With the split threshold and chunk made small, small shapes take the unit loops: rows of every
    length, rows longer than a chunk, broadcasts in any dimension."""
    full = tuple(data.draw(st.integers(1, 9)) for _ in range(rank))
    other = tuple(1 if data.draw(st.booleans()) else d for d in full)
    shape_a, shape_b = (full, other) if data.draw(st.booleans()) else (other, full)
    shape_a = tuple(max(a, b) for a, b in zip(shape_a, shape_b, strict=True))  # the reductions read x + y
    x = RNG.standard_normal(shape_a).astype(np.float32)
    y = RNG.standard_normal(shape_b).astype(np.float32)
    saved = elementwise.SPLIT_ELEMENTS, elementwise.CHUNK, reduction.SPLIT_ELEMENTS
    elementwise.SPLIT_ELEMENTS = reduction.SPLIT_ELEMENTS = 1
    elementwise.CHUNK = data.draw(st.sampled_from([1, 3, 8]))
    try:
        _agree(_program(shape_a, shape_b), [x, y], {2, 3})
    finally:
        elementwise.SPLIT_ELEMENTS, elementwise.CHUNK, reduction.SPLIT_ELEMENTS = saved


def _layout_program(shape: tuple[int, ...], other: tuple[int, ...], axis: int, perms: tuple[int, ...]):
    b = ProgramBuilder()
    x, y = b.input("x", shape, "fp32"), b.input("y", other, "fp32")
    joined = b.concat([x, y, x], axis=axis)
    b.output(joined, b.transpose(joined, perms), b.transpose(x, perms))
    return b.build()


@pytest.mark.parametrize(
    ("shape", "axis", "perms"),
    [
        ((16, 512, 128), 1, (0, 2, 1)),  # a decode step's key cache: appended to, then transposed
        ((16, 512, 128), 1, (1, 0, 2)),
        ((4, 9, 40, 50), 2, (3, 1, 0, 2)),
        ((300, 400), 0, (1, 0)),  # along the first axis: one row, not split
    ],
)
def test_large_transposes_and_concatenations_split_and_move_the_same_bits(shape, axis, perms):
    other = tuple(1 if d == axis else n for d, n in enumerate(shape))
    x = RNG.standard_normal(shape).astype(np.float32)
    y = RNG.standard_normal(other).astype(np.float32)
    compiled = interpret(_layout_program(shape, other, axis, perms))
    nat = native.compile(compiled)
    assert re.search(r"ia_parallel\(ia_unit_\d", nat.source)
    for want, got in zip(compiled.run([x, y]), nat.run([x, y]), strict=True):
        np.testing.assert_array_equal(got, want)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), rank=st.integers(1, 4))
def test_layout_units_cover_every_shape(data, rank):
    shape = tuple(data.draw(st.integers(1, 10)) for _ in range(rank))
    axis = data.draw(st.integers(0, rank - 1))
    perms = tuple(data.draw(st.permutations(range(rank))))
    other = tuple(data.draw(st.integers(1, 3)) if d == axis else n for d, n in enumerate(shape))
    x = RNG.standard_normal(shape).astype(np.float32)
    y = RNG.standard_normal(other).astype(np.float32)
    saved = data_layout.SPLIT_ELEMENTS
    data_layout.SPLIT_ELEMENTS = 1
    try:
        compiled = interpret(_layout_program(shape, other, axis, perms))
        nat = native.compile(compiled)
    finally:
        data_layout.SPLIT_ELEMENTS = saved
    for want, got in zip(compiled.run([x, y]), nat.run([x, y]), strict=True):
        np.testing.assert_array_equal(got, want)
