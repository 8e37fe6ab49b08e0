"""The Vulkan FP16 tier on lavapipe: the binary16 <-> binary32 conversions against numpy, every fp16
operator against the CPU backend.

* Conversions (shaders/include/fp16.glsl, through CAST): all 65536 fp16 patterns widened, bit for bit
  as numpy widens them (NaN payloads included), and narrowed back to themselves; fp32 patterns at every
  fp16 rounding boundary (each midpoint between neighbouring fp16 values and its fp32 neighbours, the
  overflow threshold and the subnormal range included) plus 2^20 random patterns, narrowed bit for bit
  as numpy narrows them.
* Elementwise operators whose result is fp32 arithmetic rounded once (ADD, SUB, MUL, MAXIMUM, MINIMUM,
  ABS, NEGATE, FLOOR, CEIL, CLAMP, comparisons, CAST): the CPU backend's bits (NaN only as NaN).
* The functions: on every fp16 input, within 1 fp16 ulp of the CPU backend's result, which they equal
  except where the true value lies within an fp32 ulp or two of a rounding boundary.
* Sums, products, pools, convolutions, RESIZE: fp32 accumulation rounded once, within a few fp16 ulps
  of the CPU backend; the data movement operators: exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.backends.cpu import run as cpu_run
from vulkan_fixtures import RNG_SEED, clean, dev, program_of, run_both, run_vulkan

__all__ = ["clean", "dev"]  # fixtures, used by name

ALL_HALVES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype == np.float16 else np.uint32).reshape(-1)


def half_ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in representable fp16 values (0 where both are NaN or both equal, zeros' signs included)."""
    g = _bits(np.asarray(got, np.float16)).astype(np.int64)
    w = _bits(np.asarray(want, np.float16)).astype(np.int64)
    g = np.where(g & 0x8000, -(g & 0x7FFF), g)
    w = np.where(w & 0x8000, -(w & 0x7FFF), w)
    both_nan = np.isnan(got.reshape(-1)) & np.isnan(want.reshape(-1))
    return np.where(both_nan, 0, np.abs(g - w))


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal bit for bit, except that any NaN matches any NaN (TOSA leaves payloads open)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    nan = np.isnan(got) & np.isnan(want)
    bad = (_bits(got) != _bits(want)) & ~nan.reshape(-1)
    if bad.any():
        i = int(np.argmax(bad))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} differ; first: got {got.reshape(-1)[i]!r} want "
            f"{want.reshape(-1)[i]!r} for element {i}"
        )


def random_halves(rng, n: int) -> np.ndarray:
    """Random fp16 bit patterns (every class: subnormals, infinities, NaNs), plus the special values."""
    x = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16).view(np.float16)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 65504.0, 6e-8], np.float16)
    x[: special.size] = special[: x.size]
    return x


# -- the conversions --------------------------------------------------------------------------------------


def test_widen_every_half(dev):
    got = run_vulkan(dev, program_of(lambda b, a: b.cast(a, "fp32"), [ALL_HALVES]), [ALL_HALVES])[0]
    want = ALL_HALVES.astype(np.float32)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_round_trip_every_half(dev):
    build = lambda b, a: b.cast(b.cast(a, "fp32"), "fp16")  # noqa: E731
    got = run_vulkan(dev, program_of(build, [ALL_HALVES]), [ALL_HALVES])[0]
    np.testing.assert_array_equal(_bits(got), _bits(ALL_HALVES))


def _rounding_boundaries() -> np.ndarray:
    """fp32 patterns at and around every point where rounding to fp16 changes its answer: the midpoint
    of each pair of neighbouring non-negative fp16 values (65504 and 65536, the overflow threshold,
    included) and the two fp32 values either side, the fp16 values themselves, both signs."""
    h = ALL_HALVES[:0x7C00].astype(np.float64)  # 0 .. 65504
    upper = np.append(h[1:], 65536.0)
    mid = ((h + upper) / 2).astype(np.float32).view(np.uint32).astype(np.int64)
    exact = h.astype(np.float32).view(np.uint32).astype(np.int64)
    bits = np.concatenate([mid + d for d in (-2, -1, 0, 1, 2)] + [exact])
    bits = bits[(bits >= 0) & (bits < 0x7F800000)]
    bits = np.concatenate([bits, bits | 0x80000000]).astype(np.uint32)
    return bits.view(np.float32)


