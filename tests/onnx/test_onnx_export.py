"""ONNX models through ironaccel.onnx to TOSA 1.0 programs on the CPU backend, against onnxruntime.

The conversion's tools live in .venv-onnx (``make onnx-env``); without it every test that converts skips.
The models are written and onnxruntime runs in that environment (onnx_models.py), not in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ironaccel as ia
from ironaccel.onnx import ConversionFailed, OnnxEnvironmentMissing, available, export, find_tools
from ironaccel.onnx.stages import rewrite_constants

HERE = Path(__file__).resolve().parent
ZOO = HERE.parents[1] / ".cache" / "models"
needs_env = pytest.mark.skipif(not available(), reason="no ONNX environment: make onnx-env builds .venv-onnx")


def _in_env(*args: str | Path) -> None:
    command = [str(find_tools().python), str(HERE / "onnx_models.py"), *map(str, args)]
    subprocess.run(command, check=True, capture_output=True)


def _model(name: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{name}.onnx"
    _in_env("build", name, path)
    return path


def _onnxruntime(model: Path, inputs: dict[str, np.ndarray], tmp_path: Path) -> dict[str, np.ndarray]:
    np.savez(tmp_path / "inputs.npz", **inputs)
    _in_env("reference", model, tmp_path / "inputs.npz", tmp_path / "outputs.npz")
    with np.load(tmp_path / "outputs.npz") as found:
        return {name: found[name] for name in found.files}


def _run_on_cpu(program, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    with ia.open("cpu") as dev:
        exe = dev.compile(program)
        results = exe(**inputs)
        return {spec.name: np.asarray(r) for spec, r in zip(exe.outputs, results, strict=True)}


@needs_env
def test_conv_relu_matmul_matches_onnxruntime_with_its_names_and_shapes(tmp_path):
    model = _model("conv_relu_matmul", tmp_path)
    program = export(model)
    main = program.main
    shapes = {t.name: tuple(t.shape) for t in main.tensors}
    assert main.inputs == ("image",) and main.outputs == ("logits",)
    assert shapes["image"] == (1, 3, 8, 8) and shapes["logits"] == (1, 10)
    image = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    got = _run_on_cpu(program, {"image": image})
    want = _onnxruntime(model, {"image": image}, tmp_path)
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-5, atol=1e-5)


@needs_env
def test_shapes_computed_at_run_time_two_inputs_and_outputs(tmp_path):
    """Shape -> Gather -> Concat -> Reshape: folded before the import, which would leave an unranked tensor."""
    model = _model("two_inputs", tmp_path)
    program = export(model.read_bytes())
    assert program.main.inputs == ("a", "b") and program.main.outputs == ("sum", "gate")
    rng = np.random.default_rng(2)
    inputs = {n: rng.standard_normal((2, 3, 4)).astype(np.float32) for n in ("a", "b")}
    got = _run_on_cpu(program, inputs)
    want = _onnxruntime(model, inputs, tmp_path)
    assert got["sum"].shape == (2, 12)
    for name in ("sum", "gate"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)


@needs_env
def test_symbolic_dimensions_need_shapes(tmp_path):
    model = _model("conv_relu_matmul_symbolic", tmp_path)
    with pytest.raises(ConversionFailed, match=r"image \['N', 3, 8, 8\].*shapes=") as failed:
        export(model)
    assert failed.value.stage == "prepare"
    program = export(model, shapes={"image": [2, 3, 8, 8]})
    assert tuple(program.main.tensors[[t.name for t in program.main.tensors].index("logits")].shape) == (2, 10)
    with pytest.raises(ConversionFailed, match="not inputs of the model"):
        export(model, shapes={"picture": [2, 3, 8, 8]})


@needs_env
def test_an_operator_torch_mlir_does_not_lower_is_named(tmp_path):
    with pytest.raises(ConversionFailed) as failed:
        export(_model("sinh", tmp_path))
    assert failed.value.stage == "lower"
    assert failed.value.operator == "onnx.Sinh (as torch.aten.sinh)"
    assert "model.torch.mlir:" in str(failed.value) and str(tmp_path) not in str(failed.value)


@needs_env
def test_64_bit_integers_are_refused_before_the_flatbuffer(tmp_path):
    """torch-mlir lowers Hardmax through int64 indices, a type of TOSA's 1.1 draft, not of 1.0."""
    with pytest.raises(ConversionFailed, match="int64") as failed:
        export(_model("hardmax", tmp_path))
    assert failed.value.stage == "serialize" and failed.value.operator == "tosa.const"


