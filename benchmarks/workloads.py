"""The benchmark's workloads: one TOSA program each, plus what every peer needs to run the same computation.

A :class:`Workload` carries the .tosa flatbuffer (run by IronAccel, IREE and the reference model), the inputs
in TOSA layout, and factories for the framework peers: an ONNX model for onnxruntime and a torch module for
torch eager, with adapters that turn our inputs into theirs and their outputs back into our layout (so every
peer's result can be checked against ours). Layout conversions happen outside the timed region: each peer
gets its inputs in its own native layout, which is what a user of that library would hand it.

This module imports torch and onnx lazily, so building the TOSA side needs only numpy and ironaccel.
"""

from __future__ import annotations

import dataclasses
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ironaccel.tosa.builder import ProgramBuilder
from ironaccel.tosa.codec import write

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "src" / "ironaccel" / "models"
EXAMPLES = REPO / "examples"

Arrays = list[np.ndarray]


@dataclasses.dataclass
class Workload:
    name: str
    description: str
    tosa: bytes
    inputs: Arrays  # TOSA layout, what IronAccel / IREE / the reference model get
    # Framework peers: None means "not applicable" and ``framework_note`` says why or what they run instead.
    onnx_model: Callable[[], bytes] | None = None
    torch_module: Callable[[], Any] | None = None
    to_framework: Callable[[Arrays], Arrays] = lambda xs: xs  # our inputs -> ORT / torch inputs (numpy)
    torch_inputs: Callable[[Arrays], list[Any]] | None = None  # our inputs -> torch tensors (default: from_numpy)
    from_framework: Callable[[np.ndarray], np.ndarray] = lambda y: y  # their output -> our layout
    framework_same_work: bool = True  # False: ORT / torch run a related model, outputs are not compared
    framework_note: str = ""
    ref_reps: int = 5  # reference-model calls per workload (it is slow; each call re-reads the graph)


# -- micro workloads built with our builder ------------------------------------------------------------
def conv_workload(seed: int = 0) -> Workload:
    """CONV2D fp32, NHWC 1x224x224x3 -> 64 channels, 3x3, stride 1, pad 1, with bias."""
    rng = np.random.default_rng(seed)
    weight = (rng.standard_normal((64, 3, 3, 3)) * 0.2).astype(np.float32)  # OHWI, TOSA's layout
    bias = rng.standard_normal(64).astype(np.float32)
    b = ProgramBuilder()
    x = b.input("x", (1, 224, 224, 3), "fp32")
    b.output(b.conv2d(x, weight, bias, pad=(1, 1, 1, 1)))
    inputs = [rng.standard_normal((1, 224, 224, 3)).astype(np.float32)]
    weight_oihw = np.ascontiguousarray(weight.transpose(0, 3, 1, 2))

    def onnx_model() -> bytes:
        from onnx import TensorProto, helper, numpy_helper

        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
        graph = helper.make_graph(
            [node],
            "conv",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 224, 224])],
            [numpy_helper.from_array(weight_oihw, "w"), numpy_helper.from_array(bias, "b")],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()

    def torch_module() -> Any:
        import torch

        conv = torch.nn.Conv2d(3, 64, 3, padding=1)
        with torch.no_grad():
            conv.weight.copy_(torch.from_numpy(weight_oihw))
            conv.bias.copy_(torch.from_numpy(bias))
        # channels_last: torch's fast path for NHWC data, and our input already is NHWC in memory.
        return conv.eval().to(memory_format=torch.channels_last)

    def torch_inputs(xs: Arrays) -> list[Any]:
        import torch

        return [torch.from_numpy(xs[0]).permute(0, 3, 1, 2)]  # NHWC memory viewed as NCHW: channels_last

    return Workload(
        "conv 224x224x3->64 3x3 fp32",
        "CONV2D fp32 NHWC [1,224,224,3] * [64,3,3,3] + bias, pad 1",
        write(b.build()),
        inputs,
        onnx_model,
        torch_module,
        # ONNX Conv is NCHW only: ORT gets the transposed input (made once, untimed) and returns NCHW.
        to_framework=lambda xs: [np.ascontiguousarray(xs[0].transpose(0, 3, 1, 2))],
        torch_inputs=torch_inputs,
        from_framework=lambda y: np.asarray(y).transpose(0, 2, 3, 1),
        ref_reps=3,
    )