def test_narrow_rounding_boundaries_and_random_patterns(dev):
    rng = np.random.default_rng(RNG_SEED)
    randoms = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    specials = np.array([0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFA00000, 0x7F801FFF, 1, 0x80000001])
    x = np.concatenate([_rounding_boundaries(), randoms, specials.astype(np.uint32).view(np.float32)])
    got = run_vulkan(dev, program_of(lambda b, a: b.cast(a, "fp16"), [x]), [x])[0]
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    bad = _bits(got) != _bits(want)
    assert not bad.any(), f"{int(bad.sum())} differ, first {x[bad][:4].view(np.uint32)}"


# -- elementwise operators, against the CPU backend -------------------------------------------------------

BINARY = {
    "add": lambda b, x, y: b.add(x, y),
    "sub": lambda b, x, y: b.sub(x, y),
    "mul": lambda b, x, y: b.mul(x, y),
    "maximum": lambda b, x, y: b.maximum(x, y),
    "minimum": lambda b, x, y: b.minimum(x, y),
    "equal": lambda b, x, y: b.equal(x, y),
    "greater": lambda b, x, y: b.greater(x, y),
    "greater_equal": lambda b, x, y: b.greater_equal(x, y),
    "select": lambda b, x, y: b.select(b.greater(x, y), x, y),
}


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_exact(dev, op):
    rng = np.random.default_rng(RNG_SEED)
    x, y = random_halves(rng, 1 << 18), random_halves(rng, 1 << 18)
    got, want = run_both(dev, BINARY[op], [x, y])
    assert_same(got[0], want[0], op)


def test_binary_broadcast_exact(dev):
    rng = np.random.default_rng(RNG_SEED)
    x, y = random_halves(rng, 4 * 5 * 6).reshape(4, 5, 6), random_halves(rng, 6).reshape(1, 1, 6)
    for op in ("add", "mul", "maximum"):
        got, want = run_both(dev, BINARY[op], [x, y])
        assert_same(got[0], want[0], op)


EXACT_UNARY = {
    "abs": lambda b, a: b.abs(a),
    "negate": lambda b, a: b.negate(a),
    "floor": lambda b, a: b.floor(a),
    "ceil": lambda b, a: b.ceil(a),
    "clamp": lambda b, a: b.clamp(a, -0.75, 1.25),
    "clamp_ignore": lambda b, a: b.clamp(a, -3.0, 1000.0, nan_mode="ignore"),
    "reciprocal": lambda b, a: b.reciprocal(a),
    "to_fp32": lambda b, a: b.cast(a, "fp32"),
    "to_int8": lambda b, a: b.cast(a, "int8"),
    "to_int16": lambda b, a: b.cast(a, "int16"),
    "to_int32": lambda b, a: b.cast(a, "int32"),
}


@pytest.mark.parametrize("op", list(EXACT_UNARY))
def test_unary_exact_on_every_half(dev, op):
    got, want = run_both(dev, EXACT_UNARY[op], [ALL_HALVES])
    assert_same(got[0], want[0], op)


FUNCTIONS = {
    "exp": lambda b, a: b.exp(a),
    "log": lambda b, a: b.log(a),
    "rsqrt": lambda b, a: b.rsqrt(a),
    "sin": lambda b, a: b.sin(a),
    "cos": lambda b, a: b.cos(a),
    "tanh": lambda b, a: b.tanh(a),
    "sigmoid": lambda b, a: b.sigmoid(a),
    "erf": lambda b, a: b.erf(a),
}


