"""The conformance harness: one test case through the public API, test selection, the suite's .npy forms,
reports, and (with tosa-tools) ``ironaccel conformance`` over a bounded subset of Arm's suite.

The bounded subset is what ``make test`` runs: the whole PRO-INT suite is generated (a few minutes, cached
in ``.cache/cts``) and a few tests of every operator, positive and negative, go through Arm's runner with
our system under test. ``make conformance`` runs everything.
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import ironaccel
from ironaccel.cli.main import main as cli
from ironaccel.conformance import npy
from ironaccel.conformance.case import Status, run_case
from ironaccel.conformance.report import Report
from ironaccel.conformance.runner import CaseInfo, Outcome, select
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor, write
from ironaccel.tosa.builder import ProgramBuilder
from tosa_fixtures import run_conformance

pytest.importorskip("ironaccel.backends.cpu.accelerator")


def _case_dir(tmp: Path, program, inputs: list[np.ndarray], *, negative: bool = False, needs=("tosa-pro-fp",)) -> Path:
    test = tmp / "case"
    test.mkdir()
    (test / "test.tosa").write_bytes(write(program))
    block = program.main
    for i, value in enumerate(inputs):
        npy.save(test / f"input-{i}.npy", value, block.tensor(block.inputs[i]).dtype)
    desc = {
        "tosa_file": "test.tosa",
        "ifm_name": list(block.inputs),
        "ifm_file": [f"input-{i}.npy" for i in range(len(inputs))],
        "ofm_name": list(block.outputs),
        "ofm_file": [f"result-{i}.npy" for i in range(len(block.outputs))],
        "expected_failure": negative,
        "test_requirements": {"profiles_supported": list(needs)},
        "test_details": {"operator": "ADD", "output_types": ["FP32"]},
    }
    (test / "desc.json").write_text(json.dumps(desc))
    return test


def _add_program(dtype: str = "fp32", shape=(2, 3)):
    b = ProgramBuilder()
    x = b.input("x", shape, dtype)
    y = b.input("y", shape, dtype)
    b.output(b.add(x, y))
    return b.build()


def test_case_runs_through_the_public_api_and_writes_outputs(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    test = _case_dir(tmp_path, _add_program(), [x, 2 * x])
    with ironaccel.open("cpu") as dev:
        result = run_case(dev, test)
        assert result.status is Status.VALID, result.message
        assert dev.accelerator.live_resources()["program"] == 0  # the case unloads what it loaded
    np.testing.assert_array_equal(np.load(test / "result-0.npy"), 3 * x)


def test_case_reports_an_error_if_as_an_error(tmp_path):
    # ADD of fp32[2,3] and fp32[4,5]: the shapes do not broadcast, an ERROR_IF of the operator.
    tensors = [Tensor("x", (2, 3), DType.FP32), Tensor("y", (4, 5), DType.FP32), Tensor("z", (2, 3), DType.FP32)]
    block = Block("main", [Operator(Op.ADD, ("x", "y"), ("z",))], tensors, ("x", "y"), ("z",))
    program = Program((Region("main", (block,)),))
    inputs = [np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)]
    test = _case_dir(tmp_path, program, inputs, negative=True)
    with ironaccel.open("cpu") as dev:
        result = run_case(dev, test)
    assert result.status is Status.ERROR
    assert "ADD" in result.message
    assert not (test / "result-0.npy").exists()


def test_case_checks_programs_against_the_implementations_whole_claim(tmp_path):
    # An int32 comparison in a test that lists only PRO-FP (as the suite's WHILE_LOOP tests do) is valid
    # for an implementation of both profiles.
    b = ProgramBuilder()
    x = b.input("x", (3,), "int32")
    b.output(b.greater(x, b.const(np.zeros(3, np.int32))))
    test = _case_dir(tmp_path, b.build(), [np.array([-1, 0, 5], np.int32)], needs=("tosa-pro-fp",))
    with ironaccel.open("cpu") as dev:
        result = run_case(dev, test)
    assert result.status is Status.VALID, result.message
    assert np.load(test / "result-0.npy").tolist() == [False, False, True]


def test_case_reports_an_unreadable_test_without_raising(tmp_path):
    test = _case_dir(tmp_path, _add_program(), [np.ones((2, 3), np.float32)] * 2)
    (test / "test.tosa").write_bytes(b"TOSA but not really")
    with ironaccel.open("cpu") as dev:
        result = run_case(dev, test)
    assert result.status is Status.FAILED
    assert "unreadable" in result.message


@pytest.mark.parametrize(
    ("dtype", "descr"),
    [(DType.BF16, "<V2"), (DType.FP8E4M3, "<V1"), (DType.FP8E5M2, "|u1"), (DType.INT48, "<i8"), (DType.FP16, "<f2")],
)
def test_npy_forms_round_trip_every_bit_pattern(tmp_path, dtype, descr):
    size = dtype.numpy.itemsize
    patterns = np.arange(256 if size == 1 else 65536, dtype=np.uint8 if size == 1 else np.uint16)
    if dtype is DType.INT48:
        value = np.array([-(2**47), -1, 0, 1, 2**47 - 1], np.int64)
    else:
        value = patterns.view(dtype.numpy)
    path = tmp_path / "v.npy"
    npy.save(path, value, dtype)
    assert f"'descr': '{descr}'" in path.read_bytes()[:128].decode("latin-1")
    back = npy.load(path, dtype)
    assert back.dtype == dtype.numpy
    assert back.tobytes() == value.tobytes()


def _info(op: str, types: tuple[str, ...], negative: bool, n: int, ext=()) -> CaseInfo:
    return CaseInfo(Path(f"/cts/{op.lower()}_{n}"), op, negative, tuple(ext), types)


def test_select_covers_every_output_type_and_polarity_before_repeating(tmp_path, monkeypatch):
    infos = [_info("CAST", (t,), neg, i) for i, (t, neg) in enumerate([("INT8", False)] * 9 + [("FP16", False)] * 3)]
    infos += [_info("CAST", ("INT8",), True, 100 + i) for i in range(4)]
    infos += [_info("ADD", ("INT32",), False, 200 + i, ext=("int16",)) for i in range(3)]
    by_path = {i.path: i for i in infos}
    monkeypatch.setattr(CaseInfo, "of", classmethod(lambda cls, path, profile="": by_path[path]))
    picked = select(by_path, per_operator=3)
    cast = [i for i in picked if i.operator == "CAST"]
    assert len(cast) == 3
    assert {(i.output_types, i.negative) for i in cast} == {(("INT8",), False), (("FP16",), False), (("INT8",), True)}
    assert not [i for i in select(by_path, extensions=["bf16"]) if i.operator == "ADD"]
    assert len(select(by_path, extensions=["tosa-ext-int16"], operators=["add"])) == 3
    assert all(i.negative for i in select(by_path, test_type="negative"))


def test_report_counts_tables_and_junit():
    outcomes = [
        Outcome(_info("ADD", ("FP32",), False, 1), True, seconds=0.5),
        Outcome(_info("ADD", ("FP32",), True, 2), True),
        Outcome(_info("CONV2D", ("BF16",), False, 3, ext=("bf16",)), False, message="NOT COMPLIANT\ndetail"),
        Outcome(_info("CONV2D", ("FP32",), False, 4), False, skipped=True, message="filtered"),
    ]
    outcomes.append(Outcome(dataclasses.replace(_info("ADD", ("INT32",), False, 5), profile="tosa-pro-int"), True))
    report = Report("cpu", "TOSA conformance: cpu", outcomes)
    totals = report.totals()
    assert (totals["positive"].passed, totals["positive"].failed, totals["positive"].skipped) == (2, 1, 1)
    assert (totals["negative"].passed, totals["negative"].run) == (1, 1)
    assert (totals["bf16 positive"].passed, totals["bf16 positive"].run) == (0, 1)
    assert not report.ok
    text = report.markdown()
    assert "| PRO-INT | 1 / 1 | 0 / 0 |" in text
    assert "| CONV2D ✗ | BF16 | 0 / 1 | - |" in text
    assert "`conv2d_3` (CONV2D, BF16): NOT COMPLIANT" in text
    suites = {s.get("name"): s for s in ET.fromstring(report.junit()).iter("testsuite")}
    assert suites["CONV2D"].get("failures") == "1" and suites["CONV2D"].get("skipped") == "1"
    assert suites["ADD"].get("tests") == "3" and suites["ADD"].get("failures") == "0"


def test_conformance_command_explains_missing_tools(tmp_path, capsys):
    code = cli(["conformance", "--tosa-tools", str(tmp_path / "nowhere"), "--report", str(tmp_path / "r")])
    assert code == 2
    assert "tosa-tools not found" in capsys.readouterr().err


# Operators whose tests only PRO-FP has; with the whole PRO-INT suite they cover every operator of the CTS.
FP_ONLY = (
    *("ceil", "cos", "erf", "exp", "fft2d", "floor", "log", "pow", "reciprocal"),
    *("reduce_product", "rfft2d", "rsqrt", "sigmoid", "sin", "tanh"),
)


@pytest.mark.tosa_tools
@pytest.mark.parametrize(
    ("profile", "operators"), [("pro-int", ()), ("pro-fp", FP_ONLY)], ids=["pro-int-all", "pro-fp-only-ops"]
)
def test_bounded_subset_of_the_suite_passes_on_cpu(tmp_path, profile, operators):
    """A few tests of every operator (each output type, negatives included) through Arm's runner."""
    text, cases = run_conformance(
        tmp_path / "report",
        *("--device", "cpu", "--profile", profile, "--per-operator", "3", "-j", "2"),
        *(("--operators", *operators) if operators else ()),
    )
    operators_run = {c.get("classname") for c in cases}
    assert len(operators_run) >= (len(operators) or 50)
    assert "| negative (rejected) |" in text


