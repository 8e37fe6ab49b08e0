"""The model zoo's language models (benchmarks/models/language.py) in small configurations: BERT
(transformers' BertModel, 2 layers, hidden 64) and one layer of examples/decode.py's decoder (hidden 64, 4
heads), its prefill and a decode step over the KV cache that prefill makes, each exported through
ironaccel.torch.export and run on the CPU backend against the same module in torch.

Bounds: fp32 within 1e-4 relative + 1e-5 absolute of torch (as tests/test_torch_export.py: summation orders
differ, a wrong operator errs by O(1)); int8 within one quantization step of ExecuTorch's quantized module
(TOSA rescales in fixed point where torch requantizes in float, so a value on a rounding boundary may land one
step apart).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ironaccel as ia
from ironaccel.runtime.metadata import Quantization
from ironaccel.torch import export

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "models"))
import language

HIDDEN, HEADS, TOKENS = 64, 4, 16
D = HIDDEN // HEADS


@pytest.fixture(scope="module")
def cpu():
    with ia.open("cpu") as dev:
        yield dev


def run_in_torch_order(exe, metadata: dict, inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    """The program's outputs in forward's order: the export names them output_J, J the place in forward's."""
    outputs = exe(*[t.numpy() for t in inputs])
    names = [t["name"] for t in metadata["outputs"]]
    places = [int(n.rsplit("_", 1)[1]) if n.startswith("output_") else 0 for n in names]
    return [outputs[i] for i in sorted(range(len(names)), key=places.__getitem__)]


def torch_outputs(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        result = module(*inputs)
    return [t.numpy() for t in (result if isinstance(result, tuple) else (result,))]


def test_bert_fp32_runs_as_torch_does(cpu):
    pytest.importorskip("transformers")
    config = {"hidden_size": HIDDEN, "num_hidden_layers": 2, "num_attention_heads": HEADS, "vocab_size": 500}
    model = language.bert(0, seq=TOKENS, intermediate_size=4 * HIDDEN, **config)
    made = export(model, language.bert_inputs(model, 1))
    assert [(t["name"], t["dtype"]) for t in made.metadata["inputs"]] == [("input_ids", "int32")]
    exe = cpu.compile(made.tosa, metadata=made.metadata)
    for seed in (2, 3):
        inputs = language.bert_inputs(model, seed)
        (ours,) = run_in_torch_order(exe, made.metadata, inputs)
        (theirs,) = torch_outputs(model, inputs)
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def prefill() -> language.Prefill:
    return language.Prefill(language.decoder_config(HIDDEN, HEADS), 0, TOKENS)


def test_decoder_prefill_fp32_runs_as_torch_does(prefill, cpu):
    made = export(prefill, language.prefill_inputs(prefill, 1))
    exe = cpu.compile(made.tosa, metadata=made.metadata)
    inputs = language.prefill_inputs(prefill, 2)
    ours = run_in_torch_order(exe, made.metadata, inputs)
    theirs = torch_outputs(prefill, inputs)
    assert [a.shape for a in ours] == [(TOKENS, HIDDEN), (HEADS, TOKENS, D), (HEADS, TOKENS, D)]
    for mine, reference in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(mine, reference, rtol=1e-4, atol=1e-5)


def test_decoder_step_fp32_runs_as_torch_does(cpu):
    step = language.DecodeStep(language.decoder_config(HIDDEN, HEADS), 0)
    made = export(step, language.step_inputs(step, 1, TOKENS))
    shapes = [t["shape"] for t in made.metadata["inputs"]]
    assert shapes == [[1, HIDDEN], [1, D], [1, D], [HEADS, TOKENS, D], [HEADS, TOKENS, D]]
    exe = cpu.compile(made.tosa, metadata=made.metadata)
    inputs = language.step_inputs(step, 2, TOKENS)
    ours = run_in_torch_order(exe, made.metadata, inputs)
    for mine, reference in zip(ours, torch_outputs(step, inputs), strict=True):
        np.testing.assert_allclose(mine, reference, rtol=1e-4, atol=1e-5)


def test_decoder_prefill_int8_is_within_one_step_of_executorch(prefill, cpu):
    calibration = [language.prefill_inputs(prefill, seed) for seed in range(3, 6)]
    made = export(prefill, language.prefill_inputs(prefill, 1), "int8", calibration=calibration)
    meta = made.metadata
    assert made.profile == "TOSA-1.0+INT"
    q_in = [Quantization.of(q) for q in meta["quantization"]["inputs"]]
    q_out = [Quantization.of(q) for q in meta["quantization"]["outputs"]]
    exe = cpu.compile(made.tosa, metadata=meta)
    inputs = language.prefill_inputs(prefill, 7)
    ours = exe(*[q.quantize(t.numpy()) for q, t in zip(q_in, inputs, strict=True)])
    with torch.no_grad():
        theirs = made.quantized_module(*inputs)
    names = [t["name"] for t in meta["outputs"]]
    for mine, q, name in zip(ours, q_out, names, strict=True):
        reference = q.quantize(theirs[int(name.rsplit("_", 1)[1])].numpy())
        steps = np.abs(mine.astype(np.int32) - reference.astype(np.int32)).max()
        assert steps <= 1, f"{name} differs from ExecuTorch's quantized module by {steps} steps"
