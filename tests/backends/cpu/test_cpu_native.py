"""The CPU backend's native path (backends/cpu/native): generated C agrees with the numpy interpreter, it
falls back to the interpreter whenever it cannot take a program, and the user API runs programs directly.

Agreement is the interpreter's own: integer programs bit for bit; fp32 arithmetic, comparisons and data
movement bit for bit (NaN compared as NaN); fp32 functions evaluated in double within one ulp of the
interpreter's float64 result (they round the same real number, evaluated two ways); dot products and
sums within a few ulps of their largest term (both orders meet the specification's bound).
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import stat
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ironaccel as ia
from ironaccel.backends.cpu import native
from ironaccel.backends.cpu.interpreter import load as interpret
from ironaccel.backends.cpu.native import pool, toolchain
from ironaccel.backends.cpu.native.lowering import NotNative
from ironaccel.core.errors import InternalError, InvalidArgument, Unsupported
from ironaccel.core.settings import Settings
from ironaccel.runtime import Device
from ironaccel.tosa import load
from ironaccel.tosa.builder import ProgramBuilder

pytestmark = pytest.mark.skipif(toolchain.compiler() is None, reason=f"no C compiler: {toolchain.unavailable_reason()}")

MODELS = Path(__file__).resolve().parents[3] / "src" / "ironaccel" / "models"
RNG = np.random.default_rng(11)
FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _both(program, inputs):
    """(interpreter outputs, native outputs) of ``program`` on ``inputs``."""
    compiled = interpret(program)
    return compiled.run(inputs), native.compile(compiled).run(inputs)


def _same(want: np.ndarray, got: np.ndarray, ulps: float = 0.0, scale: float = 0.0) -> None:
    """Equal dtypes and shapes; NaN where the interpreter has NaN; values within ``ulps`` of the
    interpreter's (of float32 at each value) plus ``scale`` (absolute)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    w, g = want[~nan].astype(np.float64), got[~nan].astype(np.float64)
    infinite = np.isinf(w) | np.isinf(g)
    np.testing.assert_array_equal(g[infinite], w[infinite])
    w, g, want = w[~infinite], g[~infinite], want[~nan][~infinite]
    if not ulps and not scale:
        np.testing.assert_array_equal(g, w)
        return
    room = ulps * np.spacing(np.abs(want)).astype(np.float64) + scale
    assert np.all(np.abs(w - g) <= room), f"max diff {np.max(np.abs(w - g))}"


def _model_input(name: str) -> np.ndarray:
    with np.load(MODELS / f"{name}.torch.npz") as data:
        return data["input_int8"] if "input_int8" in data.files else data["input"]


# -- the bundled programs ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cnn_fp32", "attention_fp32", "cnn_int8"])
def test_native_code_agrees_with_the_interpreter_on_the_bundled_programs(name):
    program = load(MODELS / f"{name}.tosa")
    (want,), (got,) = _both(program, [_model_input(name)])
    if want.dtype.kind == "f":
        _same(want, got, scale=1e-5 * float(np.abs(want).max()))
    else:
        _same(want, got)  # int8: bit for bit


def test_bundled_programs_run_natively_and_directly_through_the_user_api():
    with ia.open("cpu") as dev:
        for name in ("cnn_fp32", "attention_fp32", "cnn_int8"):
            exe = dev.compile(MODELS / f"{name}.tosa")
            loaded = dev.accelerator._objects[exe.program.id].native
            assert isinstance(loaded.compiled, native.NativeProgram), loaded.why
            assert dev.accelerator.runs_direct(exe.program)
            before = dev.accelerator.live_resources()
            (direct,) = exe(_model_input(name))
            assert dev.accelerator.live_resources() == before  # no buffers, no events
            (queued,) = exe.submit(_model_input(name)).wait()
            np.testing.assert_array_equal(direct, queued)


# -- elementwise, against the interpreter -----------------------------------------------------------------
SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.4e38, 88.7, -104.0, 0.5, 20.0, 1e-5]


def _floats(shape, draw_values) -> np.ndarray:
    values = np.asarray(RNG.standard_normal(shape) * draw_values, dtype=np.float32)
    flat = values.reshape(-1)  # a view, also of a rank-0 array
    picks = RNG.integers(0, len(flat), size=min(len(flat), 6))
    flat[picks] = RNG.choice(np.array(SPECIAL, np.float32), size=len(picks))
    return values


