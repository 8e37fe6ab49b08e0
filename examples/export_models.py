#!/usr/bin/env python3
"""Produce the bundled TOSA programs from PyTorch models with ExecuTorch's Arm backend.

Usage (in an environment with torch 2.13 and executorch 1.5; see `make models`):
    python examples/export_models.py OUT_DIR

Writes, for each model, NAME.tosa (TOSA 1.0 flatbuffer as ExecuTorch emits it), NAME.json (what it
is, its input shapes) and NAME.torch.npz (a seeded input and torch's own output for that input, so
tests can compare IronAccel's result with the framework's without torch installed).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
from torch import nn


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


def _lower(model: nn.Module, example: torch.Tensor, spec_name: str, quantize: bool) -> bytes:
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower

    work = tempfile.mkdtemp(prefix="ironaccel-export-")
    try:
        spec = TosaCompileSpec(spec_name).dump_intermediate_artifacts_to(work)
        exported = torch.export.export(model, (example,), strict=True)
        if quantize:
            from executorch.backends.arm.quantizer import TOSAQuantizer, get_symmetric_quantization_config
            from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

            quantizer = TOSAQuantizer(spec, use_composable_quantizer=True)
            quantizer.set_global(get_symmetric_quantization_config())
            prepared = prepare_pt2e(exported.module(check_guards=False), quantizer)
            for _ in range(8):  # calibration
                prepared(torch.randn_like(example))
            exported = torch.export.export(convert_pt2e(prepared), (example,))
        to_edge_transform_and_lower(exported, partitioner=[TOSAPartitioner(spec)])
        files = glob.glob(os.path.join(work, "**", "*.tosa"), recursive=True)
        if len(files) != 1:
            raise RuntimeError(f"expected one delegated TOSA graph, found {files}")
        with open(files[0], "rb") as f:
            return f.read()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    jobs = [
        (
            "cnn_fp32",
            SmallCNN().eval(),
            (1, 3, 32, 32),
            "TOSA-1.0+FP",
            False,
            "small CNN (conv, depthwise, mean, linear)",
        ),
        ("attention_fp32", AttentionBlock().eval(), (1, 16, 64), "TOSA-1.0+FP", False, "transformer encoder block"),
        ("cnn_int8", QuantCNN().eval(), (1, 3, 32, 32), "TOSA-1.0+INT", True, "small CNN quantized to int8 (pt2e)"),
    ]
    for name, model, shape, spec, quantize, text in jobs:
        example = torch.randn(shape)
        payload = _lower(model, example, spec, quantize)
        with open(os.path.join(out, f"{name}.tosa"), "wb") as f:
            f.write(payload)
        with torch.no_grad():
            expected = model(example).numpy()
        np.savez(os.path.join(out, f"{name}.torch.npz"), input=example.numpy(), output=expected)
        meta = {"description": text, "input_shape": list(shape), "profile": spec, "quantized": quantize}
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"{name}: {len(payload)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
