"""Narrow floats (fp16, bf16, fp8) stored as 16-bit halves or bytes, computed by the fp32 kernels,
rounded once.

bf16 and fp8 follow fp16 throughout (``include/bf16.glsl``, ``include/fp8.glsl``: exact widening, one
rounding); what is said below of fp16 holds for them with their own precision (ADR 0008, "The BF16
and FP8 tiers"). fp8 tensors are bytes.

Operators that only move, select or compare bits take fp16 elements directly as 16-bit halves
(layout, CONCAT, SELECT, RESHAPE / IDENTITY: :data:`.common.ELEMENT_BYTES`). An operator whose narrow
signatures are registered ``widened=`` (:func:`.registry.lowering`) runs its fp32 kernel between
conversions: :func:`widening` widens each fp16 operand into operator-private scratch of the arena
(exactly; an fp16 constant is widened once, at load, into the constants buffer), the fp32 kernel writes
an fp32 scratch result, and ``cast.comp`` rounds that once to fp16 (shaders/include/fp16.glsl: integer
code on the bit patterns, so no device needs shaderFloat16 and every device rounds alike).

What this gives, next to the CPU backend (which evaluates in float64 and rounds once to fp16):
* ADD, SUB, MUL, RECIPROCAL and the exact operators (ABS, NEGATE, FLOOR, CEIL, MAXIMUM, MINIMUM,
  CLAMP, comparisons, ARGMAX, REDUCE_MAX / MIN, MAX_POOL2D, GATHER, SCATTER) give the CPU's bits:
  fp16 operands are exact in fp32, a product of two is exact there, and a correctly rounded fp32 sum
  or quotient rounded again to fp16 is the correctly rounded fp16 one (24 >= 2 x 11 + 2 bits, so the
  double rounding is innocuous); RECIPROCAL's fp32 kernel is correctly rounded.
* The functions (EXP, LOG, POW, SIN, COS, TANH, SIGMOID, ERF, RSQRT) are within 1-2 fp32 ulp before
  the rounding, so the fp16 result is the CPU's or, where the true value lies that close to a rounding
  boundary between two fp16 values, its neighbour: at most 1 fp16 ulp apart (tested on every fp16 input).
* Sums (REDUCE_SUM, AVG_POOL2D, the convolutions, with either acc_type) and REDUCE_PRODUCT accumulate in
  fp32, which is more accurate than the fp16 accumulator the specification allows, and round once;
  they stay within the specification's dot-product bound, not bit-equal to a float64 sum.
* RESIZE computes its weights and sum in fp32 where the specification (and the CPU backend) round each
  step to fp16: within the same bound, not bit-equal.
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np

from ....core.errors import InternalError
from ....tosa.dtypes import DType
from ....tosa.ir import Tensor
from .common import ELEMENT_BYTES, WORKGROUP, Dispatch, Lowering, LoweringContext, Place, Step, word_groups

FP32_CODE = 0
# cast.comp's type codes of the float types stored narrower than fp32 (halves, or bytes for fp8)
NARROW_CODES = {DType.FP16: 4, DType.BF16: 5, DType.FP8E4M3: 6, DType.FP8E5M2: 7}
NARROW = frozenset(NARROW_CODES)


def convert(
    ctx: LoweringContext, src: Place, dst: Place, count: int, widen: bool, dtype: DType = DType.FP16
) -> Dispatch:
    """A ``cast.comp`` dispatch converting ``count`` elements ``dtype`` (fp16, bf16, fp8) -> fp32
    (``widen``) or back."""
    code = NARROW_CODES[dtype]
    spec = (WORKGROUP, code, FP32_CODE) if widen else (WORKGROUP, FP32_CODE, code)
    out_bytes = 4 if widen else ELEMENT_BYTES[dtype]
    return Dispatch("cast", spec, (src,), (dst,), struct.pack("<I", count), word_groups(count, out_bytes, ctx))


class _Widened:
    """The :class:`~.common.LoweringContext` an fp32 lowering sees for an fp16 or bf16 operator: its
    tensors of the ``types`` declared fp32, placed in scratch (or widened constants), with the
    conversions collected."""

    def __init__(self, outer: LoweringContext, types: frozenset[DType] = NARROW) -> None:
        self.outer = outer
        self.types = types
        self.operator = outer.operator
        self.inputs = tuple(self._as_fp32(t) for t in outer.inputs)
        self.outputs = tuple(self._as_fp32(t) for t in outer.outputs)
        self.max_groups = outer.max_groups
        self.max_loop_iterations = outer.max_loop_iterations
        self.max_shared_memory = outer.max_shared_memory
        self.matrix_tiles = outer.matrix_tiles
        self.before: list[Step] = []
        self.after: list[Step] = []
        self._places: dict[str, Place] = {}

    def place(self, tensor: Tensor) -> Place:
        found = self._places.get(tensor.name)
        if found is None:
            found = self._places[tensor.name] = self._place(tensor.name)
        return found

    def _place(self, name: str) -> Place:
        outer = self.outer
        for t in outer.outputs:
            if t.name == name:
                if t.dtype not in self.types:
                    return outer.place(t)
                wide = outer.scratch(4 * t.size)
                self.after.append(convert(outer, wide, outer.place(t), t.size, False, t.dtype))
                return wide
        for index, t in enumerate(outer.inputs):
            if t.name == name:
                if t.dtype not in self.types:
                    return outer.place(t)
                value = outer.constant(index)
                if value is not None:
                    return outer.constant_place(f"{name}@fp32", _widened(value, t.dtype))
                wide = outer.scratch(4 * t.size)
                self.before.append(convert(outer, outer.place(t), wide, t.size, True, t.dtype))
                return wide
        raise InternalError(f"{self.operator.op.name}: tensor {name!r} is not an operand")

    def constant(self, index: int) -> np.ndarray | None:
        value = self.outer.constant(index)
        dtype = self.outer.inputs[index].dtype
        if value is not None and dtype in self.types:
            return _widened(value, dtype)
        return value

    def _as_fp32(self, tensor: Tensor) -> Tensor:
        if tensor.dtype not in self.types:
            return tensor
        return dataclasses.replace(tensor, dtype=DType.FP32, data=None)

    def scratch(self, size: int) -> Place:
        return self.outer.scratch(size)

    def constant_place(self, key: str, data: np.ndarray) -> Place:
        return self.outer.constant_place(key, data)


def _widened(value: np.ndarray, dtype: DType) -> np.ndarray:
    """A constant of ``dtype`` (fp16, or bf16 as ml_dtypes stores it) as fp32: exact."""
    return np.asarray(value, dtype.numpy).astype(np.float32)


def stored_type(ctx: LoweringContext, index: int) -> DType:
    """Input ``index``'s type as the program declares it (an fp32 lowering run for fp16 sees fp32)."""
    outer = ctx.outer if isinstance(ctx, _Widened) else ctx
    return outer.inputs[index].dtype


def widening(lower: Lowering, types: frozenset[DType] = NARROW) -> Lowering:
    """``lower`` (an fp32 lowering) extended to operands and results of ``types`` (fp16, bf16) as the
    module doc says."""

    def lower_any(ctx: LoweringContext) -> list[Step]:
        if all(t.dtype not in types for t in (*ctx.inputs, *ctx.outputs)):
            return lower(ctx)
        wide = _Widened(ctx, types)
        steps = lower(wide)
        return [*wide.before, *steps, *wide.after] if steps else []

    return lower_any