def _broadcast_shapes(draw, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    full = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    other = tuple(1 if draw(st.booleans()) else d for d in full)
    return (full, other) if draw(st.booleans()) else (other, full)


BINARY = ["add", "sub", "mul", "maximum", "minimum", "equal", "greater", "greater_equal"]
UNARY = {
    "abs": 0,
    "negate": 0,
    "ceil": 0,
    "floor": 0,
    "reciprocal": 0,
    "rsqrt": 0,
    "exp": 1,
    "erf": 1,
    "tanh": 1,
    "sigmoid": 1,
}


@FEW
@given(data=st.data(), op=st.sampled_from(BINARY), rank=st.integers(0, 4), scale=st.sampled_from([1.0, 1e3, 1e-3]))
def test_binary_fp32_operators_agree_bit_for_bit(data, op, rank, scale):
    shape_a, shape_b = _broadcast_shapes(data.draw, rank)
    b = ProgramBuilder()
    x, y = b.input("x", shape_a, "fp32"), b.input("y", shape_b, "fp32")
    b.output(getattr(b, op)(x, y))
    (want,), (got,) = _both(b.build(), [_floats(shape_a, scale), _floats(shape_b, scale)])
    _same(want, got)


@FEW
@given(op=st.sampled_from(sorted(UNARY)), shape=st.lists(st.integers(1, 40), min_size=1, max_size=3))
def test_unary_fp32_operators_agree_within_one_ulp(op, shape):
    b = ProgramBuilder()
    x = b.input("x", shape, "fp32")
    b.output(getattr(b, op)(x))
    value = _floats(tuple(shape), 4.0)
    (want,), (got,) = _both(b.build(), [value])
    _same(want, got, ulps=UNARY[op])


def test_transcendental_functions_over_a_sweep_of_float32_values():
    """exp, erf, tanh and sigmoid in double, rounded once, against numpy's float64 path: at most one ulp
    apart, and identical almost everywhere (ties of 1e-4 ulp can round either way)."""
    x = np.concatenate([np.linspace(-110, 110, 40001, dtype=np.float32), np.array(SPECIAL, np.float32)])
    for op in ("exp", "erf", "tanh", "sigmoid"):
        b = ProgramBuilder()
        b.output(getattr(b, op)(b.input("x", x.shape, "fp32")))
        (want,), (got,) = _both(b.build(), [x])
        _same(want, got, ulps=1)
        assert np.count_nonzero(want != got) - np.count_nonzero(np.isnan(want)) <= 4, op


INT32_ONLY = ["add", "sub", "mul", "maximum", "minimum", "equal", "greater", "intdiv", "abs", "negate", "clz"]
ANY_INT = ["bitwise_and", "bitwise_xor", "arithmetic_right_shift", "logical_right_shift", "logical_left_shift"]


@FEW
@given(
    dtype=st.sampled_from(["int8", "int16", "int32"]),
    op=st.sampled_from(INT32_ONLY + ANY_INT),
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
)
def test_integer_elementwise_operators_agree_bit_for_bit(dtype, op, shape):
    if op in INT32_ONLY:
        dtype = "int32"  # the only integer type the profiles define these operators on
    info = np.iinfo(dtype)
    values = [RNG.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype) for _ in range(2)]
    if "shift" in op:
        values[1] = RNG.integers(0, info.bits, size=shape).astype(dtype)
    b = ProgramBuilder()
    unary = op in ("abs", "negate", "clz")
    x = b.input("x", shape, dtype)
    y = None if unary else b.input("y", shape, dtype)
    if unary:
        b.output(getattr(b, op)(x) if hasattr(b, op) else b.op(op, [x]))
    else:
        b.output(getattr(b, op)(x, y) if hasattr(b, op) else b.op(op, [x, y]))
    (want,), (got,) = _both(b.build(), values[:1] if unary else values)
    _same(want, got)


def test_clamp_rescale_and_table_agree_bit_for_bit():
    x = RNG.integers(-(2**31), 2**31 - 1, size=(3, 5, 8), endpoint=True).astype(np.int32)
    b = ProgramBuilder()
    v = b.input("x", x.shape, "int32")
    multiplier = b.const(RNG.integers(1 << 29, 1 << 31, size=8).astype(np.int32))
    shift = b.const(RNG.integers(30, 45, size=8).astype(np.int8))
    scaled = b.rescale(v, multiplier, shift, 0, 3, out_dtype="int8", per_channel=True)
    table = b.const(RNG.integers(-128, 127, size=256, endpoint=True).astype(np.int8))
    b.output(b.clamp(b.table(scaled, table), -100, 90), scaled)
    want, got = _both(b.build(), [x])
    for w, g in zip(want, got, strict=True):
        _same(w, g)


