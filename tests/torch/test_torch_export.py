"""ironaccel.torch.export: a module to one TOSA program and its metadata, run on the CPU backend against
torch's own output (fp32) and against ExecuTorch's quantized model (int8), and refused, naming every
operator left outside and its line, when the module does not lower whole.

Tolerances, as tests/test_models.py judges the bundled models: fp32 within 1e-4 relative + 1e-5
absolute (summation orders differ, a wrong operator errs by O(1)); int8 within one quantization step of
the converted PT2E module (torch requantizes in float with round-half-even where TOSA RESCALEs in fixed
point, so a value on a rounding boundary may land one step apart).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from torch_nets import NotWhole, TinyCNN, TwoInTwoOut, line_of

import ironaccel as ia
from ironaccel.core.errors import InvalidArgument
from ironaccel.runtime.metadata import Quantization
from ironaccel.torch import NotDelegated, TosaExport, export


@pytest.fixture(scope="module")
def tiny() -> TinyCNN:
    torch.manual_seed(0)
    return TinyCNN().eval()


@pytest.fixture(scope="module")
def example() -> torch.Tensor:
    return torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def cpu():
    with ia.open("cpu") as dev:
        yield dev


def test_fp32_export_runs_as_torch_does(tiny, example, cpu):
    made = export(tiny, example)
    assert isinstance(made, TosaExport) and made.profile == "TOSA-1.0+FP"
    assert made.metadata["inputs"] == [{"name": "image", "shape": [1, 3, 8, 8], "dtype": "fp32"}]
    assert made.metadata["outputs"] == [{"name": "output", "shape": [1, 5], "dtype": "fp32"}]
    assert "quantization" not in made.metadata and made.metadata["quantized"] is False
    assert [t.name for t in made.program.main.input_tensors] == ["image"]
    exe = cpu.compile(made.tosa, metadata=made.metadata)
    assert [s.name for s in exe.inputs] == ["image"] and [s.name for s in exe.outputs] == ["output"]
    for seed in range(3):
        x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(seed))
        (ours,) = exe(image=x.numpy())
        with torch.no_grad():
            np.testing.assert_allclose(ours, tiny(x).numpy(), rtol=1e-4, atol=1e-5)


def test_int8_export_is_within_one_step_of_executorch(tiny, example, cpu):
    calibration = [(torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(s)),) for s in range(4)]
    made = export(tiny, (example,), "int8", calibration=calibration)
    meta = made.metadata
    assert made.profile == "TOSA-1.0+INT" and meta["quantized"] is True
    assert [(t["name"], t["shape"], t["dtype"]) for t in meta["inputs"]] == [("image", [1, 3, 8, 8], "int8")]
    assert [(t["name"], t["shape"], t["dtype"]) for t in meta["outputs"]] == [("output", [1, 5], "int8")]
    (q_in,), (q_out,) = (
        (Quantization.of(q) for q in meta["quantization"]["inputs"]),
        (Quantization.of(q) for q in meta["quantization"]["outputs"]),
    )
    exe = cpu.compile(made.tosa, metadata=meta)
    assert exe.metadata.inputs[0].quantization == q_in and exe.metadata.outputs[0].quantization == q_out
    steps = []
    for seed in range(10, 16):
        x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(seed))
        (ours,) = exe(q_in.quantize(x.numpy()))
        with torch.no_grad():
            theirs = q_out.quantize(made.quantized_module(x).numpy())
        steps.append(np.abs(ours.astype(np.int32) - theirs.astype(np.int32)).max())
    assert max(steps) <= 1, f"int8 outputs differ from ExecuTorch's quantized model by {steps} steps"


def test_names_come_from_forward_or_from_names(cpu):
    torch.manual_seed(2)
    module = TwoInTwoOut().eval()
    features, offset = torch.randn(3, 6), torch.randn(4)
    made = export(module, (features, offset))
    assert made.input_names == ["features", "offset"] and made.output_names == ["output_0", "output_1"]
    assert [t["shape"] for t in made.metadata["inputs"]] == [[3, 6], [4]]
    exe = cpu.compile(made.tosa)
    first, second = exe(offset=offset.numpy(), features=features.numpy())
    with torch.no_grad():
        want_first, want_second = module(features, offset)
    np.testing.assert_allclose(first, want_first.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(second, want_second.numpy(), rtol=1e-4, atol=1e-5)
    renamed = export(module, (features, offset), names=["a", "b"])
    assert renamed.input_names == ["a", "b"] and [t.name for t in renamed.program.main.input_tensors] == ["a", "b"]


def test_save_writes_the_program_and_its_sidecar(tiny, example, cpu, tmp_path):
    program_path, sidecar = export(tiny, example).save(tmp_path / "tiny.tosa")
    assert sidecar == tmp_path / "tiny.json"
    exe = cpu.compile(program_path)
    assert exe.metadata.source == str(sidecar) and exe.metadata.description.startswith("TinyCNN exported")


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_a_module_not_lowered_whole_is_refused_naming_each_operator_and_line(quantize, example):
    module = NotWhole().eval()
    with pytest.raises(NotDelegated) as caught:
        export(module, example, quantize)
    operators = {op.operator: op for op in caught.value.operators}
    # int8: what follows the sort stays in float outside too (the flatten); every one is listed
    assert {"ironaccel_test.shift.default", "aten.sort.default"} <= set(operators), caught.value.operators
    assert quantize or len(operators) == 2, caught.value.operators
    assert operators["ironaccel_test.shift.default"].location.endswith(line_of("shift"))
    assert operators["aten.sort.default"].location.endswith(line_of("sort"))
    assert operators["aten.sort.default"].module == "sorting (Sorting)"
    text = str(caught.value)
    assert line_of("shift") in text and line_of("sort") in text and "PyTorch on the host CPU" in text


def test_the_refusal_names_the_device(example, cpu):
    with pytest.raises(NotDelegated, match=r"one TOSA program on cpu \("):
        cpu.compile(NotWhole().eval(), example_inputs=example)


def test_bad_arguments_are_refused(tiny, example):
    with pytest.raises(InvalidArgument, match="quantize must be None or 'int8'"):
        export(tiny, example, "int4")
    with pytest.raises(InvalidArgument, match="example_inputs must be a tensor or a tuple of tensors"):
        export(tiny, [example.numpy()])
    with pytest.raises(InvalidArgument, match="names must be 1 distinct non-empty strings"):
        export(tiny, example, names=["a", "b"])


def test_the_module_keeps_its_training_mode(example):
    module = TinyCNN().train()
    export(module, example)
    assert module.training and all(m.training for m in module.modules())


def test_importing_ironaccel_or_the_front_door_imports_no_torch():
    code = (
        "import sys, ironaccel; a = 'torch' in sys.modules; import ironaccel.torch; "
        "print(a, 'torch' in sys.modules, 'executorch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]
