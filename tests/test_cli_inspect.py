"""``ironaccel inspect``: tables, --json, and a clean failure on unreadable files."""

from __future__ import annotations

import json

import numpy as np
import pytest

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