_RESCALE_SOURCES = {  # (dtype, unsigned): value range
    ("int8", False): (-128, 127),
    ("int8", True): (0, 255),
    ("int16", False): (-32768, 32767),
    ("int16", True): (0, 65535),
    ("int32", False): (-(2**31), 2**31 - 1),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(sorted(_RESCALE_SOURCES)),
    scale32=st.booleans(),
    double_round=st.booleans(),
    per_channel=st.booleans(),
    high_shifts=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_rescale_agrees_bit_for_bit_in_every_form(source, scale32, double_round, per_channel, high_shifts, seed):
    """The native RESCALE (32 x 32 -> 64-bit products where operands fit int32, the high word of the sum
    where every shift is 32 or more) against the interpreter: every source width and signedness, scale16
    and scale32, both rounding modes, per-tensor and per-channel, zero points where the type allows them,
    the extreme values of the input included."""
    dtype, unsigned = source
    low, high = _RESCALE_SOURCES[source]
    rng = np.random.default_rng(seed)
    channels = 6
    x = rng.integers(low, high, size=(2, 3, channels), endpoint=True)
    x.flat[:2] = (low, high)
    storage = {"int8": np.int8, "int16": np.int16, "int32": np.int32}[dtype]
    x = x.astype({np.int8: np.uint8, np.int16: np.uint16}.get(storage, storage) if unsigned else storage)
    x = x.view(storage)
    count = channels if per_channel else 1
    top = 1 << 31 if scale32 else 1 << 15
    multiplier = rng.integers(0, top, size=count)
    # the shift keeps the scaled value within int32 (a REQUIRE of the specification)
    span = (high - low) * int(multiplier.max(initial=1))
    shift = np.maximum(rng.integers(32 if high_shifts else 2, 63, size=count), max(2, span.bit_length() - 30))
    zp_in = int(rng.integers(low, high, endpoint=True)) if dtype == "int8" else 0
    if dtype == "int16" and unsigned:
        zp_in = int(rng.choice([0, 32768]))  # the only zero points uint16 takes
    zp_out = int(rng.integers(-128, 127, endpoint=True))
    b = ProgramBuilder()
    v = b.input("x", x.shape, dtype)
    mult_const = b.const(multiplier.astype(np.int32 if scale32 else np.int16))
    b.output(
        b.rescale(
            v,
            mult_const,
            b.const(np.minimum(shift, 62).astype(np.int8)),
            b.const(np.array([zp_in]).astype(x.dtype if not unsigned else storage)),
            b.const(np.array([zp_out], np.int8)),
            out_dtype="int8",
            scale32=scale32,
            rounding_mode="double_round" if double_round and scale32 else "single_round",
            per_channel=per_channel,
            input_unsigned=unsigned,
        )
    )
    (want,), (got,) = _both(b.build(), [x])
    _same(want, got)


# -- convolutions and products ----------------------------------------------------------------------------
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 2),
    out_hw=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    ic=st.integers(1, 20),
    oc=st.integers(1, 40),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pad=st.tuples(*(st.integers(0, 2) for _ in range(4))),
    integer=st.booleans(),
    constant_weights=st.booleans(),
)
def test_conv2d_agrees_with_the_interpreter(
    n, out_hw, ic, oc, kernel, stride, dilation, pad, integer, constant_weights
):
    (oh, ow), (kh, kw), (sy, sx), (dy, dx) = out_hw, kernel, stride, dilation
    top, bottom, left, right = pad
    # The input the windows tile exactly (as the specification requires), with less padding if need be.
    h = (oh - 1) * sy + (kh - 1) * dy + 1 - top - bottom
    w = (ow - 1) * sx + (kw - 1) * dx + 1 - left - right
    if h < 1:
        h, top, bottom = h + top + bottom, 0, 0
    if w < 1:
        w, left, right = w + left + right, 0, 0
    pad = (top, bottom, left, right)
    dtype = "int8" if integer else "fp32"
    if integer:
        x = RNG.integers(-128, 127, size=(n, h, w, ic), endpoint=True).astype(np.int8)
        weights = RNG.integers(-128, 127, size=(oc, kh, kw, ic), endpoint=True).astype(np.int8)
        bias = RNG.integers(-1000, 1000, size=oc).astype(np.int32)
        zps = (int(RNG.integers(-128, 127)), 0)
    else:
        x = RNG.standard_normal((n, h, w, ic)).astype(np.float32)
        weights = RNG.standard_normal((oc, kh, kw, ic)).astype(np.float32)
        bias = RNG.standard_normal(oc).astype(np.float32)
        zps = (0, 0)
    b = ProgramBuilder()
    xin = b.input("x", x.shape, dtype)
    win = b.const(weights) if constant_weights else b.input("w", weights.shape, dtype)
    conv = b.conv2d(xin, win, b.const(bias), *zps, pad=pad, stride=stride, dilation=dilation)
    b.output(conv)
    (want,), (got,) = _both(b.build(), [x] if constant_weights else [x, weights])
    if integer:
        _same(want, got)
    else:
        terms = np.abs(weights).max() * np.abs(x).max() * kh * kw * ic + np.abs(bias).max()
        _same(want, got, scale=float(terms) * 2.0**-21)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 30), st.integers(1, 40), st.integers(1, 40)),
    integer=st.booleans(),
    constant_b=st.booleans(),
)
def test_matmul_agrees_with_the_interpreter(shape, integer, constant_b):
    n, h, c, w = shape
    if integer:
        a = RNG.integers(-128, 127, size=(n, h, c), endpoint=True).astype(np.int8)
        bm = RNG.integers(-128, 127, size=(n, c, w), endpoint=True).astype(np.int8)
        zps = (int(RNG.integers(-128, 127)), int(RNG.integers(-128, 127)))
    else:
        a = RNG.standard_normal((n, h, c)).astype(np.float32)
        bm = RNG.standard_normal((n, c, w)).astype(np.float32)
        zps = (0, 0)
    b = ProgramBuilder()
    ain = b.input("a", a.shape, "int8" if integer else "fp32")
    bin_ = b.const(bm) if constant_b else b.input("b", bm.shape, "int8" if integer else "fp32")
    b.output(b.matmul(ain, bin_, *zps))
    (want,), (got,) = _both(b.build(), [a] if constant_b else [a, bm])
    if integer:
        _same(want, got)
    else:
        _same(want, got, scale=float(np.abs(a).max() * np.abs(bm).max() * c) * 2.0**-21)


