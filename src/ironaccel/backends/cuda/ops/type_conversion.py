"""CAST between fp32 and int32, and between fp32 and fp16 / bf16.

fp32 -> int32 rounds to nearest, ties to even, and saturates; NaN, which the specification leaves
unpredictable, gives 0 (as in the CPU backend). int32 -> fp32 rounds to nearest even. fp16 and bf16 ->
fp32 are exact; fp32 -> fp16 / bf16 round once to nearest even (``..prelude`` conversions): the kernels'
loads and stores do the narrow conversions, so those casts are plain copies between compute types.
"""

from __future__ import annotations

from ....tosa.capability import Signature
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import LoweringContext, Step, elementwise_launch
from .elementwise import kernel, kernel_name
from .registry import lowering

EXPRESSIONS = {
    (DType.FP32, DType.INT32): "ia_f32_to_i32(x0)",
    (DType.INT32, DType.FP32): "__int2float_rn(x0)",
    (DType.FP16, DType.FP32): "x0",
    (DType.FP32, DType.FP16): "x0",
    (DType.BF16, DType.FP32): "x0",
    (DType.FP32, DType.BF16): "x0",
}


@lowering(Op.CAST, signatures=tuple(Signature.of(in_t=i, out_t=o) for i, o in EXPRESSIONS))
def cast(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    k = kernel(kernel_name("cast", x.dtype, out.dtype), (x.dtype,), out.dtype, EXPRESSIONS[(x.dtype, out.dtype)])
    return elementwise_launch(ctx, k, (x,))
