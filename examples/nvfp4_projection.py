"""Quantize a weight matrix to NVFP4 and run a projection with it on the CPU backend.

    python examples/nvfp4_projection.py

``nvfp4.quantize`` turns a float32 (n, k) weight into 4-bit E2M1 codes (two per byte), one FP8 E4M3 scale
per 16 values along k and one float32 tensor scale. A compiled ``nvfp4.Projection`` computes
``act(x @ w_hat.T)``, where ``w_hat = nvfp4.dequantize(q)`` is the exact decode of those weights; this
script checks that against numpy and shows how far the quantized weights are from the original ones.
The weights go to the device once (``dev.array(q)``), so each call moves only its activations and outputs.
"""

from __future__ import annotations

import sys

import numpy as np

import ironaccel as ia
from ironaccel import nvfp4


def silu(v: np.ndarray) -> np.ndarray:
    wide = v.astype(np.float64)
    return (wide / (1.0 + np.exp(-wide))).astype(np.float32)


def main() -> int:
    m, n, k = 4, 64, 256  # k: a multiple of 16 (one FP8 scale per 16 values)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((n, k)).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    q = nvfp4.quantize(w)
    w_hat = nvfp4.dequantize(q)
    print(f"weights: {w.nbytes} bytes float32 -> {q.packed.nbytes + q.scales.nbytes + 4} bytes NVFP4")
    print(f"quantization error: max |w - w_hat| / max |w| = {np.abs(w - w_hat).max() / np.abs(w).max():.3f}")
    with ia.open("cpu") as dev:
        exe = dev.compile(nvfp4.Projection(m=m, n=n, k=k, activation="silu"))
        weights = dev.array(q)  # packed codes, scales and tensor scale written once; calls bind them in place
        (y,) = exe(x, weights)  # x goes in and y comes back as numpy arrays
    want = silu(x @ w_hat.T)
    error = float(np.abs(y - want).max() / np.abs(want).max())
    print(f"y: shape {y.shape}, first values {np.array2string(y.ravel()[:4], precision=4)}")
    print(f"against silu(x @ nvfp4.dequantize(q).T): largest difference {error:.2e} of the largest value")
    agree = error < 1e-5
    print(f"agree: {'yes' if agree else 'NO'}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
