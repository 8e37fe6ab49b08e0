"""The Python API as users of onnxruntime and PyTorch expect it: inputs by name, outputs by name,
a program's metadata and quantization, readable reprs, and errors that say what went wrong where."""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

import ironaccel as ia
from ironaccel.core.errors import InvalidArgument
from ironaccel.runtime.metadata import Quantization
from ironaccel.tosa import DType, Op, ProgramBuilder, write
from ironaccel.tosa.errors import FormatError, LoweringError
from vulkan_fixtures import open_test_device

MODELS = Path(__file__).resolve().parents[2] / "src" / "ironaccel" / "models"


def _two_inputs() -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (4,), DType.FP32)
    y = b.input("y", (4,), DType.FP32)
    b.output(b.op(Op.SUB, [x, y]), b.op(Op.ADD, [x, y]))
    return write(b.build())


@pytest.fixture(scope="module")
def dev():
    with ia.open("cpu") as device:
        yield device


def test_inputs_by_position_by_keyword_and_by_mapping_agree(dev):
    exe = dev.compile(_two_inputs())
    x, y = np.arange(4, dtype=np.float32), np.full(4, 10, np.float32)
    expected = [x - y, x + y]
    for got in (exe(x, y), exe(y=y, x=x), exe({"x": x, "y": y}), exe.submit(x=x, y=y).wait()):
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_array_equal(g, e)


def test_named_inputs_are_checked_by_name(dev):
    exe = dev.compile(_two_inputs())
    x = np.zeros(4, np.float32)
    with pytest.raises(InvalidArgument, match="no input named 'z'; the inputs are 'x', 'y'"):
        exe(x=x, z=x)
    with pytest.raises(InvalidArgument, match="input 'y' not given"):
        exe(x=x)
    with pytest.raises(InvalidArgument, match="by position or by name"):
        exe(x, y=x)
    with pytest.raises(InvalidArgument, match=r"takes 2 input\(s\) \('x', 'y'\), got 1"):
        exe(x)


def test_outputs_by_name_in_both_forms(dev):
    exe = dev.compile(_two_inputs())
    feeds = {"x": np.ones(4, np.float32), "y": np.ones(4, np.float32)}
    names = [spec.name for spec in exe.outputs]
    (added,) = exe.run([names[1]], feeds)
    np.testing.assert_array_equal(added, np.full(4, 2, np.float32))
    assert [a.tolist() for a in exe.run(None, feeds)] == [[0.0] * 4, [2.0] * 4]
    named = exe.run_named(feeds)
    assert list(named) == names
    with pytest.raises(InvalidArgument, match="no output named 'nope'"):
        exe.run(["nope"], feeds)


def test_a_quantized_program_is_fed_and_read_as_floats_through_its_metadata(dev):
    exe = dev.compile(MODELS / "cnn_int8.tosa")
    meta = exe.metadata
    assert meta.quantized and "int8" in meta.description and meta.source.endswith("cnn_int8.json")
    q_in, q_out = meta.inputs[0].quantization, meta.outputs[0].quantization
    with np.load(MODELS / "cnn_int8.torch.npz") as data:
        x, x_int8, y_int8 = data["input"], data["input_int8"], data["output_qmodel_int8"]
    np.testing.assert_array_equal(q_in.quantize(x), x_int8)  # the exporter's own quantization, bit for bit
    (y,) = exe(q_in.quantize(x))
    assert np.abs(y.astype(int) - y_int8.astype(int)).max() <= 1
    real = q_out.dequantize(y)
    assert real.dtype == np.float32 and np.allclose(real, q_out.scale * (y.astype(np.float32) - q_out.zero_point))


def test_metadata_without_a_sidecar_lists_the_tensors(dev):
    exe = dev.compile(_two_inputs(), metadata={"description": "difference and sum"})
    assert exe.metadata.description == "difference and sum"
    assert [t.name for t in exe.metadata.inputs] == ["x", "y"] and not exe.metadata.quantized
    with pytest.raises(InvalidArgument, match="quantization for 1 inputs, the program has 2"):
        dev.compile(_two_inputs(), metadata={"quantization": {"inputs": [{"scale": 1.0, "zero_point": 0}]}})


def test_quantization_rounds_half_to_even_and_clamps():
    q = Quantization(0.5, 3)
    np.testing.assert_array_equal(q.quantize([0.25, 0.75, -100.0, 100.0]), np.array([3, 5, -128, 127], np.int8))
    np.testing.assert_array_equal(q.dequantize(np.array([3, 5], np.int8)), np.array([0.0, 1.0], np.float32))
    with pytest.raises(InvalidArgument, match="scale"):
        Quantization(0.0, 0)


def test_reprs_say_what_an_object_is(dev):
    exe = dev.compile(_two_inputs())
    assert repr(dev).startswith("<Device cpu: CPU")
    assert repr(exe) == "<Executable on cpu: (x: fp32[4], y: fp32[4]) -> (" + ", ".join(map(str, exe.outputs)) + ")>"
    run = exe.submit(np.ones(4, np.float32), np.ones(4, np.float32))
    assert repr(run).endswith(": submitted>")
    run.wait()
    assert repr(run).endswith(": done>")


def _npy() -> bytes:
    out = io.BytesIO()
    np.save(out, np.zeros(3))
    return out.getvalue()


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("data.pkl", b"x")
    return out.getvalue()


@pytest.mark.parametrize(
    ("content", "looks_like"),
    [
        (b"\x08\x07\x12\x07pytorch\x1a\x052.0.0", "an ONNX model"),
        (b"\x1c\x00\x00\x00ET12" + bytes(32), "an ExecuTorch program"),
        (pickle.dumps({"weights": [1, 2]}), "a Python pickle"),
        (_zip(), "a zip archive"),
        (_npy(), "a numpy array"),
        (b"module {\n  func.func @main() {\n", "MLIR text"),
    ],
)
def test_a_file_that_is_not_tosa_says_what_it_looks_like(dev, tmp_path, content, looks_like):
    path = tmp_path / "model.tosa"
    path.write_bytes(content)
    with pytest.raises(FormatError) as info:
        dev.compile(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not a TOSA flatbuffer") and f"this looks like {looks_like}" in message


def test_a_refusal_at_load_names_the_device_that_refused():
    b = ProgramBuilder()  # int16 products accumulate in int48, which no Vulkan tier holds
    x, y = b.input("x", (1, 2, 4), "int16"), b.input("y", (1, 4, 3), "int16")
    zero = np.zeros(1, np.int16)
    b.output(b.matmul(x, y, b.const(zero, "int16"), b.const(zero, "int16")))
    device = open_test_device("vulkan:llvmpipe")
    with pytest.raises(LoweringError) as info:
        device.compile(b.build())
    assert str(info.value).startswith("vulkan:llvmpipe (llvmpipe")
    device.close()
    device.accelerator.close()