# The same selection as the codec round-trip tests, so the cache entry is shared.
FP_SET = ("tosa-pro-fp", ("add", "const", "matmul"), ("tosa-ext-bf16", "tosa-ext-fp8e4m3", "tosa-ext-fp8e5m2"))


@pytest.mark.tosa_tools
def test_run_command_takes_a_suite_test_directory(tmp_path, capsys):
    from tosa_fixtures import cts_dir, cts_tests

    tests = cts_tests(cts_dir(*FP_SET))
    bf16 = next(
        t
        for t in tests
        if json.loads((t / "desc.json").read_text())["test_details"].get("output_types") == ["BF16"]
        and not json.loads((t / "desc.json").read_text())["expected_failure"]
    )
    out = tmp_path / "out.npy"
    assert cli(["run", str(bf16), "--device", "cpu", "--compare", "cpu", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0 differing elements" in printed
    assert "'descr': '<V2'" in out.read_bytes()[:128].decode("latin-1")
    desc = json.loads((bf16 / "desc.json").read_text())
    assert list(npy.load(out, DType.BF16).shape) == desc["test_details"]["output_shapes"][0]
    assert npy.load(out, DType.BF16).dtype == ml_dtypes.bfloat16


def test_run_command_draws_seeded_inputs_of_every_type_when_none_are_given():
    from ironaccel.cli.run_inputs import random_inputs
    from ironaccel.runtime.spec import TensorSpec

    types = ("bool", "int4", "int8", "int16", "int32", "int48", "fp32", "fp16", "bf16", "fp8e4m3", "fp8e5m2")
    specs = tuple(TensorSpec(t, (64,), DType.parse(t)) for t in types)
    first, again, other = random_inputs(specs, 1), random_inputs(specs, 1), random_inputs(specs, 2)
    for spec, a, b, c in zip(specs, first, again, other, strict=True):
        assert a.dtype == spec.dtype.numpy and a.shape == (64,)
        assert a.tobytes() == b.tobytes() and a.tobytes() != c.tobytes(), spec.name
    ranges = {t: (int(v.min()), int(v.max())) for t, v in zip(types, first, strict=True) if t.startswith("int")}
    assert -8 <= ranges["int4"][0] and ranges["int4"][1] <= 7
    assert all(-(1 << 15) <= lo and hi < 1 << 15 for lo, hi in ranges.values())
    with pytest.raises(ValueError, match="shape"):
        random_inputs((TensorSpec("s", (2,), DType.SHAPE),), 0)


def test_the_suite_is_generated_with_only_the_extensions_the_command_allows():
    from ironaccel.cli.conformance import _generated_extensions

    assert _generated_extensions("tosa-pro-fp", None) is None  # default: every extension
    assert _generated_extensions("tosa-pro-fp", []) == []  # --extension none: the base profile
    assert _generated_extensions("tosa-pro-fp", ["bf16", "tosa-ext-fp8e4m3", "int16"]) == [
        "tosa-ext-bf16",
        "tosa-ext-fp8e4m3",
    ]  # int16 is PRO-INT's
    assert _generated_extensions("tosa-pro-int", ["INT16"]) == ["tosa-ext-int16"]
