"""``ironaccel validate --device``: whether a device would admit each valid file, naming every problem."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ironaccel.cli import validate as validate_command
from ironaccel.cli.main import main
from ironaccel.tosa import DType, Op, save
from ironaccel.tosa.builder import ProgramBuilder
from ironaccel.tosa.capability import CapabilityDescriptor, admit, supported
from ironaccel.tosa.errors import LoweringError
from ironaccel.tosa.target import Target

# A backend of fp32 ADD up to rank 4, and nothing else.
TINY = CapabilityDescriptor(Target(), frozenset({DType.FP32}), supported([Op.ADD]), max_rank=4, name="tiny")


def troubled(path):
    """Five ways to be refused by TINY, one after another, after an operator it takes."""
    b = ProgramBuilder()
    a, c = b.input("a", (2, 3), "fp32"), b.input("c", (2, 3), "fp32")
    i = b.input("i", (2, 3), "int32")
    r = b.input("r", (1, 1, 1, 2, 3), "fp32")
    ok = b.add(a, c)  # 0: admitted
    b.output(b.sub(ok, c))  # 1: SUB is not listed
    b.output(b.add(i, i))  # 2: int32
    b.output(b.add(r, r))  # 3: rank 5
    save(b.build(), path)
    return path


def test_every_problem_is_named_not_only_the_first(tmp_path):
    from ironaccel.tosa import load

    program = load(troubled(tmp_path / "t.tosa"))
    with pytest.raises(LoweringError) as first:
        admit(program, TINY)
    problems = validate_command.admission_problems(program, TINY)
    assert problems[0] == str(first.value)
    assert [p.split(":")[0] for p in problems[:3]] == ["operator #1 SUB", "operator #2 ADD", "operator #3 ADD"]
    assert "operator not supported by this backend" in problems[0]
    assert "dtype int32 of input1 'i' not supported by this backend (supports: fp32)" in problems[1]
    assert "has rank 5 > 4, the backend's max" in problems[2]
    assert "dtype int32 of graph input 'i' not supported by this backend" in problems[3:]
    assert validate_command.lacking(program, TINY) == {"operators": ["SUB"], "dtypes": ["int32"]}


def test_an_admitted_program_has_no_problems(tmp_path):
    from ironaccel.tosa import load

    b = ProgramBuilder()
    b.output(b.add(b.input("a", (2,), "fp32"), b.input("c", (2,), "fp32")))
    save(b.build(), tmp_path / "ok.tosa")
    assert validate_command.admission_problems(load(tmp_path / "ok.tosa"), TINY) == []


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(validate_command, "_device", lambda spec: ("Tiny Device", TINY))


def test_the_command_lists_every_problem_and_exits_1(tmp_path, tiny, capsys):
    path = troubled(tmp_path / "t.tosa")
    assert main(["validate", str(path), "--device", "tiny"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == f"{path}: valid"
    assert lines[1].startswith(f"{path}: not admitted by tiny (Tiny Device): ")
    assert "operators not supported: SUB; dtypes not supported: int32" in lines[1]
    assert [line.split(":")[0] for line in lines[2:5]] == [
        "  operator #1 SUB",
        "  operator #2 ADD",
        "  operator #3 ADD",
    ]
    assert "1 valid; 0 admitted by tiny, 1 not" in captured.err
    assert main(["validate", "--json", str(path), "--device", "tiny"]) == 1
    row = json.loads(capsys.readouterr().out)
    assert row["status"] == "valid" and row["device"]["admitted"] is False
    assert len(row["device"]["problems"]) == len(lines) - 2


def test_an_invalid_file_is_not_judged_for_the_device(tmp_path, tiny, capsys):
    (tmp_path / "junk.tosa").write_bytes(b"not a flatbuffer")
    assert main(["validate", str(tmp_path / "junk.tosa"), "--device", "tiny"]) == 1
    out = capsys.readouterr().out
    assert ": unreadable: " in out and "admitted" not in out


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ironaccel", *args], capture_output=True, text=True, timeout=120)


def test_the_cpu_admits_a_valid_program(tmp_path):
    path = troubled(tmp_path / "t.tosa")
    done = cli("validate", str(path), "--device", "cpu")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{path}: valid" and lines[1].startswith(f"{path}: admitted by cpu (CPU")
    assert len(lines) == 2


def test_a_device_that_cannot_be_opened_is_one_line_and_status_2(tmp_path):
    path = troubled(tmp_path / "t.tosa")
    done = cli("validate", str(path), "--device", "nosuch")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("ironaccel validate: no execution backend 'nosuch'")
