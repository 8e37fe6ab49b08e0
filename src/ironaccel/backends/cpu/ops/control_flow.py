"""COND_IF and WHILE_LOOP: they run other blocks of the program through the interpreter.

TOSA puts no bound on the number of WHILE_LOOP iterations, and neither does this kernel; a run that
must be stoppable passes a ``check`` hook (or a deadline) to :meth:`CompiledProgram.run`, which the
interpreter calls before every operator of every block, so a loop can always be abandoned.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....tosa.operators import Op
from ..kernel import KernelContext, kernel


def _truth(value: np.ndarray) -> bool:
    # The condition is a one-element bool tensor of any rank.
    return bool(np.asarray(value).reshape(-1)[0])


@kernel(Op.COND_IF)
def cond_if(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    attribute = ctx.operator.attribute
    graph = attribute.then_graph if _truth(inputs[0]) else attribute.else_graph
    return ctx.run_block(graph, list(inputs[1:]))


@kernel(Op.WHILE_LOOP)
def while_loop(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    attribute = ctx.operator.attribute
    values = list(inputs)
    while _truth(ctx.run_block(attribute.cond_graph, values)[0]):
        values = ctx.run_block(attribute.body_graph, values)
    return values