def _int8_conv(x, weights, bias, zps, *, pad=(0, 0, 0, 0), stride=(1, 1), bias_input=False):
    """An int8 CONV2D program with constant weights (and bias, unless ``bias_input``), and its inputs."""
    b = ProgramBuilder()
    xin = b.input("x", x.shape, "int8")
    bin_ = b.input("bias", bias.shape, "int32") if bias_input else b.const(bias)
    b.output(b.conv2d(xin, b.const(weights), bin_, *zps, pad=pad, stride=stride, dilation=(1, 1)))
    return b.build(), [x, bias] if bias_input else [x]


@pytest.fixture
def without_vnni(monkeypatch):
    """The compiler as found, but with the VNNI kernels switched off (so the float path is exercised)."""
    tools = toolchain.compiler()
    monkeypatch.setattr(native, "compiler", lambda: dataclasses.replace(tools, dot_int8=False))


@pytest.mark.skipif(not getattr(toolchain.compiler(), "dot_int8", False), reason="the compiler does not target VNNI")
def test_int8_convolutions_with_int8_weights_take_the_vnni_kernels_and_agree():
    """Extremes of the input, weights and zero points; channels that are no multiple of 4; padding; a
    bias given at run time; a 2048-long dot product. The weights must fit int8 after their zero point:
    those that do not take the float kernels."""
    cases = []
    for zp_x in (-128, 0, 127):
        for value in (-128, 127):
            x = np.full((1, 6, 6, 7), value, np.int8)
            x[0, 0, 0, :3] = (-128, 127, 0)
            weights = RNG.choice(np.array([-128, 127, 0, 1], np.int8), size=(19, 3, 3, 7))
            bias = RNG.integers(-(2**31), 2**31 - 1, size=19, endpoint=True).astype(np.int32)
            cases.append((x, weights, bias, (zp_x, 0), dict(pad=(1, 2, 0, 1), stride=(2, 1))))
    x = RNG.integers(-128, 127, size=(2, 1, 1, 2048), endpoint=True).astype(np.int8)
    weights = RNG.integers(-128, 127, size=(10, 1, 1, 2048), endpoint=True).astype(np.int8)
    cases.append((x, weights, np.zeros(10, np.int32), (-128, 0), {}))
    cases.append((x, weights, np.arange(10, dtype=np.int32), (5, 0), dict(bias_input=True)))
    small = RNG.integers(-60, 60, size=(3, 2, 1, 5), endpoint=True).astype(np.int8)
    cases.append((x[:, :, :, :5].reshape(1, 2, 1, 5), small, np.ones(3, np.int32), (1, -60), {}))  # fits int8
    for x, weights, bias, zps, options in cases:
        program, inputs = _int8_conv(x, weights, bias, zps, **options)
        compiled = interpret(program)
        nat = native.compile(compiled)
        assert "ia_vdot4(c0_0" in nat.source
        _same(compiled.run(inputs)[0], nat.run(inputs)[0])
    wide = np.full((3, 1, 1, 4), 100, np.int8)  # 100 - (-100) does not fit int8
    program, inputs = _int8_conv(np.ones((1, 2, 2, 4), np.int8), wide, np.zeros(3, np.int32), (0, -100))
    compiled = interpret(program)
    nat = native.compile(compiled)
    assert "ia_vdot4(c0_0" not in nat.source
    _same(compiled.run(inputs)[0], nat.run(inputs)[0])


