"""NVFP4 projections on the CPU: the oracle other backends' NVFP4 kernels are checked against.

Each run decodes the weights exactly (:func:`ironaccel.nvfp4.codec.decode`: float32, one rounding per
element), multiplies in float32 through BLAS, and applies the activation in float64 rounded once to
float32. Weights are inputs of every run, so nothing but the projection's description stays resident.
The mixture-of-experts form (ADR 0042) is its two projections in turn, the squared ReLU between them
rounded to float32 as the other forms' activations are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...nvfp4 import codec
from ...nvfp4.bounds import Form
from ...nvfp4.moe import MoEProjection
from ...nvfp4.projection import ProjectionArtifact

RESIDENT_BYTES = 256  # the description and the runner: no constants


def activate(values: np.ndarray, activation: str) -> np.ndarray:
    """``activation`` of float32 ``values``, evaluated in float64 and rounded once to float32."""
    if activation == "none":
        return values
    wide = values.astype(np.float64)
    if activation == "squared_relu":
        result = np.square(np.maximum(wide, 0.0))
    else:
        with np.errstate(over="ignore"):  # exp(-v) overflows to inf for v < -709: sigmoid is then 0
            sigmoid = 1.0 / (1.0 + np.exp(-wide))
        result = sigmoid if activation == "sigmoid" else wide * sigmoid
    return result.astype(np.float32)


class ProjectionRunner:
    """Runs one projection: ``run(inputs)`` returns ``[y]``; ``run_into(inputs, [y])`` fills y."""

    def __init__(self, projection: ProjectionArtifact) -> None:
        self.projection = projection

    def run(
        self,
        inputs: Sequence[np.ndarray],
        destinations: Sequence[np.ndarray | None] | None = None,
        check: Callable[[], None] | None = None,
    ) -> list:
        if check is not None:  # one product: looked at once, before it starts
            check()
        return [self._compute(inputs)]

    def run_into(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        outputs[0][...] = self._compute(inputs)

    def _compute(self, inputs: Sequence[np.ndarray]) -> np.ndarray:
        p = self.projection
        x = inputs[0]
        if p.form is Form.MOE:
            return _moe(p, inputs)  # type: ignore[arg-type]
        if p.form is Form.EXPERTS:
            y = np.empty((p.count, p.m, p.n), np.float32)
            for e in range(p.count):
                packed, scales, tensor = inputs[1 + 3 * e : 4 + 3 * e]
                y[e] = x[e] @ _decode(packed, scales, tensor).T
        elif p.form is Form.BATCHED:
            packed, scales, tensor = inputs[1:4]
            y = np.matmul(_decode(packed, scales, tensor), x[:, :, None])[:, :, 0]
        else:
            packed, scales, tensor = inputs[1:4]
            y = x @ _decode(packed, scales, tensor).T
        return activate(y, p.activation)


def _moe(p: MoEProjection, inputs: Sequence[np.ndarray]) -> np.ndarray:
    x, blobs = inputs[0], inputs[1 : 1 + p.experts]
    up_tensor, down_tensor = inputs[1 + p.experts], inputs[2 + p.experts]
    y = np.empty((p.experts, p.width), np.float32)
    for e, blob in enumerate(blobs):
        up_packed, up_scales, down_packed, down_scales = p.planes(blob, e)
        h = activate(x[e : e + 1] @ _decode(up_packed, up_scales, up_tensor[e]).T, "squared_relu")
        y[e] = (h @ _decode(down_packed, down_scales, down_tensor[e]).T)[0]
    return y


def _decode(packed: np.ndarray, scales: np.ndarray, tensor: np.ndarray) -> np.ndarray:
    return codec.decode(packed, scales.view(np.uint8), tensor)
