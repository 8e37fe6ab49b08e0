"""Quantize float32 weights to NVFP4 and decode them back.

The scale recipe (see ADR 0012): the tensor scale is the matrix's largest magnitude over 6 x 448, so
every block scale fits E4M3; each block's scale is its largest magnitude over 6 divided by the tensor
scale, rounded **up** to an E4M3 value, so no element of the block passes 6 and none is clipped; each
element is then its value over the block's effective scale rounded to the nearest E2M1 value, ties to
even. Every element's error is thus at most half an E2M1 step of its block's effective scale.

Stacks of matrices (..., n, k) are quantized matrix by matrix, each with its own tensor scale.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from ..core.errors import InvalidArgument
from . import codec
from .bounds import BLOCK

E4M3_DTYPE = np.dtype(ml_dtypes.float8_e4m3fn)
_TENSOR_DIVISOR = 6.0 * codec.E4M3_MAX  # largest E2M1 magnitude times largest E4M3 scale


@dataclasses.dataclass(frozen=True)
class QuantizedWeights:
    """NVFP4 weights of one (n, k) matrix, or a stack (..., n, k) of them.

    ``packed`` (..., n, k/2) uint8, ``scales`` (..., n, k/16) float8_e4m3fn, ``tensor_scale`` a float32
    scalar for one matrix, a float32 array of the leading shape for a stack. ``operands`` is the three in
    the order a projection takes them."""

    packed: np.ndarray
    scales: np.ndarray
    tensor_scale: np.floating | np.ndarray

    @property
    def n(self) -> int:
        return int(self.packed.shape[-2])

    @property
    def k(self) -> int:
        return int(self.packed.shape[-1]) * 2

    @property
    def operands(self) -> tuple[np.ndarray, np.ndarray, np.floating | np.ndarray]:
        return self.packed, self.scales, self.tensor_scale

    def check(self) -> None:
        """Raise InvalidArgument naming the first array whose dtype or shape does not fit the others."""
        packed, scales = self.packed, self.scales
        if not isinstance(packed, np.ndarray) or packed.dtype != np.uint8 or packed.ndim < 2:
            raise InvalidArgument(f"packed must be a uint8 array (..., n, k/2), got {_describe(packed)}")
        lead, n, k = packed.shape[:-2], packed.shape[-2], packed.shape[-1] * 2
        if not isinstance(scales, np.ndarray) or scales.dtype != E4M3_DTYPE:
            raise InvalidArgument(f"scales must be a float8_e4m3fn array, got {_describe(scales)}")
        if k % BLOCK or scales.shape != (*lead, n, k // BLOCK):
            raise InvalidArgument(
                f"scales must have shape {(*lead, n, k // BLOCK)} for packed {packed.shape} (k = {k}, a multiple"
                f" of {BLOCK}), got {scales.shape}"
            )
        tensor = np.asarray(self.tensor_scale)
        if tensor.dtype != np.float32 or tensor.shape != lead:
            raise InvalidArgument(f"tensor_scale must be float32 of shape {lead}, got {_describe(tensor)}")


def _describe(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}"
    return type(value).__name__


def quantize(w: np.ndarray) -> QuantizedWeights:
    """NVFP4 weights of ``w``: (n, k) float32 with k a multiple of 16 (or a stack (..., n, k))."""
    w = np.asarray(w)
    if w.dtype != np.float32:
        raise InvalidArgument(f"w must be float32, got {w.dtype}")
    if w.ndim < 2 or w.shape[-1] % BLOCK or 0 in w.shape:
        raise InvalidArgument(f"w must be (..., n, k) with n, k > 0 and k a multiple of {BLOCK}, got {w.shape}")
    if not np.isfinite(w).all():
        raise InvalidArgument("w has a NaN or infinite element; NVFP4 encodes finite values only")
    *lead, n, k = w.shape
    wide = w.astype(np.float64)
    amax = np.abs(wide).reshape(*lead, -1).max(axis=-1)
    tensor = _tensor_scale(amax)
    blocks = wide.reshape(*lead, n, k // BLOCK, BLOCK)
    ideal = np.abs(blocks).max(axis=-1) / (6.0 * tensor.astype(np.float64)[..., None, None])
    scale_codes = codec.encode_e4m3_up(ideal)
    effective = codec.E4M3[scale_codes].astype(np.float64) * tensor.astype(np.float64)[..., None, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(effective[..., None] > 0, blocks / effective[..., None], 0.0 * blocks)
    codes = codec.encode_e2m1(ratio).reshape(*lead, n, k)
    tensor_scale = np.float32(tensor) if not lead else tensor
    return QuantizedWeights(codec.pack(codes), scale_codes.view(E4M3_DTYPE), tensor_scale)


def _tensor_scale(amax: np.ndarray) -> np.ndarray:
    """amax / (6 * 448) in float32, nudged up where float32 rounding went below it (so no block scale
    would need more than 448), never below float32's smallest normal, and 1 for an all-zero matrix."""
    scale = (amax / _TENSOR_DIVISOR).astype(np.float32)
    low = scale.astype(np.float64) * _TENSOR_DIVISOR < amax
    scale = np.where(low, np.nextafter(scale, np.float32(np.inf)), scale)
    scale = np.maximum(scale, np.finfo(np.float32).tiny)
    return np.where(amax == 0, np.float32(1), scale).astype(np.float32)


def dequantize(q: QuantizedWeights) -> np.ndarray:
    """The exact float32 weights (..., n, k) that ``q`` encodes (see :func:`codec.decode`)."""
    q.check()
    return codec.decode(q.packed, q.scales.view(np.uint8), np.asarray(q.tensor_scale, np.float32))
