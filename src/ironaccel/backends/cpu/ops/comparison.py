"""CPU kernels of the comparison operators.

Floats are compared as float64 (exact for every TOSA float type): NaN on either side gives false,
and +0 equals -0, as the spec's comparison rules require; IEEE comparisons already behave so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ....tosa.operators import Op
from .. import numerics
from ..kernel import KernelContext, kernel


def _compare(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], doc: str):
    def run(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
        if a.dtype == b.dtype and a.dtype.kind in "fi":
            pass  # numpy's own types compare exactly as stored: no widening needed
        elif ctx.inputs[0].dtype.is_float:
            a, b = numerics.to_float64(a), numerics.to_float64(b)
        else:
            a, b = a.astype(np.int64), b.astype(np.int64)
        return [np.asarray(fn(a, b), dtype=np.bool_)]

    run.__doc__ = doc
    return run


kernel(Op.EQUAL)(_compare(np.equal, "input1 == input2; false when either is NaN."))
kernel(Op.GREATER)(_compare(np.greater, "input1 > input2; false when either is NaN."))
kernel(Op.GREATER_EQUAL)(_compare(np.greater_equal, "input1 >= input2; false when either is NaN."))