@needs_env
def test_keep_leaves_every_stage_file(tmp_path):
    kept = tmp_path / "kept"
    export(_model("conv_relu_matmul", tmp_path), keep=kept)
    names = {p.name for p in kept.iterdir()}
    assert {"prepared.onnx", "model.torch.mlir", "model.tosa.mlir", "model.tosa"} <= names


def test_a_missing_environment_says_how_to_build_one(tmp_path):
    with pytest.raises(OnnxEnvironmentMissing, match="make onnx-env"):
        export(tmp_path / "model.onnx", environment=tmp_path / "nowhere")


def test_splat_constants_become_tosa_constants_and_other_dialects_are_named(tmp_path):
    lowered = tmp_path / "lowered.mlir"
    lowered.write_text(
        "module {\n"
        "  func.func @main(%arg0: tensor<1x2xf32>) -> tensor<1x4xf32> {\n"
        "    %cst = arith.constant dense<0.000000e+00> : tensor<1x2xf32>\n"
        "    %0 = tosa.concat %cst, %arg0 {axis = 1 : i32} : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x4xf32>\n"
        "    return %0 : tensor<1x4xf32>\n"
        "  }\n"
        "}\n"
    )
    assert rewrite_constants("m", lowered, tmp_path / "out.mlir") == 1
    text = (tmp_path / "out.mlir").read_text()
    assert "arith" not in text
    assert '%cst = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1x2xf32>}> : () -> tensor<1x2xf32>' in text
    lowered.write_text("    %1 = tensor.empty() : tensor<1x2xf32>\n")
    with pytest.raises(ConversionFailed) as failed:
        rewrite_constants("m", lowered, tmp_path / "out.mlir")
    assert failed.value.operator == "tensor.empty" and failed.value.stage == "lower"


def test_importing_the_package_imports_none_of_the_tools():
    tools = "('onnx', 'onnxruntime', 'torch_mlir')"
    code = f"import ironaccel.onnx, sys; print(sorted(m for m in {tools} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@needs_env
@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet50", "vit_b_16"])
def test_zoo_models_match_onnxruntime(name, tmp_path):
    """The model zoo's ONNX exports (benchmarks/models/zoo.py caches them): the whole network on the CPU
    backend, within float32 bounds of onnxruntime on the same weights."""
    found = sorted(ZOO.glob(f"{name}-onnx-*.onnx"))
    if not found:
        pytest.skip(f"no cached ONNX export of {name} under {ZOO} (benchmarks/models/zoo.py makes it)")
    program = export(found[-1])
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    (got,) = _run_on_cpu(program, {"x": x}).values()
    want = _onnxruntime(found[-1], {"x": x}, tmp_path)["y"]
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert got.argmax() == want.argmax()


@needs_env
def test_the_command_line_writes_the_program_and_its_metadata(tmp_path, capsys):
    from ironaccel.cli.main import main

    model = _model("conv_relu_matmul_symbolic", tmp_path)
    out = tmp_path / "model.tosa"
    assert main(["export", str(model), "-o", str(out), "--shape", "2,3,8,8", "--input-name", "image"]) == 0
    assert "(image: fp32[2, 3, 8, 8]) -> (logits: fp32[2, 10])" in capsys.readouterr().out
    sidecar = json.loads(out.with_suffix(".json").read_text())
    assert [t["name"] for t in sidecar["inputs"]] == ["image"] and sidecar["outputs"][0]["shape"] == [2, 10]
    with ia.open("cpu") as dev:
        exe = dev.compile(out)
        assert exe.metadata.description.endswith("converted from ONNX by torch-mlir")
        assert exe(image=np.zeros((2, 3, 8, 8), np.float32))[0].shape == (2, 10)


@needs_env
def test_the_command_line_says_in_one_line_what_failed(tmp_path, capsys):
    from ironaccel.cli.main import main

    model = _model("conv_relu_matmul_symbolic", tmp_path)
    assert main(["export", str(model), "-o", str(tmp_path / "m.tosa")]) == 2
    assert "the prepare stage" in capsys.readouterr().err
    assert main(["export", str(model), "-o", str(tmp_path / "m.tosa"), "--shape", "2,3,8,8"]) == 2
    assert "--input-name" in capsys.readouterr().err
    assert main(["export", str(model), "-o", str(tmp_path / "m.tosa"), "--int8"]) == 2
