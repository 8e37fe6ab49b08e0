"""The CPU backend's exact numeric helpers against straightforward Python-int restatements of the spec's
pseudocode (scale helpers, shifts, table lookup) and against numpy / ml_dtypes for float rounding
(exhaustively over every fp8, fp16 and bf16 bit pattern)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ironaccel.backends.cpu import numerics
from ironaccel.tosa.attributes import NanPropagationMode
from ironaccel.tosa.dtypes import DType

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in cast:RuntimeWarning")

INT32 = st.integers(-(2**31), 2**31 - 1)
INT48 = st.integers(-(2**47), 2**47 - 1)


# -- Python-int reference implementations, written from the pseudocode --------------------------------
def to_int32(value: int) -> int:
    """static_cast<int32_t>: keep the low 32 bits, signed."""
    return ((value + 2**31) % 2**32) - 2**31


def ref_apply_scale_32(value: int, multiplier: int, shift: int, double_round: bool) -> int:
    round_ = 1 << (shift - 1)
    if double_round and shift > 31:
        round_ += (1 << 30) if value >= 0 else -(1 << 30)
    return to_int32((value * multiplier + round_) >> shift)  # Python's >> on ints is an arithmetic shift


def ref_apply_scale_16(value: int, multiplier: int, shift: int) -> int:
    return to_int32((value * multiplier + (1 << (shift - 1))) >> shift)


def ref_lookup_16(table: list[int], value: int) -> int:
    clipped = min(max(value, -32768), 32767)
    index, fraction = (clipped + 32768) >> 7, clipped & 0x7F
    base, following = table[index], table[index + 1]
    return (base << 7) + (following - base) * fraction


# -- apply_scale --------------------------------------------------------------------------------------
@st.composite
def scale32_args(draw):
    """Arguments inside apply_scale_32's REQUIREs: multiplier >= 0, 2 <= shift <= 62, value in range."""
    shift = draw(st.integers(2, 62))
    bound = min(1 << (shift - 1), 2**31)
    value = draw(st.integers(-bound, bound - 1) | st.sampled_from([-bound, bound - 1, 0, -1]))
    multiplier = draw(st.integers(0, 2**31 - 1) | st.sampled_from([0, 1, 1 << 30, 2**31 - 1]))
    return value, multiplier, shift


@given(scale32_args(), st.booleans())
@settings(max_examples=400, deadline=None)
def test_apply_scale_32_matches_the_pseudocode(args, double_round):
    value, multiplier, shift = args
    got = numerics.apply_scale_32(np.array([value]), np.array([multiplier]), np.array([shift]), double_round)
    assert int(got[0]) == ref_apply_scale_32(value, multiplier, shift, double_round)


@given(INT48, st.integers(0, 2**15 - 1), st.integers(2, 62))
@settings(max_examples=400, deadline=None)
def test_apply_scale_16_matches_the_pseudocode(value, multiplier, shift):
    got = numerics.apply_scale_16(np.array([value]), np.array([multiplier]), np.array([shift]))
    assert int(got[0]) == ref_apply_scale_16(value, multiplier, shift)


@given(
    st.integers(-(2**48), 2**48),
    st.integers(-(2**31), 2**31),
    st.integers(0, 63),
    st.integers(-(2**62), 2**62),
)
@settings(max_examples=500, deadline=None)
def test_multiply_round_shift_is_exact_beyond_int64_products(value, multiplier, shift, round_):
    """The 80-bit products of a 48-bit value and a 32-bit multiplier never overflow the int64 pieces."""
    expected = (value * multiplier + round_) >> shift
    got = numerics.multiply_round_shift(
        np.array([value]), np.array([multiplier]), np.array([shift]), np.array([round_])
    )
    if -(2**63) <= expected < 2**63:
        assert int(got[0]) == expected


