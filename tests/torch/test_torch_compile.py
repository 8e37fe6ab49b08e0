"""Device.compile(module, example_inputs=...): the module exported and compiled in one call, the export
kept in this process by graph and weights so that compiling the same module again does not lower it again."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_nets import TinyCNN

import ironaccel as ia
from ironaccel.core.errors import InvalidArgument
from ironaccel.torch import clear_export_cache, export_cache_info


@pytest.fixture
def cpu():
    clear_export_cache()
    with ia.open("cpu") as dev:
        yield dev


def _input(seed: int) -> torch.Tensor:
    return torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(seed))


def test_compile_exports_once_per_graph_and_weights(cpu):
    torch.manual_seed(3)
    module, x = TinyCNN().eval(), _input(0)
    exe = cpu.compile(module, example_inputs=(x,))
    assert str(exe) == "<Executable on cpu: (image: fp32[1, 3, 8, 8]) -> (output: fp32[1, 5])>"
    with torch.no_grad():
        np.testing.assert_allclose(exe(x.numpy())[0], module(x).numpy(), rtol=1e-4, atol=1e-5)
    assert export_cache_info()[:3] == (0, 1, 1)
    again = cpu.compile(module, example_inputs=_input(1))  # other values of the same shape: the same program
    assert export_cache_info()[:3] == (1, 1, 1), "compiling the same module again lowered it again"
    assert again.metadata == exe.metadata
    with torch.no_grad():
        module.fc.weight.mul_(-1)  # new weights, a new program
    changed = cpu.compile(module, example_inputs=x)
    assert export_cache_info()[:3] == (1, 2, 2)
    with torch.no_grad():
        np.testing.assert_allclose(changed(x.numpy())[0], module(x).numpy(), rtol=1e-4, atol=1e-5)
    cpu.compile(module, example_inputs=torch.randn(2, 3, 8, 8))  # another shape, another program
    assert export_cache_info()[:3] == (1, 3, 3)


def test_compile_quantizes_on_request(cpu):
    torch.manual_seed(4)
    module = TinyCNN().eval()
    exe = cpu.compile(module, example_inputs=_input(0), quantize="int8")
    assert exe.metadata.quantized and [s.dtype.name for s in exe.inputs] == ["INT8"]
    q_in, q_out = exe.metadata.inputs[0].quantization, exe.metadata.outputs[0].quantization
    (y,) = exe(q_in.quantize(_input(0).numpy()))
    with torch.no_grad():
        want = module(_input(0)).numpy()
    # against the float module: within a few output steps (int8 arithmetic throughout the CNN)
    assert np.abs(q_out.dequantize(y) - want).max() <= 8 * q_out.scale
    cpu.compile(module, example_inputs=_input(0))  # float: another program
    assert export_cache_info()[:3] == (0, 2, 2)


def test_compile_refuses_what_does_not_fit(cpu):
    with pytest.raises(InvalidArgument, match="needs example_inputs="):
        cpu.compile(TinyCNN())
    with pytest.raises(InvalidArgument, match=r"apply to a torch\.nn\.Module only"):
        cpu.compile(b"not a module", example_inputs=_input(0))
