"""Constant folding at load: operators whose operands are all constants run once, and their results become
constants of the program.

:class:`ConstantFolder` is the fold :func:`~.block_plan.plan_block` offers every such step to. It never
folds an operator with effects or one that runs other blocks, nor one whose result shape is not fixed.
Folding trades memory for time, and folded results stay with the program, so it is bounded twice: one
operator's results by :data:`FOLD_LIMIT_BYTES`, and what all of them hold by the program's estimated peak
working set (:func:`~ironaccel.tosa.working_set.estimate`, which the runtime checks against the caller's
bounds before load), never beyond :data:`FOLD_TOTAL_LIMIT_BYTES`. Past that, the remaining foldable
operators run at run time. A kernel that fails while folding is left for the run, which reports the
error with its context.
"""

from __future__ import annotations

import numpy as np

from ...tosa.errors import ValidationError
from ...tosa.ir import Program
from ...tosa.operators import Op
from .block_plan import Step, storage_matches

# Operators never evaluated at load: they have effects, or they run other blocks.
_NOT_FOLDABLE = frozenset({Op.COND_IF, Op.WHILE_LOOP, Op.VARIABLE, Op.VARIABLE_READ, Op.VARIABLE_WRITE, Op.CUSTOM})
# A constant that big (a TILE of a small constant, say) stays lazy.
FOLD_LIMIT_BYTES = 64 << 20
# What folding adds in all, at most (and never more than the program's estimated peak working set).
FOLD_TOTAL_LIMIT_BYTES = 256 << 20
# Their results are their operands or their tensor's data: no bytes of their own.
_FOLDED_FREE = frozenset({Op.CONST, Op.CONST_SHAPE, Op.IDENTITY})


class ConstantFolder:
    """Folding's account for one program: ``folded_bytes``, what folded results hold of their own (a view
    of a constant holds nothing), against the budget fixed at the first fold that may cost bytes."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.folded_bytes = 0
        self._budget: int | None = None

    def fold(self, step: Step, template: list[np.ndarray | None], constant: set[int]) -> bool:
        """Evaluate ``step`` now if all its operands are constants; True when it became constants (its
        results in ``template``, their slots in ``constant``).

        Never allocates past the program's folding budget: an operator whose results could take more
        than what is left of it stays for the run."""
        ctx = step.ctx
        if ctx.operator.op in _NOT_FOLDABLE or step.read_vars or step.write_vars:
            return False
        if not all(s in constant for s in step.inputs):
            return False
        if any(t.unranked or any(d < 0 for d in t.shape) for t in ctx.outputs):
            return False
        need = sum(t.size * t.dtype.numpy.itemsize for t in ctx.outputs)
        if need > FOLD_LIMIT_BYTES:
            return False
        operands = [template[s] for s in step.inputs]
        op = ctx.operator.op
        # CONST gives its tensor's data, IDENTITY its operand, and RESHAPE views a C-contiguous operand: they
        # cost no bytes, within any budget.
        free = op in _FOLDED_FREE or (op is Op.RESHAPE and operands[0] is not None and operands[0].flags.c_contiguous)
        if not free:
            if self._budget is None:  # once per program, at its first fold that may cost bytes
                from ...tosa.working_set import estimate

                try:
                    peak = estimate(self.program).peak_bytes
                except ValidationError:
                    peak = 0  # the load reports what is wrong; meanwhile nothing is folded that costs bytes
                self._budget = min(FOLD_TOTAL_LIMIT_BYTES, peak)
            if self.folded_bytes + need > self._budget:
                return False
        try:
            with np.errstate(all="ignore"):
                results = step.kernel(ctx, operands)
        except Exception:  # noqa: BLE001 - leave it to the run, which reports the error with its context
            return False
        if len(results) != len(step.outputs) or not all(
            isinstance(r, np.ndarray) and storage_matches(t, r) for t, r in zip(ctx.outputs, results, strict=True)
        ):
            return False
        if op not in (Op.CONST, Op.CONST_SHAPE):  # their data is the program's already
            owned = [r for r in results if not any(np.may_share_memory(r, x) for x in operands if x is not None)]
            self.folded_bytes += sum(r.nbytes for r in owned)
        for s, value in zip(step.outputs, results, strict=True):
            if value.flags.writeable:  # a fresh result: freeze a view of it, constants are shared by runs
                value = value.view()
                value.flags.writeable = False
            template[s] = value
            constant.add(s)
        return True