@pytest.mark.skipif(not getattr(toolchain.compiler(), "dot_int8", False), reason="the compiler does not target VNNI")
@pytest.mark.parametrize("constant_b", [False, True])
def test_int8_matmuls_take_the_vnni_kernels_and_agree(constant_b):
    """Extremes of both operands, depths that are no multiple of 4, batches; B given at run time (zero
    point 0) or as a constant (fitting int8 after its zero point)."""
    for (n, h, c, w), zp_a, zp_b in (((2, 17, 7, 33), -128, 0), ((1, 3, 1, 1), 127, 0), ((3, 30, 66, 16), 5, 0)):
        a = RNG.choice(np.array([-128, 127, 0, 3], np.int8), size=(n, h, c))
        bm = RNG.choice(np.array([-128, 127, 0, -1], np.int8), size=(n, c, w))
        if constant_b:
            zp_b, bm = -10, np.clip(bm, -128, 117).astype(np.int8)
        b = ProgramBuilder()
        ain = b.input("a", a.shape, "int8")
        bin_ = b.const(bm) if constant_b else b.input("b", bm.shape, "int8")
        b.output(b.matmul(ain, bin_, zp_a, zp_b))
        compiled = interpret(b.build())
        nat = native.compile(compiled)
        assert "ia_vdot4(c0_0" in nat.source
        inputs = [a] if constant_b else [a, bm]
        _same(compiled.run(inputs)[0], nat.run(inputs)[0])


def test_int8_convolutions_agree_on_the_float_kernels_too(without_vnni):
    x = RNG.integers(-128, 127, size=(1, 6, 5, 7), endpoint=True).astype(np.int8)
    weights = RNG.integers(-128, 127, size=(21, 3, 2, 7), endpoint=True).astype(np.int8)
    program, inputs = _int8_conv(x, weights, np.arange(21, dtype=np.int32), (-7, 0), pad=(1, 1, 0, 1))
    compiled = interpret(program)
    nat = native.compile(compiled)
    assert "ia_vdot4(c0_0" not in nat.source
    _same(compiled.run(inputs)[0], nat.run(inputs)[0])


def test_an_integer_dot_product_too_long_for_float_is_exact_in_chunks(without_vnni):
    """2048 products of up to 255 * 128 exceed float32's exact integers: the kernel sums chunks."""
    x = np.full((1, 1, 1, 2048), 127, np.int8)
    weights = np.full((3, 1, 1, 2048), -128, np.int8)
    b = ProgramBuilder()
    b.output(b.conv2d(b.input("x", x.shape, "int8"), b.const(weights), b.const(np.zeros(3, np.int32)), -128, 0))
    (want,), (got,) = _both(b.build(), [x])
    _same(want, got)
    assert int(got.reshape(-1)[0]) == 255 * -128 * 2048


