"""Elementwise binary operators with TOSA broadcasting: ADD, SUB, MUL, MAXIMUM, MINIMUM.

fp32, fp16 and bf16 compute in fp32 (``.elementwise``), so +, - and * are IEEE operations rounded once to
the result's type (NVRTC's default keeps denormals and IEEE rounding: no fast-math flag is given).
MAXIMUM / MINIMUM pick an operand, with the attribute's NaN mode. int32 ADD, SUB and MUL wrap in two's
complement (where TOSA requires no overflow, what overflows is unpredictable), computed unsigned so the C
has no undefined behaviour; int32 MUL takes TOSA's shift, a constant read at load: the exact 64-bit product
rounded half up at the shift (``ia_mul_i32``). The float forms' shift is 0 (validation checks it).
"""

from __future__ import annotations

import numpy as np

from ....tosa.attributes import NanPropagationMode
from ....tosa.capability import Constraint, OperatorView, Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import LoweringContext, Step, elementwise_launch
from .elementwise import kernel, kernel_name
from .registry import in_out, lowering

FLOATS = ("fp32", "fp16", "bf16")
FLOAT_EXPRESSIONS = {
    Op.ADD: "x0 + x1",
    Op.SUB: "x0 - x1",
    Op.MUL: "x0 * x1",
    Op.MAXIMUM: "ia_max_f32(x0, x1, a.scalars[0])",
    Op.MINIMUM: "ia_min_f32(x0, x1, a.scalars[0])",
}
INT_EXPRESSIONS = {
    Op.ADD: "(int)((unsigned)x0 + (unsigned)x1)",
    Op.SUB: "(int)((unsigned)x0 - (unsigned)x1)",
    Op.MUL: "ia_mul_i32(x0, x1, a.scalars[0])",
    Op.MAXIMUM: "(x0 >= x1 ? x0 : x1)",
    Op.MINIMUM: "(x0 < x1 ? x0 : x1)",
}


def nan_mode(ctx: LoweringContext) -> int:
    """The operator's NaN mode as the kernels take it: 2 ignore, 1 propagate (also for UNKNOWN)."""
    mode = getattr(ctx.operator.attribute, "nan_mode", NanPropagationMode.PROPAGATE)
    return 2 if mode == NanPropagationMode.IGNORE else 1


def _constant_shift(view: OperatorView) -> bool:
    return len(view.consts) > 2 and view.consts[2] is not None


# MUL's shift is read on the host at load, so it must be a constant.
CONSTANT_SHIFT = Constraint("constant MUL shift only", _constant_shift)


def _binary(ctx: LoweringContext, scalars: tuple[int, ...]) -> list[Step]:
    a, b = ctx.inputs[0], ctx.inputs[1]
    out = ctx.outputs[0]
    table = INT_EXPRESSIONS if out.dtype is DType.INT32 else FLOAT_EXPRESSIONS
    op = ctx.operator.op
    k = kernel(kernel_name(op.name, out.dtype), (a.dtype, b.dtype), out.dtype, table[op])
    return elementwise_launch(ctx, k, (a, b), scalars)


@lowering(Op.ADD, Op.SUB, Op.MAXIMUM, Op.MINIMUM, signatures=in_out(*FLOATS, "int32"))
def binary(ctx: LoweringContext) -> list[Step]:
    return _binary(ctx, (nan_mode(ctx),))


@lowering(
    Op.MUL,
    signatures=tuple(Signature.of(in_t=t, out_t=t) for t in (*FLOATS, "int32")),
    constraints=(CONSTANT_SHIFT,),
)
def mul(ctx: LoweringContext) -> list[Step]:
    value = ctx.constant(2) if len(ctx.inputs) > 2 else None
    shift = int(np.asarray(value).reshape(-1)[0]) if value is not None and np.asarray(value).size else 0
    return _binary(ctx, (min(max(shift, 0), 63),))
