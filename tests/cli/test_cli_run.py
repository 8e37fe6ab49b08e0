"""``ironaccel run``: inputs by name or from an .npz, outputs to .npy / .npz / a directory, timed repeats,
and --compare judged by tolerances, with a failing device reported by name."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ironaccel
from ironaccel.cli import run_compare, run_inputs, run_outputs
from ironaccel.cli.main import main
from ironaccel.core.errors import DeviceLost, InvalidArgument
from ironaccel.runtime.session import open_device
from ironaccel.runtime.spec import TensorSpec
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor, Version, save

A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 0.5, np.float32)


def cli(*args: str, cwd, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ironaccel", *args], capture_output=True, text=True, cwd=cwd, timeout=120, env=env
    )


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip()


def two_outputs(path, dtype=DType.FP32) -> None:
    """a, b -> sum = a + b, diff = a - b."""
    tensors = tuple(Tensor(n, (2, 3), dtype) for n in ("a", "b", "sum", "diff"))
    ops = (Operator(Op.ADD, ("a", "b"), ("sum",)), Operator(Op.SUB, ("a", "b"), ("diff",)))
    save(
        Program((Region("main", (Block("main", ops, tensors, ("a", "b"), ("sum", "diff")),)),), Version(1, 0, 2)), path
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    two_outputs(root / "two.tosa")
    two_outputs(root / "int.tosa", DType.INT32)
    np.save(root / "a.npy", A)
    np.save(root / "b.npy", B)
    np.savez(root / "ab.npz", a=A, b=B)
    np.savez(root / "bc.npz", b=B, c=A)
    return root


# -- inputs -------------------------------------------------------------------------------------------------
def test_inputs_by_name_in_any_order_and_outputs_to_one_npz(work, tmp_path):
    out = tmp_path / "out.npz"
    done = cli(
        "run", str(work / "two.tosa"), "-i", "b=b.npy", "-i", "a=a.npy", "-o", str(out), "--device", "cpu", cwd=work
    )
    assert done.returncode == 0, done.stderr
    assert out.is_file()  # it used to become a directory named out.npz
    with np.load(out) as saved:
        assert sorted(saved.files) == ["diff", "sum"]
        np.testing.assert_array_equal(saved["sum"], A + B)
        np.testing.assert_array_equal(saved["diff"], A - B)
    assert f"wrote {out}" in done.stdout


def test_inputs_from_an_npz_and_outputs_to_a_directory(work, tmp_path):
    out = tmp_path / "outs"
    done = cli("run", str(work / "two.tosa"), "-i", "ab.npz", "-o", f"{out}/", "--device", "cpu", cwd=work)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["diff.npy", "sum.npy"]
    np.testing.assert_array_equal(np.load(out / "diff.npy"), A - B)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (["c=b.npy", "a=a.npy"], "ironaccel run: -i c=b.npy: the program has no input named 'c'; its inputs: 'a', 'b'"),
        (
            ["b=b.npy", "a.npy"],
            "ironaccel run: -i: give every input by name (NAME=FILE) or every one in order, not both "
            "(b by name; a.npy in order)",
        ),
        (["a=a.npy"], "ironaccel run: -i: no file for input(s) 'b'; the program's inputs: 'a', 'b'"),
        (["a=a.npy", "a=b.npy"], "ironaccel run: -i a=b.npy: input 'a' is already given (a.npy)"),
        (
            ["bc.npz"],
            "ironaccel run: bc.npz: holds no array for input(s) 'a'; member(s) 'c' name no input "
            "(the program's inputs: 'a', 'b')",
        ),
        (["ab.npz", "a.npy"], "ironaccel run: -i ab.npz: an .npz archive feeds every input by name; give it as"),
        (["a.npy"], "ironaccel run: the program takes 2 input(s) (a: fp32[2, 3], b: fp32[2, 3]); 1 given"),
    ],
)
def test_input_mistakes_are_refused_by_name(work, inputs, message):
    argv = ["run", str(work / "two.tosa"), "--device", "cpu"]
    for value in inputs:
        argv += ["-i", value]
    done = cli(*argv, cwd=work)
    assert done.returncode == 2
    assert one_line(done).startswith(message)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.text(st.sampled_from("ab=.npzy/x"), max_size=12), max_size=4))
def test_binding_hostile_input_arguments_either_binds_or_refuses(values):
    specs = (TensorSpec("a", (2,), DType.FP32), TensorSpec("b", (2,), DType.FP32))
    try:
        bound = run_inputs.bind_inputs(values, specs)
    except InvalidArgument:
        return
    assert [spec.name for spec, _, _ in bound] == ["a", "b"]


def test_an_integer_archive_member_is_narrowed_only_when_every_value_survives(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.array([1, 2], np.int64), b=np.array([1, 1 << 40], np.int64))
    specs = (TensorSpec("a", (2,), DType.INT32), TensorSpec("b", (2,), DType.INT32))
    bound = run_inputs.bind_inputs([str(tmp_path / "x.npz")], specs)
    with pytest.raises(ValueError, match=r"x.npz\[b\]: holds int64 values, which are not int32"):
        run_inputs.load_inputs(bound)
    np.savez(tmp_path / "x.npz", a=np.array([1, 2], np.int64), b=np.array([3, 4], np.int16))
    a, b = run_inputs.load_inputs(bound)
    assert a.dtype == b.dtype == np.int32 and b.tolist() == [3, 4]


# -- outputs ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("x.npy", "ironaccel run: -o x.npy: the program has 2 outputs ('sum', 'diff'); give OUT.npz or a directory"),
        ("x", "ironaccel run: -o x: give OUT.npy (one output), OUT.npz (every output by name) or a directory"),
    ],
)
def test_an_output_path_that_cannot_hold_the_outputs_is_refused_before_anything_is_written(
    work, tmp_path, out, message
):
    done = cli("run", str(work / "two.tosa"), "-i", str(work / "ab.npz"), "-o", out, "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 2
    assert one_line(done).startswith(message)
    assert list(tmp_path.iterdir()) == []


def test_output_file_names_never_leave_the_target():
    plain = (TensorSpec("y", (1,), DType.FP32), TensorSpec("z.0", (1,), DType.FP32))
    assert run_outputs._file_names(plain) == ["y", "z.0"]
    for names in (("../evil", "y"), ("Y", "y"), ("a/b", "c"), ("", "c")):
        specs = tuple(TensorSpec(n, (1,), DType.FP32) for n in names)
        assert run_outputs._file_names(specs) == ["output-0", "output-1"]


def test_bf16_outputs_keep_the_suites_raw_form_inside_an_npz(tmp_path):
    values = [np.array([1.5, -2.0], ml_dtypes.bfloat16), np.array([3.0], np.float32)]
    specs = (TensorSpec("h", (2,), DType.BF16), TensorSpec("f", (1,), DType.FP32))
    assert run_outputs.save_outputs(values, specs, str(tmp_path / "o.npz")) == [str(tmp_path / "o.npz")]
    with zipfile.ZipFile(tmp_path / "o.npz") as archive:
        assert sorted(archive.namelist()) == ["f.npy", "h.npy"]
        assert b"'descr': '<V2'" in archive.read("h.npy")[:128]
    with np.load(tmp_path / "o.npz") as saved:
        assert saved["h"].view(ml_dtypes.bfloat16).tolist() == [1.5, -2.0]


# -- timing -------------------------------------------------------------------------------------------------
def test_warmup_and_repeat_report_median_and_spread(work):
    argv = ["run", str(work / "two.tosa"), "-i", "ab.npz", "--device", "cpu", "--warmup", "2", "--repeat", "7"]
    done = cli(*argv, "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    timing = json.loads(done.stdout)["timing"]
    assert timing["warmup"] == 2 and timing["repeat"] == 7
    assert 0 < timing["p10_ms"] <= timing["median_ms"] <= timing["p90_ms"]
    text = cli(*argv, cwd=work).stdout
    assert "median, p10-p90" in text and "over 7 calls after 2 warm-up call(s)" in text


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--repeat", "0"], "--repeat must be 1 or more, got 0"),
        (["--warmup", "-1"], "--warmup must be 0 or more, got -1"),
        (["--compare", "cpu", "--atol", "nan"], "--atol must be a finite number >= 0, got nan"),
        (["--rtol", "0.1"], "--rtol applies to --compare DEVICE, which is not given"),
    ],
)
def test_bad_numbers_are_refused(work, flags, message, capsys, monkeypatch):
    monkeypatch.delenv("IRONACCEL_DEBUG", raising=False)
    assert main(["run", str(work / "two.tosa"), "--device", "cpu", *flags]) == 2
    assert capsys.readouterr().err == f"ironaccel run: {message}\n"


# -- comparison ---------------------------------------------------------------------------------------------
def test_tolerances_default_by_dtype():
    exact = run_compare.default_tolerance(np.int8)
    fp32, fp16 = run_compare.default_tolerance(np.float32), run_compare.default_tolerance(np.float16)
    bf16 = run_compare.default_tolerance(ml_dtypes.bfloat16)
    assert exact == (0.0, 0.0) and run_compare.default_tolerance(np.bool_) == (0.0, 0.0)
    assert fp32 == (1e-5, 1e-4)
    assert fp32 < fp16 < bf16 < run_compare.default_tolerance(ml_dtypes.float8_e4m3fn)


def test_compare_judges_every_element_and_names_the_worst():
    ref = np.array([[1.0, 2.0, np.nan], [np.inf, -4.0, 100.0]], np.float32)
    same = ref.copy()
    (row,) = run_compare.compare([same], [ref])
    assert row["agree"] and row["differing"] == 0 and row["worst"] is None  # NaN == NaN, inf == inf
    near = ref.copy()
    near[1, 2] = 100.005  # within rtol 1e-4 of 100
    near[0, 0] = 1.0 + 5e-6
    (row,) = run_compare.compare([near], [ref])
    assert row["agree"] and row["differing"] == 2 and row["beyond"] == 0
    far = near.copy()
    far[1, 1] = -4.01
    far[0, 1] = 2.0 + 3e-4
    (row,) = run_compare.compare([far], [ref])
    assert not row["agree"] and row["beyond"] == 2
    assert row["worst"]["index"] == [1, 1] and row["worst"]["reference"] == -4.0
    (row,) = run_compare.compare([far], [ref], atol=0.02)
    assert row["agree"]
    nan = ref.copy()
    nan[0, 0] = np.nan
    (row,) = run_compare.compare([nan], [ref], atol=1e9)
    assert not row["agree"] and row["worst"]["index"] == [0, 0]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=32), st.floats(0, 1), st.floats(0, 1))
def test_compare_counts_exactly_the_elements_beyond_the_tolerance(values, atol, rtol):
    ref = np.array(values, np.float32)
    got = (ref * np.float32(1.001)).astype(np.float32)
    (row,) = run_compare.compare([got], [ref], atol, rtol)
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    assert row["beyond"] == int(np.count_nonzero(diff > atol + rtol * np.abs(ref.astype(np.float64))))
    assert row["agree"] == (row["beyond"] == 0)


def test_two_devices_that_agree_exit_0_and_say_so(work):
    done = cli("run", str(work / "int.tosa"), "--device", "cpu", "--compare", "cpu", cwd=work)
    assert done.returncode == 0, done.stderr
    assert "inputs: seeded random (seed 0)" in done.stdout
    assert "output 0 sum int32[2, 3]: 0 differing elements, max |diff| 0 vs CPU" in done.stdout
    assert "agree (exactly)" in done.stdout


class _Skewed:
    """A device that wraps the CPU and changes its outputs (``delta`` added) or fails (``error`` raised)."""

    def __init__(self, delta=0, error: Exception | None = None) -> None:
        self.device = open_device("cpu")
        self.info, self.why, self.delta, self.error = self.device.info, "a skewed test device", delta, error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.device.close()

    def compile(self, program):
        exe = self.device.compile(program)
        outer = self

        class Exe:
            inputs, outputs = exe.inputs, exe.outputs

            def __call__(self, *arrays):
                if outer.error is not None:
                    raise outer.error
                outputs = exe(*arrays)
                outputs[0].reshape(-1)[-1] += outer.delta
                return outputs

        return Exe()


@pytest.fixture
def skewed(monkeypatch):
    """``--compare skewed`` / ``--device skewed`` opens a _Skewed made by the test."""
    made = {}
    real = ironaccel.open

    def fake(spec="auto"):
        return made["device"]() if spec == "skewed" else real(spec)

    monkeypatch.setattr(ironaccel, "open", fake)
    monkeypatch.delenv("IRONACCEL_DEBUG", raising=False)
    return made


def test_outputs_beyond_the_tolerance_exit_1_naming_the_worst_element(work, skewed, capsys):
    skewed["device"] = lambda: _Skewed(delta=np.float32(0.01))
    argv = ["run", str(work / "two.tosa"), "-i", str(work / "ab.npz"), "--device", "skewed", "--compare", "cpu"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert (
        "output 0 sum float32[2, 3]: 1 differing elements, max |diff| 0.01 vs CPU (x86_64" in out
        and "; 1 beyond atol 1e-05, rtol 0.0001, worst at [1, 2]: 5.51 on CPU" in out
        and "vs 5.5 on CPU" in out
    )
    assert "output 1 diff float32[2, 3]: 0 differing elements" in out
    assert main([*argv, "--atol", "0.02"]) == 0
    assert main([*argv, "--json"]) == 1
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report["compare"]["agree"] is False
    assert report["compare"]["outputs"][0]["worst"]["index"] == [1, 2]


def test_integers_are_exact_unless_told(work, skewed, capsys):
    skewed["device"] = lambda: _Skewed(delta=1)
    argv = ["run", str(work / "int.tosa"), "--device", "skewed", "--compare", "cpu"]
    assert main(argv) == 1
    assert "1 beyond exactly" in capsys.readouterr().out
    assert main([*argv, "--atol", "1"]) == 0


@pytest.mark.parametrize(
    "devices", [["--device", "skewed", "--compare", "cpu"], ["--device", "cpu", "--compare", "skewed"]]
)
def test_a_failing_device_is_named_and_the_other_ones_outputs_are_still_written(
    work, skewed, tmp_path, capsys, devices
):
    skewed["device"] = lambda: _Skewed(error=DeviceLost("the queue hung"))
    out = tmp_path / "out.npz"
    assert main(["run", str(work / "two.tosa"), "-i", str(work / "ab.npz"), "-o", str(out), *devices]) == 2
    captured = capsys.readouterr()
    assert captured.err == "ironaccel run: skewed failed: the queue hung\n"
    assert "ran on CPU" in captured.out and f"wrote {out}" in captured.out
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["sum"], A + B)


def test_a_device_that_cannot_be_opened_is_named(work, tmp_path):
    out = tmp_path / "y.npz"
    done = cli("run", str(work / "two.tosa"), "--device", "cpu", "--compare", "nosuch", "-o", str(out), cwd=work)
    assert done.returncode == 2
    assert one_line(done).startswith("ironaccel run: nosuch failed: no execution backend 'nosuch'")
    assert out.is_file() and "ran on CPU" in done.stdout


def test_a_bug_in_a_compared_device_is_reported_with_its_type(work, skewed, capsys):
    skewed["device"] = lambda: _Skewed(error=RuntimeError("an invariant broke"))
    argv = ["run", str(work / "two.tosa"), "-i", str(work / "ab.npz"), "--device", "cpu", "--compare", "skewed"]
    assert main(argv) == 2
    assert capsys.readouterr().err == "ironaccel run: skewed failed: RuntimeError: an invariant broke\n"
    with pytest.raises(RuntimeError, match="an invariant broke"):
        main(["--debug", *argv])