@pytest.mark.parametrize("nan_mode", ["propagate", "ignore"])
@pytest.mark.parametrize("bounds", [(0.0, 6.0), (-0.0, 0.0), (-1.0, -0.0), (-np.inf, np.inf), (2.5, 2.5)])
def test_a_clamp_fused_into_the_convolution_before_it_agrees_bit_for_bit(nan_mode, bounds):
    """CONV2D / DEPTHWISE_CONV2D read only by a CLAMP apply it to their results in place (the CLAMP
    costs no pass of its own). Products of one term, x * 1 + 0, pass every value through
    exactly, so the clamp itself is compared bit for bit: NaN, infinities, zero bounds of either sign."""
    channels = 37  # two full vectors and a part
    x = _floats((1, 3, 5, channels), 10.0)
    x.reshape(-1)[:8] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, bounds[0], bounds[1]]
    b = ProgramBuilder()
    v = b.input("x", x.shape, "fp32")
    pixels = b.reshape(v, (1, 3 * 5, channels, 1))  # one channel: a single product per result
    bias = b.const(np.zeros(channels, np.float32))
    conv = b.conv2d(pixels, b.const(np.ones((channels, 1, 1, 1), np.float32)), bias)
    depthwise = b.depthwise_conv2d(v, b.const(np.ones((1, 1, channels, 1), np.float32)), bias)
    lo, hi = bounds
    b.output(b.clamp(conv, lo, hi, nan_mode=nan_mode), b.clamp(depthwise, lo, hi, nan_mode=nan_mode))
    compiled = interpret(b.build())
    nat = native.compile(compiled)
    assert "CLAMP" not in nat.source  # fused: no function of its own
    for want, got in zip(compiled.run([x]), nat.run([x]), strict=True):
        _same(want, got)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_a_convolution_read_by_more_than_a_clamp_is_not_fused():
    x = RNG.standard_normal((1, 4, 4, 8)).astype(np.float32)
    b = ProgramBuilder()
    conv = b.conv2d(b.input("x", x.shape, "fp32"), b.const(RNG.standard_normal((8, 3, 3, 8)).astype(np.float32)))
    b.output(b.clamp(conv, 0.0, 1.0), b.abs(conv))  # two readers
    compiled = interpret(b.build())
    nat = native.compile(compiled)
    assert "CLAMP" in nat.source
    for want, got in zip(compiled.run([x]), nat.run([x]), strict=True):
        _same(want, got, scale=1e-4)


def test_pools_depthwise_and_layout_operators_agree():
    x = RNG.standard_normal((2, 7, 9, 5)).astype(np.float32)
    x.reshape(-1)[::17] = np.nan
    b = ProgramBuilder()
    v = b.input("x", x.shape, "fp32")
    pooled = b.max_pool2d(v, kernel=(3, 2), stride=(2, 1), pad=(1, 1, 0, 1), nan_mode="ignore")
    average = b.avg_pool2d(v, kernel=(2, 3), stride=(1, 2), pad=(1, 0, 1, 1))
    weights = b.const(RNG.standard_normal((3, 3, 5, 2)).astype(np.float32))
    depthwise = b.depthwise_conv2d(v, weights, b.const(np.ones(10, np.float32)), pad=(1, 1, 1, 1))
    moved = b.transpose(b.slice(b.pad(v, [0, 0, 1, 2, 0, 0, 0, 1], -1.5), [1, 0, 2, 1], [1, 9, 7, 3]), (3, 1, 0, 2))
    b.output(pooled, average, depthwise, moved, b.tile(b.reverse(v, 2), [1, 2, 1, 1]), b.reduce_max(v, 1))
    want, got = _both(b.build(), [x])
    for index, (w, g) in enumerate(zip(want, got, strict=True)):
        _same(w, g, scale=1e-5 if index in (1, 2) else 0.0)


# -- falling back -----------------------------------------------------------------------------------------
def _sine_program():
    b = ProgramBuilder()
    b.output(b.sin(b.input("x", (4,), "fp32")))
    return b.build()


def test_programs_the_native_path_cannot_take_stay_with_the_interpreter():
    with pytest.raises(NotNative, match="SIN"):
        native.compile(interpret(_sine_program()))
    with ia.open("cpu") as dev:
        exe = dev.compile(_sine_program())
        loaded = dev.accelerator._objects[exe.program.id].native
        assert not isinstance(loaded.compiled, native.NativeProgram) and "SIN" in loaded.why
        x = np.linspace(-3, 3, 4, dtype=np.float32)
        np.testing.assert_allclose(exe(x)[0], np.sin(x), rtol=1e-6)


def _use_settings(monkeypatch, **changes) -> None:
    monkeypatch.setattr(sys.modules["ironaccel.core.settings"], "settings", Settings(**changes))


def test_switched_off_or_without_a_compiler_every_program_is_interpreted(monkeypatch):
    _use_settings(monkeypatch, cpu_native="off")
    assert native.load(interpret(_sine_program()))[0] is None
    with ia.open("cpu") as dev:
        exe = dev.compile(load(MODELS / "cnn_fp32.tosa"))
        loaded = dev.accelerator._objects[exe.program.id].native
        assert not isinstance(loaded.compiled, native.NativeProgram) and "IRONACCEL_CPU_NATIVE=0" in loaded.why
        assert exe(_model_input("cnn_fp32"))[0].shape == (1, 10)
    _use_settings(monkeypatch)
    monkeypatch.setattr(toolchain, "_found", None)
    monkeypatch.setattr(toolchain, "_reason", None)
    monkeypatch.setattr(toolchain, "_candidates", lambda: [])
    runner, why = native.load(interpret(load(MODELS / "cnn_fp32.tosa")))
    assert runner is None and "no C compiler" in why


