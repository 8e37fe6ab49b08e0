"""VARIABLE, VARIABLE_READ and VARIABLE_WRITE on the interpreter's variable store.

The attribute records of these operators are empty: the variable an operator means is the tensor
flagged ``variable`` among its operands or results (its ``variable_name``, else its tensor name; the
initial value is that tensor's data). The interpreter already declares every variable tensor when it
loads the program, and it reads and writes the store for variable operands and results itself, so these
kernels only cover the forms where the variable is named without being passed as a value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....core.errors import InternalError
from ....tosa.ir import Tensor
from ....tosa.operators import Op
from ..block_plan import variable_key
from ..kernel import KernelContext, kernel


def _variable_among(tensors: Sequence[Tensor]) -> int | None:
    for index, tensor in enumerate(tensors):
        if tensor.variable:
            return index
    return None


@kernel(Op.VARIABLE)
def variable(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    # Declaration happened at load; a result (the variable itself) gets the current value.
    return [ctx.variable(variable_key(t)) for t in ctx.outputs]


@kernel(Op.VARIABLE_READ)
def variable_read(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    index = _variable_among(ctx.inputs)
    if index is None:
        raise InternalError("VARIABLE_READ names no variable tensor")
    return [ctx.variable(variable_key(ctx.inputs[index]))]


@kernel(Op.VARIABLE_WRITE)
def variable_write(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    target = _variable_among(ctx.inputs)
    if target is not None:  # operands (variable, value): write here
        value = inputs[1 - target] if len(inputs) == 2 else inputs[-1]
        ctx.set_variable(variable_key(ctx.inputs[target]), value)
        return [value for _ in ctx.outputs]
    if _variable_among(ctx.outputs) is None:
        raise InternalError("VARIABLE_WRITE names no variable tensor")
    # operand (value,) and result (variable,): the interpreter stores the result
    return [inputs[0] for _ in ctx.outputs]
