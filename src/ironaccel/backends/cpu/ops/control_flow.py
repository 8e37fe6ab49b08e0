"""COND_IF and WHILE_LOOP: they run other blocks of the program.

Each operator is written once, as a generator (:data:`BLOCK_RUNNERS`): it yields ``(block name,
values)`` for every graph it needs run, is sent that graph's outputs back, and returns the operator's
results. The interpreter drives these generators from an explicit stack (see
:meth:`~..interpreter.CompiledProgram.run`), so a program nested as deep as TOSA allows (MAX_NESTING
256) costs no Python stack per level. The registered kernels drive the same generators by calling
``ctx.run_block`` at once, for kernel contexts other than the interpreter's.

TOSA puts no bound on the number of WHILE_LOOP iterations, and neither does this kernel; a run that
must be stoppable passes a ``check`` hook (or a deadline) to :meth:`CompiledProgram.run`, which the
interpreter calls before every operator and on entry to every graph, so a loop can always be
abandoned (even one whose graphs have no operators).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

import numpy as np

from ....tosa.ir import Operator
from ....tosa.operators import Op
from ..kernel import KernelContext, kernel

# What a control-flow operator yields: a graph to run and its input values; it is sent the graph's outputs.
BlockRequest = tuple[str, list[np.ndarray]]
Blocks = Generator[BlockRequest, list[np.ndarray], list[np.ndarray]]


def _truth(value: np.ndarray) -> bool:
    # The condition is a one-element bool tensor of any rank.
    return bool(np.asarray(value).reshape(-1)[0])


def cond_if_blocks(operator: Operator, inputs: Sequence[np.ndarray]) -> Blocks:
    """COND_IF: the then or the else graph, on every input but the condition."""
    attribute = operator.attribute
    graph = attribute.then_graph if _truth(inputs[0]) else attribute.else_graph
    return (yield graph, list(inputs[1:]))


def while_loop_blocks(operator: Operator, inputs: Sequence[np.ndarray]) -> Blocks:
    """WHILE_LOOP: the cond graph, then the body graph while cond's one element is true."""
    attribute = operator.attribute
    values = list(inputs)
    while _truth((yield attribute.cond_graph, values)[0]):
        values = yield attribute.body_graph, values
    return values


BLOCK_RUNNERS: dict[Op, Callable[[Operator, Sequence[np.ndarray]], Blocks]] = {
    Op.COND_IF: cond_if_blocks,
    Op.WHILE_LOOP: while_loop_blocks,
}


def _run_now(ctx: KernelContext, blocks: Blocks) -> list[np.ndarray]:
    """Drive ``blocks``, running each graph it asks for through ``ctx.run_block`` (one call per level)."""
    results: list[np.ndarray] | None = None
    try:
        while True:
            name, values = blocks.send(results)  # type: ignore[arg-type]  # None starts the generator
            results = ctx.run_block(name, values)
    except StopIteration as done:
        return done.value


@kernel(Op.COND_IF)
def cond_if(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return _run_now(ctx, cond_if_blocks(ctx.operator, inputs))


@kernel(Op.WHILE_LOOP)
def while_loop(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return _run_now(ctx, while_loop_blocks(ctx.operator, inputs))
