"""NVFP4 element and scale codes: E2M1 values packed two per byte, FP8 E4M3 block scales.

Layout of one (n, k) weight matrix, row-major along n:

* ``packed`` (n, k/2) uint8: element ``w[i, 2j]`` is the **low** nibble (bits 3..0) of ``packed[i, j]``
  and ``w[i, 2j+1]`` the **high** nibble (bits 7..4) — the order of NVFP4 checkpoints and of
  ``float4_e2m1fn_x2`` elsewhere.
* ``scales`` (n, k/16) float8_e4m3fn: ``scales[i, b]`` scales ``w[i, 16b : 16b+16]``.
* ``tensor_scale`` float32: one for the whole matrix.

A nibble is sign (bit 3), exponent (bits 2..1, bias 1) and mantissa (bit 0): 0, 0.5, 1, 1.5, 2, 3, 4, 6
and their negatives (code 8 is -0). An E4M3 scale is sign, 4 exponent bits (bias 7), 3 mantissa bits;
0x7F and 0xFF are NaN (no infinities; the largest finite value is 448).

Decoding is exact and defined as ``float32(e2m1 * scale) * tensor_scale`` in float32: the first product
has at most 6 significant bits, so it is exact, and the one multiply by the tensor scale rounds once
(to nearest even). A NaN scale makes its 16 elements NaN; a negative scale is honoured. The tables here
are built from the bit definitions, not from ml_dtypes, which the tests use as the independent oracle.
"""

from __future__ import annotations

import numpy as np

from .bounds import BLOCK


def _e2m1_value(code: int) -> float:
    sign = -1.0 if code & 8 else 1.0
    exponent, mantissa = (code >> 1) & 3, code & 1
    if exponent == 0:
        return sign * mantissa * 0.5
    return sign * (1 + mantissa / 2) * 2.0 ** (exponent - 1)


def _e4m3_value(code: int) -> float:
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 15, code & 7
    if exponent == 15 and mantissa == 7:
        return float("nan")
    if exponent == 0:
        return sign * mantissa * 2.0**-9
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


E2M1 = np.array([_e2m1_value(c) for c in range(16)], np.float32)  # value of each 4-bit code
E4M3 = np.array([_e4m3_value(c) for c in range(256)], np.float32)  # value of each 8-bit scale code
E4M3_MAX = 448.0
# Both values of every byte of ``packed``, low nibble first: one gather decodes a whole row.
PAIRS = np.stack([E2M1[np.arange(256) & 15], E2M1[np.arange(256) >> 4]], axis=1)

_E2M1_MAGNITUDES = E2M1[:8].astype(np.float64)
_E2M1_MIDPOINTS = (_E2M1_MAGNITUDES[:-1] + _E2M1_MAGNITUDES[1:]) / 2
_E4M3_FINITE = E4M3[:0x7F].astype(np.float64)  # codes 0x00..0x7E ascend from 0 to 448


def pack(codes: np.ndarray) -> np.ndarray:
    """(..., k) 4-bit codes -> (..., k/2) bytes, element 2j in the low nibble of byte j."""
    codes = codes.astype(np.uint8)
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def unpack(packed: np.ndarray) -> np.ndarray:
    """(..., k/2) bytes -> (..., k) 4-bit codes (the inverse of :func:`pack`)."""
    out = np.empty((*packed.shape[:-1], packed.shape[-1] * 2), np.uint8)
    out[..., 0::2] = packed & 15
    out[..., 1::2] = packed >> 4
    return out


def encode_e2m1(values: np.ndarray) -> np.ndarray:
    """Nearest E2M1 code of each value, ties to the even code, magnitudes past 6 saturating to 6.
    The sign bit follows the value's sign (so -0.0 is code 8); NaN is not accepted by callers."""
    magnitude = np.abs(values.astype(np.float64))
    index = np.searchsorted(_E2M1_MIDPOINTS, magnitude, side="left")
    # A value exactly halfway sits at midpoint ``index``, between codes index and index + 1: take the even one.
    tie = (index < len(_E2M1_MIDPOINTS)) & (magnitude == _E2M1_MIDPOINTS[np.minimum(index, len(_E2M1_MIDPOINTS) - 1)])
    index = np.where(tie & (index % 2 == 1), index + 1, index)
    return (index | (np.signbit(values).astype(np.int64) << 3)).astype(np.uint8)


def encode_e4m3_up(values: np.ndarray) -> np.ndarray:
    """The smallest non-negative finite E4M3 code whose value is >= each value (values in [0, 448])."""
    index = np.searchsorted(_E4M3_FINITE, values.astype(np.float64), side="left")
    return np.minimum(index, len(_E4M3_FINITE) - 1).astype(np.uint8)


def decode(packed: np.ndarray, scale_codes: np.ndarray, tensor_scale: np.ndarray) -> np.ndarray:
    """Exact float32 weights (..., n, k) from packed (..., n, k/2) uint8, scale codes (..., n, k/16) uint8
    and the tensor scale (a float32 per leading index, broadcast against (..., 1, 1))."""
    *lead, n, half = packed.shape
    k = half * 2
    elements = PAIRS[packed].reshape(*lead, n, k // BLOCK, BLOCK)
    scaled = elements * E4M3[scale_codes][..., None]  # exact: at most 6 significant bits
    tensor = np.asarray(tensor_scale, np.float32).reshape(*lead, 1, 1, 1)
    with np.errstate(invalid="ignore"):  # 0 * inf under an infinite tensor scale: NaN, as documented
        return (scaled * tensor).reshape(*lead, n, k)
