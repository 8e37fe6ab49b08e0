"""`ironaccel export MODULE:FACTORY`: a factory in a module of the current directory exported to a .tosa and
its metadata, which Device.compile and `ironaccel run` find beside it; each mistake a one-line error."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ironaccel as ia
from ironaccel.cli.main import main

FACTORIES = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, pixels, scale):
        x = nn.functional.avg_pool2d(torch.relu(self.conv(pixels)), 2)
        return self.fc(x.flatten(1)) * scale


def make():
    return Net().eval()


def sorted_net():
    class Sorted(nn.Module):
        def forward(self, x):
            return torch.sort(x).values
    return Sorted()


def broken():
    raise RuntimeError("no weights here")


NOT_CALLABLE = 3
"""


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of the current directory with factories; a name of its own for each test."""
    name = f"factories_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(FACTORIES))
    monkeypatch.chdir(tmp_path)
    return name


def _sort_line(tmp_path: Path, name: str) -> str:
    lines = (tmp_path / f"{name}.py").read_text().splitlines()
    (number,) = [i for i, line in enumerate(lines, 1) if "torch.sort(x)" in line]
    return f"{name}.py:{number}"


def test_export_writes_the_program_and_its_metadata(factories, tmp_path, capsys):
    status = main(["export", f"{factories}:make", "-o", "net.tosa", "--shape", "1,3,8,8", "--shape", "1"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "(pixels: fp32[1, 3, 8, 8], scale: fp32[1]) -> (output: fp32[1, 3])" in out
    meta = json.loads((tmp_path / "net.json").read_text())
    assert meta["description"] == f"{factories}:make() exported from PyTorch (TOSA-1.0+FP)"
    with ia.open("cpu") as dev:
        exe = dev.compile(tmp_path / "net.tosa")
        assert exe.metadata.source == str(tmp_path / "net.json")
        assert [s.name for s in exe.inputs] == ["pixels", "scale"]
        (y,) = exe(np.zeros((1, 3, 8, 8), np.float32), np.ones(1, np.float32))
        assert y.shape == (1, 3) and np.isfinite(y).all()


def test_export_int8_with_input_names(factories, tmp_path):
    shapes, names = ["--shape", "1,3,8,8", "--shape", "1"], ["--input-name", "x", "--input-name", "s"]
    assert main(["export", f"{factories}:make", "-o", "q.tosa", "--int8", *shapes, *names]) == 0
    with ia.open("cpu") as dev:
        exe = dev.compile(tmp_path / "q.tosa")
    assert exe.metadata.quantized and [t.name for t in exe.metadata.inputs] == ["x", "s"]
    assert all(t.quantization is not None for t in (*exe.metadata.inputs, *exe.metadata.outputs))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["nocolon", "--shape", "1"], "'nocolon' is not MODULE:FACTORY"),
        (["no_such_module_here:make", "--shape", "1"], "cannot import no_such_module_here: No module named"),
        (["{m}:missing", "--shape", "1"], "{m} has no missing"),
        (["{m}:NOT_CALLABLE", "--shape", "1"], "{m}:NOT_CALLABLE is a int, not something to call"),
        (["{m}:broken", "--shape", "1"], "{m}:broken() failed: RuntimeError: no weights here"),
        (["{m}:make", "--shape", "1,x"], "--shape '1,x': give positive integers"),
        (["{m}:make", "--shape", "1", "--input-name", "a", "--input-name", "b"], "2 --input-name for 1 --shape"),
        (["{m}:make", "--shape", "1,3,8,8"], "torch.export could not capture Net"),
    ],
)
def test_mistakes_are_one_line(factories, capsys, arguments, message):
    arguments = [a.format(m=factories) for a in arguments]
    assert main(["export", arguments[0], "-o", "x.tosa", *arguments[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ironaccel export: "), err
    assert message.format(m=factories) in err, err


def test_an_operator_left_outside_is_named_with_its_line(factories, tmp_path, capsys):
    assert main(["export", f"{factories}:sorted_net", "-o", "s.tosa", "--shape", "2,5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "aten.sort.default at " in err, err
    assert _sort_line(tmp_path, factories) in err, err
    assert not (tmp_path / "s.tosa").exists()
