"""CONST and CONST_SHAPE: nothing runs. A constant is uploaded once, at load, into the program's
constants buffer when some step or a graph output uses it; shape values stay on the host."""

from __future__ import annotations

from ....tosa.operators import Op
from . import lowering
from .common import LoweringContext, Step


@lowering(Op.CONST, Op.CONST_SHAPE)
def const(ctx: LoweringContext) -> list[Step]:
    del ctx
    return []