def test_apply_scale_vectorised_per_channel_and_edges():
    values = np.array([[-(2**31), 2**31 - 1, 0, -1]] * 3).T  # 4 x 3, channels along the last axis
    multipliers = np.array([1 << 30, 2**31 - 1, 12345])
    shifts = np.array([30, 62, 2])
    got = numerics.apply_scale_32(values, multipliers, shifts)
    for (i, c), v in np.ndenumerate(values):
        if shifts[c] == 2 and not -2 <= v < 2:
            continue  # outside the REQUIRE: unpredictable
        assert got[i, c] == ref_apply_scale_32(int(v), int(multipliers[c]), int(shifts[c]), False)
    # double rounding only changes results for shift > 31
    v = np.array([3 << 20, -(3 << 20)])
    assert numerics.apply_scale_32(v, 1 << 30, 31, True).tolist() == numerics.apply_scale_32(v, 1 << 30, 31).tolist()
    assert numerics.apply_scale_32(np.array([1]), 1 << 30, 32, True).tolist() == [1]  # 0.25 + 0.25 + 0.5 rounds up
    assert numerics.apply_scale_32(np.array([1]), 1 << 30, 32).tolist() == [0]


@given(st.lists(st.integers(1, 2**31 - 1), min_size=1, max_size=30))
def test_reciprocal_scale_matches_the_pseudocode(values):
    multiplier, shift = numerics.reciprocal_scale(np.array(values))
    for v, m, s in zip(values, multiplier.tolist(), shift.tolist(), strict=True):
        k = (v - 1).bit_length()  # 32 - count_leading_zeros(v - 1)
        assert (m, s) == ((((1 << 30) + 1) << k) // v, 30 + k)
        assert 1 << 30 <= m < 1 << 31


@given(st.integers(-(2**62), 2**62), st.integers(0, 63))
@settings(max_examples=300, deadline=None)
def test_rounding_shift_right(value, shift):
    expected = value if shift == 0 else (value + (1 << (shift - 1))) >> shift
    assert int(numerics.rounding_shift_right(np.array([value]), np.array([shift]))[0]) == expected


# -- saturation, truncation, CLZ, TABLE ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("dtype", "unsigned", "expected"),
    [
        (DType.INT4, False, (-8, 7)),
        (DType.INT8, False, (-128, 127)),
        (DType.INT8, True, (0, 255)),
        (DType.INT16, True, (0, 65535)),
        (DType.INT32, False, (-(2**31), 2**31 - 1)),
        (DType.INT48, False, (-(2**47), 2**47 - 1)),
    ],
)
def test_int_range(dtype, unsigned, expected):
    assert numerics.int_range(dtype, unsigned) == expected


def test_saturate_wrap_zero_extend():
    big = np.array([-(2**40), -129, -128, 127, 128, 2**40])
    assert numerics.saturate(big, DType.INT8).tolist() == [-128, -128, -128, 127, 127, 127]
    unsigned = numerics.saturate(np.array([-5, 0, 200, 300]), DType.INT8, unsigned=True)
    assert unsigned.dtype == np.int8 and unsigned.view(np.uint8).tolist() == [0, 0, 200, 255]
    assert numerics.wrap(np.array([128, 255, 256, -129]), DType.INT8).tolist() == [-128, -1, 0, 127]
    assert numerics.wrap(np.array([8, 15, -9]), DType.INT4).tolist() == [-8, -1, 7]
    assert numerics.wrap(np.array([2**47, 2**48 - 1]), DType.INT48).tolist() == [-(2**47), -1]
    assert numerics.zero_extend(np.array([-1, -128], np.int8), DType.INT8).tolist() == [255, 128]
    assert numerics.zero_extend(np.array([-32768], np.int16), DType.INT16).tolist() == [32768]


@given(st.lists(INT32, min_size=1, max_size=50))
def test_count_leading_zeros(values):
    got = numerics.count_leading_zeros(np.array(values, np.int32))
    assert got.dtype == np.int32
    assert got.tolist() == [32 - (v & 0xFFFFFFFF).bit_length() for v in values]


@given(
    st.lists(st.integers(-32768, 32767), min_size=513, max_size=513), st.lists(st.integers(-32768, 32767), max_size=40)
)
@settings(max_examples=50, deadline=None)
def test_table_lookup_16_matches_the_pseudocode(table, values):
    got = numerics.table_lookup_16(np.array(values, np.int16), np.array(table, np.int16))
    assert got.dtype == np.int32
    assert got.tolist() == [ref_lookup_16(table, v) for v in values]


