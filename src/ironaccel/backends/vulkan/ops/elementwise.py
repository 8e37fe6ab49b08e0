"""The elementwise kernels that several operator groups dispatch, one helper per kernel.

* ``unary.comp`` (:func:`unary_steps`): the fp32 one-operand functions, activations and CLAMP; ABS,
  NEGATE, FLOOR and CEIL are exact, the others are written out in shaders/include/math.glsl because
  Vulkan's built-ins are looser than TOSA's bounds.
* ``integer.comp`` (:func:`integer_steps`): the two-operand integer and BOOL operators with TOSA
  broadcasting, comparisons of int32 and LOGICAL_NOT; exact two's complement arithmetic (where the
  specification REQUIREs no overflow, the result wraps, as in the CPU backend).
* ``int_unary.comp`` (:func:`int_unary_steps`): the one-operand integer operators (ABS, NEGATE with zero
  points, CLAMP, BITWISE_NOT, CLZ, CAST between BOOL and the integer types, TABLE). NEGATE is formed in
  64 bits (two words) and saturated, as the CPU backend computes it in int64; TABLE reads its table
  from the tensor (constant or not).
"""

from __future__ import annotations

import struct

import numpy as np

from ....core.errors import InternalError
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, groups, indexed_push, word_groups, words

UNARY_OPCODES = {
    Op.ABS: 0,
    Op.NEGATE: 1,
    Op.FLOOR: 2,
    Op.CEIL: 3,
    Op.EXP: 4,
    Op.LOG: 5,
    Op.RECIPROCAL: 6,
    Op.RSQRT: 7,
    Op.SIN: 8,
    Op.COS: 9,
    Op.TANH: 10,
    Op.SIGMOID: 11,
    Op.ERF: 12,
    Op.CLAMP: 13,
}
INTEGER_OPCODES = {
    Op.ADD: 0,
    Op.SUB: 1,
    Op.MUL: 2,
    Op.INTDIV: 3,
    Op.LOGICAL_AND: 4,
    Op.LOGICAL_OR: 5,
    Op.LOGICAL_XOR: 6,
    Op.LOGICAL_NOT: 7,
    Op.LOGICAL_LEFT_SHIFT: 8,
    Op.LOGICAL_RIGHT_SHIFT: 9,
    Op.BITWISE_AND: 10,
    Op.BITWISE_OR: 11,
    Op.BITWISE_XOR: 12,
    Op.ARITHMETIC_RIGHT_SHIFT: 13,
    Op.MAXIMUM: 14,
    Op.MINIMUM: 15,
    Op.EQUAL: 16,
    Op.GREATER: 17,
    Op.GREATER_EQUAL: 18,
}
INT_UNARY_OPCODES = {Op.ABS: 0, Op.NEGATE: 1, Op.CLAMP: 2, Op.BITWISE_NOT: 3, Op.CLZ: 4, Op.CAST: 5, Op.TABLE: 6}
TABLE16 = 7  # int_unary.comp's opcode of int16 TABLE (interpolated)


def unary_steps(ctx: LoweringContext, lo: float = 0.0, hi: float = 0.0, nan: int = 1) -> list[Step]:
    """One ``unary.comp`` dispatch for the operator; ``lo`` / ``hi`` / ``nan`` only matter to CLAMP."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    n = out.size
    if n == 0:
        return []
    push = struct.pack("<Iff", n, lo, hi)
    spec = (WORKGROUP, UNARY_OPCODES[ctx.operator.op], nan)
    return [Dispatch("unary", spec, (ctx.place(x),), (ctx.place(out),), push, groups(n, ctx))]


def integer_steps(ctx: LoweringContext, a_index: int = 0, b_index: int = 1, shift: int = 0) -> list[Step]:
    """One ``integer.comp`` dispatch (LOGICAL_NOT passes its operand as both); ``shift`` is MUL's shift
    or ARITHMETIC_RIGHT_SHIFT's round flag."""
    a, b = ctx.inputs[a_index], ctx.inputs[b_index]
    out = ctx.outputs[0]
    n, push = indexed_push(out.shape, [a.shape, b.shape])
    if n == 0:
        return []
    es, out_es = element_bytes(a), element_bytes(out)
    spec = (WORKGROUP, es, INTEGER_OPCODES[ctx.operator.op], out_es)
    reads = (ctx.place(a), ctx.place(b))
    return [Dispatch("integer", spec, reads, (ctx.place(out),), push + words(shift), word_groups(n, out_es, ctx))]


def int_unary_steps(ctx: LoweringContext, a: int = 0, b: int = 0, opcode: int | None = None) -> list[Step]:
    """One ``int_unary.comp`` dispatch; ``a`` / ``b`` are the kernel's two integer parameters."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    op = INT_UNARY_OPCODES[ctx.operator.op] if opcode is None else opcode
    es_out = element_bytes(out)
    table = ctx.place(ctx.inputs[1]) if ctx.operator.op is Op.TABLE else ctx.place(x)
    spec = (WORKGROUP, element_bytes(x), es_out, op)
    push = struct.pack("<Iii", out.size, a, b)
    return [
        Dispatch("int_unary", spec, (ctx.place(x), table), (ctx.place(out),), push, word_groups(out.size, es_out, ctx))
    ]


def constant_int(ctx: LoweringContext, index: int) -> int:
    """The single integer of constant operand ``index`` (a zero point its registration requires constant)."""
    value = ctx.constant(index)
    if value is None:
        raise InternalError(f"{ctx.operator.op.name}: operand {index} is not a constant")
    return int(np.asarray(value).astype(np.int64).reshape(-1)[0])


def integer_bound(raw: bytes, dtype: DType) -> int:
    """An integer CLAMP bound from the attribute's little-endian bytes of ``dtype``."""
    size = {DType.INT8: 1, DType.INT16: 2, DType.INT32: 4}[dtype]
    return int.from_bytes(raw[:size].ljust(size, b"\0"), "little", signed=True)
