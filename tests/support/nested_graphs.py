"""Blocks that run each other through COND_IF, for the tests of nesting depth and call-graph cycles (the
validator's, the analysis's and the interpreter's)."""

from __future__ import annotations

import numpy as np

from ironaccel.tosa import Block, DType, Op, Operator, Tensor
from ironaccel.tosa.attributes import ATTRIBUTE_OF


def calls_block(name: str, then: str, other: str) -> Block:
    """A block whose COND_IF (on a constant condition) runs ``then`` or ``other`` on its int32 input."""
    cond_if = Operator(Op.COND_IF, ("c", "x"), ("y",), ATTRIBUTE_OF[Op.COND_IF](then_graph=then, else_graph=other))
    condition = Tensor("c", (1,), DType.BOOL, np.array([True]))
    tensors = (condition, Tensor("x", (1,), DType.INT32), Tensor("y", (1,), DType.INT32))
    return Block(name, (Operator(Op.CONST, (), ("c",)), cond_if), tensors, ("x",), ("y",))


def step_block(name: str, then: str | None, other: str | None = None) -> Block:
    """A block that adds one to its int32 input and, where ``then`` is given, hands the sum to a COND_IF
    (always true) over ``then`` / ``other``."""
    i32 = DType.INT32
    ops = [Operator(Op.CONST, (), ("c",)), Operator(Op.CONST, (), ("one",))]
    if then is None:
        ops.append(Operator(Op.ADD, ("x", "one"), ("y",)))
    else:
        graphs = ATTRIBUTE_OF[Op.COND_IF](then_graph=then, else_graph=other or then)
        ops += [Operator(Op.ADD, ("x", "one"), ("x1",)), Operator(Op.COND_IF, ("c", "x1"), ("y",), graphs)]
    tensors = (
        Tensor("c", (1,), DType.BOOL, np.array([True])),
        Tensor("one", (1,), i32, np.array([1], np.int32)),
        *(Tensor(n, (1,), i32) for n in ("x", "x1", "y")),
    )
    return Block(name, tuple(ops), tensors, ("x",), ("y",))


__all__ = ["calls_block", "step_block"]
