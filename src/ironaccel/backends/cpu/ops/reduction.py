"""Reductions along one axis, keeping it as a dimension of size 1.

* REDUCE_ALL / REDUCE_ANY: exact on bool.
* REDUCE_MAX / REDUCE_MIN: exact (the result is one of the inputs). ``nan_mode`` PROPAGATE gives NaN
  when any element is NaN (``np.max``); IGNORE skips NaNs and gives NaN only for an all-NaN slice
  (``fmax.reduce``). bf16 / fp8 go through float32, which holds them exactly.
* REDUCE_SUM: int32 adds exactly in int64 and wraps to int32: overflow is a REQUIRE in the
  specification (unpredictable), so any result is allowed and wrapping keeps the CPU deterministic.
  Floating-point sums are taken in float64 and rounded once to the output type: the specification
  judges them as a dot product against fp64, which a more accurate sum always meets.
* REDUCE_PRODUCT: float64 product rounded once to the output type (checked against fp64 too).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....tosa.attributes import NanPropagationMode
from ....tosa.operators import Op
from ..kernel import KernelContext, kernel


def _axis(ctx: KernelContext) -> int:
    return ctx.operator.attribute.axis


def _is_float(value: np.ndarray) -> bool:
    # ml_dtypes types (bf16, fp8) are not np.floating subclasses; their kind is "V".
    return value.dtype.kind in "fV"


# The ufuncs' reduce methods directly: np.all / np.sum / ... add a Python layer that costs more than the
# reduction itself on small tensors, and call the same reduce underneath.
@kernel(Op.REDUCE_ALL)
def reduce_all(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(np.logical_and.reduce(np.asarray(inputs[0], np.bool_), axis=_axis(ctx), keepdims=True))]


@kernel(Op.REDUCE_ANY)
def reduce_any(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(np.logical_or.reduce(np.asarray(inputs[0], np.bool_), axis=_axis(ctx), keepdims=True))]


def _extremum(ctx: KernelContext, value: np.ndarray, propagate: np.ufunc, ignore: np.ufunc) -> np.ndarray:
    if not _is_float(value):
        return propagate.reduce(value, axis=_axis(ctx), keepdims=True)
    ufunc = ignore if ctx.operator.attribute.nan_mode == NanPropagationMode.IGNORE else propagate
    wide = value.astype(np.float32, copy=False)  # fp32 itself needs no copy: the reduction only reads it
    return ufunc.reduce(wide, axis=_axis(ctx), keepdims=True).astype(value.dtype)


@kernel(Op.REDUCE_MAX)
def reduce_max(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [_extremum(ctx, inputs[0], np.maximum, np.fmax)]


@kernel(Op.REDUCE_MIN)
def reduce_min(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [_extremum(ctx, inputs[0], np.minimum, np.fmin)]


@kernel(Op.REDUCE_SUM)
def reduce_sum(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    (value,) = inputs
    wide = value.astype(np.float64 if _is_float(value) else np.int64)
    return [np.add.reduce(wide, axis=_axis(ctx), keepdims=True).astype(value.dtype)]


@kernel(Op.REDUCE_PRODUCT)
def reduce_product(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    (value,) = inputs
    return [np.prod(value.astype(np.float64), axis=_axis(ctx), keepdims=True).astype(value.dtype)]
