"""RESIZE of NHWC images, NEAREST and BILINEAR: fp32 by ``resize.comp``, one invocation per output;
int8 (to int8 for NEAREST, int32 for BILINEAR) by ``resize_int.comp``, in the specification's integers.

Scale, offset and border are compile-time shape constants read here; the kernel follows the
specification's arithmetic (integer positions, the fraction rounded once to fp32; see the shader).
"""

from __future__ import annotations

import numpy as np

from ....core.errors import InternalError
from ....tosa.attributes import ResizeMode
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from . import lowering
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, groups, word_groups, words


def _ints(ctx: LoweringContext, index: int) -> list[int]:
    value = ctx.constant(index)
    if value is None:
        raise InternalError(f"RESIZE: operand {index} is not a constant shape")
    return [int(v) for v in np.asarray(value).reshape(-1)]


@lowering(Op.RESIZE)
def resize(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    scale, offset = _ints(ctx, 1), _ints(ctx, 2)
    _, ih, iw, c = x.shape
    _, oh, ow, _ = out.shape
    push = words(out.size, ih, iw, c, oh, ow, *scale, *offset)
    bilinear = int(ctx.operator.attribute.mode == ResizeMode.BILINEAR)
    if x.dtype is DType.INT8:
        es = element_bytes(out)
        spec = (WORKGROUP, bilinear, es)
        return [Dispatch("resize_int", spec, (ctx.place(x),), (ctx.place(out),), push, word_groups(out.size, es, ctx))]
    return [Dispatch("resize", (WORKGROUP, bilinear), (ctx.place(x),), (ctx.place(out),), push, groups(out.size, ctx))]
