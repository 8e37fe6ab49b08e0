"""CONST_SHAPE: nothing runs; shape values stay on the host, where the lowerings that take them read
them (:meth:`.common.LoweringContext.constant`)."""

from __future__ import annotations

from ....tosa.operators import Op
from .common import LoweringContext, Step
from .registry import lowering


@lowering(Op.CONST_SHAPE, signatures=None)
def const_shape(ctx: LoweringContext) -> list[Step]:
    del ctx
    return []
