"""CPU kernels of the activation operators: CLAMP, ERF, SIGMOID, TANH.

The float functions are evaluated in float64 and rounded once to the output type (fp16 / bf16 / fp32
alike), so their error is the final rounding plus float64's own, far inside the spec's bounds.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from ....core.errors import InternalError
from ....tosa.attributes import NanPropagationMode
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .. import numerics
from ..kernel import KernelContext, destination, kernel, prepared


def decode_scalar(raw: bytes, dtype: DType) -> np.ndarray:
    """A CLAMP bound: the little-endian bytes of one ``dtype`` value, as a 0-d storage array.

    Writers may pad the vector (the schema aligns it), so only the first element's bytes count.
    """
    storage = dtype.numpy
    if len(raw) < storage.itemsize:
        raise InternalError(f"CLAMP bound of {len(raw)} bytes is too short for {dtype}")
    data = bytes(raw[: storage.itemsize])
    if sys.byteorder == "big":
        data = data[::-1]
    return np.frombuffer(data, dtype=storage)[0]


# How CLAMP runs, decided once per operator from its attribute.
_GENERIC, _INTEGER, _FLOAT32 = 0, 1, 2


def _clamp_plan(ctx: KernelContext) -> tuple[int, np.ndarray, np.ndarray, NanPropagationMode, np.generic]:
    attr = ctx.operator.attribute
    dtype = ctx.outputs[0].dtype
    lo = decode_scalar(attr.min_val, dtype)
    hi = decode_scalar(attr.max_val, dtype)
    mode = getattr(attr, "nan_mode", NanPropagationMode.PROPAGATE)
    how = _GENERIC
    if dtype.numpy.kind == "i":
        how = _INTEGER
    elif dtype is DType.FP32 and lo < hi:  # false for NaN bounds, which stay on the general path
        how = _FLOAT32
    # What a NaN input becomes: the plain NaN (PROPAGATE), or max(NaN, lo) = lo, then min(lo, hi) = lo.
    fill = lo if mode == NanPropagationMode.IGNORE else np.float32(np.nan)
    return how, lo, hi, mode, fill


@kernel(Op.CLAMP)
def clamp(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``min(max(x, min_val), max_val)`` with the attribute's NaN mode: PROPAGATE keeps a NaN input,
    IGNORE turns it into ``min_val`` (the spec's clip applies max first).

    Integers: np.clip is that very function. fp32 with min_val < max_val: np.clip agrees with it except
    where the spec's choice between equal values shows, that is for zeros of the other sign than a zero
    bound (max(x, lo) keeps x when x >= lo, min(x, hi) takes hi when x >= hi) and for NaN inputs (the
    plain NaN, or min_val); those are set after the clip. Anything else takes the general path."""
    how, lo, hi, mode, fill = prepared(ctx, "clamp", lambda: _clamp_plan(ctx))
    dtype = ctx.outputs[0].dtype
    x = np.asarray(inputs[0], dtype=dtype.numpy)
    if how == _INTEGER:
        return [np.asarray(np.clip(x, lo, hi))]
    if how == _FLOAT32:
        out = destination(ctx, x.dtype)
        result = np.clip(x, lo, hi) if out is None else np.clip(x, lo, hi, out=out)
        if type(result) is not np.ndarray:  # rank 0 gives a numpy scalar
            result = np.asarray(result)
        if lo == 0:  # x == lo: the spec keeps x, with its own zero sign
            np.copyto(result, x, where=x == 0)
        elif hi == 0:  # x == hi: the spec takes hi
            np.copyto(result, hi, where=x == 0)
        if numerics.has_nan(x):
            result[np.isnan(x)] = fill
        return [result]
    return [numerics.clip(x, np.asarray(lo, dtype.numpy), np.asarray(hi, dtype.numpy), mode)]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))  # exp overflow to inf gives exactly 0 for very negative x


@kernel(Op.ERF)
def erf(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [numerics.float_compute(numerics.erf, inputs[0], dtype=ctx.outputs[0].dtype)]


@kernel(Op.SIGMOID)
def sigmoid(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [numerics.float_compute(_sigmoid, inputs[0], dtype=ctx.outputs[0].dtype)]


@kernel(Op.TANH)
def tanh(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [numerics.float_compute(np.tanh, inputs[0], dtype=ctx.outputs[0].dtype)]
