"""NVFP4 weights: an artifact format of ours beside TOSA (ADR 0012).

TOSA 1.0 has no 4-bit float type, yet NVFP4 checkpoints are how large models ship. This package holds
their storage contract — E2M1 values packed two per byte (low nibble first), one FP8 E4M3 scale per
16 consecutive elements along k, one FP32 tensor scale (:mod:`.codec`) — quantization and exact decode
(:mod:`.quantize`), and the projections a device compiles (:mod:`.projection`, serialized by
:mod:`.format`)::

    from ironaccel import nvfp4
    q = nvfp4.quantize(w)                      # w (n, k) float32, k % 16 == 0
    w_hat = nvfp4.dequantize(q)                # exact decode, (n, k) float32
    exe = dev.compile(nvfp4.Projection(m=m, n=n, k=k, activation="silu"))
    y, = exe(x, q.packed, q.scales, q.tensor_scale)   # y = act(x @ w_hat.T)
    weights = dev.array(q)                     # or: the weights uploaded once, bound in place by every call
    y, = exe(x, weights)

Upstream virtio-accel's artifacts (VKNVFP4 projections, VKNVMOE mixtures of experts; ADR 0042) are read
and written by :mod:`.upstream`; the mixture of experts is :class:`MoEProjection` (:mod:`.moe`)::

    moe = nvfp4.MoEProjection.packed(experts=4, width=w, inner=i)
    blobs = [nvfp4.pack_expert(up_q[e], down_q[e]) for e in range(4)]
    y, = dev.compile(moe)(x, *blobs, up_tensor_scales, down_tensor_scales)

It sits between the TOSA program model and the runtime: it uses TOSA's error types, and the runtime
loads its artifacts (format ids ``NVFP4_FORMAT`` and upstream's ``VKNVFP4_FORMAT``) on backends that
declare them.
"""

from . import upstream
from .bounds import ACTIVATIONS, BLOCK, Form
from .errors import HeaderError
from .format import MAGIC, VERSION
from .moe import MoEProjection, pack_expert
from .projection import BatchedProjection, ExpertProjection, Operand, Projection, ProjectionArtifact, from_bytes
from .quantize import QuantizedWeights, dequantize, quantize

__all__ = [
    "ACTIVATIONS",
    "BLOCK",
    "MAGIC",
    "VERSION",
    "BatchedProjection",
    "ExpertProjection",
    "Form",
    "HeaderError",
    "MoEProjection",
    "Operand",
    "Projection",
    "ProjectionArtifact",
    "QuantizedWeights",
    "dequantize",
    "from_bytes",
    "pack_expert",
    "quantize",
    "upstream",
]
