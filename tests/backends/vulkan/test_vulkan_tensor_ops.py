"""The Vulkan FP32 tier's tensor operators against the CPU backend (the oracle): CONV2D, CONV3D,
DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, AVG_POOL2D, MAX_POOL2D, ARGMAX.

Convolutions are judged like TOSA judges them, as dot products: |got - want| <= K 2^-23 S + tiny, where
S is the same convolution of |input| and |weight| plus |bias| (the sum of the absolute terms) and K the
number of terms per output. The kernel accumulates with fma in fp32 in a different order from the
oracle's sgemm, so results are not bit-equal; measured on lavapipe the worst was 0.11 K 2^-23 S.
Pools: MAX exact (it picks an element); AVG within one fp32 rounding of the sum's error bound.
Shapes are chosen to reach every tile width of ``conv.comp`` (16, 32 and 64 columns and rows), partial
tiles, strides, dilations, padding, and both bias forms ([OC] and [1]).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel.backends.cpu import run as cpu_run
from ironaccel.tosa import ProgramBuilder
from vulkan_fixtures import BIG, RNG_SEED, assert_close, clean, dev, normal, run_both

__all__ = ["clean", "dev"]  # fixtures, used by name


def _conv_case(dev, op, x, w, bias, **attrs):
    """Run ``op`` on Vulkan and the CPU with constant weights, and the oracle on absolute values."""

    def build(b, a, weight=w, bias=bias):
        return getattr(b, op)(a, b.const(weight), b.const(bias), **attrs)

    (got,), (want,) = run_both(dev, build, [x])
    b = ProgramBuilder()
    b.output(build(b, b.input("x0", x.shape, "fp32"), np.abs(w), np.abs(bias)))
    (magnitude,) = cpu_run(b.build(), [np.abs(x)])
    return got, want, magnitude


def _assert_dot_product_bound(got, want, magnitude, terms, what):
    assert got.shape == want.shape and got.dtype == np.float32, (got.shape, want.shape)
    bound = (terms + 1) * 2.0**-23 * magnitude.astype(np.float64) + 1e-30
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    worst = float(np.max(err / bound)) if err.size else 0.0
    assert worst <= 1.0, f"{what}: error {worst:.3g} x the dot-product bound"


CONV2D = [
    # (input NHWC, weight [OC, KH, KW, IC], pad, stride, dilation, bias size)
    ((1, 5, 5, 1), (1, 1, 1, 1), (0, 0, 0, 0), (1, 1), (1, 1), 1),
    ((2, 9, 11, 5), (7, 3, 3, 5), (1, 1, 0, 2), (2, 1), (1, 2), 7),
    ((1, 16, 16, 3), (16, 3, 3, 3), (1, 1, 1, 1), (1, 1), (1, 1), 1),
    ((1, 12, 10, 20), (40, 1, 1, 20), (0, 0, 0, 0), (1, 1), (1, 1), 40),
    ((2, 17, 19, 9), (70, 5, 3, 9), (2, 2, 1, 1), (1, 2), (1, 1), 70),
    ((1, 33, 7, 2), (3, 2, 2, 2), (0, 1, 1, 0), (2, 2), (3, 1), 3),
]


@pytest.mark.parametrize(("xs", "ws", "pad", "stride", "dilation", "bc"), CONV2D, ids=str)
def test_conv2d(dev, xs, ws, pad, stride, dilation, bc):
    rng = np.random.default_rng(RNG_SEED)
    x, w, bias = normal(rng, xs), normal(rng, ws), normal(rng, (bc,))
    got, want, mag = _conv_case(dev, "conv2d", x, w, bias, pad=pad, stride=stride, dilation=dilation)
    _assert_dot_product_bound(got, want, mag, ws[1] * ws[2] * ws[3], "conv2d")


@pytest.mark.parametrize(
    ("xs", "ws", "pad", "stride", "dilation"),
    [
        ((1, 4, 6, 7, 3), (4, 2, 3, 2, 3), (1, 0, 0, 1, 1, 1), (1, 2, 1), (1, 1, 2)),
        ((2, 3, 5, 5, 8), (20, 1, 1, 1, 8), (0, 0, 0, 0, 0, 0), (1, 1, 1), (1, 1, 1)),
        ((1, 6, 4, 4, 2), (5, 3, 2, 2, 2), (1, 0, 1, 0, 0, 1), (2, 1, 1), (2, 1, 1)),
    ],
    ids=str,
)
def test_conv3d(dev, xs, ws, pad, stride, dilation):
    rng = np.random.default_rng(RNG_SEED)
    x, w, bias = normal(rng, xs), normal(rng, ws), normal(rng, (ws[0],))
    attrs = {"pad": pad, "stride": stride, "dilation": dilation, "acc_type": "fp32"}

    def build(b, a, weight=w, bias=bias):
        return b.op("CONV3D", [a, b.const(weight), b.const(bias), 0.0, 0.0], **attrs)

    (got,), (want,) = run_both(dev, build, [x])
    b = ProgramBuilder()
    b.output(build(b, b.input("x0", xs, "fp32"), np.abs(w), np.abs(bias)))
    (mag,) = cpu_run(b.build(), [np.abs(x)])
    _assert_dot_product_bound(got, want, mag, int(np.prod(ws[1:])), "conv3d")


@pytest.mark.parametrize(
    ("xs", "ws", "pad", "stride", "dilation", "bc"),
    [
        ((1, 16, 16, 32), (3, 3, 32, 1), (1, 1, 1, 1), (1, 1), (1, 1), 32),
        ((2, 9, 11, 5), (3, 3, 5, 2), (1, 1, 1, 1), (1, 2), (1, 1), 10),
        ((1, 8, 7, 3), (2, 3, 3, 4), (0, 1, 2, 0), (2, 1), (2, 2), 1),
    ],
    ids=str,
)
def test_depthwise_conv2d(dev, xs, ws, pad, stride, dilation, bc):
    rng = np.random.default_rng(RNG_SEED)
    x, w, bias = normal(rng, xs), normal(rng, ws), normal(rng, (bc,))
    got, want, mag = _conv_case(dev, "depthwise_conv2d", x, w, bias, pad=pad, stride=stride, dilation=dilation)
    _assert_dot_product_bound(got, want, mag, ws[0] * ws[1], "depthwise_conv2d")


@pytest.mark.parametrize(
    ("xs", "ws", "out_pad", "stride", "bc"),
    [
        ((2, 9, 11, 5), (6, 3, 2, 5), (0, 1, -1, 0), (2, 3), 6),
        ((1, 4, 4, 8), (40, 2, 2, 8), (0, 0, 0, 0), (2, 2), 1),
        ((1, 5, 3, 2), (3, 3, 3, 2), (-2, -1, 1, 2), (1, 1), 3),
        ((1, 1, 1, 4), (2, 4, 4, 4), (0, 0, 0, 0), (1, 1), 2),
    ],
    ids=str,
)
def test_transpose_conv2d(dev, xs, ws, out_pad, stride, bc):
    rng = np.random.default_rng(RNG_SEED)
    x, w, bias = normal(rng, xs), normal(rng, ws), normal(rng, (bc,))
    got, want, mag = _conv_case(dev, "transpose_conv2d", x, w, bias, out_pad=out_pad, stride=stride)
    _assert_dot_product_bound(got, want, mag, ws[1] * ws[2] * ws[3], "transpose_conv2d")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 2),
    size=st.tuples(st.integers(1, 12), st.integers(1, 12)),
    channels=st.tuples(st.integers(1, 9), st.integers(1, 40)),
    kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    seed=st.integers(0, 2**16),
)
def test_conv2d_property(dev, n, size, channels, kernel, stride, dilation, pads, seed):
    """Any valid CONV2D (the padded span a multiple of the stride, as TOSA requires) within the bound."""
    (ih, iw), (ic, oc), (kh, kw) = size, channels, kernel
    pads = list(pads)
    for axis, (extent, k, s, d) in enumerate(((ih, kh, stride[0], dilation[0]), (iw, kw, stride[1], dilation[1]))):
        span = extent - 1 + pads[2 * axis] + pads[2 * axis + 1] - (k - 1) * d
        if span < 0:
            pads[2 * axis + 1] += -span
            span = 0
        pads[2 * axis + 1] += (-span) % s
    rng = np.random.default_rng(seed)
    x, w, bias = normal(rng, (n, ih, iw, ic)), normal(rng, (oc, kh, kw, ic)), normal(rng, (oc,))
    got, want, mag = _conv_case(dev, "conv2d", x, w, bias, pad=tuple(pads), stride=stride, dilation=dilation)
    _assert_dot_product_bound(got, want, mag, kh * kw * ic, "conv2d")


POOLS = [
    ((2, 9, 11, 5), (3, 2), (2, 1), (1, 1, 1, 0)),
    ((1, 8, 8, 16), (2, 2), (2, 2), (0, 0, 0, 0)),
    ((1, 7, 5, 3), (7, 5), (1, 1), (0, 0, 0, 0)),
    ((3, 6, 9, 1), (3, 3), (3, 2), (2, 1, 2, 2)),
]


@pytest.mark.parametrize(("xs", "kernel", "stride", "pad"), POOLS, ids=str)
def test_pools(dev, xs, kernel, stride, pad):
    x = normal(np.random.default_rng(RNG_SEED), xs, 3)
    attrs = {"kernel": kernel, "stride": stride, "pad": pad}
    (avg, mx), (want_avg, want_max) = run_both(
        dev, lambda b, a: (b.avg_pool2d(a, **attrs), b.max_pool2d(a, **attrs)), [x]
    )
    assert_close(mx, want_max, 0, 0.0, "max_pool2d")
    # The sum of k terms in fp32 (k 2^-23 of the absolute sum), then a division within one ulp.
    (abs_avg,) = run_both(dev, lambda b, a: b.avg_pool2d(a, **attrs), [np.abs(x)])[1]
    k = kernel[0] * kernel[1]
    bound = (k + 2) * 2.0**-23 * abs_avg.astype(np.float64)
    assert avg.shape == want_avg.shape
    assert np.all(np.abs(avg.astype(np.float64) - want_avg) <= bound)


@pytest.mark.parametrize("mode", ["propagate", "ignore"])
def test_max_pool2d_nan_modes(dev, mode):
    x = normal(np.random.default_rng(RNG_SEED), (1, 6, 6, 2))
    x[0, 0, 0, 0] = np.nan
    x[0, 2:4, 2:4, 1] = np.nan  # a whole window of NaNs
    x[0, 5, 5, 0] = np.inf
    x[0, 4, 1, 1] = -np.inf
    build = lambda b, a: b.max_pool2d(a, kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0), nan_mode=mode)  # noqa: E731
    (got,), (want,) = run_both(dev, build, [x])
    assert_close(got, want, 0, 0.0, f"max_pool2d {mode}")


@pytest.mark.parametrize("mode", ["propagate", "ignore"])
@pytest.mark.parametrize(("shape", "axis"), [((9,), 0), ((3, 7), 1), ((4, 5, 6), 0), ((2, 3, 4, 5), 2)])
def test_argmax(dev, mode, shape, axis):
    rng = np.random.default_rng(RNG_SEED)
    x = np.round(normal(rng, shape, 2))  # ties: the first index wins
    flat = x.reshape(-1)
    flat[:: max(3, flat.size // 5)] = np.nan
    (got,), (want,) = run_both(dev, lambda b, a: b.argmax(a, axis, nan_mode=mode), [x])
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_a_small_cnn_of_the_new_operators(dev):
    """conv -> depthwise -> pool -> transpose conv -> resize -> pad, one recorded program."""
    rng = np.random.default_rng(5)
    x = normal(rng, (1, 12, 12, 3))

    def build(b, a):
        h = b.conv2d(a, b.const(normal(rng, (8, 3, 3, 3), 0.3)), b.const(normal(rng, (8,))), pad=(1, 1, 1, 1))
        h = b.clamp(h, 0.0, 6.0)
        h = b.depthwise_conv2d(h, b.const(normal(rng, (3, 3, 8, 1), 0.3)), b.const(normal(rng, (8,))), pad=(1, 1, 1, 1))
        h = b.max_pool2d(h, kernel=(2, 2), stride=(2, 2))
        h = b.transpose_conv2d(h, b.const(normal(rng, (4, 2, 2, 8), 0.3)), b.const(normal(rng, (4,))), stride=(2, 2))
        h = b.resize(h, (2, 1, 2, 1), mode="bilinear")
        return b.avg_pool2d(b.pad(h, [0, 0, 1, 1, 1, 1, 0, 0], 0.0), kernel=(3, 3))

    (got,), (want,) = run_both(dev, build, [x], resident_bytes=BIG)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
