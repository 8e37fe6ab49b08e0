"""The CPU backend's native code for GATHER (an index read from data, checked), for convolutions whose
weights run block by block (weights past a core's cache) and for products of a few rows that read a
computed B in place (attention in a decode step), each against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ironaccel as ia
from ironaccel.backends.cpu import native
from ironaccel.backends.cpu.interpreter import load as interpret
from ironaccel.backends.cpu.native import toolchain
from ironaccel.backends.cpu.native.ops import convolution, matmul
from ironaccel.tosa.builder import ProgramBuilder
from ironaccel.tosa.errors import ValidationError

pytestmark = pytest.mark.skipif(toolchain.compiler() is None, reason=f"no C compiler: {toolchain.unavailable_reason()}")

RNG = np.random.default_rng(29)
STORAGE = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "fp32": np.float32}


def _values(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "fp32":
        return RNG.standard_normal(shape).astype(np.float32)
    info = np.iinfo(STORAGE[dtype])
    return RNG.integers(info.min, info.max, shape, endpoint=True).astype(STORAGE[dtype])


# -- GATHER ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "fp32"])
@pytest.mark.parametrize("constant_values", [False, True])
def test_gather_runs_natively_and_picks_the_rows_numpy_picks(dtype, constant_values):
    n, k, c, w = 3, 11, 5, 9
    values = _values(dtype, (n, k, c))
    indices = RNG.integers(0, k, (n, w)).astype(np.int32)
    indices[0, :2] = [0, k - 1]  # both ends of the axis
    b = ProgramBuilder()
    source = b.const(values) if constant_values else b.input("values", values.shape, dtype)
    b.output(b.gather(source, b.input("indices", indices.shape, "int32")))
    compiled = interpret(b.build())
    program = native.compile(compiled)
    feed = [indices] if constant_values else [values, indices]
    (got,) = program.run(feed)
    np.testing.assert_array_equal(got, np.take_along_axis(values, indices[:, :, None].astype(np.intp), axis=1))
    np.testing.assert_array_equal(got, compiled.run(feed)[0])


def test_an_embedding_lookup_feeding_a_product_agrees_with_the_interpreter():
    """BERT's first operators: token embeddings gathered from a large constant table, then a product."""
    table = RNG.standard_normal((1, 1000, 64)).astype(np.float32)
    weights = RNG.standard_normal((1, 64, 48)).astype(np.float32)
    ids = RNG.integers(0, 1000, (1, 40)).astype(np.int32)
    b = ProgramBuilder()
    rows = b.gather(b.const(table), b.input("ids", ids.shape, "int32"))
    b.output(b.matmul(rows, b.const(weights)))
    compiled = interpret(b.build())
    (want,), (got,) = compiled.run([ids]), native.compile(compiled).run([ids])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[0], table[0, ids[0]] @ weights[0], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("bad", [-1, 7, 1 << 30, -(1 << 31)])
def test_a_gather_index_outside_the_axis_raises_as_the_interpreter_does(bad):
    """An index outside [0, K) breaks a REQUIRE (unpredictable): the native run stops before reading past
    the values and raises ValidationError(unpredictable=True), queued or direct, like the interpreter."""
    values = _values("fp32", (2, 7, 3))
    indices = np.array([[0, 1, 2], [3, bad, 4]], np.int32)
    b = ProgramBuilder()
    gathered = b.gather(b.input("values", values.shape, "fp32"), b.input("indices", indices.shape, "int32"))
    b.output(b.add(gathered, gathered))
    program = b.build()
    compiled = interpret(program)
    nat = native.compile(compiled)
    for run in (compiled.run, nat.run):
        with pytest.raises(ValidationError, match=r"GATHER index outside \[0, 7\)") as raised:
            run([values, indices])
        assert raised.value.unpredictable and raised.value.op == "GATHER"
    with pytest.raises(ValidationError, match="unpredictable"):
        nat.run_into([values, indices], [np.empty((2, 3, 3), np.float32)])
    indices[1, 1] = 6  # the same program runs on once the indices are valid
    (got,) = nat.run([values, indices])
    np.testing.assert_array_equal(got, 2 * np.take_along_axis(values, indices[:, :, None], axis=1))


def test_a_program_with_gather_runs_natively_through_the_user_api():
    table = RNG.standard_normal((1, 50, 8)).astype(np.float32)
    b = ProgramBuilder()
    b.output(b.gather(b.const(table), b.input("ids", (1, 4), "int32")))
    with ia.open("cpu") as dev:
        exe = dev.compile(b.build())
        loaded = dev.accelerator._objects[exe.program.id].native
        assert isinstance(loaded.compiled, native.NativeProgram), loaded.why
        (got,) = exe(np.array([[3, 0, 49, 3]], np.int32))
        np.testing.assert_array_equal(got, table[:, [3, 0, 49, 3]])
        with pytest.raises(ValidationError, match="unpredictable"):
            exe(np.array([[3, 0, 50, 3]], np.int32))


