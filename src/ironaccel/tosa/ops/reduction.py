"""Rules of the reductions (spec chapter "Reduction Operators").

The output keeps the input's rank with the reduced axis set to 1 (ERROR_IF ``shape[axis] != 1``; the
other dimensions are those of the input, which the pseudocode's indexing relies on).
"""

from __future__ import annotations

from ..attributes import NanPropagationMode
from ..operators import Op
from .rule import Context, rule


@rule(Op.REDUCE_ALL, Op.REDUCE_ANY, Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_PRODUCT, Op.REDUCE_SUM)
def reduce(ctx: Context) -> list[tuple[int, ...]]:
    shape = ctx.inputs[0].shape
    axis = int(ctx.attribute.axis)
    ctx.error_if(not 0 <= axis < len(shape), f"axis {axis} is outside [0, {len(shape)})")
    if ctx.op in (Op.REDUCE_MAX, Op.REDUCE_MIN):
        mode = ctx.attribute.nan_mode
        ok = mode in (NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE)
        ctx.error_if(not ok, f"nan_mode {int(mode)} is neither PROPAGATE nor IGNORE")
    return [(*shape[:axis], 1, *shape[axis + 1 :])]
