"""CPU kernels of the elementwise binary operators (and TABLE, which the spec files with them).

Broadcasting is numpy's: TOSA guarantees equal ranks with dims equal or 1, which numpy broadcasting
handles as is. Integer arithmetic is done in int64 and narrowed with a two's complement truncation;
where the spec REQUIREs no overflow (ADD, SUB, INTDIV, MUL with shift) an overflowing result is
unpredictable, and the truncated value is what comes out. Float arithmetic is done in float64 and
rounded once (see :mod:`..numerics`), which is the correctly rounded result for +, -, *; for fp32 that
is what one float32 operation gives, so fp32 ADD / SUB / MUL run in float32 (no widening, one pass).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ....tosa.attributes import NanPropagationMode
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .. import numerics
from ..kernel import KernelContext, constants, destination, kernel, muted, prepared

_F32 = np.dtype(np.float32)


def _out_dtype(ctx: KernelContext) -> DType:
    return ctx.outputs[0].dtype


def _in_dtype(ctx: KernelContext) -> DType:
    return ctx.inputs[0].dtype


def _int64(values: np.ndarray) -> np.ndarray:
    return np.asarray(values).astype(np.int64)


def _shift_amount(values: np.ndarray) -> np.ndarray:
    """Shift counts outside [0, 63] are REQUIRE violations; clipping keeps numpy's shifts defined."""
    return np.clip(_int64(values), 0, 63)


def _float32(ctx: KernelContext, ufunc: np.ufunc, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One IEEE float32 operation (the float64-and-round result, see the module doc), written into the
    caller's buffer when there is one; a result holding a NaN is computed the float64 way instead."""
    out = destination(ctx, _F32)
    with muted(ctx):
        result = ufunc(a, b) if out is None else ufunc(a, b, out=out)
    if type(result) is not np.ndarray:  # rank 0 operands give a numpy scalar
        result = np.asarray(result)
    if numerics.has_nan(result):
        return numerics.float_compute(ufunc, a, b, dtype=DType.FP32)
    return result


def _arith(ctx: KernelContext, inputs: Sequence[np.ndarray], int_fn: Callable, float_fn: Callable) -> list[np.ndarray]:
    dtype = _out_dtype(ctx)
    a, b = inputs[0], inputs[1]
    if dtype.is_float:
        if dtype is DType.FP32 and a.dtype == _F32 and b.dtype == _F32:
            return [_float32(ctx, float_fn, a, b)]
        return [numerics.float_compute(float_fn, a, b, dtype=dtype)]
    return [numerics.wrap(int_fn(_int64(a), _int64(b)), dtype)]


@kernel(Op.ADD)
def add(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return _arith(ctx, inputs, np.add, np.add)


@kernel(Op.SUB)
def sub(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return _arith(ctx, inputs, np.subtract, np.subtract)


@kernel(Op.MUL)
def mul(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Inputs: input1, input2, shift ([1] int8). int8/int16 products are exact in int32; int32
    products are rounded by ``shift`` (round half up, from the exact 64-bit product) or, with shift 0,
    keep their low 32 bits."""
    out = _out_dtype(ctx)
    a, b = inputs[0], inputs[1]
    if out.is_float:
        if out is DType.FP32 and a.dtype == _F32 and b.dtype == _F32:
            return [_float32(ctx, np.multiply, a, b)]
        return [numerics.float_compute(np.multiply, a, b, dtype=out)]
    product = _int64(a) * _int64(b)
    shift = int(np.asarray(inputs[2]).reshape(-1)[0]) if len(inputs) > 2 else 0
    if _in_dtype(ctx) is DType.INT32 and shift > 0:
        product = numerics.rounding_shift_right(product, shift)
    return [numerics.wrap(product, out)]


@kernel(Op.POW)
def pow_(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [numerics.float_compute(np.power, inputs[0], inputs[1], dtype=_out_dtype(ctx))]


def _nan_mode(ctx: KernelContext) -> NanPropagationMode:
    return getattr(ctx.operator.attribute, "nan_mode", NanPropagationMode.PROPAGATE)


@kernel(Op.MAXIMUM)
def maximum(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [numerics.maximum(inputs[0], inputs[1], _nan_mode(ctx))]


@kernel(Op.MINIMUM)
def minimum(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [numerics.minimum(inputs[0], inputs[1], _nan_mode(ctx))]


@kernel(Op.INTDIV)
def intdiv(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Quotient truncated towards zero. Division by zero (a REQUIRE violation) gives 0."""
    a, b = _int64(inputs[0]), _int64(inputs[1])
    magnitude = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    return [numerics.wrap(magnitude * np.sign(a) * np.sign(b), _out_dtype(ctx))]


@kernel(Op.ARITHMETIC_RIGHT_SHIFT)
def arithmetic_right_shift(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``a >> b`` on the signed value; with ``round``, add the last bit shifted out (round half up)."""
    a, b = _int64(inputs[0]), _shift_amount(inputs[1])
    result = a >> b
    if getattr(ctx.operator.attribute, "round", False):
        last_out = (a >> np.maximum(b - 1, 0)) & 1
        result = result + np.where(b > 0, last_out, 0)
    return [numerics.wrap(result, _out_dtype(ctx))]


@kernel(Op.LOGICAL_LEFT_SHIFT)
def logical_left_shift(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Bits shifted past the type's width are lost (the result is truncated to the type)."""
    return [numerics.wrap(_int64(inputs[0]) << _shift_amount(inputs[1]), _out_dtype(ctx))]


@kernel(Op.LOGICAL_RIGHT_SHIFT)
def logical_right_shift(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Shifts the type's own unsigned bit pattern (int8 -1 is 0xFF), so zeros enter from the top."""
    dtype = _out_dtype(ctx)
    pattern = numerics.zero_extend(inputs[0], dtype)
    return [numerics.wrap(pattern >> _shift_amount(inputs[1]), dtype)]


def _bitwise(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]):
    def run(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        dtype = _out_dtype(ctx).numpy
        return [np.asarray(fn(np.asarray(inputs[0], dtype), np.asarray(inputs[1], dtype)), dtype=dtype)]

    run.__doc__ = f"Elementwise ``{fn.__name__}`` on the storage values (bit patterns are the values)."
    return run


kernel(Op.BITWISE_AND)(_bitwise(np.bitwise_and))
kernel(Op.BITWISE_OR)(_bitwise(np.bitwise_or))
kernel(Op.BITWISE_XOR)(_bitwise(np.bitwise_xor))
kernel(Op.LOGICAL_AND)(_bitwise(np.logical_and))
kernel(Op.LOGICAL_OR)(_bitwise(np.logical_or))
kernel(Op.LOGICAL_XOR)(_bitwise(np.logical_xor))


@kernel(Op.TABLE)
def table(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """int8: 256-entry lookup; int16: 513-entry interpolated lookup giving a 16.7 value in int32."""
    if _in_dtype(ctx) is DType.INT8:
        values = np.asarray(inputs[0])
        if constants(ctx, 1) and values.dtype == np.int8 and np.size(inputs[1]) == 256:
            # table[v + 128] is rolled[v's bit pattern as uint8]: one gather, no index arithmetic
            rolled = prepared(ctx, "table8", lambda: np.roll(np.asarray(inputs[1], dtype=np.int8).reshape(-1), 128))
            return [np.asarray(rolled[values.view(np.uint8)])]
        return [numerics.table_lookup_8(values, inputs[1])]
    return [numerics.table_lookup_16(inputs[0], inputs[1])]
