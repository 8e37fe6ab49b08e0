"""The CUDA prelude's fp8 conversions (fp8e4m3 and fp8e5m2 to and from fp32), built with the host C compiler
and compared with the CPU backend's definition (``numerics.round_to_float``) and ml_dtypes: every 8-bit
pattern widened, and a dense sample of fp32 patterns narrowed (every value of the top 16 bits with low bits
at and around the rounding points, ties, the overflow boundaries, subnormals, zeros, infinities and NaNs),
bit for bit, NaNs included. fp16 and bf16 narrow through fp32, as CAST's kernels do, over every pattern.
"""

from __future__ import annotations

import ctypes

import host_conversions
import ml_dtypes
import numpy as np
import pytest

from ironaccel.backends.cpu.numerics import round_to_float
from ironaccel.tosa.dtypes import DType

FORMATS = (("e4m3", DType.FP8E4M3, ml_dtypes.float8_e4m3fn), ("e5m2", DType.FP8E5M2, ml_dtypes.float8_e5m2))

# One array entry point per conversion: in[i] -> out[i], as bit patterns.
_WRAPPERS = host_conversions.wrappers(
    tuple(
        entry
        for fmt in ("e4m3", "e5m2")
        for entry in (
            (f"{fmt}_to_f32", "unsigned char", "unsigned", f"ia_bits(ia_{fmt}_to_f32(in[i]))"),
            (f"f32_to_{fmt}", "unsigned", "unsigned char", f"ia_f32_to_{fmt}(ia_float(in[i]))"),
            (f"f16_to_{fmt}", "unsigned short", "unsigned char", f"ia_f32_to_{fmt}(ia_f16_to_f32(in[i]))"),
            (f"bf16_to_{fmt}", "unsigned short", "unsigned char", f"ia_f32_to_{fmt}(ia_bf16_to_f32(in[i]))"),
        )
    )
)


@pytest.fixture(scope="module")
def conversions(tmp_path_factory) -> ctypes.CDLL:
    return host_conversions.build(tmp_path_factory.mktemp("fp8_conversions"), _WRAPPERS)


def _same_bits(got: np.ndarray, want: np.ndarray, inputs: np.ndarray, what: str) -> None:
    wrong = np.flatnonzero(got != want)
    shown = [(hex(int(inputs[i])), hex(int(got[i])), hex(int(want[i]))) for i in wrong[:5]]
    assert not wrong.size, f"{what}: {wrong.size} results differ (input, got, want): {shown}"


@pytest.mark.parametrize(("fmt", "dtype", "numpy_type"), FORMATS, ids=[f[0] for f in FORMATS])
def test_fp8_widens_exactly_for_every_pattern(conversions, fmt, dtype, numpy_type):
    patterns = np.arange(256, dtype=np.uint8)
    got = host_conversions.run(conversions, f"{fmt}_to_f32", patterns, np.uint32)
    want = patterns.view(numpy_type).astype(np.float32)
    nan = np.isnan(want)
    _same_bits(got[~nan], want.view(np.uint32)[~nan], patterns[~nan], f"{fmt} -> fp32")
    values = got.view(np.float32)
    assert np.isnan(values[nan]).all(), f"{fmt} -> fp32: a NaN became a number"
    assert ((got[nan] >> 31) == (patterns[nan] >> 7)).all(), f"{fmt} -> fp32: a NaN lost its sign"
    if dtype is DType.FP8E4M3:  # no infinities: only 0x7F and 0xFF are NaN
        assert np.isfinite(values[~nan]).all()
        assert sorted(np.flatnonzero(nan)) == [0x7F, 0xFF]


