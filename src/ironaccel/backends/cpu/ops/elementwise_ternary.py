"""CPU kernel of SELECT, the one elementwise ternary operator."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....tosa.operators import Op
from ..kernel import KernelContext, kernel


@kernel(Op.SELECT)
def select(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``input2`` where the bool ``input1`` is true, else ``input3``, broadcasting all three; values
    are copied bit for bit (NaN payloads and zero signs included)."""
    dtype = ctx.outputs[0].dtype.numpy
    condition = np.asarray(inputs[0], dtype=np.bool_)
    return [np.asarray(np.where(condition, np.asarray(inputs[1], dtype), np.asarray(inputs[2], dtype)), dtype=dtype)]
