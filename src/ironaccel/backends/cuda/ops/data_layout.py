"""RESHAPE: no data moves when the planner made the result a view (an intermediate shares its source's
arena bytes, a reshaped constant the constant's bytes); otherwise, where a graph input or output is
involved, one copy (:func:`.common.view_or_copy`)."""

from __future__ import annotations

from ....tosa.operators import Op
from .common import LoweringContext, Step, view_or_copy
from .data_nodes import STORED
from .registry import in_out, lowering


@lowering(Op.RESHAPE, signatures=in_out(*STORED))
def reshape(ctx: LoweringContext) -> list[Step]:
    return view_or_copy(ctx)
