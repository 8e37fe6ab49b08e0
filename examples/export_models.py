#!/usr/bin/env python3
"""Produce the bundled TOSA programs from PyTorch models with ExecuTorch's Arm backend.

Usage (in an environment with torch 2.13 and executorch 1.5; see `make models`):
    python examples/export_models.py OUT_DIR

Writes, for each model, NAME.tosa (TOSA 1.0 flatbuffer as ExecuTorch emits it), NAME.json (what it
is, its input shapes) and NAME.torch.npz (a seeded input and torch's own output for that input, so
tests can compare IronAccel's result with the framework's without torch installed).

For a quantized model the delegated TOSA graph takes and returns integers: ExecuTorch quantizes the
float input before it (quantize_per_tensor) and dequantizes its output after it
(dequantize_per_tensor). Those two steps are recorded so the integer program can be compared with torch:

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

import dataclasses
import glob
import json
import operator
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import Any

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


@dataclasses.dataclass
class Lowered:
    payload: bytes  # the delegated TOSA flatbuffer
    quantized_model: Callable[[torch.Tensor], torch.Tensor] | None = None  # the converted pt2e module
    input_qparams: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    output_qparams: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def _op_of(node: torch.fx.Node) -> Any:
    """The torch operator a call node runs (edge dialect operators wrap one)."""
    return getattr(node.target, "_op", node.target)


def _qparams(node: torch.fx.Node) -> dict[str, Any]:
    """Scale, zero point, dtype and range of a quantized_decomposed per-tensor (de)quantize node."""
    names = [argument.name for argument in node.target._schema.arguments]
    bound = dict(zip(names, node.args, strict=False)) | dict(node.kwargs)
    for key in ("scale", "zero_point"):
        if isinstance(bound[key], torch.fx.Node):
            raise RuntimeError(f"{node.name}: {key} is computed in the graph, expected a constant")
    return {
        "scheme": "per_tensor_affine",
        "scale": float(bound["scale"]),
        "zero_point": int(bound["zero_point"]),
        "dtype": str(bound["dtype"]).removeprefix("torch."),
        "qmin": int(bound["quant_min"]),
        "qmax": int(bound["quant_max"]),
    }


def _delegate_qparams(graph: torch.fx.Graph) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The quantization ExecuTorch applies around the one delegated partition: the quantize_per_tensor
    feeding each delegate input and the dequantize_per_tensor reading each delegate output."""
    quantize = torch.ops.quantized_decomposed.quantize_per_tensor.default
    dequantize = torch.ops.quantized_decomposed.dequantize_per_tensor.default
    delegate = torch.ops.higher_order.executorch_call_delegate
    calls = [n for n in graph.nodes if n.op == "call_function" and n.target is delegate]
    if len(calls) != 1:
        raise RuntimeError(f"expected one delegate call in the lowered graph, found {len(calls)}")
    (call,) = calls
    inputs = []
    for arg in call.args[1:]:  # args[0] is the lowered module
        if not (isinstance(arg, torch.fx.Node) and arg.op == "call_function" and _op_of(arg) is quantize):
            raise RuntimeError(f"delegate input {arg} is not produced by quantize_per_tensor")
        inputs.append(_qparams(arg))
    outputs: dict[int, dict[str, Any]] = {}
    for item in call.users:
        if _op_of(item) is not operator.getitem:
            raise RuntimeError(f"unexpected user {item.name} of the delegate call")
        readers = [u for u in item.users if u.op == "call_function" and _op_of(u) is dequantize]
        if len(readers) != 1 or len(item.users) != 1:
            raise RuntimeError(f"delegate output {item.args[1]} is not read by exactly one dequantize_per_tensor")
        outputs[item.args[1]] = _qparams(readers[0])
    return inputs, [outputs[i] for i in sorted(outputs)]


def _lower(model: nn.Module, example: torch.Tensor, spec_name: str, quantize: bool) -> Lowered:
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower

    work = tempfile.mkdtemp(prefix="ironaccel-export-")
    try:
        spec = TosaCompileSpec(spec_name).dump_intermediate_artifacts_to(work)
        exported = torch.export.export(model, (example,), strict=True)
        quantized_model = None
        if quantize:
            from executorch.backends.arm.quantizer import TOSAQuantizer, get_symmetric_quantization_config
            from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

            quantizer = TOSAQuantizer(spec, use_composable_quantizer=True)
            quantizer.set_global(get_symmetric_quantization_config())
            prepared = prepare_pt2e(exported.module(check_guards=False), quantizer)
            for _ in range(8):  # calibration
                prepared(torch.randn_like(example))
            quantized_model = convert_pt2e(prepared)
            exported = torch.export.export(quantized_model, (example,))
        edge = to_edge_transform_and_lower(exported, partitioner=[TOSAPartitioner(spec)])
        files = glob.glob(os.path.join(work, "**", "*.tosa"), recursive=True)
        if len(files) != 1:
            raise RuntimeError(f"expected one delegated TOSA graph, found {files}")
        with open(files[0], "rb") as f:
            lowered = Lowered(f.read(), quantized_model)
        if quantize:
            lowered.input_qparams, lowered.output_qparams = _delegate_qparams(edge.exported_program().graph)
        return lowered
    finally:
        shutil.rmtree(work, ignore_errors=True)


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
        lowered = _lower(model, example, spec, quantize)
        with open(os.path.join(out, f"{name}.tosa"), "wb") as f:
            f.write(lowered.payload)
        with torch.no_grad():
            arrays = {"input": example.numpy(), "output": model(example).numpy()}
        meta: dict[str, Any] = {"description": text, "input_shape": list(shape), "profile": spec, "quantized": quantize}
        if quantize:
            (qin,), (qout,) = lowered.input_qparams, lowered.output_qparams
            meta["quantization"] = {"inputs": lowered.input_qparams, "outputs": lowered.output_qparams}
            with torch.no_grad():
                qmodel_output = lowered.quantized_model(example)
            arrays["input_int8"] = _quantize(example, qin).numpy()
            arrays["output_qmodel"] = qmodel_output.numpy()
            # the model ends in quantize -> dequantize: quantizing its output again gives those integers back
            arrays["output_qmodel_int8"] = _quantize(qmodel_output, qout).numpy()
        np.savez(os.path.join(out, f"{name}.torch.npz"), **arrays)
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"{name}: {len(lowered.payload)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
