"""``ironaccel inspect``: tables, --json, and a clean failure on unreadable files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ironaccel.cli.main import main
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor, Version, save
from ironaccel.tosa.attributes import Conv2dAttribute


@pytest.fixture
def model(tmp_path):
    """A small generated program: a CONST weight, a CONV2D with attributes, a SHAPE value."""
    weights = np.ones((4, 3, 3, 2), np.float32)
    block = Block(
        "main",
        (
            Operator(Op.CONST, (), ("w",)),
            Operator(Op.CONV2D, ("x", "w"), ("y",), Conv2dAttribute((1, 1, 1, 1), (1, 1), (1, 1), False, DType.FP32)),
            Operator(Op.CONST_SHAPE, (), ("s",), location="model.py:3"),
        ),
        (
            Tensor("x", (1, 8, 8, 2), DType.FP32),
            Tensor("w", weights.shape, DType.FP32, weights),
            Tensor("y", (1, 8, 8, 4), DType.FP32),
            Tensor("s", (2,), DType.SHAPE, np.array([64, 4], np.int64)),
        ),
        ("x",),
        ("y",),
    )
    path = tmp_path / "model.tosa"
    save(Program((Region("main", (block,)),), Version(1, 0, 2)), path)
    return path


def test_tables(model, capsys):
    assert main(["inspect", str(model)]) == 0
    out = capsys.readouterr().out
    assert "TOSA 1.0.2" in out and "CONV2D" in out and "1x8x8x2 fp32" in out
    assert "pad=[1, 1, 1, 1]" in out and "acc_type=FP32" in out
    assert "288" in out  # constant bytes of w


def test_json(model, capsys):
    assert main(["inspect", "--json", str(model)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["version"] == {"major": 1, "minor": 0, "patch": 2, "draft": False, "text": "1.0.2"}
    block = info["regions"][0]["blocks"][0]
    conv = block["operators"][1]
    assert conv["op"] == "CONV2D" and conv["inputs"] == ["x", "w"]
    assert conv["attributes"] == {
        "pad": [1, 1, 1, 1],
        "stride": [1, 1],
        "dilation": [1, 1],
        "local_bound": False,
        "acc_type": "FP32",
    }
    assert block["operators"][2]["location"] == "model.py:3"
    tensors = {t["name"]: t for t in block["tensors"]}
    assert tensors["w"]["constant_bytes"] == 288 and tensors["x"]["constant_bytes"] is None
    assert tensors["s"]["dtype"] == "shape" and tensors["s"]["shape"] == [2]
    assert info["totals"]["operators"] == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file"),
        (b"not a flatbuffer at all", "cannot read"),
        (b"\x0c\0\0\0TOSA" + bytes(4), "cannot read"),
    ],
)
def test_unreadable_file_fails_cleanly(tmp_path, capsys, content, message):
    path = tmp_path / "bad.tosa"
    if content is not None:
        path.write_bytes(content)
    assert main(["inspect", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and str(path) in captured.err


# -- values, signature and operator counts --------------------------------------------------------------------
def _clamp_program(path, dtype: str, low, high, extra_ops: int = 0):
    from ironaccel.tosa.builder import ProgramBuilder

    b = ProgramBuilder()
    x = b.input("x", (1, 4), dtype)
    y = b.clamp(x, low, high)
    for _ in range(extra_ops):
        y = b.clamp(y, low, high)
    b.output(y)
    save(b.build(), path)
    return path


@pytest.mark.parametrize(
    ("dtype", "low", "high", "shown"),
    [
        ("fp32", 0.0, 6.0, {"min_val": 0.0, "max_val": 6.0}),
        ("fp16", -1.5, 1.5, {"min_val": -1.5, "max_val": 1.5}),
        ("bf16", -2.0, 0.25, {"min_val": -2.0, "max_val": 0.25}),
        ("int8", -5, 100, {"min_val": -5, "max_val": 100}),
        ("int16", -300, 3000, {"min_val": -300, "max_val": 3000}),
    ],
)
def test_clamp_bounds_are_decoded_by_the_input_type(tmp_path, capsys, dtype, low, high, shown):
    path = _clamp_program(tmp_path / "clamp.tosa", dtype, low, high)
    assert main(["inspect", "--json", str(path)]) == 0
    op = json.loads(capsys.readouterr().out)["regions"][0]["blocks"][0]["operators"][0]
    assert {k: op["attributes"][k] for k in shown} == shown
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"min_val={json.dumps(shown['min_val'])}" in out and f"max_val={json.dumps(shown['max_val'])}" in out


def test_the_header_names_inputs_outputs_and_counts_operators(tmp_path, capsys):
    from ironaccel.tosa.builder import ProgramBuilder

    b = ProgramBuilder()
    x = b.input("x", (2, 3), "fp32")
    w = b.input("w", (2, 3), "fp32")
    y = b.add(b.add(b.add(x, w), w), w)
    z = b.mul(b.sub(y, x), b.sub(y, w))
    b.output(y, z)
    path = tmp_path / "counts.tosa"
    save(b.build(), path)
    assert main(["inspect", "--json", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["inputs"] == [
        {"name": "x", "dtype": "fp32", "shape": [2, 3]},
        {"name": "w", "dtype": "fp32", "shape": [2, 3]},
    ]
    assert [o["shape"] for o in info["outputs"]] == [[2, 3], [2, 3]]
    counts = info["operator_counts"]
    assert list(counts.items())[:2] == [("ADD", 3), ("SUB", 2)]
    assert sum(counts.values()) == info["totals"]["operators"]
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "inputs: x fp32[2, 3], w fp32[2, 3]" in out
    assert "operator counts: ADD 3, SUB 2" in out


def test_small_constants_are_shown_with_their_values(model, capsys):
    assert main(["inspect", "--json", str(model)]) == 0
    tensors = {t["name"]: t for t in json.loads(capsys.readouterr().out)["regions"][0]["blocks"][0]["tensors"]}
    assert tensors["s"]["values"] == [64, 4]
    assert tensors["w"]["values"] is None  # 72 elements: too many to print
    assert tensors["x"]["values"] is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=10), st.sampled_from(list(DType)))
def test_decoding_hostile_attribute_bytes_never_fails(raw, dtype):
    from ironaccel.cli.inspect import decode_scalar

    value = decode_scalar(raw, dtype)
    if value is not None:
        assert dtype.is_tosa_1_0 and len(raw) == (dtype.bits + 7) // 8
    json.dumps(value)


def test_inspect_runs_as_a_module(tmp_path):
    import subprocess
    import sys

    path = _clamp_program(tmp_path / "clamp.tosa", "fp32", 0.0, 6.0, extra_ops=2)
    done = subprocess.run(
        [sys.executable, "-m", "ironaccel", "inspect", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "max_val=6.0" in done.stdout and "0000c040" not in done.stdout
    assert "operator counts: CLAMP 3" in done.stdout
