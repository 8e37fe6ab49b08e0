"""RESIZE (NEAREST, BILINEAR) of NHWC images, following the specification's pseudocode.

The sampling position of every output row and column is computed once per axis in integers exactly as
the pseudocode does (``y = oy * scale_d + offset``, floor division by ``scale_n``, the remainder as the
fraction), so the choice of source pixels is exact for every type. For integer types the fraction stays
an integer in units of ``1/scale_n`` and the bilinear sum is exact in int64 (int8 -> int32 results,
int16 -> int48). For floating-point types the fraction ``dy = ry / scale_n`` and the weights ``1 - dy``
are rounded to the resize type as the pseudocode's ``resize_t`` arithmetic does (that rounding decides
NEAREST's ``dy >= 0.5``); the weighted sum is then taken in float64 and rounded once, which the
specification's error bound (relative to the largest input) comfortably allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....tosa.attributes import ResizeMode
from ....tosa.operators import Op
from ..kernel import KernelContext, kernel


def _positions(
    out_size: int, in_size: int, numerator: int, denominator: int, offset: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output index: the two source indices (clamped) and the remainder in units of 1/numerator."""
    pos = np.arange(out_size, dtype=np.int64) * denominator + offset
    index = pos // numerator  # floor division, as idiv_floor
    remainder = pos - index * numerator
    return np.maximum(index, 0), np.minimum(index + 1, in_size - 1), remainder


def _in_type(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round float64 values to ``dtype`` and back: one operation of the pseudocode in that type.

    Rounding a float32 / float64 result of an operation on narrower operands to the narrow type gives the
    correctly rounded narrow result (the wide formats have more than twice the precision, so the double
    rounding is innocuous); this emulates fp16 / bf16 / fp32 arithmetic exactly.
    """
    return values.astype(np.float32).astype(dtype).astype(np.float64)


def _fraction(remainder: np.ndarray, numerator: int, dtype: np.dtype) -> np.ndarray:
    r = _in_type(remainder.astype(np.float64), dtype).astype(np.float32)
    n = np.float32(_in_type(np.array([float(numerator)]), dtype)[0])
    return _in_type((r / n).astype(np.float64), dtype)


@kernel(Op.RESIZE)
def resize(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    image, scale, offset, _border = inputs  # border only fixes the output size
    scale_y_n, scale_y_d, scale_x_n, scale_x_d = (int(v) for v in scale.reshape(-1))
    offset_y, offset_x = (int(v) for v in offset.reshape(-1))
    out_decl = ctx.outputs[0]
    _, out_h, out_w, _ = out_decl.shape
    _, in_h, in_w, _ = image.shape
    y0, y1, ry = _positions(out_h, in_h, scale_y_n, scale_y_d, offset_y)
    x0, x1, rx = _positions(out_w, in_w, scale_x_n, scale_x_d, offset_x)
    out_dtype = out_decl.dtype.numpy
    is_float = image.dtype.kind in "fV"
    mode = ctx.operator.attribute.mode

    if mode == ResizeMode.NEAREST:
        if is_float:
            pick_y = _fraction(ry, scale_y_n, image.dtype) >= 0.5
            pick_x = _fraction(rx, scale_x_n, image.dtype) >= 0.5
        else:
            pick_y, pick_x = 2 * ry >= scale_y_n, 2 * rx >= scale_x_n
        rows = np.where(pick_y, y1, y0)
        cols = np.where(pick_x, x1, x0)
        return [image[:, rows][:, :, cols].astype(out_dtype, copy=False)]

    if is_float:
        dy, dx = _fraction(ry, scale_y_n, image.dtype), _fraction(rx, scale_x_n, image.dtype)
        wy = (_in_type(1.0 - dy, image.dtype), dy)
        wx = (_in_type(1.0 - dx, image.dtype), dx)
        work = image.astype(np.float64)
    else:
        wy = (scale_y_n - ry, ry)
        wx = (scale_x_n - rx, rx)
        work = image.astype(np.int64)
    acc = None
    for rows, weight_y in zip((y0, y1), wy, strict=True):
        band = work[:, rows]
        for cols, weight_x in zip((x0, x1), wx, strict=True):
            term = band[:, :, cols] * weight_y[None, :, None, None] * weight_x[None, None, :, None]
            acc = term if acc is None else acc + term
    if not is_float and out_dtype == np.int64:  # int48: the sum of int16 * 2^22 terms fits 48 bits
        return [acc]
    return [acc.astype(out_dtype)]