# -- convolutions block by block ---------------------------------------------------------------------------
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.tuples(st.integers(1, 2), st.integers(1, 5), st.integers(1, 7)),
    ic=st.integers(1, 24),
    oc=st.integers(2, 150),
    kernel=st.sampled_from([(1, 1), (3, 3), (1, 2)]),
    pad=st.booleans(),
    integer=st.booleans(),
    clamp=st.booleans(),
)
def test_convolutions_run_block_by_block_agree_with_the_interpreter(rows, ic, oc, kernel, pad, integer, clamp):
    """With the threshold at 0 every convolution of several column blocks takes the block-major units
    (one tile in one block each) that large weights take; the results are the interpreter's (integers bit
    for bit), a fused CLAMP included."""
    n, oh, ow = rows
    kh, kw = kernel
    pads = ((kh - 1) // 2, (kh - 1) // 2, (kw - 1) // 2, (kw - 1) // 2) if pad else (0, 0, 0, 0)
    h, w = oh + kh - 1 - pads[0] - pads[1], ow + kw - 1 - pads[2] - pads[3]
    dtype = "int8" if integer else "fp32"
    x = _values(dtype, (n, h, w, ic))
    weights = _values(dtype, (oc, kh, kw, ic))
    bias = RNG.integers(-1000, 1000, oc).astype(np.int32) if integer else RNG.standard_normal(oc).astype(np.float32)
    zps = (int(RNG.integers(-128, 127)), 0) if integer else (0, 0)
    b = ProgramBuilder()
    conv = b.conv2d(b.input("x", x.shape, dtype), b.const(weights), b.const(bias), *zps, pad=pads)
    b.output(b.clamp(conv, -3.0, 2.5) if clamp and not integer else conv)
    compiled = interpret(b.build())
    saved = convolution.BLOCK_MAJOR_BYTES
    convolution.BLOCK_MAJOR_BYTES = 0
    try:
        nat = native.compile(compiled)
    finally:
        convolution.BLOCK_MAJOR_BYTES = saved
    (want,), (got,) = compiled.run([x]), nat.run([x])
    if integer:
        np.testing.assert_array_equal(got, want)
    else:
        bound = float(np.abs(weights).max() * np.abs(x).max() * kh * kw * ic + np.abs(bias).max()) * 2.0**-21
        assert np.max(np.abs(got.astype(np.float64) - want), initial=0.0) <= bound


def test_a_large_pointwise_convolution_takes_the_block_units():
    """A linear layer of BERT's size (weights of 9 MiB) runs block by block: one unit per tile and block."""
    x = RNG.standard_normal((16, 1, 1, 768)).astype(np.float32)
    weights = (RNG.standard_normal((3072, 1, 1, 768)) * 0.05).astype(np.float32)
    bias = RNG.standard_normal(3072).astype(np.float32)
    b = ProgramBuilder()
    b.output(b.conv2d(b.input("x", x.shape, "fp32"), b.const(weights), b.const(bias)))
    compiled = interpret(b.build())
    nat = native.compile(compiled)
    assert "const ptrdiff_t nb = unit /" in nat.source
    (got,) = nat.run([x])
    want = x.reshape(16, 768).astype(np.float64) @ weights.reshape(3072, 768).T.astype(np.float64) + bias
    np.testing.assert_allclose(got.reshape(16, 3072), want, rtol=0, atol=2e-4)


# -- products of a few rows, B read in place ---------------------------------------------------------------
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 3),
    h=st.integers(1, matmul.DIRECT_ROWS),
    c=st.integers(1, 150),
    w=st.sampled_from([1, 15, 16, 17, 64, 65, 200, 513]),
)
def test_a_product_of_few_rows_reads_b_in_place_with_the_packed_kernels_sums(n, h, c, w):
    """No prologue packs B; the results are the packed kernels' bit for bit (the same fused multiply-adds
    in the same order) and the product within the error bound."""
    a = RNG.standard_normal((n, h, c)).astype(np.float32)
    bm = RNG.standard_normal((n, c, w)).astype(np.float32)
    b = ProgramBuilder()
    b.output(b.matmul(b.input("a", a.shape, "fp32"), b.input("b", bm.shape, "fp32")))
    compiled = interpret(b.build())
    direct = native.compile(compiled)
    saved = matmul.DIRECT_ROWS
    matmul.DIRECT_ROWS = 0
    try:
        packed = native.compile(compiled)
    finally:
        matmul.DIRECT_ROWS = saved
    assert "_pre(" not in direct.source and "_pre(" in packed.source
    (got,), (want,) = direct.run([a, bm]), packed.run([a, bm])
    np.testing.assert_array_equal(got, want)
    exact = np.matmul(a.astype(np.float64), bm.astype(np.float64))
    assert np.max(np.abs(got - exact)) <= float(np.abs(a).max() * np.abs(bm).max() * c) * 2.0**-21
