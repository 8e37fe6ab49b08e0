"""The Vulkan FP32 tier's data movement, selection, type and integer operators against the CPU backend:
SLICE, PAD, TILE, REVERSE, CONCAT, TRANSPOSE (fp32 and BOOL), GATHER, SCATTER, RESIZE, CAST, the
INT32 / BOOL operators of PRO-FP (ADD, SUB, MUL with shift, INTDIV, logical operators and shifts,
LOGICAL_NOT, SELECT), and REDUCE_MIN / PRODUCT / ALL / ANY.

Everything here is exact (moves bits, compares or computes integers) except RESIZE BILINEAR and
REDUCE_PRODUCT: bilinear weights are rounded to fp32 as the specification's arithmetic does and the
weighted sum is taken in fp32 (the oracle sums in float64), within 4 ulps of the largest corner value;
a product of n factors in fp32 is within n ulps. Measured on lavapipe: bilinear within 1 ulp of the
largest value, products within 2 ulps.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vulkan_fixtures import RNG_SEED, assert_close, clean, dev, normal, program_of, run_both, run_vulkan

__all__ = ["clean", "dev"]  # fixtures, used by name

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.5, -2.5, 1e-40], np.float32)


def _values(kind: str, rng, shape):
    if kind == "bool":
        return np.asarray(rng.random(shape) > 0.5, np.bool_)
    x = normal(rng, shape, 4)
    x.reshape(-1)[: SPECIAL.size] = SPECIAL[: x.size]
    return x


def _exact(dev, build, inputs):
    got, want = run_both(dev, build, inputs)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        assert g.tobytes() == w.tobytes() or (g.dtype.kind == "f" and np.array_equal(g, w, equal_nan=True))


LAYOUT = {
    "slice": lambda b, a: b.slice(a, [1, 0, 2], [2, 3, 3]),
    "pad": lambda b, a: b.pad(a, [0, 2, 1, 0, 3, 1], True if a.dtype.name == "BOOL" else -7.5),
    "tile": lambda b, a: b.tile(a, [2, 1, 3]),
    "reverse": lambda b, a: b.reverse(a, 2),
    "reverse_0": lambda b, a: b.reverse(a, 0),
    "transpose": lambda b, a: b.transpose(a, (2, 0, 1)),
    "concat": lambda b, a: b.concat([a, b.slice(a, [0, 0, 0], [3, 4, 1]), a], 2),
    "concat_0": lambda b, a: b.concat([a, a], 0),
}


@pytest.mark.parametrize("kind", ["fp32", "bool"])
@pytest.mark.parametrize("op", list(LAYOUT))
def test_layout(dev, op, kind):
    x = _values(kind, np.random.default_rng(RNG_SEED), (3, 4, 5))
    _exact(dev, LAYOUT[op], [x])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    data=st.data(),
    kind=st.sampled_from(["fp32", "bool"]),
)
def test_layout_property(dev, shape, data, kind):
    """Random ranks up to six: SLICE, PAD, TILE and REVERSE composed, every element where it belongs."""
    rank = len(shape)
    start = [data.draw(st.integers(0, d - 1)) for d in shape]
    size = [data.draw(st.integers(1, d - s)) for d, s in zip(shape, start, strict=True)]
    padding = [data.draw(st.integers(0, 2)) for _ in range(2 * rank)]
    multiples = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    axis = data.draw(st.integers(0, rank - 1))
    x = _values(kind, np.random.default_rng(RNG_SEED), tuple(shape))

    def build(b, a):
        s = b.slice(a, start, size)
        return b.reverse(b.tile(b.pad(s, padding, False if kind == "bool" else 1.25), multiples), axis)

    _exact(dev, build, [x])


def test_gather_and_scatter(dev):
    rng = np.random.default_rng(RNG_SEED)
    values = normal(rng, (3, 11, 6))
    indices = rng.integers(0, 11, (3, 7)).astype(np.int32)
    updates = normal(rng, (3, 7, 6))
    unique = np.stack([rng.permutation(11)[:7] for _ in range(3)]).astype(np.int32)
    _exact(dev, lambda b, v, i: b.gather(v, i), [values, indices])
    _exact(dev, lambda b, v, i, u: b.scatter(v, i, u), [values, unique, updates])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("c", [1, 3, 6], ids=lambda c: f"C{c}")  # elements of one word from several rows
def test_gather_and_scatter_of_every_integer_width(dev, dtype, c):
    """Narrow elements: GATHER writes whole words, SCATTER sets its bytes of a word with atomics while
    neighbours in the same word are written by other invocations."""
    rng = np.random.default_rng(RNG_SEED + c)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, (3, 11, c), endpoint=True).astype(dtype)
    indices = rng.integers(0, 11, (3, 7)).astype(np.int32)
    updates = rng.integers(info.min, info.max, (3, 7, c), endpoint=True).astype(dtype)
    unique = np.stack([rng.permutation(11)[:7] for _ in range(3)]).astype(np.int32)
    _exact(dev, lambda b, v, i: b.gather(v, i), [values, indices])
    _exact(dev, lambda b, v, i, u: b.scatter(v, i, u), [values, unique, updates])


def test_gather_out_of_range_indices_stay_inside_the_tensor(dev):
    """An index outside [0, K) is unpredictable in TOSA; the kernel must still touch only the tensors."""
    values = normal(np.random.default_rng(RNG_SEED), (2, 4, 3))
    indices = np.array([[0, -1, 4, 1 << 30], [3, 2, -(1 << 30), 1]], np.int32)
    (got,) = run_vulkan(dev, program_of(lambda b, v, i: b.gather(v, i), [values, indices]), [values, indices])
    inside = (indices >= 0) & (indices < 4)
    picked = np.take_along_axis(values, np.clip(indices, 0, 3)[:, :, None], axis=1)
    np.testing.assert_array_equal(got[inside], picked[inside])
    assert np.all(got[~inside] == 0)


RESIZE = [
    # (input NHWC, scale (y_n, y_d, x_n, x_d), offset, border wanted (lowered until the size divides))
    ((1, 5, 6, 2), (4, 2, 3, 1), (0, -1), (2, 0)),
    ((2, 7, 4, 3), (7, 3, 5, 4), (1, 2), (0, 1)),
    ((1, 9, 9, 1), (1, 3, 1, 2), (0, 0), (-2, -1)),
    ((1, 3, 8, 4), (16, 1, 2, 1), (-5, 0), (5, 0)),
    ((1, 6, 5, 2), (3, 8, 2, 5), (5, 1), (0, 1)),
]


def _border(size: int, n: int, d: int, offset: int, wanted: int) -> int:
    """The largest border <= ``wanted`` for which (size - 1) n - offset + border divides by d."""
    return wanted - ((size - 1) * n - offset + wanted) % d


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize(("xs", "scale", "offset", "wanted"), RESIZE, ids=str)
def test_resize(dev, mode, xs, scale, offset, wanted):
    (y_n, y_d, x_n, x_d), (_, ih, iw, _) = scale, xs
    border = (_border(ih, y_n, y_d, offset[0], wanted[0]), _border(iw, x_n, x_d, offset[1], wanted[1]))
    x = normal(np.random.default_rng(RNG_SEED), xs, 3)
    (got,), (want,) = run_both(dev, lambda b, a: b.resize(a, scale, offset, border, mode=mode), [x])
    if mode == "nearest":
        assert_close(got, want, 0, 0.0, "resize nearest")
    else:
        tol = 4 * np.spacing(np.float32(np.abs(x).max()))
        assert got.shape == want.shape
        assert np.all(np.abs(got.astype(np.float64) - want) <= tol)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize(("xs", "scale", "offset", "wanted"), RESIZE, ids=str)
def test_resize_int8_is_exact(dev, mode, xs, scale, offset, wanted):
    """PRO-INT: int8 in, int8 (NEAREST) or the int32 weighted sum (BILINEAR) out, bit for bit."""
    (y_n, y_d, x_n, x_d), (_, ih, iw, _) = scale, xs
    border = (_border(ih, y_n, y_d, offset[0], wanted[0]), _border(iw, x_n, x_d, offset[1], wanted[1]))
    x = np.random.default_rng(RNG_SEED).integers(-128, 127, xs, endpoint=True).astype(np.int8)
    x.flat[:2] = -128, 127
    out = "int8" if mode == "nearest" else "int32"
    (got,), (want,) = run_both(dev, lambda b, a: b.resize(a, scale, offset, border, mode=mode, out_dtype=out), [x])
    assert want.dtype == (np.int8 if mode == "nearest" else np.int32)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


CAST_FROM_FP32 = np.concatenate(
    [
        SPECIAL,
        np.array([127.5, 128.0, -128.5, -129.0, 32767.5, -32768.5, 40000.0, 2.1e9], np.float32),
        np.array([2147483520.0, 2147483648.0, -2147483648.0, 3e9, -3e9], np.float32),
        normal(np.random.default_rng(RNG_SEED), (64,), 1000),
    ]
)


@pytest.mark.parametrize("to", ["int8", "int16", "int32"])
def test_cast_from_fp32_rounds_half_to_even_and_saturates(dev, to):
    _exact(dev, lambda b, a: b.cast(a, to), [CAST_FROM_FP32])


@pytest.mark.parametrize("src", [np.int8, np.int16, np.int32])
def test_cast_to_fp32_rounds_once(dev, src):
    info = np.iinfo(src)
    edges = [info.min, info.max, 0, -1, 1]
    if src is np.int32:
        edges += [16777217, 16777219, -16777217, 33554435, 2**30 + 65, 2**31 - 65]
    values = np.concatenate([np.array(edges), np.random.default_rng(RNG_SEED).integers(info.min, info.max, 50)])
    _exact(dev, lambda b, a: b.cast(a, "fp32"), [values.astype(src)])


def test_int32_arithmetic(dev):
    rng = np.random.default_rng(RNG_SEED)
    a = np.concatenate([rng.integers(-(2**31), 2**31, 30), [2**31 - 1, -(2**31), -(2**31), 7, -7, 0]]).astype(np.int32)
    b_ = np.concatenate([rng.integers(-1000, 1000, 30), [1, -1, 1, -2, 2, 5]]).astype(np.int32)
    b_[b_ == 0] = 3
    ops = lambda b, x, y: (b.add(x, y), b.sub(x, y), b.mul(x, y), b.intdiv(x, y))  # noqa: E731
    _exact(dev, ops, [a.reshape(6, 6), b_.reshape(6, 6)])
    _exact(dev, ops, [a.reshape(6, 6), b_[:6].reshape(1, 6)])  # broadcasting


@pytest.mark.parametrize("shift", [1, 7, 31, 32, 40, 63])
def test_int32_mul_with_shift_rounds_the_64_bit_product(dev, shift):
    rng = np.random.default_rng(RNG_SEED + shift)
    # every magnitude, so that some products fit after the shift
    a = (rng.integers(-(2**31), 2**31, 256) >> rng.integers(0, 31, 256)).astype(np.int32)
    b_ = (rng.integers(-(2**31), 2**31, 256) >> rng.integers(0, 31, 256)).astype(np.int32)
    # keep the REQUIREd range: the rounded result must fit int32
    product = (a.astype(object) * b_.astype(object) + (1 << (shift - 1))) >> shift
    keep = np.array([-(2**31) <= int(p) < 2**31 for p in product])
    a, b_ = a[keep], b_[keep]
    assert a.size >= 8
    _exact(dev, lambda b, x, y: b.mul(x, y, b.const(np.array([shift], np.int8))), [a, b_])


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_logical_shifts(dev, dtype):
    rng = np.random.default_rng(RNG_SEED)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (4, 8)).astype(dtype)
    s = rng.integers(0, info.bits, (4, 8)).astype(dtype)
    ops = lambda b, x, y: (b.op("LOGICAL_LEFT_SHIFT", [x, y]), b.op("LOGICAL_RIGHT_SHIFT", [x, y]))  # noqa: E731
    _exact(dev, ops, [a, s])


def test_boolean_operators(dev):
    rng = np.random.default_rng(RNG_SEED)
    p, q = _values("bool", rng, (3, 7, 5)), _values("bool", rng, (3, 1, 5))
    x, y = normal(rng, (3, 7, 5)), normal(rng, (1, 7, 1))

    def build(b, p, q, x, y):
        return (
            b.op("LOGICAL_AND", [p, q]),
            b.op("LOGICAL_OR", [p, q]),
            b.op("LOGICAL_XOR", [p, q]),
            b.op("LOGICAL_NOT", [p]),
            b.select(p, q, b.op("LOGICAL_NOT", [q])),
            b.select(b.greater(x, y), x, y),
            b.reduce_all(p, 1),
            b.reduce_any(p, 2),
        )

    _exact(dev, build, [p, q, x, y])


@pytest.mark.parametrize("mode", ["propagate", "ignore"])
def test_reduce_min_and_product(dev, mode):
    rng = np.random.default_rng(RNG_SEED)
    x = normal(rng, (4, 6, 5))
    x[0, 2, 1] = np.nan
    x[1, :, 3] = np.nan
    x[2, 1, 0] = -np.inf
    (got,), (want,) = run_both(dev, lambda b, a: b.reduce_min(a, 1, nan_mode=mode), [x])
    assert_close(got, want, 0, 0.0, f"reduce_min {mode}")
    y = np.asarray(1.0 + 0.25 * normal(rng, (3, 7, 4)), np.float32)
    (got,), (want,) = run_both(dev, lambda b, a: b.reduce_product(a, 1), [y])
    assert_close(got, want, 7, 0.0, "reduce_product")


@pytest.mark.parametrize("length", [300, 5000, 70000])
def test_long_axes_are_shared_by_a_workgroup_and_keep_walk_order_semantics(dev, length):
    """Beyond lavapipe's 65535 loop iterations per invocation, and where the tree meets interleaved
    partials: the first of equal values (the sign of a zero, ARGMAX's index) and NaN modes still hold."""
    rng = np.random.default_rng(RNG_SEED)
    x = np.asarray(-np.abs(normal(rng, (2, length, 1))), np.float32)
    x[0, length // 3, 0] = -0.0
    x[0, length - 2, 0] = 0.0  # MAX: -0.0 comes first and wins
    x[1, 5, 0] = np.nan
    for mode in ("propagate", "ignore"):

        def build(b, a, mode=mode):
            return (
                b.reduce_max(a, 1, nan_mode=mode),
                b.reduce_min(b.negate(a), 1, nan_mode=mode),
                b.argmax(a, 1, nan_mode=mode),
            )

        _exact(dev, build, [x])
    ones = np.ones((3, length), np.float32)
    (got,), _ = run_both(dev, lambda b, a: b.reduce_sum(a, 1), [ones])
    np.testing.assert_array_equal(got.reshape(-1), np.full(3, length, np.float32))
    flags = np.ones((5, length), np.bool_)
    flags[1, length - 1] = False
    flags[3, length // 2] = False
    _exact(dev, lambda b, a: (b.reduce_all(a, 1), b.reduce_any(b.op("LOGICAL_NOT", [a]), 1)), [flags])
