"""GATHER and SCATTER along the K axis of [N,K,C] tensors with int32 [N,W] indices.

The specification makes an index outside [0, K) (and, for SCATTER, two writes to one position)
unpredictable rather than an error; numpy would silently wrap negative indices, so both are checked
and reported as :class:`~ironaccel.tosa.errors.ValidationError` with ``unpredictable=True``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....tosa.errors import ValidationError
from ....tosa.operators import Op
from ..kernel import KernelContext, kernel


def _check_indices(op: str, indices: np.ndarray, k: int) -> None:
    if indices.size and (indices.min() < 0 or indices.max() >= k):
        raise ValidationError(f"{op} index outside [0, {k})", op=op, unpredictable=True)


@kernel(Op.GATHER)
def gather(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    values, indices = inputs
    _check_indices("GATHER", indices, values.shape[1])
    return [np.take_along_axis(values, indices.astype(np.intp)[:, :, None], axis=1)]


@kernel(Op.SCATTER)
def scatter(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    values_in, indices, updates = inputs
    _check_indices("SCATTER", indices, values_in.shape[1])
    ordered = np.sort(indices, axis=1)
    if ordered.shape[1] > 1 and np.any(ordered[:, 1:] == ordered[:, :-1]):
        raise ValidationError("SCATTER writes one position twice", op="SCATTER", unpredictable=True)
    out = values_in.copy()
    batch = np.arange(values_in.shape[0])[:, None]
    out[batch, indices.astype(np.intp)] = updates
    return [out]
