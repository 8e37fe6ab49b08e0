"""Conformance for a device on another machine: pack here, execute there, judge here.

The packing, execution and recording steps need no tosa-tools and run on the CPU backend; the judging
step goes through Arm's runner (with tosa-tools) and must fail a recorded output that was changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ironaccel.cli.main import main as cli
from ironaccel.conformance import bundle
from ironaccel.conformance.runner import CaseInfo
from ironaccel.tosa import write
from ironaccel.tosa.builder import ProgramBuilder
from tosa_fixtures import cts_dir, cts_tests

pytest.importorskip("ironaccel.backends.cpu.accelerator")


def _add_case(root: Path, name: str, n: int, *, negative: bool = False, needs: tuple[str, ...] = ()) -> Path:
    """A test directory in the suite's layout: ADD of two int32 vectors of length n."""
    b = ProgramBuilder()
    x, y = b.input("x", (n,), "int32"), b.input("y", (n,), "int32")
    b.output(b.add(x, y))
    program = b.build()
    test = root / name
    test.mkdir(parents=True)
    (test / "test.tosa").write_bytes(write(program))
    for i in range(2):
        np.save(test / f"input-{i}.npy", np.arange(n, dtype=np.int32) * (i + 1))
    (test / "result-0.npy").write_bytes(b"an output left by an earlier run")
    desc = {
        "tosa_file": "test.tosa",
        "ifm_name": ["x", "y"],
        "ifm_file": ["input-0.npy", "input-1.npy"],
        "ofm_name": list(program.main.outputs),
        "ofm_file": ["result-0.npy"],
        "expected_failure": negative,
        "test_requirements": {"profiles_supported": ["tosa-pro-int"], "extensions_required": list(needs)},
        "test_details": {"operator": "ADD", "output_types": ["INT32"]},
    }
    (test / "desc.json").write_text(json.dumps(desc))
    return test


def test_smallest_takes_the_k_smallest_tests_of_every_kind(tmp_path):
    tests = [CaseInfo.of(_add_case(tmp_path, f"add_{n}", n)) for n in (40, 3, 900, 7)]
    tests.append(CaseInfo.of(_add_case(tmp_path, "add_neg_500", 500, negative=True)))
    chosen = bundle.smallest(tests, 2)
    assert sorted(i.path.name for i in chosen) == ["add_3", "add_7", "add_neg_500"]
    (tmp_path / "add_3" / "result-0.npy").write_bytes(bytes(1 << 20))  # what a run left behind does not count
    assert bundle.smallest(tests, 2) == chosen
    assert [i.path.name for i in bundle.smallest(tests, 10)] == sorted(i.path.name for i in tests)


def test_pack_execute_record_and_restore_without_tosa_tools(tmp_path):
    suite = tmp_path / "suite"
    good = _add_case(suite, "add_ok", 5)
    unknown = _add_case(suite, "add_needs_future_ext", 5, needs=("tosa-ext-not-in-1.0",))
    packed = tmp_path / "bundle"
    bundle.pack([CaseInfo.of(good, "tosa-pro-int"), CaseInfo.of(unknown, "tosa-pro-int")], packed)
    ids = [e["id"] for e in bundle.read_manifest(packed, "bundle")["tests"]]
    # The bundle carries what a device needs and nothing a device produced.
    assert sorted(p.name for p in (packed / "tests" / ids[0]).iterdir()) == [
        "desc.json",
        "input-0.npy",
        "input-1.npy",
        "test.tosa",
    ]

    results = tmp_path / "results"
    assert cli(["conformance", "--device", "cpu", "--execute", str(packed), "--results", str(results)]) == 0
    recorded = bundle.Recorded.open(results)
    assert recorded.device == "cpu"
    ident, record = recorded.result(good)
    assert record["status"] == "valid" and ident == ids[0]
    assert np.array_equal(np.load(results / ident / "result-0.npy"), np.arange(5) * 3)
    _, record = recorded.result(unknown)
    assert record["status"] == bundle.NOT_APPLICABLE and "unknown requirement" in record["message"]
    _, record = recorded.result(tmp_path / "elsewhere")
    assert record["status"] == "failed"  # a test the results do not hold never passes

    # Restoring replaces the stale output with the recorded one, byte for byte.
    recorded.restore_outputs(ident, good, json.loads((good / "desc.json").read_text()))
    assert (good / "result-0.npy").read_bytes() == (results / ident / "result-0.npy").read_bytes()

    # Recording again into the same directory is refused, as is a hostile test id.
    assert cli(["conformance", "--device", "cpu", "--execute", str(packed), "--results", str(results)]) == 2
    manifest = json.loads((packed / "manifest.json").read_text())
    manifest["tests"][0]["id"] = "../outside"
    (packed / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="not a plain file name"):
        bundle.execute(packed, None, "cpu", tmp_path / "again")


@pytest.mark.tosa_tools
def test_recorded_outputs_are_judged_by_the_official_runner(tmp_path):
    """Execute on the CPU backend, judge with Arm's runner: passes; change one recorded value: fails."""
    source = cts_tests(cts_dir("tosa-pro-int", ["add"]))
    positive = next(t for t in source if "ERRORIF" not in t.name and t.name.endswith("_i32"))
    negative = next(t for t in source if "ERRORIF" in t.name)
    tests = []
    for test in (positive, negative):  # private copies: the runner writes into the test directories
        shutil.copytree(test, tmp_path / "suite" / test.name, ignore=shutil.ignore_patterns("result*", "bounds*"))
        tests.append(CaseInfo.of(tmp_path / "suite" / test.name, "tosa-pro-int"))
    packed, results = tmp_path / "bundle", tmp_path / "results"
    bundle.pack(tests, packed, "the two tests")
    assert cli(["conformance", "--device", "cpu", "--execute", str(packed), "--results", str(results)]) == 0

    report = tmp_path / "report"
    assert cli(["conformance", "--judge", str(results), "--report", str(report), "-j", "1"]) == 0
    text = (report / "report.md").read_text()
    assert "| positive (compliant) | 1 / 1 |" in text and "| negative (rejected) | 1 / 1 |" in text
    assert "Selection: the two tests; run on " in text and ", judged here" in text

    ident = bundle.Recorded.open(results).result(tests[0].path)[0]
    desc = json.loads((tests[0].path / "desc.json").read_text())
    output = results / ident / desc["ofm_file"][0]
    value = np.load(output)
    value.reshape(-1)[0] += 1
    np.save(output, value)
    assert cli(["conformance", "--judge", str(results), "--report", str(report), "-j", "1"]) == 1
    assert "| positive (compliant) | 0 / 1 |" in (report / "report.md").read_text()
