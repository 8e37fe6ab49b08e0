"""Tensor operators: ARGMAX, FFT2D and RFFT2D here; the rest in the modules this one imports.

The kernel table imports this module for the specification's tensor group; importing it registers the
group's other kernels too:

- :mod:`.products`: MATMUL, and how every dot product stays within the specification while BLAS does
  the work (exact integers in the cheapest exact type, floats widened to float32);
- :mod:`.convolution`: CONV2D, CONV3D (im2col and one GEMM per chunk), DEPTHWISE_CONV2D and
  TRANSPOSE_CONV2D;
- :mod:`.pooling`: AVG_POOL2D and MAX_POOL2D.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....tosa.attributes import NanPropagationMode
from ....tosa.operators import Op
from ..kernel import KernelContext, kernel
from . import convolution, pooling, products
from .products import is_int

# Imported for their registrations; named so that a reader finds the group's kernels from here.
__all__ = ["argmax", "convolution", "fft2d", "pooling", "products", "rfft2d"]


@kernel(Op.ARGMAX)
def argmax(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    (value,) = inputs
    axis = ctx.operator.attribute.axis
    out_dtype = ctx.outputs[0].dtype.numpy
    if is_int(value) or ctx.operator.attribute.nan_mode != NanPropagationMode.IGNORE:
        # np.argmax returns the first maximum, and the first NaN if there is one (PROPAGATE).
        wide = value if is_int(value) else value.astype(np.float32)
        return [np.asarray(np.argmax(wide, axis=axis), dtype=out_dtype)]  # rank 1 -> rank 0 array
    # IGNORE: the first element equal to the largest non-NaN value; index 0 when all are NaN.
    wide = value.astype(np.float32)
    best = np.fmax.reduce(wide, axis=axis, keepdims=True)
    return [np.asarray(np.argmax(wide == best, axis=axis), dtype=out_dtype)]


@kernel(Op.FFT2D)
def fft2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    real, imag = inputs
    signal = np.empty(real.shape, np.complex128)
    signal.real, signal.imag = real, imag  # not real + 1j * imag: 1j * inf would put a NaN in the real part
    if ctx.operator.attribute.inverse:
        result = np.fft.ifft2(signal, norm="forward")  # TOSA's inverse is not scaled by 1/(H*W)
    else:
        result = np.fft.fft2(signal)
    return [result.real.astype(np.float32), result.imag.astype(np.float32)]


@kernel(Op.RFFT2D)
def rfft2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    (real,) = inputs
    _, h, w = real.shape
    result = np.fft.rfft2(real.astype(np.float64))
    imag = result.imag.astype(np.float32)
    # Where every angle is a multiple of pi the specification adds no sine terms: exactly zero.
    rows = [0, h // 2] if h > 1 else [0]
    cols = [0, w // 2] if w > 1 else [0]
    imag[:, np.array(rows)[:, None], np.array(cols)[None, :]] = 0.0
    return [result.real.astype(np.float32), imag]
