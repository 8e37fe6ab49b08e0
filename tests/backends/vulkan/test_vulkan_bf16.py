"""The Vulkan BF16 tier on lavapipe: the bfloat16 <-> binary32 conversions, every bf16 operator against
the CPU backend.

* Conversions (shaders/include/bf16.glsl, through CAST): all 65536 bf16 patterns widened to the fp32
  with the same top half; fp32 patterns at every bf16 rounding boundary plus random patterns narrowed
  as the CPU backend narrows them (round to nearest even, overflow to infinity, NaN to the plain NaN of
  its sign); integers rounded once (int32 from 2^24 up included) and bf16 to integers.
* Operators whose result is fp32 arithmetic rounded once (ADD, SUB, MUL, MAXIMUM, MINIMUM, ABS, NEGATE,
  FLOOR, CEIL, CLAMP, RECIPROCAL, comparisons, SELECT): the CPU backend's bits, NaN only as NaN (fp32
  holds every product of two bf16 values, and 24 >= 2 x 8 + 2 bits make the double rounding of a sum
  or quotient innocuous). Inputs are normal numbers, zeros, infinities and NaNs: bf16 subnormals are
  fp32 subnormals, which a device's fp32 arithmetic may flush (TOSA allows it; NVIDIA's does).
* The functions: within 1 bf16 ulp of the CPU backend on every normal input.
* Sums, pools, convolutions, MATMUL: fp32 accumulation, within the bound of bf16 rounding; data
  movement, GATHER / SCATTER: exact.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ironaccel.backends.vulkan import capability
from ironaccel.backends.vulkan.device import Limits
from vulkan_fixtures import RNG_SEED, clean, dev, program_of, run_both, run_vulkan

__all__ = ["clean", "dev"]  # fixtures, used by name

BF16 = ml_dtypes.bfloat16
ALL_BF16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF16)
_EXP = (ALL_BF16.view(np.uint16) >> 7) & 0xFF
NORMAL_OR_SPECIAL = ALL_BF16[(_EXP != 0) | ((ALL_BF16.view(np.uint16) & 0x7F) == 0)]  # no subnormals


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32).reshape(-1)


def bf16_ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in representable bf16 values (0 where both are NaN)."""
    g = _bits(np.asarray(got, BF16)).astype(np.int64)
    w = _bits(np.asarray(want, BF16)).astype(np.int64)
    g = np.where(g & 0x8000, -(g & 0x7FFF), g)
    w = np.where(w & 0x8000, -(w & 0x7FFF), w)
    both_nan = np.isnan(got.reshape(-1).astype(np.float32)) & np.isnan(want.reshape(-1).astype(np.float32))
    return np.where(both_nan, 0, np.abs(g - w))


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Equal bit for bit, except that any NaN matches any NaN."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    if got.dtype not in (np.dtype(BF16), np.dtype(np.float32)):
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    nan = (np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))).reshape(-1)
    bad = (_bits(got) != _bits(want)) & ~nan
    if bad.any():
        i = int(np.argmax(bad))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} differ; first: got {got.reshape(-1)[i]!r} "
            f"want {want.reshape(-1)[i]!r} for element {i}"
        )


def random_bf16(rng, n: int) -> np.ndarray:
    """Random bf16 patterns without subnormals, with the special values first."""
    x = rng.choice(NORMAL_OR_SPECIAL, n)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 3.3895314e38], BF16)
    x[: special.size] = special[: x.size]
    return x


