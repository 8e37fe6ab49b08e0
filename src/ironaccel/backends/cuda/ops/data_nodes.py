"""CONST and IDENTITY.

CONST runs nothing: a constant is uploaded once, at load, into the program's constants when some step or a
graph output uses it, and its type is judged where it is used (the registration takes every type).
IDENTITY is RESHAPE's view or copy (:func:`.common.view_or_copy`), of every type TOSA gives it: the bytes
move as they are stored.
"""

from __future__ import annotations

from ....tosa.operators import Op
from .common import LoweringContext, Step, view_or_copy
from .registry import in_out, lowering

STORED = ("bool", "int4", "int8", "int16", "int32", "int48", "fp32", "fp16", "bf16", "fp8e4m3", "fp8e5m2")


@lowering(Op.CONST, signatures=None)
def const(ctx: LoweringContext) -> list[Step]:
    del ctx
    return []


@lowering(Op.IDENTITY, signatures=in_out(*STORED))
def identity(ctx: LoweringContext) -> list[Step]:
    return view_or_copy(ctx)