@pytest.mark.parametrize("op", list(FUNCTIONS))
def test_functions_on_every_half(dev, op):
    """Within 1 fp16 ulp of the CPU backend everywhere, and equal nearly everywhere (a differing result
    means the true value lay within the fp32 kernel's error of a rounding boundary)."""
    got, want = run_both(dev, FUNCTIONS[op], [ALL_HALVES])
    d = half_ulps(got[0], want[0])
    if op in ("sin", "cos"):  # their argument reduction is exact below 6434 (math.glsl); 2 ulp beyond
        far = np.abs(ALL_HALVES.astype(np.float32)) >= 4096
        assert d[far].max() <= 2, f"{op}: worst {int(d[far].max())} fp16 ulp beyond 4096"
        d = np.where(far, 0, d)
    assert d.max() <= 1, f"{op}: worst {int(d.max())} fp16 ulp at {ALL_HALVES[int(np.argmax(d))]!r}"
    assert np.count_nonzero(d) <= 64, f"{op}: {np.count_nonzero(d)} of 65536 differ by 1 ulp"


def test_pow(dev):
    rng = np.random.default_rng(RNG_SEED)
    x = np.abs(rng.standard_normal(1 << 16) * 4).astype(np.float16)
    y = (rng.standard_normal(1 << 16) * 3).astype(np.float16)
    got, want = run_both(dev, lambda b, a, e: b.pow(a, e), [x, y])
    d = half_ulps(got[0], want[0])
    assert d.max() <= 1, f"pow: worst {int(d.max())} fp16 ulp"


@pytest.mark.parametrize("src", [np.int8, np.int16, np.int32])
def test_cast_integers_to_fp16(dev, src):
    info = np.iinfo(src)
    values = np.arange(-32768, 32768, dtype=np.int64)
    if src is np.int32:
        rng = np.random.default_rng(RNG_SEED)
        edges = [info.min, info.max, 65504, 65519, 65520, 65535, 1 << 24, (1 << 24) + 1, -65520, -65519]
        values = np.concatenate([values, rng.integers(info.min, info.max, 1 << 16), edges])
    values = np.unique(np.clip(values, info.min, info.max)).astype(src)
    got, want = run_both(dev, lambda b, a: b.cast(a, "fp16"), [values])
    assert_same(got[0], want[0], f"{np.dtype(src)} -> fp16")


def test_cast_fp32_to_fp16_matches_cpu(dev):
    x = _rounding_boundaries()
    got, want = run_both(dev, lambda b, a: b.cast(a, "fp16"), [x])
    assert_same(got[0], want[0], "fp32 -> fp16")


# -- everything else ----------------------------------------------------------------------------------


