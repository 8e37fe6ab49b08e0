"""Pooling: AVG_POOL2D and MAX_POOL2D, separable over the padded input.

Every window is reduced along x first, then along y, with one ufunc over whole rows (:func:`_pool_windows`).
An average sums exactly (int64 minus the zero point, or float64), divides by the count of valid elements
(padding does not count) and, for integers, scales by reciprocal_scale(count) with apply_scale_32's single
rounding. A maximum pads with the type's minimum, or with NaN for fp types under nan_mode IGNORE (which
fmax skips: an all-NaN window stays NaN); float types are compared as float32, which holds each exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ....tosa.attributes import NanPropagationMode
from ....tosa.operators import Op
from ..kernel import KernelContext, kernel
from .products import is_int, zero_point


def _pool_windows(value: np.ndarray, attribute: Any, fill: float, reduce: np.ufunc) -> np.ndarray:
    """Reduce every [kernel] window of the input (padded with ``fill``) with the binary ufunc ``reduce``;
    separable: first along x, then along y."""
    ky, kx = attribute.kernel
    sy, sx = attribute.stride
    top, bottom, left, right = attribute.pad
    n, h, w, c = value.shape
    out_h, out_w = (h + top + bottom - ky) // sy + 1, (w + left + right - kx) // sx + 1
    padded = np.full((n, h + top + bottom, w + left + right, c), fill, value.dtype)
    padded[:, top : top + h, left : left + w] = value
    rows = padded[:, :, 0 : (out_w - 1) * sx + 1 : sx].copy()
    for i in range(1, kx):
        reduce(rows, padded[:, :, i : i + (out_w - 1) * sx + 1 : sx], out=rows)
    acc = rows[:, 0 : (out_h - 1) * sy + 1 : sy].copy()
    for i in range(1, ky):
        reduce(acc, rows[:, i : i + (out_h - 1) * sy + 1 : sy], out=acc)
    return acc


def _valid_counts(size: int, kernel: int, stride: int, pad: int, out_size: int) -> np.ndarray:
    start = np.arange(out_size, dtype=np.int64) * stride - pad
    return np.minimum(start + kernel, size) - np.maximum(start, 0)


@kernel(Op.AVG_POOL2D)
def avg_pool2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    value, in_zp, out_zp = inputs
    attribute = ctx.operator.attribute
    integer = is_int(value)
    work = value.astype(np.int64) - zero_point(in_zp) if integer else value.astype(np.float64)
    total = _pool_windows(work, attribute, 0, np.add)
    _, out_h, out_w, _ = total.shape
    (ky, kx), (sy, sx), (top, _, left, _) = attribute.kernel, attribute.stride, attribute.pad
    count = (
        _valid_counts(value.shape[1], ky, sy, top, out_h)[:, None]
        * _valid_counts(value.shape[2], kx, sx, left, out_w)[None, :]
    )[None, :, :, None]
    if not integer:
        return [(total / count).astype(value.dtype)]
    # reciprocal_scale(count) then apply_scale_32 (single rounding), per distinct count.
    shift_k = np.zeros_like(count)
    for c in np.unique(count):
        shift_k[count == c] = (int(c) - 1).bit_length()
    multiplier = (((1 << 30) + 1) << shift_k) // count
    shift = 30 + shift_k
    scaled = (total * multiplier + (np.int64(1) << (shift - 1))) >> shift
    info = np.iinfo(value.dtype)
    return [np.clip(scaled + zero_point(out_zp), info.min, info.max).astype(value.dtype)]


def _ignores_nan(ctx: KernelContext) -> bool:
    return ctx.operator.attribute.nan_mode == NanPropagationMode.IGNORE


@kernel(Op.MAX_POOL2D)
def max_pool2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    (value,) = inputs
    attribute = ctx.operator.attribute
    if is_int(value):
        return [_pool_windows(value, attribute, np.iinfo(value.dtype).min, np.maximum)]
    # float32 holds every fp16 / bf16 / fp8 value exactly, and the result is one of the inputs.
    wide = value.astype(np.float32)
    if _ignores_nan(ctx):  # padding is NaN, which fmax skips; an all-NaN window stays NaN
        result = _pool_windows(wide, attribute, np.nan, np.fmax)
    else:
        result = _pool_windows(wide, attribute, -np.inf, np.maximum)
    return [result.astype(value.dtype)]
