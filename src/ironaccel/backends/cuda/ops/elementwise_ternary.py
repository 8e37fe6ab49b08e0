"""SELECT: ``input2`` where the bool ``input1`` is true, else ``input3``, broadcasting all three, for every
type the kernels hold.

Values move as bits: a float is read and written as the integer of its width, so NaN payloads and zero
signs come through unchanged (as the CPU backend copies them), and fp32 / int32 share one kernel, as
fp16 / bf16 / int16 do.
"""

from __future__ import annotations

from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import LoweringContext, Step, elementwise_launch
from .elementwise import kernel, kernel_name
from .registry import in_out, lowering

# The integer type that holds each value type's bits.
BITS = {DType.FP32: DType.INT32, DType.FP16: DType.INT16, DType.BF16: DType.INT16}


@lowering(Op.SELECT, signatures=in_out("fp32", "fp16", "bf16", "int8", "int16", "int32", "bool"))
def select(ctx: LoweringContext) -> list[Step]:
    cond, a, b = ctx.inputs
    held = BITS.get(ctx.outputs[0].dtype, ctx.outputs[0].dtype)
    k = kernel(kernel_name("select", held), (DType.BOOL, held, held), held, "x0 ? x1 : x2")
    return elementwise_launch(ctx, k, (cond, a, b))
