"""CONST and IDENTITY.

CONST runs nothing: a constant is uploaded once, at load, into the program's constants buffer when some
step or a graph output uses it, and its type is judged where it is used (the registration takes every
type). IDENTITY is RESHAPE's view or copy (:func:`.common.view_or_copy`) for every type the backend
stores, int4 included: EXT-INT4 enables it for IDENTITY (and CONST) alone among the data-movement
operators, and an int4 tensor is held one value per byte (``DType.INT4.numpy``, int8), so its copy is
int8's.
"""

from __future__ import annotations

from ....tosa.operators import Op
from .common import LoweringContext, Step, view_or_copy
from .registry import in_out, lowering

FP8 = ("fp8e4m3", "fp8e5m2")


@lowering(Op.CONST, signatures=None)
def const(ctx: LoweringContext) -> list[Step]:
    del ctx
    return []


@lowering(Op.IDENTITY, signatures=in_out("fp32", "bool", "int4", "int8", "int16", "int32", "fp16", "bf16", *FP8))
def identity(ctx: LoweringContext) -> list[Step]:
    return view_or_copy(ctx)
