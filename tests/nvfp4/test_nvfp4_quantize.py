"""quantize / dequantize: shapes and dtypes of the API, the error bound of the scale recipe, exact
round trips of representable weights, stacks, and refusals of bad input."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ironaccel import nvfp4
from ironaccel.core.errors import InvalidArgument
from ironaccel.nvfp4 import codec

E2M1_STEP_BELOW = np.array([0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 2.0, 2.0])  # gap to the next E2M1 magnitude


def test_api_shapes_and_dtypes():
    w = np.random.default_rng(0).standard_normal((24, 96)).astype(np.float32)
    q = nvfp4.quantize(w)
    assert q.packed.shape == (24, 48) and q.packed.dtype == np.uint8
    assert q.scales.shape == (24, 6) and q.scales.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert isinstance(q.tensor_scale, np.float32) and np.ndim(q.tensor_scale) == 0
    w_hat = nvfp4.dequantize(q)
    assert w_hat.shape == (24, 96) and w_hat.dtype == np.float32
    assert (q.n, q.k) == (24, 96)


def _check_bound(w: np.ndarray, q: nvfp4.QuantizedWeights) -> None:
    """Every element within half an E2M1 step of its block's effective scale; no block clipped."""
    w_hat = nvfp4.dequantize(q).astype(np.float64)
    n, k = w.shape
    effective = codec.E4M3[q.scales.view(np.uint8)].astype(np.float64) * np.float64(q.tensor_scale)
    per_element = np.repeat(effective, 16, axis=1)
    block_max = np.abs(w.astype(np.float64)).reshape(n, k // 16, 16).max(axis=-1)
    # No clipping: the block's largest magnitude fits 6 times its effective scale.
    assert (block_max <= 6 * effective * (1 + 2**-20)).all()
    # Rounding: within half the gap between the E2M1 neighbours of |w| / scale (plus float32 decode rounding).
    ratio = np.abs(w) / np.where(per_element > 0, per_element, 1)
    step = E2M1_STEP_BELOW[np.minimum(np.searchsorted(codec.E2M1[:8], ratio, side="right") - 1, 7)]
    bound = 0.5 * step * per_element + np.abs(w_hat) * 2**-24
    assert (np.abs(w_hat - w) <= bound).all()
    # And the effective scale is at most one E4M3 step above the block's ideal (amax / 6), so the bound is tight.
    ideal = block_max / 6
    assert (effective <= ideal * (1 + 2**-3) * (1 + 2**-20) + 2**-9 * np.float64(q.tensor_scale)).all()


@settings(max_examples=150, deadline=None)
@given(
    hnp.arrays(
        np.float32,
        st.tuples(st.integers(1, 4), st.sampled_from([16, 32, 64])),
        elements=st.floats(-1e6, 1e6, width=32, allow_subnormal=True),
    )
)
def test_error_bound_holds_for_any_finite_weights(w):
    _check_bound(w, nvfp4.quantize(w))


@pytest.mark.parametrize("scale", [1e-30, 1e-3, 1.0, 3e4, 1e37])
def test_error_bound_across_magnitudes(scale):
    w = (np.random.default_rng(1).standard_normal((32, 128)) * scale).astype(np.float32)
    q = nvfp4.quantize(w)
    _check_bound(w, q)
    error = nvfp4.dequantize(q).astype(np.float64) - w
    relative = np.linalg.norm(error) / np.linalg.norm(w.astype(np.float64))
    assert relative < 0.12  # Gaussian weights: about 0.10 with this recipe


def test_representable_weights_round_trip_exactly():
    # Each block holds a 6 (so amax / 6 is its scale exactly) and one block has the largest scale, 448
    # (so amax / (6 * 448) is the tensor scale exactly): quantize must find every code again.
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 16, (8, 64)).astype(np.uint8)
    codes[:, ::16] = 7
    scale_codes = rng.integers(1, 0x7F, (8, 4)).astype(np.uint8)
    scale_codes[3, 2] = 0x7E
    tensor = np.float32(2.0**-10)
    w = codec.decode(codec.pack(codes), scale_codes, tensor)
    q = nvfp4.quantize(w)
    assert q.tensor_scale == tensor
    assert np.array_equal(q.scales.view(np.uint8), scale_codes)
    assert np.array_equal(q.packed, codec.pack(codes))
    assert np.array_equal(nvfp4.dequantize(q), w)


def test_zero_and_negative_zero():
    w = np.zeros((2, 32), np.float32)
    w[1] = -0.0
    q = nvfp4.quantize(w)
    assert q.tensor_scale == 1 and not q.scales.view(np.uint8).any()
    w_hat = nvfp4.dequantize(q)
    assert np.array_equal(w_hat, w) and np.signbit(w_hat[1]).all()


def test_stacks_quantize_matrix_by_matrix():
    w = np.random.default_rng(3).standard_normal((3, 8, 32)).astype(np.float32)
    w[1] *= 1000
    q = nvfp4.quantize(w)
    assert q.packed.shape == (3, 8, 16) and q.scales.shape == (3, 8, 2)
    assert q.tensor_scale.shape == (3,) and q.tensor_scale.dtype == np.float32
    w_hat = nvfp4.dequantize(q)
    for i in range(3):
        one = nvfp4.quantize(w[i])
        assert np.array_equal(q.packed[i], one.packed) and q.tensor_scale[i] == one.tensor_scale
        assert np.array_equal(w_hat[i], nvfp4.dequantize(one))


@pytest.mark.parametrize(
    ("w", "words"),
    [
        (np.zeros((4, 24), np.float32), "multiple of 16"),
        (np.zeros((0, 16), np.float32), "n, k > 0"),
        (np.zeros(16, np.float32), "(..., n, k)"),
        (np.zeros((4, 16), np.float64), "float32"),
        (np.full((4, 16), np.nan, np.float32), "NaN or infinite"),
        (np.full((4, 16), np.inf, np.float32), "NaN or infinite"),
    ],
)
def test_quantize_refuses_bad_weights(w, words):
    with pytest.raises(InvalidArgument, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        nvfp4.quantize(w)


def test_dequantize_names_the_inconsistent_array():
    q = nvfp4.quantize(np.ones((4, 32), np.float32))
    with pytest.raises(InvalidArgument, match="packed"):
        nvfp4.dequantize(nvfp4.QuantizedWeights(q.packed.astype(np.int8), q.scales, q.tensor_scale))
    with pytest.raises(InvalidArgument, match="scales must be a float8"):
        nvfp4.dequantize(nvfp4.QuantizedWeights(q.packed, q.scales.view(np.uint8), q.tensor_scale))
    with pytest.raises(InvalidArgument, match="scales must have shape"):
        nvfp4.dequantize(nvfp4.QuantizedWeights(q.packed, q.scales[:, :1], q.tensor_scale))
    with pytest.raises(InvalidArgument, match="tensor_scale"):
        nvfp4.dequantize(nvfp4.QuantizedWeights(q.packed, q.scales, np.float64(1)))