def _bf16(rng, shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(BF16)


# -- the conversions --------------------------------------------------------------------------------------


def test_widen_every_bf16(dev):
    got = run_vulkan(dev, program_of(lambda b, a: b.cast(a, "fp32"), [ALL_BF16]), [ALL_BF16])[0]
    np.testing.assert_array_equal(_bits(got), ALL_BF16.view(np.uint16).astype(np.uint32) << 16)


def _rounding_boundaries() -> np.ndarray:
    """fp32 patterns at and around every point where rounding to bf16 changes its answer: each
    midpoint between neighbouring non-negative bf16 values (the overflow threshold included) and the
    two fp32 values either side, the bf16 values themselves, both signs."""
    low = np.arange(0x7F80, dtype=np.int64) << 16  # 0 .. the largest finite bf16, as fp32 bits
    mid = low + 0x8000
    bits = np.concatenate([mid + d for d in (-2, -1, 0, 1, 2)] + [low])
    bits = bits[(bits >= 0) & (bits < 0x7F800000)]
    return np.concatenate([bits, bits | 0x80000000]).astype(np.uint32).view(np.float32)


def test_narrow_boundaries_random_patterns_and_nans_as_the_cpu_does(dev):
    rng = np.random.default_rng(RNG_SEED)
    randoms = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    specials = np.array([0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFA00000, 0x7F7FFFFF, 1, 0x80000001])
    x = np.concatenate([_rounding_boundaries(), randoms, specials.astype(np.uint32).view(np.float32)])
    got, want = run_both(dev, lambda b, a: b.cast(a, "bf16"), [x])
    np.testing.assert_array_equal(_bits(got[0]), _bits(want[0]))  # NaNs too: both give 0x7fc0 / 0xffc0


@pytest.mark.parametrize("src", [np.int8, np.int16, np.int32])
def test_integers_round_once_to_bf16(dev, src):
    info = np.iinfo(src)
    values = np.arange(max(info.min, -70000), min(info.max, 70000) + 1, dtype=np.int64)
    if src is np.int32:
        rng = np.random.default_rng(RNG_SEED)
        # ties and near-ties of bf16 at large magnitudes, where rounding through fp32 would round twice
        ties = [(1 << 24) + (1 << 16) + d for d in (-1, 0, 1)] + [(1 << 30) + (3 << 22) + d for d in (-1, 0, 1)]
        edges = [info.min, info.max, info.min + 1, *ties, *(-t for t in ties)]
        values = np.concatenate([values, rng.integers(info.min, info.max, 1 << 16), edges])
    values = np.unique(values).astype(src)
    got, want = run_both(dev, lambda b, a: b.cast(a, "bf16"), [values])
    np.testing.assert_array_equal(_bits(got[0]), _bits(want[0]))


@pytest.mark.parametrize("dst", ["int8", "int16", "int32", "fp32"])
def test_bf16_to_integers_and_fp32(dev, dst):
    got, want = run_both(dev, lambda b, a: b.cast(a, dst), [NORMAL_OR_SPECIAL])
    assert_same(got[0], want[0], f"bf16 -> {dst}")


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
    x, y = random_bf16(rng, 1 << 16), random_bf16(rng, 1 << 16)
    with np.errstate(all="ignore"):  # infinities and NaNs are among the inputs
        wide_x, wide_y = x.astype(np.float64), y.astype(np.float64)
        # results below the normal range would be fp32 subnormals: sums that cancel, tiny products
        result = {"add": wide_x + wide_y, "sub": wide_x - wide_y, "mul": wide_x * wide_y}.get(op)
    if result is not None:
        y = np.where((result != 0) & (np.abs(result) < 1e-37), BF16(1.0), y)
    got, want = run_both(dev, BINARY[op], [x, y])
    assert_same(got[0], want[0], op)


EXACT_UNARY = {
    "abs": lambda b, a: b.abs(a),
    "negate": lambda b, a: b.negate(a),
    "floor": lambda b, a: b.floor(a),
    "ceil": lambda b, a: b.ceil(a),
    "clamp": lambda b, a: b.clamp(a, -0.75, 1.25),
    "clamp_ignore": lambda b, a: b.clamp(a, -3.0, 1000.0, nan_mode="ignore"),
}


@pytest.mark.parametrize("op", list(EXACT_UNARY))
def test_unary_exact(dev, op):
    got, want = run_both(dev, EXACT_UNARY[op], [NORMAL_OR_SPECIAL])
    assert_same(got[0], want[0], op)


FUNCTIONS = {
    "exp": lambda b, a: b.exp(a),
    "log": lambda b, a: b.log(a),
    "rsqrt": lambda b, a: b.rsqrt(a),
    "reciprocal": lambda b, a: b.reciprocal(a),
    "sin": lambda b, a: b.sin(a),
    "cos": lambda b, a: b.cos(a),
    "tanh": lambda b, a: b.tanh(a),
    "sigmoid": lambda b, a: b.sigmoid(a),
    "erf": lambda b, a: b.erf(a),
}


@pytest.mark.parametrize("op", list(FUNCTIONS))
def test_functions(dev, op):
    """Within 1 bf16 ulp of the CPU backend on every input; beyond |x| = 4096 sin and cos reduce their
    argument inexactly (math.glsl) within TOSA's bound, proportional to |x|. Results in the subnormal
    range are left out (flushable)."""
    x = NORMAL_OR_SPECIAL
    got, want = run_both(dev, FUNCTIONS[op], [x])
    d = bf16_ulps(got[0], want[0])
    tiny = np.abs(want[0].astype(np.float32)) < np.finfo(np.float32).tiny
    d = np.where(tiny & (np.abs(got[0].astype(np.float32)) < np.finfo(np.float32).tiny), 0, d)
    if op in ("sin", "cos"):  # beyond 4096 TOSA's bound grows with |x| (math.glsl's reduction)
        with np.errstate(invalid="ignore"):  # NaN inputs
            magnitude = np.abs(x.astype(np.float64))
        far = (magnitude >= 4096) & np.isfinite(magnitude)
        with np.errstate(invalid="ignore"):
            err = np.abs(got[0].astype(np.float64) - want[0].astype(np.float64))
        assert np.all(err[far] <= 2.0**-7 + magnitude[far] * 2.0**-22), f"{op}: beyond 4096"
        d = np.where(far, 0, d)
    assert d.max() <= 1, f"{op}: worst {int(d.max())} bf16 ulp at {x[int(np.argmax(d))]!r}"


# -- products, reductions, data movement --------------------------------------------------------------------


def _close(got, want, max_ulp: int, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype == np.dtype(BF16), (got.dtype, want.dtype)
    d = bf16_ulps(got, want)
    assert d.max() <= max_ulp, f"{what}: worst {int(d.max())} bf16 ulp"


def test_convolutions_pools_and_reductions(dev):
    rng = np.random.default_rng(RNG_SEED)
    x = _bf16(rng, (2, 9, 10, 5))
    w, bias = _bf16(rng, (6, 3, 3, 5), 0.3), _bf16(rng, (6,))
    dw, dbias = _bf16(rng, (3, 3, 5, 2), 0.3), _bf16(rng, (10,))

    def build(b, a):
        return (
            b.conv2d(a, b.const(w), b.const(bias), pad=(1, 1, 0, 2), stride=(2, 1), acc_type="fp32"),
            b.depthwise_conv2d(a, b.const(dw), b.const(dbias), pad=(1, 1, 1, 1), acc_type="fp32"),
            b.avg_pool2d(a, kernel=(3, 3), stride=(2, 2), pad=(1, 1, 1, 0), acc_type="fp32"),
            b.reduce_sum(a, 2),
            b.max_pool2d(a, kernel=(2, 2), stride=(1, 2)),
            b.reduce_max(a, 1),
            b.argmax(a, 3),
        )

    got, want = run_both(dev, build, [x])
    for what, g, wnt in zip(("conv2d", "depthwise", "avg_pool", "reduce_sum"), got, want, strict=False):
        _close(g, wnt, 2, what)
    for what, g, wnt in zip(("max_pool2d", "reduce_max", "argmax"), got[4:], want[4:], strict=True):
        assert_same(g, wnt, what)


def test_matmul_to_fp32(dev):
    rng = np.random.default_rng(RNG_SEED)
    a, c = _bf16(rng, (2, 33, 70)), _bf16(rng, (2, 70, 20))
    got, want = run_both(dev, lambda b, x, y: b.op("MATMUL", [x, y, 0, 0], out_dtype="fp32"), [a, c])
    exact = np.matmul(a.astype(np.float64), c.astype(np.float64))
    magnitude = np.matmul(np.abs(a.astype(np.float64)), np.abs(c.astype(np.float64)))
    assert got[0].dtype == np.float32
    assert np.all(np.abs(got[0] - exact) <= 71 * 2.0**-23 * magnitude + 1e-30)
    assert np.all(np.abs(want[0] - exact) <= 71 * 2.0**-23 * magnitude + 1e-30)


def test_data_movement_gather_scatter_exact(dev):
    rng = np.random.default_rng(RNG_SEED)
    x = random_bf16(rng, 3 * 4 * 5).reshape(3, 4, 5)

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
    values = random_bf16(rng, 2 * 7 * 3).reshape(2, 7, 3)
    unique = np.stack([rng.permutation(7)[:4] for _ in range(2)]).astype(np.int32)
    updates = random_bf16(rng, 2 * 4 * 3).reshape(2, 4, 3)
    got, want = run_both(dev, lambda b, v, i: b.gather(v, i), [values, unique])
    assert_same(got[0], want[0], "gather")
    got, want = run_both(dev, lambda b, v, i, u: b.scatter(v, i, u), [values, unique, updates])
    assert_same(got[0], want[0], "scatter")


def test_the_tier_is_the_bf16_extension():
    """Every bf16 signature the specification's BF16 extension adds to PRO-FP, and only those."""
    from ironaccel.tosa.dtypes import DType
    from ironaccel.tosa.operators import Op
    from ironaccel.tosa.spec import operator as spec_of
    from ironaccel.tosa.target import Extension, Target

    enabled = Target.of(profiles=["pro-fp"], extensions=["bf16"], level="8k").enabled
    wanted = {}
    for op in capability.BF16_OPERATORS:
        spec = spec_of(op)
        rows = [r for r in (spec.typesupport if spec else ()) if r.enabled(enabled)]
        wanted[op] = {frozenset(r.types.items()) for r in rows if DType.BF16 in r.types.values()}
    del wanted[Op.CONST]  # CONST takes every type (each constant is judged where it is used)
    offered = {op: {frozenset(s.types) for s in sigs} for op, sigs in capability.BF16_SIGNATURES.items()}
    assert {op: rows for op, rows in wanted.items() if rows} == offered
    limits = Limits(1 << 30, 1 << 30, 1 << 30, 64, 64, 64, 128, (65535, 65535, 65535), 49152)
    tier = capability.bf16_descriptor(limits)
    assert tier.name == "vulkan-bf16" and DType.BF16 in tier.dtypes
    assert Extension.BF16 in capability.descriptor(limits).target.extensions
