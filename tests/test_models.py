"""The bundled programs (src/ironaccel/models, made by examples/export_models.py with ExecuTorch's Arm
backend) give the right answers on the CPU backend: against torch's own outputs, recorded at export
time in NAME.torch.npz, and against Arm's TOSA reference model.

Tolerances, and what was measured when they were set (CPU backend, OpenBLAS, x86-64):

* fp32 vs torch: max |ours - torch| <= 1e-4 * max|torch| + 1e-5. Both compute in float32 but sum
  convolutions, matmuls, softmax and layer norms in different orders, so each output carries a few
  ulps of the largest values it was built from; 1e-4 relative is ~1000x float32's epsilon, room for
  any summation order or BLAS kernel, while a wrong operator, layout or constant errs by O(1) relative.
  Measured: cnn_fp32 1.5e-8 (7.8e-8 of max|ref| 0.19), attention_fp32 4.8e-7 (1.2e-7 of max|ref| 3.9).
* fp32 vs the reference model: max |ours - ref| <= 1e-5 * max|ref|, ten times tighter.
  Measured: cnn_fp32 3.0e-8 (1.6e-7 of max|ref|), attention_fp32 3.6e-7 (9.1e-8 of max|ref|).
  Elementwise relative error is no measure here: outputs near zero differ by many ulps (up to 10240
  ulps seen in attention_fp32) while being as accurate as the rest in absolute terms.
* cnn_int8 vs the reference model: bit for bit (integer TOSA is exactly specified).
* cnn_int8 vs torch's quantized model (the converted pt2e module, what ExecuTorch runs end to end):
  within one quantization step of the output. Torch does not compute the same integer arithmetic: it
  dequantizes, convolves in float32 and requantizes with round-half-even, while the TOSA program
  accumulates in int32 and RESCALEs with fixed-point multipliers, so a value near a rounding boundary
  may land one step apart. Measured: the bundled input matches exactly (0 of 10 values differ); over
  300 other random inputs 17 of 3000 output values differed, each by exactly one step.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ironaccel as ia
from ironaccel.cli.main import main
from ironaccel.tosa import load
from tosa_fixtures import require_tosa_tools, run_reference_model

MODELS = Path(__file__).resolve().parents[1] / "src" / "ironaccel" / "models"
NAMES = ["cnn_fp32", "attention_fp32", "cnn_int8"]
FLOAT_NAMES = [n for n in NAMES if not n.endswith("int8")]

TORCH_REL, TORCH_ABS = 1e-4, 1e-5
REFERENCE_REL = 1e-5


def _meta(name: str) -> dict:
    return json.loads((MODELS / f"{name}.json").read_text())


def _torch(name: str) -> dict[str, np.ndarray]:
    with np.load(MODELS / f"{name}.torch.npz") as data:
        return {key: data[key] for key in data.files}


def _program_input(name: str) -> np.ndarray:
    """What the TOSA program takes: the float input, or for a quantized model the int8 tensor ExecuTorch fed it."""
    return _torch(name)["input_int8" if _meta(name)["quantized"] else "input"]


def _run_ours(name: str) -> np.ndarray:
    with ia.open("cpu") as dev:
        exe = dev.compile(MODELS / f"{name}.tosa")
        (out,) = exe(_program_input(name))
    return np.asarray(out)


def _run_reference(name: str) -> np.ndarray:
    require_tosa_tools()
    (out,) = run_reference_model((MODELS / f"{name}.tosa").read_bytes(), [_program_input(name)])
    return np.asarray(out)


def _qparams(name: str, side: str) -> dict:
    (qp,) = _meta(name)["quantization"][side]
    return qp


def _dequantize(q: np.ndarray, qp: dict) -> np.ndarray:
    """x = (q - zero_point) * scale, in float32 as torch's dequantize_per_tensor computes it."""
    return (q.astype(np.float32) - np.float32(qp["zero_point"])) * np.float32(qp["scale"])


def test_every_bundled_model_is_tested():
    assert sorted(p.stem for p in MODELS.glob("*.tosa")) == sorted(NAMES)
    for name in NAMES:
        assert (MODELS / f"{name}.json").exists() and (MODELS / f"{name}.torch.npz").exists()