def test_table_lookup_8_covers_every_input():
    table = np.random.default_rng(1).integers(-128, 128, 256).astype(np.int8)
    values = np.arange(-128, 128, dtype=np.int8)
    assert numerics.table_lookup_8(values, table).tolist() == table.tolist()


# -- float rounding -----------------------------------------------------------------------------------
LOW = {
    DType.FP16: np.dtype(np.float16),
    DType.BF16: np.dtype(ml_dtypes.bfloat16),
    DType.FP8E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
    DType.FP8E5M2: np.dtype(ml_dtypes.float8_e5m2),
}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Same bits, except that any NaN matches any NaN."""
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    nan = np.isnan(fa)
    uint = f"u{a.dtype.itemsize}"
    return bool(np.array_equal(nan, np.isnan(fb)) and np.array_equal(a.view(uint)[~nan], b.view(uint)[~nan]))


@pytest.mark.parametrize("dtype", list(LOW))
def test_every_bit_pattern_round_trips_through_fp32(dtype):
    """All 256 fp8 / 65536 fp16 and bf16 patterns: widening to fp32 agrees with ml_dtypes / numpy and
    our rounding back to the format gives the same pattern."""
    patterns = np.arange(2 ** (8 * LOW[dtype].itemsize), dtype=f"u{LOW[dtype].itemsize}").view(LOW[dtype])
    as_f32 = patterns.astype(np.float32)
    ours_f32 = numerics.to_float64(patterns).astype(np.float32)
    assert _same(ours_f32, as_f32)
    assert _same(numerics.round_to_float(as_f32, dtype), patterns)
    assert _same(numerics.round_to_float(numerics.to_float64(patterns), DType.FP32), as_f32)


@pytest.mark.parametrize("dtype", list(LOW))
def test_fp32_to_low_precision_agrees_with_ml_dtypes(dtype):
    """A million random fp32 bit patterns (every exponent, NaNs, infinities, subnormals) plus the
    midpoints between neighbouring values of the target format, which exercise ties-to-even."""
    rng = np.random.default_rng(7)
    random = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    grid = np.arange(2 ** (8 * LOW[dtype].itemsize), dtype=f"u{LOW[dtype].itemsize}").view(LOW[dtype])
    g = np.sort(grid.astype(np.float64)[np.isfinite(grid.astype(np.float64))])
    midpoints = ((g[:-1] + g[1:]) / 2).astype(np.float32)
    for values in (
        random,
        midpoints,
        np.nextafter(midpoints, np.float32(np.inf)),
        np.nextafter(midpoints, np.float32(-np.inf)),
    ):
        assert _same(numerics.round_to_float(values, dtype), values.astype(LOW[dtype]))


@pytest.mark.parametrize("source", [DType.FP16, DType.BF16])
@pytest.mark.parametrize("target", [DType.FP8E4M3, DType.FP8E5M2, DType.FP16, DType.BF16])
def test_low_precision_to_low_precision_every_pattern(source, target):
    patterns = np.arange(65536, dtype=np.uint16).view(LOW[source])
    expected = patterns.astype(np.float32).astype(LOW[target])  # fp16 / bf16 -> fp32 is exact: one rounding
    assert _same(numerics.round_to_float(numerics.to_float64(patterns), target), expected)


@pytest.mark.parametrize(
    ("dtype", "value", "expected"),
    [
        (DType.FP16, 1 + 2**-11, 1.0),  # tie: even mantissa wins
        (DType.FP16, 1 + 3 * 2**-11, 1 + 2**-9),
        (DType.FP16, 2**-25, 0.0),  # half the smallest subnormal ties to zero
        (DType.FP16, 3 * 2**-25, 2**-23),
        (DType.FP16, 65520.0, math.inf),  # max + half an ulp rounds to infinity
        (DType.FP16, 65519.99, 65504.0),
        (DType.BF16, 1 + 2**-8, 1.0),
        (DType.BF16, 1 + 3 * 2**-8, 1 + 2**-6),
        (DType.FP32, 1 + 2**-24, 1.0),
        (DType.FP32, 1 + 3 * 2**-24, 1 + 2**-22),
        (DType.FP8E4M3, 464.0, 448.0),  # the tie above the largest value goes to the even 448
        (DType.FP8E4M3, 464.5, math.nan),  # above it overflows: NaN, there is no infinity
        (DType.FP8E4M3, -math.inf, math.nan),
        (DType.FP8E4M3, 2**-10, 0.0),
        (DType.FP8E4M3, 3 * 2**-10, 2**-8),
        (DType.FP8E5M2, 61440.0, math.inf),  # the tie above 57344 goes to the even "next" value: inf
        (DType.FP8E5M2, 61439.0, 57344.0),
        (DType.FP8E5M2, -1e10, -math.inf),
    ],
)
def test_round_to_nearest_even_ties_and_overflow(dtype, value, expected):
    got = float(numerics.round_to_float(np.array([value]), dtype).astype(np.float64)[0])
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_round_to_float_keeps_zero_signs_and_nan():
    for dtype in numerics.FLOAT_FORMATS:
        got = numerics.round_to_float(np.array([-0.0, 0.0, np.nan, -1e-300]), dtype).astype(np.float64)
        assert np.signbit(got[[0, 1, 3]]).tolist() == [True, False, True] and np.isnan(got[2])


def test_float_to_int_rounds_half_to_even_and_saturates():
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e10, -1e10, np.inf, -np.inf, np.nan], np.float32)
    expected = [0, 2, 2, 0, -2, -2, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 0]  # NaN (unpredictable) gives 0
    assert numerics.float_to_int(values, DType.INT32).tolist() == expected
    assert numerics.float_to_int(np.array([127.5, -128.5, 300.0]), DType.INT8).tolist() == [127, -128, 127]
    assert numerics.float_to_int(np.array([2.0**31 - 0.5]), DType.INT32).tolist() == [2**31 - 1]


def test_ulp():
    assert numerics.ulp(np.array([1.0, 1.5, 2.0, 0.0]), DType.FP32).tolist() == [2**-23, 2**-23, 2**-22, 2**-149]
    assert numerics.ulp(np.array([1.0, 65504.0]), DType.FP16).tolist() == [2**-10, 32.0]
    assert numerics.ulp(np.array([448.0]), DType.FP8E4M3).tolist() == [32.0]


def test_erf_is_accurate_to_float64():
    x = np.concatenate([np.linspace(-7, 7, 20001), [1e-300, -1e-30, 0.5, 5.9999, 6.0]])
    expected = np.array([math.erf(v) for v in x])
    got = numerics.erf(x)
    assert np.max(np.abs(got - expected) / np.maximum(np.abs(expected), 1e-300)) < 1e-14
    assert np.isnan(numerics.erf(np.array([np.nan]))).all()
    assert numerics.erf(np.array([np.inf, -np.inf])).tolist() == [1.0, -1.0]


# -- NaN propagation ----------------------------------------------------------------------------------
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=32)


@given(st.lists(st.tuples(FLOATS, FLOATS), min_size=1, max_size=20), st.sampled_from(list(NanPropagationMode)[1:]))
def test_maximum_minimum_follow_apply_max_min(pairs, mode):
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    mx, mn = numerics.maximum(a, b, mode), numerics.minimum(a, b, mode)
    assert mx.dtype == np.float32 and mn.dtype == np.float32
    for x, y, hi, lo in zip(a.tolist(), b.tolist(), mx.tolist(), mn.tolist(), strict=True):
        if math.isnan(x) or math.isnan(y):
            if mode == NanPropagationMode.PROPAGATE or (math.isnan(x) and math.isnan(y)):
                assert math.isnan(hi) and math.isnan(lo)
            else:
                keep = y if math.isnan(x) else x
                assert hi == keep and lo == keep
        else:
            assert hi == max(x, y) and lo == min(x, y)


def test_clip_nan_modes_and_integers():
    x = np.array([np.nan, -3.0, 0.5, 7.0], np.float32)
    assert np.isnan(numerics.clip(x, np.float32(-1), np.float32(1))[0])
    assert numerics.clip(x, np.float32(-1), np.float32(1), NanPropagationMode.IGNORE).tolist() == [-1, -1, 0.5, 1]
    assert numerics.clip(np.array([-200, 5, 200], np.int16), np.int16(-100), np.int16(100)).tolist() == [-100, 5, 100]
