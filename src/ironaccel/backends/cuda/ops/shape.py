"""CONST_SHAPE: nothing runs; shape values stay on the host, where the lowerings that take them (RESHAPE's
new shape is its result's declared shape) read them."""

from __future__ import annotations

from ....tosa.operators import Op
from .common import LoweringContext, Step
from .registry import lowering


@lowering(Op.CONST_SHAPE, signatures=None)
def const_shape(ctx: LoweringContext) -> list[Step]:
    del ctx
    return []
