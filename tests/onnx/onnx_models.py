"""Small ONNX models written with onnx's helper API, and onnxruntime's outputs for them: run as a script by
the ONNX environment's interpreter (the test process has neither onnx nor onnxruntime).

    python onnx_models.py build NAME OUT.onnx
    python onnx_models.py reference MODEL.onnx INPUTS.npz OUT.npz   (inputs and outputs in graph order)
"""

from __future__ import annotations

import sys

import numpy as np


def _conv_relu_matmul(symbolic: bool = False):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {
        "w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.2,
        "b": rng.standard_normal(8).astype(np.float32) * 0.1,
        "m": rng.standard_normal((8 * 6 * 6, 10)).astype(np.float32) * 0.05,
        "shape": np.array([0, -1], np.int64),  # 0: the batch as it comes
    }
    nodes = [
        helper.make_node("Conv", ["image", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[0, 0, 0, 0]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["f"]),
        helper.make_node("MatMul", ["f", "m"], ["logits"]),
    ]
    batch = "N" if symbolic else 1
    graph = helper.make_graph(
        nodes,
        "conv_relu_matmul",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _two_inputs():
    """Shapes computed at run time (Shape -> Gather -> Concat -> Reshape), as torch.onnx.export writes them,
    two inputs and two outputs."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Shape", ["s"], ["dims"]),
        helper.make_node("Gather", ["dims", "zero"], ["n"], axis=0),
        helper.make_node("Concat", ["n", "minus_one"], ["flat"], axis=0),
        helper.make_node("Reshape", ["s", "flat"], ["sum"]),
        helper.make_node("Sigmoid", ["a"], ["gate"]),
    ]
    graph = helper.make_graph(
        nodes,
        "two_inputs",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3, 4]) for n in ("a", "b")],
        [
            helper.make_tensor_value_info("sum", TensorProto.FLOAT, [2, 12]),
            helper.make_tensor_value_info("gate", TensorProto.FLOAT, [2, 3, 4]),
        ],
        [
            numpy_helper.from_array(np.array([0], np.int64), "zero"),
            numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _one_operator(op: str):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"])],
        op.lower(),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


MODELS = {
    "conv_relu_matmul": _conv_relu_matmul,
    "conv_relu_matmul_symbolic": lambda: _conv_relu_matmul(symbolic=True),
    "two_inputs": _two_inputs,
    "sinh": lambda: _one_operator("Sinh"),
    "hardmax": lambda: _one_operator("Hardmax"),
}


def main(argv: list[str]) -> int:
    if argv[1] == "build":
        import onnx

        model = MODELS[argv[2]]()
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, argv[3])
        return 0
    import onnxruntime as ort

    session = ort.InferenceSession(argv[2], providers=["CPUExecutionProvider"])
    given = np.load(argv[3])
    feeds = {i.name: given[i.name] for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    np.savez(argv[4], **dict(zip(names, session.run(None, feeds), strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