def test_a_compiler_failure_falls_back_with_a_logged_reason_or_fails_when_required(monkeypatch, caplog):
    def broken(source, tools):
        raise native.BuildError("the C compiler failed (1): error: simulated")

    monkeypatch.setattr(native, "build", broken)
    compiled = interpret(load(MODELS / "cnn_int8.tosa"))
    with caplog.at_level(logging.WARNING, logger="ironaccel.cpu.native"):
        runner, why = native.load(compiled)
    assert runner is None and "simulated" in why and "simulated" in caplog.text
    _use_settings(monkeypatch, cpu_native="require")
    with pytest.raises(InternalError, match="simulated"):
        native.load(compiled)


def test_settings_read_the_native_switch():
    assert Settings.from_env({}).cpu_native == "auto"
    assert Settings.from_env({"IRONACCEL_CPU_NATIVE": "0"}).cpu_native == "off"
    assert Settings.from_env({"IRONACCEL_CPU_NATIVE": "require"}).cpu_native == "require"
    assert Settings.from_env({"IRONACCEL_CPU_NATIVE_CACHE": "/x"}).cpu_native_cache == "/x"


def test_no_name_from_the_program_reaches_the_generated_source():
    hostile = '*/ #error injected\n int x = ("'
    b = ProgramBuilder()
    x = b.input(hostile + "in", (4,), "fp32")
    b.output(b.add(x, x, name=hostile + "out"))
    compiled = native.compile(interpret(b.build()))
    assert "injected" not in compiled.source
    np.testing.assert_array_equal(compiled.run([np.ones(4, np.float32)])[0], np.full(4, 2, np.float32))


def test_oversized_tensors_are_refused_before_anything_is_allocated():
    b = ProgramBuilder()
    b.output(b.exp(b.input("x", (1 << 16, 1 << 16), "fp32")))
    with pytest.raises(NotNative, match="elements"):
        native.compile(interpret(b.build(validate=False)))


# -- the compiled-object cache ----------------------------------------------------------------------------
def test_objects_are_cached_by_source_and_a_shared_cache_directory_is_not_trusted(tmp_path, monkeypatch):
    tools = toolchain.compiler()
    source = '#include <stdint.h>\n__attribute__((visibility("default"))) int ia_probe(int x) { return x + 2; }\n'
    first = toolchain.build(source, tools)
    calls = []
    monkeypatch.setattr(toolchain, "_run", lambda *a, **k: calls.append(a))
    assert toolchain.build(source, tools) == first and not calls  # from the cache: no compiler run
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert not toolchain._private_dir(shared)
    private = tmp_path / "private"
    assert toolchain._private_dir(private) and not private.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)


# -- threads and the direct runs --------------------------------------------------------------------------
def _split_program():
    b = ProgramBuilder()
    conv = b.conv2d(
        b.input("x", (1, 64, 64, 16), "fp32"), b.const(RNG.standard_normal((64, 3, 3, 16)).astype(np.float32))
    )
    b.output(b.clamp(conv, 0.0, 6.0, nan_mode="propagate"))
    return native.compile(interpret(b.build()))


def _pool_threads(monkeypatch, threads: int) -> None:
    monkeypatch.setattr(pool, "split_threads", lambda: threads)
    monkeypatch.setattr(pool, "_limit_now", 0)  # passed down again at the next run


def test_a_large_operator_split_across_threads_gives_the_same_result(monkeypatch):
    x = RNG.standard_normal((1, 64, 64, 16)).astype(np.float32)
    compiled = _split_program()
    assert compiled._splits  # 37 M multiply-adds: run through the helper pool
    _pool_threads(monkeypatch, 1)
    (alone,) = compiled.run([x])
    _pool_threads(monkeypatch, 2)
    (shared,) = compiled.run([x])
    np.testing.assert_array_equal(alone, shared)


