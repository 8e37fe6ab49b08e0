"""Shape operators of TOSA 1.0: only CONST_SHAPE, whose value is the int64 data of its output."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....tosa.operators import Op
from ..kernel import KernelContext, kernel
from .data_nodes import constant_value


@kernel(Op.CONST_SHAPE)
def const_shape(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [constant_value(ctx)]