def _fp32_patterns() -> np.ndarray:
    """Every value of the top 16 bits (sign, exponent, 7 mantissa bits: every fp8 rounding point lies
    there) with low bits 0, 1, the half and all ones; every fp8 value, the midpoints between neighbours and
    the fp32 values either side of each; the specials; and random patterns."""
    top = np.arange(1 << 16, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x8000, 0xFFFF], dtype=np.uint32)
    dense = (top[:, None] | lows[None, :]).ravel()
    points = []
    for _, _, numpy_type in FORMATS:
        values = np.arange(256, dtype=np.uint8).view(numpy_type).astype(np.float64)
        finite = np.unique(np.abs(values[np.isfinite(values)]))
        step = finite[-1] - finite[-2]  # past the largest value: the next one's midpoint and beyond
        grid = np.concatenate([finite, [finite[-1] + step, finite[-1] + 2 * step]])
        middles = (grid[:-1] + grid[1:]) / 2
        points.append(np.concatenate([grid, middles]).astype(np.float32).view(np.uint32))
    near = np.concatenate(points)
    near = np.concatenate([near, near + 1, near - 1])
    near = np.concatenate([near, near | 0x80000000])
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF,
                         0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF], dtype=np.uint32)  # fmt: skip
    rng = np.random.default_rng(8)
    noise = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([dense, near, specials, noise])


@pytest.mark.parametrize(("fmt", "dtype", "numpy_type"), FORMATS, ids=[f[0] for f in FORMATS])
def test_fp32_narrows_to_fp8_as_the_cpu_backend(conversions, fmt, dtype, numpy_type):
    patterns = _fp32_patterns()
    got = host_conversions.run(conversions, f"f32_to_{fmt}", patterns, np.uint8)
    with np.errstate(invalid="ignore"):  # the reference stores its NaNs through a cast
        want = round_to_float(patterns.view(np.float32).astype(np.float64), dtype).view(np.uint8)
    _same_bits(got, want, patterns, f"fp32 -> {fmt}")
    values = patterns.view(np.float32)
    with np.errstate(all="ignore"):  # ml_dtypes agrees wherever no overflow rule is involved
        library = values.astype(numpy_type).view(np.uint8)
    inside = np.isfinite(values) & (np.abs(values) <= float(ml_dtypes.finfo(numpy_type).max))
    _same_bits(got[inside], library[inside], patterns[inside], f"fp32 -> {fmt} (ml_dtypes)")


@pytest.mark.parametrize(("fmt", "dtype", "numpy_type"), FORMATS, ids=[f[0] for f in FORMATS])
def test_fp16_and_bf16_narrow_to_fp8_once(conversions, fmt, dtype, numpy_type):
    del numpy_type
    patterns = np.arange(1 << 16, dtype=np.uint16)
    for source, narrow in (("f16", np.float16), ("bf16", ml_dtypes.bfloat16)):
        got = host_conversions.run(conversions, f"{source}_to_{fmt}", patterns, np.uint8)
        with np.errstate(invalid="ignore"):
            want = round_to_float(patterns.view(narrow).astype(np.float64), dtype).view(np.uint8)
        _same_bits(got, want, patterns, f"{source} -> {fmt}")


def test_the_overflow_boundaries_and_nans(conversions):
    """The largest finite values; the ties past them, which go to the even neighbour (fp8e4m3's largest
    code is even, fp8e5m2's odd, so its tie overflows); beyond them the NaN (fp8e4m3) or infinity
    (fp8e5m2); and the NaN each format stores, with its sign."""
    values = np.array([448.0, 464.0, 464.0001, 480.0, -np.inf, np.nan, -np.nan], dtype=np.float32)
    got = host_conversions.run(conversions, "f32_to_e4m3", values.view(np.uint32), np.uint8)
    assert [hex(v) for v in got] == ["0x7e", "0x7e", "0x7f", "0x7f", "0xff", "0x7f", "0xff"]
    values = np.array([57344.0, 61439.0, 61440.0, -1e30, np.inf, np.nan, -np.nan], dtype=np.float32)
    got = host_conversions.run(conversions, "f32_to_e5m2", values.view(np.uint32), np.uint8)
    assert [hex(v) for v in got] == ["0x7b", "0x7b", "0x7c", "0xfc", "0x7c", "0x7e", "0xfe"]
