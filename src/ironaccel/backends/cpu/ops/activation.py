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
from ..kernel import KernelContext, kernel


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


@kernel(Op.CLAMP)
def clamp(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``min(max(x, min_val), max_val)`` with the attribute's NaN mode: PROPAGATE keeps a NaN input,
    IGNORE turns it into ``min_val`` (the spec's clip applies max first)."""
    attr = ctx.operator.attribute
    dtype = ctx.outputs[0].dtype
    lo = decode_scalar(attr.min_val, dtype)
    hi = decode_scalar(attr.max_val, dtype)
    mode = getattr(attr, "nan_mode", NanPropagationMode.PROPAGATE)
    x = np.asarray(inputs[0], dtype=dtype.numpy)
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
