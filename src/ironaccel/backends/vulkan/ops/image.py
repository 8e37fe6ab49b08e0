"""RESIZE of NHWC images, NEAREST and BILINEAR: fp32 by ``resize.comp``, one invocation per output (fp16
and bf16 widened to it); int8 (to int8 for NEAREST, int32 for BILINEAR) by ``resize_int.comp``, in the
specification's integers.

Scale, offset and border are compile-time shape constants read here; the kernel follows the
specification's arithmetic (integer positions, the fraction rounded once to fp32; see the shader).
"""

from __future__ import annotations

import numpy as np

from ....core.errors import InternalError
from ....tosa.attributes import ResizeMode
from ....tosa.capability import Signature
from ....tosa.operators import Op
from .common import WORKGROUP, Dispatch, LoweringContext, Step, element_bytes, groups, word_groups, words
from .registry import lowering


def _ints(ctx: LoweringContext, index: int) -> list[int]:
    value = ctx.constant(index)
    if value is None:
        raise InternalError(f"RESIZE: operand {index} is not a constant shape")
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _push(ctx: LoweringContext) -> bytes:
    x, out = ctx.inputs[0], ctx.outputs[0]
    scale, offset = _ints(ctx, 1), _ints(ctx, 2)
    _, ih, iw, c = x.shape
    _, oh, ow, _ = out.shape
    return words(out.size, ih, iw, c, oh, ow, *scale, *offset)


def _bilinear(ctx: LoweringContext) -> int:
    return int(ctx.operator.attribute.mode == ResizeMode.BILINEAR)


def _same(t: str) -> Signature:
    return Signature.of(resize_t=t, in_t=t, out_t=t)


@lowering(Op.RESIZE, signatures=(_same("fp32"),), widened=(_same("fp16"), _same("bf16")))
def resize(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    spec = (WORKGROUP, _bilinear(ctx))
    return [Dispatch("resize", spec, (ctx.place(x),), (ctx.place(out),), _push(ctx), groups(out.size, ctx))]


@lowering(Op.RESIZE, signatures=tuple(Signature.of(resize_t="int16", in_t="int8", out_t=t) for t in ("int8", "int32")))
def resize_integer(ctx: LoweringContext) -> list[Step]:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.size == 0:
        return []
    es = element_bytes(out)
    spec = (WORKGROUP, _bilinear(ctx), es)
    push = _push(ctx)
    return [Dispatch("resize_int", spec, (ctx.place(x),), (ctx.place(out),), push, word_groups(out.size, es, ctx))]