def _halves(rng, shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def _close(got, want, max_ulp: int, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype == np.float16, (got.dtype, want.dtype)
    d = half_ulps(got, want)
    assert d.max() <= max_ulp, f"{what}: worst {int(d.max())} fp16 ulp: {got.reshape(-1)[np.argmax(d)]!r}"


@pytest.mark.parametrize("acc", ["fp16", "fp32"])
def test_convolutions_and_pools(dev, acc):
    rng = np.random.default_rng(RNG_SEED)
    x = _halves(rng, (2, 9, 10, 5))
    w, bias = _halves(rng, (6, 3, 3, 5), 0.3), _halves(rng, (6,))
    dw, dbias = _halves(rng, (3, 3, 5, 2), 0.3), _halves(rng, (10,))
    tw = _halves(rng, (4, 2, 3, 5), 0.3)

    def build(b, a):
        return (
            b.conv2d(a, b.const(w), b.const(bias), pad=(1, 1, 0, 2), stride=(2, 1), acc_type=acc),
            b.depthwise_conv2d(a, b.const(dw), b.const(dbias), pad=(1, 1, 1, 1), acc_type=acc),
            b.transpose_conv2d(a, b.const(tw), b.const(bias[:4]), stride=(2, 2), acc_type=acc),
            b.avg_pool2d(a, kernel=(3, 3), stride=(2, 2), pad=(1, 1, 1, 0), acc_type=acc),
            b.max_pool2d(a, kernel=(2, 2), stride=(1, 2)),
        )

    got, want = run_both(dev, build, [x])
    for what, g, wnt in zip(("conv2d", "depthwise", "transpose_conv2d", "avg_pool"), got, want, strict=False):
        _close(g, wnt, 2, f"{what} acc {acc}")
    assert_same(got[4], want[4], "max_pool2d")


def test_reductions(dev):
    rng = np.random.default_rng(RNG_SEED)
    x = _halves(rng, (6, 300, 5))
    x[0, 3, 0] = np.nan
    small = (1 + rng.random((4, 12, 3)) * 0.25).astype(np.float16)
    got, want = run_both(
        dev,
        lambda b, a: (b.reduce_max(a, 1), b.reduce_min(a, 1, nan_mode="ignore"), b.argmax(a, 1)),
        [x],
    )
    for what, g, w in zip(("reduce_max", "reduce_min", "argmax"), got, want, strict=True):
        assert_same(g, w, what)
    got, want = run_both(dev, lambda b, a: (b.reduce_sum(a, 1), b.reduce_product(a, 1)), [small])
    _close(got[0], want[0], 1, "reduce_sum")
    _close(got[1], want[1], 1, "reduce_product")


def test_data_movement_exact(dev):
    rng = np.random.default_rng(RNG_SEED)
    x = random_halves(rng, 3 * 4 * 5).reshape(3, 4, 5)

    def build(b, a):
        return (
            b.slice(a, [1, 0, 2], [2, 3, 3]),
            b.pad(a, [0, 2, 1, 0, 3, 1], -7.5),
            b.tile(a, [2, 1, 3]),
            b.reverse(a, 2),
            b.transpose(a, (2, 0, 1)),
            b.concat([a, b.slice(a, [0, 0, 0], [3, 4, 1]), a], 2),
            b.reshape(a, (60,)),
            b.identity(a),
        )

    got, want = run_both(dev, build, [x])
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.tobytes() == w.tobytes(), f"output {i}"


def test_gather_scatter(dev):
    rng = np.random.default_rng(RNG_SEED)
    values = random_halves(rng, 2 * 7 * 3).reshape(2, 7, 3)
    indices = rng.integers(0, 7, (2, 4)).astype(np.int32)
    unique = np.stack([rng.permutation(7)[:4] for _ in range(2)]).astype(np.int32)
    updates = random_halves(rng, 2 * 4 * 3).reshape(2, 4, 3)
    got, want = run_both(dev, lambda b, v, i: b.gather(v, i), [values, indices])
    assert_same(got[0], want[0], "gather")
    got, want = run_both(dev, lambda b, v, i, u: b.scatter(v, i, u), [values, unique, updates])
    assert_same(got[0], want[0], "scatter")


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_resize(dev, mode):
    rng = np.random.default_rng(RNG_SEED)
    x = _halves(rng, (1, 5, 6, 3))
    got, want = run_both(dev, lambda b, a: b.resize(a, (4, 2, 3, 2), (0, 0), (2, 1), mode=mode), [x])
    if mode == "nearest":
        assert_same(got[0], want[0], "resize nearest")
        return
    # The CPU backend rounds every step to fp16 as the specification does, the kernel computes in fp32
    # and rounds once: apart by a few roundings of values the size of the largest corner.
    err = np.abs(got[0].astype(np.float64) - want[0].astype(np.float64))
    bound = 4 * 2.0**-11 * float(np.max(np.abs(x.astype(np.float64))))
    assert err.max() <= bound, (err.max(), bound)


def test_mixed_program_with_fp16_constants(dev):
    """fp16 constants widened at load, fp16 intermediates, an fp32 result: one program, both tiers."""
    rng = np.random.default_rng(RNG_SEED)
    x = _halves(rng, (4, 8))
    c = _halves(rng, (1, 8))

    def build(b, a):
        h = b.mul(b.add(a, b.const(c)), b.const(c))
        return b.cast(b.sigmoid(h), "fp32"), b.reduce_max(h, 1)

    program = program_of(build, [x])
    got = run_vulkan(dev, program, [x])
    want = cpu_run(program, [x])
    assert got[0].dtype == np.float32
    assert np.max(np.abs(got[0] - want[0])) <= 2.0**-10
    assert_same(got[1], want[1], "reduce_max")