@pytest.mark.parametrize("name", NAMES)
def test_model_runs_on_cpu(name):
    program = load(MODELS / f"{name}.tosa")
    (spec_in,), (spec_out,) = program.main.input_tensors, program.main.output_tensors
    x = _program_input(name)
    assert x.dtype == spec_in.dtype.numpy and x.shape == tuple(spec_in.shape)
    assert list(_torch(name)["input"].shape) == _meta(name)["input_shape"]
    out = _run_ours(name)
    assert out.dtype == spec_out.dtype.numpy and out.shape == tuple(spec_out.shape)
    assert out.shape == _torch(name)["output"].shape
    if out.dtype.kind == "f":
        assert np.isfinite(out).all()


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_fp32_model_matches_torch(name):
    expected = _torch(name)["output"].astype(np.float64)
    ours = _run_ours(name).astype(np.float64)
    diff = np.abs(ours - expected).max()
    bound = TORCH_REL * np.abs(expected).max() + TORCH_ABS
    assert diff <= bound, f"{name}: max |ours - torch| {diff:.3g} > {bound:.3g}"


@pytest.mark.tosa_tools
@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_fp32_model_matches_reference_model(name):
    ref = _run_reference(name)
    ours = _run_ours(name)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64)).max()
    bound = REFERENCE_REL * np.abs(ref.astype(np.float64)).max()
    assert diff <= bound, f"{name}: max |ours - reference model| {diff:.3g} > {bound:.3g}"


def test_int8_quantization_is_recorded():
    meta = _meta("cnn_int8")
    assert meta["quantized"] is True
    program = load(MODELS / "cnn_int8.tosa")
    for side, tensors in (("inputs", program.main.input_tensors), ("outputs", program.main.output_tensors)):
        assert len(meta["quantization"][side]) == len(tensors)
        for qp, tensor in zip(meta["quantization"][side], tensors, strict=True):
            assert qp["scheme"] == "per_tensor_affine" and qp["dtype"] == "int8" == tensor.dtype.numpy.name
            assert -128 <= qp["qmin"] <= qp["zero_point"] <= qp["qmax"] <= 127
            assert qp["scale"] > 0
    data = _torch("cnn_int8")
    assert data["input_int8"].dtype == np.int8 and data["output_qmodel_int8"].dtype == np.int8
    # the int8 input is the float input quantized with the recorded parameters
    qin = _qparams("cnn_int8", "inputs")
    scaled = data["input"].astype(np.float32) * np.float32(1.0 / qin["scale"])
    requantized = np.clip(np.rint(scaled) + qin["zero_point"], qin["qmin"], qin["qmax"]).astype(np.int8)
    np.testing.assert_array_equal(requantized, data["input_int8"])
    # the quantized model's float output is its int8 output dequantized with the recorded parameters
    np.testing.assert_array_equal(
        _dequantize(data["output_qmodel_int8"], _qparams("cnn_int8", "outputs")), data["output_qmodel"]
    )


@pytest.mark.tosa_tools
def test_int8_model_matches_reference_model_bit_exact():
    ref = _run_reference("cnn_int8")
    ours = _run_ours("cnn_int8")
    assert ours.dtype == ref.dtype == np.int8 and ours.shape == ref.shape
    np.testing.assert_array_equal(ours, ref)


def test_int8_model_matches_torch_quantized_model():
    data = _torch("cnn_int8")
    qout = _qparams("cnn_int8", "outputs")
    ours = _run_ours("cnn_int8")
    steps = np.abs(ours.astype(np.int32) - data["output_qmodel_int8"].astype(np.int32))
    assert steps.max() <= 1, f"int8 outputs differ from torch's quantized model by up to {steps.max()} steps"
    # the same, in ExecuTorch's float output after the dequantize that follows the delegated graph
    diff = np.abs(_dequantize(ours, qout).astype(np.float64) - data["output_qmodel"]).max()
    assert diff <= qout["scale"] * 1.0001, f"dequantized output differs by {diff:.3g} (scale {qout['scale']:.3g})"


@pytest.mark.parametrize("model", [None, "cnn_int8"])
def test_demo_runs(model, capsys):
    argv = ["demo", "--device", "cpu", "--repeat", "1"]
    if model:
        argv += ["--model", str(MODELS / f"{model}.tosa")]
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "0 differing elements" in text
    if model is None:  # the default (float) model is also compared with torch's output
        assert "agreement with PyTorch" in text
