"""NVFP4 codes against ml_dtypes as an independent oracle: every E2M1 code in both nibbles, every E4M3
scale code, the encoders' rounding, and the decode rule (exact product, one rounding by the tensor scale)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ironaccel import nvfp4
from ironaccel.nvfp4 import codec

E2M1_ORACLE = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
E4M3_ORACLE = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)


def test_e2m1_table_matches_ml_dtypes_bit_for_bit():
    assert codec.E2M1.view(np.uint32).tolist() == E2M1_ORACLE.view(np.uint32).tolist()  # -0 included


def test_e4m3_table_matches_ml_dtypes_and_nan_codes_are_0x7f_0xff():
    nan = np.isnan(E4M3_ORACLE)
    assert np.flatnonzero(nan).tolist() == [0x7F, 0xFF]
    assert np.isnan(codec.E4M3).tolist() == nan.tolist()
    assert codec.E4M3[~nan].view(np.uint32).tolist() == E4M3_ORACLE[~nan].view(np.uint32).tolist()
    assert codec.E4M3[0x7E] == codec.E4M3_MAX == 448.0


def test_every_byte_decodes_low_nibble_first():
    packed = np.arange(256, dtype=np.uint8).reshape(1, 256)
    codes = codec.unpack(packed)
    assert codes[0, 0::2].tolist() == [b & 15 for b in range(256)]  # element 2j: bits 3..0
    assert codes[0, 1::2].tolist() == [b >> 4 for b in range(256)]  # element 2j + 1: bits 7..4
    assert np.array_equal(codec.pack(codes), packed)
    # The pair table used by decode agrees with unpacking then looking up each nibble in the oracle.
    assert np.array_equal(codec.PAIRS[np.arange(256)].reshape(-1), E2M1_ORACLE[codes[0]], equal_nan=True)


def test_decode_all_nibble_and_scale_codes_against_ml_dtypes():
    # Every byte (both nibbles of every code) under every one of the 256 scale codes, unit tensor scale.
    packed = np.tile(np.repeat(np.arange(256, dtype=np.uint8), 8).reshape(1, 2048), (256, 1))  # k = 4096
    scales = np.tile(np.arange(256, dtype=np.uint8)[:, None], (1, 4096 // 16))
    got = codec.decode(packed, scales, np.float32(1))
    elements = E2M1_ORACLE[codec.unpack(packed)]
    block_scale = np.repeat(E4M3_ORACLE[scales], 16, axis=1)
    want = (elements.astype(np.float64) * block_scale).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    # NaN scales (0x7F, 0xFF) make their whole block NaN, zero elements included.
    assert np.isnan(got[0x7F]).all() and np.isnan(got[0xFF]).all()


@settings(max_examples=200, deadline=None)
@given(
    codes=hnp.arrays(np.uint8, (3, 32), elements=st.integers(0, 255)),
    scales=hnp.arrays(np.uint8, (3, 4), elements=st.integers(0, 0x7E)),
    tensor=st.floats(width=32, allow_nan=False, allow_infinity=False),
)
def test_decode_is_exact_product_then_one_float32_rounding(codes, scales, tensor):
    got = codec.decode(codes, scales, np.float32(tensor))
    elements = E2M1_ORACLE[codec.unpack(codes)].astype(np.float64)
    exact = elements * np.repeat(E4M3_ORACLE[scales], 16, axis=1) * np.float64(np.float32(tensor))
    with np.errstate(over="ignore"):
        want = exact.astype(np.float32)  # float64 holds the exact product (<= 6 + 24 significant bits)
    assert np.array_equal(got, want)


def test_e2m1_encoder_matches_ml_dtypes_on_every_halfway_point_and_beyond():
    grid = np.arange(0, 8.0, 1 / 64)  # every midpoint of E2M1 is a multiple of 1/4
    values = np.concatenate([grid, -grid, [6.0, 6.5, 7.0, 1e9, -1e9]]).astype(np.float32)
    got = codec.encode_e2m1(values)
    want = values.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 15
    assert got.tolist() == want.tolist()


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(np.float32, 64, elements=st.floats(-100, 100, width=32)))
def test_e2m1_encoder_rounds_to_nearest_even_like_ml_dtypes(values):
    got = codec.encode_e2m1(values)
    want = values.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 15
    # ml_dtypes keeps the sign of a value rounding to zero, as the encoder does.
    assert got.tolist() == want.tolist()


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 448, allow_subnormal=True))
def test_scale_encoder_rounds_up_to_the_smallest_e4m3_not_below(value):
    code = int(codec.encode_e4m3_up(np.array([value]))[0])
    assert float(E4M3_ORACLE[code]) >= value  # compared in float64: value may be below float32's range
    assert code == 0 or float(E4M3_ORACLE[code - 1]) < value


def test_quantized_scales_are_ml_dtypes_float8_e4m3fn():
    q = nvfp4.quantize(np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32))
    assert q.scales.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(q.scales.astype(np.float32), codec.E4M3[q.scales.view(np.uint8)])
