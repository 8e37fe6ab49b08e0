"""Data nodes: CONST and IDENTITY.

CONST produces the data its output tensor carries; the interpreter evaluates it once at load (constant
folding), so at run time a constant is only a slot that is already filled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....core.errors import InternalError
from ....tosa.operators import Op
from ..kernel import KernelContext, kernel


def constant_value(ctx: KernelContext) -> np.ndarray:
    """The data of the operator's (single) output tensor; an empty tensor may carry none."""
    (decl,) = ctx.outputs
    if decl.data is not None:
        return decl.data
    if decl.size == 0 and not any(d < 0 for d in decl.shape):
        return np.zeros(decl.shape, decl.dtype.numpy)
    raise InternalError(f"{ctx.operator.op.name} output {decl.name!r} carries no data")


@kernel(Op.CONST)
def const(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [constant_value(ctx)]


@kernel(Op.IDENTITY)
def identity(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    # Kernels never modify their operands, so passing the array on is safe.
    return [inputs[0]]