def matmul_workload(seed: int = 1) -> Workload:
    """MATMUL fp32 [1,512,512] x [1,512,512], both operands inputs."""
    rng = np.random.default_rng(seed)
    b = ProgramBuilder()
    a_in = b.input("a", (1, 512, 512), "fp32")
    b_in = b.input("b", (1, 512, 512), "fp32")
    b.output(b.matmul(a_in, b_in))
    inputs = [rng.standard_normal((1, 512, 512)).astype(np.float32) for _ in range(2)]

    def onnx_model() -> bytes:
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["y"])],
            "matmul",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 512, 512]) for n in ("a", "b")],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 512, 512])],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()

    def torch_module() -> Any:
        import torch

        class MatMul(torch.nn.Module):
            def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
                return torch.matmul(a, b)

        return MatMul().eval()

    return Workload(
        "matmul 512^3 fp32",
        "MATMUL fp32 [1,512,512] x [1,512,512] (both inputs)",
        write(b.build()),
        inputs,
        onnx_model,
        torch_module,
        ref_reps=3,
    )


# -- the bundled framework-produced programs ------------------------------------------------------------
def _export_models() -> Any:
    """examples/export_models.py as a module (it defines the PyTorch modules the programs came from)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    import export_models

    return export_models


def _seeded_modules() -> dict[str, Any]:
    """The three modules with the weights the bundled programs were exported with: export_models.py seeds
    torch with 0 and constructs them in this order, so constructing them the same way reproduces them
    (checked against the saved torch output below, to float rounding)."""
    import torch

    em = _export_models()
    torch.manual_seed(0)
    modules = {
        "cnn_fp32": em.SmallCNN().eval(),
        "attention_fp32": em.AttentionBlock().eval(),
        "cnn_int8": em.QuantCNN().eval(),
    }
    for name, module in modules.items():
        saved = np.load(MODELS / f"{name}.torch.npz")
        with torch.no_grad():
            got = module(torch.from_numpy(saved["input"])).numpy()
        # Same weights give the same output up to summation order, which differs between CPUs (AVX2 vs
        # AVX-512 kernels); a wrong weight would be off by far more than this.
        if not np.allclose(got, saved["output"], rtol=1e-5, atol=1e-6):
            raise RuntimeError(f"re-created {name} module does not reproduce the saved torch output")
    return modules


_MODULES: dict[str, Any] = {}


def framework_module(name: str) -> Any:
    if not _MODULES:
        _MODULES.update(_seeded_modules())
    return _MODULES[name]


def _onnx_export(name: str, example: np.ndarray) -> bytes:
    import torch

    buffer = io.BytesIO()
    # The TorchScript exporter: the dynamo one needs onnxscript, which this benchmark does not install.
    torch.onnx.export(framework_module(name), (torch.from_numpy(example),), buffer, dynamo=False, opset_version=17)
    return buffer.getvalue()


def framework_workload(name: str) -> Workload:
    meta = json.loads((MODELS / f"{name}.json").read_text())
    saved = np.load(MODELS / f"{name}.torch.npz")
    tosa = (MODELS / f"{name}.tosa").read_bytes()
    example = saved["input"].astype(np.float32)
    if not meta.get("quantized"):
        return Workload(
            name,
            f"{meta['description']} (bundled .tosa, input {meta['input_shape']})",
            tosa,
            [example],
            onnx_model=lambda: _onnx_export(name, example),
            torch_module=lambda: framework_module(name),
            ref_reps=20,
        )
    # The int8 program takes an int8 tensor (the quantize step ran outside the delegated graph) and its
    # scales are not in the .tosa, so no framework model computes the same integers. ORT and torch run the
    # fp32 module the program was quantized from, on the saved float input: same layers, float arithmetic.
    rng = np.random.default_rng(2)
    int8_input = rng.integers(-128, 128, meta["input_shape"]).astype(np.int8)
    return Workload(
        name,
        f"{meta['description']} (bundled .tosa, int8 input {meta['input_shape']})",
        tosa,
        [int8_input],
        onnx_model=lambda: _onnx_export(name, example),
        torch_module=lambda: framework_module(name),
        to_framework=lambda xs: [example],
        framework_same_work=False,
        framework_note="ORT and torch run the fp32 QuantCNN it was quantized from (float work, not compared)",
        ref_reps=20,
    )


WORKLOADS: dict[str, Callable[[], Workload]] = {
    "conv": conv_workload,
    "matmul": matmul_workload,
    "cnn_fp32": lambda: framework_workload("cnn_fp32"),
    "attention_fp32": lambda: framework_workload("attention_fp32"),
    "cnn_int8": lambda: framework_workload("cnn_int8"),
}