def test_split_programs_run_from_many_threads_at_once_give_each_caller_its_own_result(monkeypatch):
    # One caller at a time owns the pool; the others run their units alone. Either way every caller
    # must get exactly the result of its own input.
    compiled = _split_program()
    _pool_threads(monkeypatch, 2)
    inputs = [RNG.standard_normal((1, 64, 64, 16)).astype(np.float32) for _ in range(4)]
    expected = [compiled.run([x])[0] for x in inputs]
    failures: list[str] = []

    def caller(index: int) -> None:
        for _ in range(10):
            (got,) = compiled.run([inputs[index]])
            if not np.array_equal(got, expected[index]):
                failures.append(f"caller {index}")

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def _run_in_child(compiled, x, queue) -> None:
    queue.put(compiled.run([x])[0])


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_child_runs_split_programs_without_the_parents_helpers(monkeypatch):
    compiled = _split_program()
    _pool_threads(monkeypatch, 2)
    x = RNG.standard_normal((1, 64, 64, 16)).astype(np.float32)
    (expected,) = compiled.run([x])  # the helpers exist in this process now
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_run_in_child, args=(compiled, x, queue))
    child.start()
    got = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    np.testing.assert_array_equal(got, expected)


def _variable_program():
    b = ProgramBuilder()
    var = b.variable("total", (4,), "fp32", np.zeros(4, np.float32))
    b.variable_write(var, b.add(b.variable_read(var), b.input("x", (4,), "fp32")))
    b.output(b.variable_read(var))
    return b.build()


def test_run_direct_is_offered_only_for_programs_without_state_and_checks_its_arrays():
    with ia.open("cpu") as dev:
        acc = dev.accelerator
        stateful = dev.compile(_variable_program())
        assert not acc.runs_direct(stateful.program)
        with pytest.raises(Unsupported):
            acc.run_direct(stateful.program, [np.ones(4, np.float32)], [np.empty(4, np.float32)])
        stateful(np.ones(4, np.float32))
        np.testing.assert_array_equal(stateful(np.ones(4, np.float32))[0], np.full(4, 2, np.float32))

        exe = dev.compile(_sine_program())
        x, out = np.ones(4, np.float32), np.empty(4, np.float32)
        # Runs finish on this thread here: nothing is started to finish later, and Device.host_empty is numpy's.
        assert not acc.starts_direct(exe.program)
        with pytest.raises(Unsupported, match="cannot start a direct run"):
            acc.start_direct(exe.program, [x])
        made = dev.host_empty((2, 3), np.int8)
        assert type(made) is np.ndarray and made.shape == (2, 3) and made.dtype == np.int8
        acc.run_direct(exe.program, [x], [out])
        np.testing.assert_allclose(out, np.sin(x), rtol=1e-6)
        for inputs, outputs in (
            ([x.astype(np.float64)], [out]),
            ([x], [out[:3]]),
            ([x], [x]),  # the output would overwrite the input while it is read
            ([x], [np.broadcast_to(out, (4,))]),  # read-only
            ([np.ones(8, np.float32)[::2]], [out]),  # not contiguous
        ):
            with pytest.raises(InvalidArgument):
                acc.run_direct(exe.program, inputs, outputs)
        # In place through the user API still works: it takes the queue, which copies the input first.
        y = np.linspace(0, 1, 4, dtype=np.float32)
        expected = np.sin(y)
        (same,) = exe(y, out=y)
        assert same is y
        np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_backends_offer_no_direct_runs_unless_they_say_so():
    from ironaccel.backends.cpu.accelerator import CpuAccelerator

    class Queued(CpuAccelerator):
        def _direct(self, program):
            return None

    dev = Device(Queued(), "cpu-queued")
    try:
        exe = dev.compile(_sine_program())
        assert not dev.accelerator.runs_direct(exe.program) and not exe._direct
        np.testing.assert_allclose(exe(np.zeros(4, np.float32))[0], np.zeros(4), atol=0)
    finally:
        dev.close()


def test_rank_zero_tensors_run_directly():
    b = ProgramBuilder()
    x = b.input("x", (), "int32")
    b.output(b.add(x, b.const(np.array(5, np.int32))))
    with ia.open("cpu") as dev:
        exe = dev.compile(b.build())
        (y,) = exe(np.array(-2, np.int32))
        (queued,) = exe.submit(np.array(-2, np.int32)).wait()
    assert y.shape == () and int(y) == 3
    assert queued.shape == () and int(queued) == 3


def test_float_weights_with_infinities_and_nan_compile():
    weights = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32).reshape(2, 1, 1, 2)
    b = ProgramBuilder()
    x = b.input("x", (1, 2, 2, 2), "fp32")
    product = b.matmul(b.input("a", (1, 2, 2), "fp32"), b.const(weights.reshape(1, 2, 2)))
    b.output(b.conv2d(x, b.const(weights)), product)
    inputs = [np.ones((1, 2, 2, 2), np.float32), np.ones((1, 2, 2), np.float32)]
    for want, got in zip(*_both(b.build(), inputs), strict=True):
        _same(want, got)
