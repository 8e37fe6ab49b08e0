#!/usr/bin/env python3
"""Produce the bundled TOSA programs from PyTorch models with ``ironaccel.torch.export`` (ExecuTorch's Arm
TOSA backend).

Usage (in the environment of `make export-env`: ironaccel, torch 2.13 and executorch 1.5; see `make models`):
    python examples/export_models.py OUT_DIR

Writes, for each model, NAME.tosa (the TOSA 1.0 flatbuffer ExecuTorch emits, its input named after
``forward``'s parameter and its output ``output``), NAME.json (what it is, its input shape and what the
export's metadata holds) and NAME.torch.npz (a seeded input and torch's own output for that input, so
tests can compare IronAccel's result with the framework's without torch installed).

For a quantized model the delegated TOSA graph takes and returns integers: ExecuTorch quantizes the
float input before it (quantize_per_tensor) and dequantizes its output after it
(dequantize_per_tensor). Those two steps, which the export reads from the lowered graph, are recorded so
the integer program can be compared with torch:

* NAME.json ``"quantization"``: ``{"inputs": [QP, ...], "outputs": [QP, ...]}``, one entry per input /
  output of the delegated graph, in its order, each ``{"scheme": "per_tensor_affine", "scale": float,
  "zero_point": int, "dtype": "int8", "qmin": int, "qmax": int}``, read from the lowered edge program.
  q = clamp(round(x / scale) + zero_point, qmin, qmax) and x = (q - zero_point) * scale.
* NAME.torch.npz, besides ``input`` (float) and ``output`` (the float model's output):
  ``input_int8``, the input quantized exactly as ExecuTorch's graph does it (the tensor the TOSA
  program receives); ``output_qmodel``, the output of the whole quantized model (the converted pt2e
  module, float, after the final dequantize: what ExecuTorch computes end to end); and
  ``output_qmodel_int8``, the integers of that output before its dequantize (comparable with the TOSA
  program's output directly).

Float models' files carry only ``input`` and ``output`` and no ``"quantization"`` entry.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np
import torch
from torch import nn

from ironaccel.torch import export


class SmallCNN(nn.Module):
    """Conv → ReLU → conv (stride 2) → ReLU6 → depthwise conv → global mean → linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = torch.nn.functional.relu6(self.conv2(x))
        x = torch.relu(self.dw(x))
        x = x.mean(dim=(2, 3))  # global average pool
        return self.fc(x)


class QuantCNN(nn.Module):
    """An int8-friendly CNN: three convolutions with ReLU, then a linear classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.fc = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x).flatten(1))


class AttentionBlock(nn.Module):
    """A pre-norm transformer encoder block: self-attention and an MLP, each with a residual."""

    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def _quantize(x: torch.Tensor, qp: dict[str, Any]) -> torch.Tensor:
    """The same quantize_per_tensor operator ExecuTorch's graph runs before the delegate."""
    return torch.ops.quantized_decomposed.quantize_per_tensor.default(
        x, qp["scale"], qp["zero_point"], qp["qmin"], qp["qmax"], getattr(torch, qp["dtype"])
    )


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    jobs = [
        ("cnn_fp32", SmallCNN().eval(), (1, 3, 32, 32), None, "small CNN (conv, depthwise, mean, linear)"),
        ("attention_fp32", AttentionBlock().eval(), (1, 16, 64), None, "transformer encoder block"),
        ("cnn_int8", QuantCNN().eval(), (1, 3, 32, 32), "int8", "small CNN quantized to int8 (pt2e)"),
    ]
    for name, model, shape, quantize, text in jobs:
        example = torch.randn(shape)
        # calibrated as the bundled int8 model always was: eight seeded random batches
        calibration = [(torch.randn_like(example),) for _ in range(8)] if quantize else None
        made = export(model, (example,), quantize, calibration=calibration, description=text)
        with open(os.path.join(out, f"{name}.tosa"), "wb") as f:
            f.write(made.tosa)
        with torch.no_grad():
            arrays = {"input": example.numpy(), "output": model(example).numpy()}
        meta: dict[str, Any] = {"input_shape": list(shape)} | made.metadata
        if quantize:
            (qin,), (qout,) = made.metadata["quantization"]["inputs"], made.metadata["quantization"]["outputs"]
            with torch.no_grad():
                qmodel_output = made.quantized_module(example)
            arrays["input_int8"] = _quantize(example, qin).numpy()
            arrays["output_qmodel"] = qmodel_output.numpy()
            # the model ends in quantize -> dequantize: quantizing its output again gives those integers back
            arrays["output_qmodel_int8"] = _quantize(qmodel_output, qout).numpy()
        np.savez(os.path.join(out, f"{name}.torch.npz"), **arrays)
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"{name}: {len(made.tosa)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
