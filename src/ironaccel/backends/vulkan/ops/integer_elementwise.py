"""The integer tier's one-operand operators: ABS, NEGATE with zero points, CLAMP, BITWISE_NOT, CLZ, CAST
between BOOL and the integer types, TABLE (int8; int16 with interpolation): ``int_unary.comp``.

All exact: NEGATE is formed in 64 bits (two words) and saturated, as the CPU backend computes it in
int64; TABLE reads its table from the tensor (constant or not). The two-operand integer operators are
``integer.comp``'s (:mod:`.elementwise_binary`).
"""

from __future__ import annotations

import struct

import numpy as np

from ....core.errors import InternalError
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, word_groups

OPCODES = {Op.ABS: 0, Op.NEGATE: 1, Op.CLAMP: 2, Op.BITWISE_NOT: 3, Op.CLZ: 4, Op.CAST: 5, Op.TABLE: 6}
TABLE16 = 7


def unary_int_steps(ctx: LoweringContext, a: int = 0, b: int = 0, opcode: int | None = None) -> list[Step]:
    """One ``int_unary.comp`` dispatch; ``a`` / ``b`` are the kernel's two integer parameters."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    op = OPCODES[ctx.operator.op] if opcode is None else opcode
    es_out = element_bytes(out)
    table = ctx.place(ctx.inputs[1]) if ctx.operator.op is Op.TABLE else ctx.place(x)
    spec = (WORKGROUP, element_bytes(x), es_out, op)
    push = struct.pack("<Iii", out.size, a, b)
    return [
        Dispatch("int_unary", spec, (ctx.place(x), table), (ctx.place(out),), push, word_groups(out.size, es_out, ctx))
    ]


def _constant_int(ctx: LoweringContext, index: int) -> int:
    value = ctx.constant(index)
    if value is None:  # admission requires constant zero points of NEGATE
        raise InternalError(f"{ctx.operator.op.name}: operand {index} is not a constant")
    return int(np.asarray(value).astype(np.int64).reshape(-1)[0])


def _bound(raw: bytes, dtype: DType) -> int:
    size = element_bytes_of(dtype)
    return int.from_bytes(raw[:size].ljust(size, b"\0"), "little", signed=True)


def element_bytes_of(dtype: DType) -> int:
    return {DType.INT8: 1, DType.INT16: 2, DType.INT32: 4}[dtype]


def abs_(ctx: LoweringContext) -> list[Step]:
    return unary_int_steps(ctx)


def negate(ctx: LoweringContext) -> list[Step]:
    return unary_int_steps(ctx, _constant_int(ctx, 1), _constant_int(ctx, 2))


def clamp(ctx: LoweringContext) -> list[Step]:
    attr, dtype = ctx.operator.attribute, ctx.inputs[0].dtype
    return unary_int_steps(ctx, _bound(attr.min_val, dtype), _bound(attr.max_val, dtype))


def cast(ctx: LoweringContext) -> list[Step]:
    return unary_int_steps(ctx, int(ctx.outputs[0].dtype is DType.BOOL))


@lowering(Op.BITWISE_NOT, Op.CLZ)
def bitwise_not_clz(ctx: LoweringContext) -> list[Step]:
    return unary_int_steps(ctx)


@lowering(Op.TABLE)
def table(ctx: LoweringContext) -> list[Step]:
    return unary_int_steps(ctx, opcode=TABLE16 if ctx.inputs[0].dtype is DType.INT16 else None)
