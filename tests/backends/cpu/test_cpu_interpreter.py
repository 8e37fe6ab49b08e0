"""The CPU interpreter (load, run, folding, liveness, control flow, variables) and the shared harness that
checks CPU results against tosa-tools' reference model (used by test_cpu_tensor_ops / test_cpu_layout_ops).

Harness: :func:`op_program` builds a one-operator program; :func:`check_program` runs it here and on the
reference model; :func:`check_cts_tests` does the same for conformance tests. Every comparison is made
twice: the official verifier library judges our output against the reference model's fp64 ("precise")
result, as the conformance suite does (one reference run per test); and a tight check requires integers
and exact-mode floats to be bit-for-bit equal, dot products within half an ulp of the output type plus
1e-5 of the dot product of absolute values (the bounds run), and other floats within an ulp. Reference
results are cached under ``.cache/cpu-ref`` (keyed by the test's files), so reruns cost only our side and
the verifier.
tosa-tools is found as tosa_fixtures finds it, with ``/tmp/tosavenv`` as a last resort.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import tosa_fixtures
from ironaccel.backends import cpu
from ironaccel.backends.cpu.kernel import kernel_for
from ironaccel.core.errors import DeadlineExpired, InvalidArgument
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor
from ironaccel.tosa.attributes import ATTRIBUTE_OF
from ironaccel.tosa.codec import read, write
from ironaccel.tosa.errors import LoweringError, ValidationError
from tosa_fixtures import cts_dir, cts_tests, require_tosa_tools

_FALLBACK_TOOLS = Path("/tmp/tosavenv")
if tosa_fixtures.tosa_tools_venv() is None and (_FALLBACK_TOOLS / "bin" / "tosa_verif_conformance_generator").exists():
    os.environ.setdefault(tosa_fixtures.ENV_VAR, str(_FALLBACK_TOOLS))

REF_CACHE = tosa_fixtures.REPO / ".cache" / "cpu-ref"
FP_EXTENSIONS = ("tosa-ext-bf16", "tosa-ext-fp8e4m3", "tosa-ext-fp8e5m2", "tosa-ext-fft", "tosa-ext-controlflow")
INT_EXTENSIONS = ("tosa-ext-int16", "tosa-ext-int4", "tosa-ext-controlflow")
PROFILES = {"tosa-pro-fp": FP_EXTENSIONS, "tosa-pro-int": INT_EXTENSIONS}


# -- building programs ---------------------------------------------------------------------------------
@dataclasses.dataclass
class V:
    """An operand of :func:`op_program`: a run-time input, or a constant (SHAPE constants use CONST_SHAPE)."""

    array: np.ndarray
    dtype: DType
    const: bool = False


def C(array, dtype: DType) -> V:
    return V(np.asarray(array, dtype=dtype.numpy), dtype, True)


def I(array, dtype: DType) -> V:  # noqa: E743
    return V(np.asarray(array, dtype=dtype.numpy), dtype)


def op_program(op: Op, operands: Sequence[V], outputs: Sequence[tuple[DType, Sequence[int]]], **attrs):
    """A one-operator program and its run-time inputs (the non-constant operands, in order)."""
    tensors, operators, block_inputs, inputs = [], [], [], []
    for index, operand in enumerate(operands):
        name = f"{'c' if operand.const else 'in'}{index}"
        if operand.const:
            tensors.append(Tensor(name, operand.array.shape, operand.dtype, operand.array))
            operators.append(Operator(Op.CONST_SHAPE if operand.dtype is DType.SHAPE else Op.CONST, (), (name,)))
        else:
            tensors.append(Tensor(name, operand.array.shape, operand.dtype))
            block_inputs.append(name)
            inputs.append(operand.array)
    names = [f"out{i}" for i in range(len(outputs))]
    tensors += [Tensor(n, tuple(shape), dtype) for n, (dtype, shape) in zip(names, outputs, strict=True)]
    operand_names = tuple(t.name for t in tensors[: len(operands)])
    operators.append(Operator(op, operand_names, tuple(names), ATTRIBUTE_OF[op](**attrs)))
    block = Block("main", tuple(operators), tuple(tensors), tuple(block_inputs), tuple(names))
    return Program((Region("main", (block,)),)), inputs


def run_op(op: Op, operands: Sequence[V], outputs: Sequence[tuple[DType, Sequence[int]]], **attrs):
    program, inputs = op_program(op, operands, outputs, **attrs)
    return cpu.run(program, inputs)


# -- the reference model -------------------------------------------------------------------------------
_REFERENCE_SCRIPT = r"""
import json, shutil, subprocess, sys
from pathlib import Path
import numpy as np
import tosa_reference_model
from checker.verifier import VerifierLibrary

lib = Path(tosa_reference_model.__file__).parent
cli = lib.parent / "bin" / "tosa_reference_model"
verifier = VerifierLibrary(lib / "libtosa_reference_verify_lib.so")
report = []
for job in json.loads(Path(sys.argv[1]).read_text()):
    test, ref = Path(job["test"]), Path(job["ref"])
    desc = json.loads((test / "desc.json").read_text())
    entry = {"status": "TOSA_VALID", "verdicts": [], "error": None}
    try:
        if not (ref / "precise" / "code").exists():  # one fp64 run (+ bounds), kept for later sessions
            out = ref / "precise"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            done = subprocess.run(
                [str(cli), "--test_desc", str(test / "desc.json"), "--flatbuffer_dir", str(test),
                 "--output_dir", str(out), "--precise_mode=1"],
                capture_output=True, text=True,
            )
            (out / "log").write_text(done.stdout[-4000:] + done.stderr[-4000:])
            (out / "code").write_text(str(done.returncode))
        code = int((ref / "precise" / "code").read_text())
        if code != 0:
            entry["status"] = {1: "TOSA_UNPREDICTABLE", 2: "TOSA_ERROR"}.get(code, f"exit {code}")
        else:
            for i, (name, file) in enumerate(zip(desc["ofm_name"], desc["ofm_file"])):
                precise = np.load(ref / "precise" / file)
                bounds = ref / "precise" / f"bounds_{file}"
                bounds = np.load(bounds) if bounds.exists() else None
                imp = np.load(Path(job["imp"]) / f"imp-{i}.npy")
                compliance = desc["meta"]["compliance"]
                entry["verdicts"].append(bool(verifier.verify_data(name, compliance, imp, precise, bounds)))
    except Exception as exc:  # one broken test must not hide the rest
        entry["error"] = f"{type(exc).__name__}: {exc}"
    report.append(entry)
Path(sys.argv[2]).write_text(json.dumps(report))
"""


def load_input(path: Path, dtype: DType) -> np.ndarray:
    """A CTS ``.npy`` in storage form: bf16 / fp8 come as raw bytes (void or unsigned), others as is."""
    array = np.load(path)
    storage = dtype.numpy
    if array.dtype == storage:
        return array
    if array.dtype.kind in "uV" and array.dtype.itemsize == storage.itemsize:
        return array.view(storage)
    return array.astype(storage)


def save_like_cts(path: Path, value: np.ndarray, dtype: DType) -> None:
    """Write an input the way the CTS does, which is the form the reference model reads: bf16 and fp8e4m3 as
    little-endian void ('<V2', '<V1'; numpy itself writes '|V2'), fp8e5m2 as uint8."""
    if dtype is DType.FP8E5M2:
        np.save(path, np.array(value, order="C").view(np.uint8))
        return
    np.save(path, _for_verifier(value, dtype))
    if dtype in (DType.BF16, DType.FP8E4M3):
        size = dtype.numpy.itemsize
        data = path.read_bytes()
        path.write_bytes(data.replace(f"'|V{size}'".encode(), f"'<V{size}'".encode(), 1))


def _for_verifier(value: np.ndarray, dtype: DType) -> np.ndarray:
    if dtype in (DType.BF16, DType.FP8E4M3, DType.FP8E5M2):
        return np.array(value, order="C").view(f"V{dtype.numpy.itemsize}")
    return np.array(value, order="C")  # not ascontiguousarray: that turns rank 0 into rank 1


_FRAC = {DType.FP32: 23, DType.FP16: 10, DType.BF16: 7, DType.FP8E4M3: 3, DType.FP8E5M2: 2}


def tight_mismatch(ours: np.ndarray, precise: np.ndarray, bounds, dtype: DType, comp: dict) -> str:
    """'' if ``ours`` passes the tight check of the module docstring, else a description of the first miss.
    ``precise`` is the reference model's fp64-mode result (integers and bools come out as in normal mode)."""
    mode = comp["mode"]
    if not dtype.is_float:
        expected = precise.view(ours.dtype) if precise.dtype.itemsize == ours.dtype.itemsize else precise
        bad = np.flatnonzero(ours.ravel() != expected.astype(ours.dtype).ravel())
        return (
            f"{bad.size} differ, first #{bad[0]}: {ours.ravel()[bad[0]]} != {expected.ravel()[bad[0]]}"
            if bad.size
            else ""
        )
    with np.errstate(invalid="ignore"):
        got = ours.astype(np.float64).ravel()
    ref = np.asarray(precise, np.float64).ravel()
    if mode == "EXACT":
        ok = (got == ref) | (np.isnan(got) & np.isnan(ref))
    else:
        half_ulp = 2.0 ** -(_FRAC[dtype] + 1)
        scale = np.abs(ref)
        if mode in ("DOT_PRODUCT", "FP_SPECIAL") and bounds is not None:
            bound = np.asarray(bounds, np.float64).ravel()
            slack = np.where(np.isnan(bound), np.inf, 1e-5 * bound)  # a NaN bound sets no requirement
        elif mode == "MAX_RELATIVE":  # RESIZE: fractions are rounded to the resize type first
            slack = 4 * half_ulp * np.nanmax(np.where(np.isfinite(ref), np.abs(ref), 0), initial=0)
        else:
            slack = half_ulp * scale
        tiny = np.finfo(np.float32).tiny if dtype is DType.FP32 else float(np.finfo(dtype.numpy).tiny)
        with np.errstate(invalid="ignore", over="ignore"):
            ok = (np.abs(got - ref) <= half_ulp * scale + slack + tiny) | (np.isnan(got) & np.isnan(ref))
            ok |= np.isinf(ref) & (got == ref)
            limit = float(np.finfo(dtype.numpy).max)
            ok |= (np.abs(ref) > limit) & (np.abs(got) >= limit)  # overflowed in both
    bad = np.flatnonzero(~ok)
    return f"{bad.size} outside, first #{bad[0]}: {got[bad[0]]!r} vs {ref[bad[0]]!r}" if bad.size else ""


@dataclasses.dataclass
class Outcome:
    test: Path
    compliant: bool  # the official verifier's verdict
    tight: bool
    detail: str = ""


def _ref_dir(test: Path) -> Path:
    digest = hashlib.sha256()
    for name in sorted(p.name for p in test.iterdir() if p.suffix in (".json", ".tosa", ".npy")):
        if name.startswith(("imp-", "result")):
            continue
        digest.update(name.encode())
        digest.update((test / name).read_bytes())
    return REF_CACHE / digest.hexdigest()[:20]


def check_cts_tests(tests: Sequence[Path]) -> list[Outcome]:
    """Run positive conformance tests here and on the reference model; one :class:`Outcome` each."""
    venv = require_tosa_tools()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        jobs, ours = [], []
        for index, test in enumerate(Path(t).resolve() for t in tests):
            desc = json.loads((test / "desc.json").read_text())
            if desc.get("expected_failure"):
                continue
            program = read((test / desc["tosa_file"]).read_bytes())
            block = program.main
            given = dict(zip(desc["ifm_name"], desc["ifm_file"], strict=True))
            inputs = [load_input(test / given[n], block.tensor(n).dtype) for n in block.inputs]
            imp = root / str(index)
            imp.mkdir()
            try:
                values = cpu.run(program, inputs)
            except Exception as exc:  # noqa: BLE001 - recorded as a failed test
                outcomes.append(Outcome(test, False, False, f"our run failed: {type(exc).__name__}: {exc}"))
                continue
            dtypes = [block.tensor(n).dtype for n in block.outputs]
            for i, (value, dtype) in enumerate(zip(values, dtypes, strict=True)):
                np.save(imp / f"imp-{i}.npy", _for_verifier(value, dtype))
            ref = _ref_dir(test)
            jobs.append({"test": str(test), "ref": str(ref), "imp": str(imp)})
            ours.append((test, ref, values, dtypes, desc))
        if not jobs:
            return outcomes
        (root / "jobs.json").write_text(json.dumps(jobs))
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-c", _REFERENCE_SCRIPT, str(root / "jobs.json"), str(root / "out.json")],
            capture_output=True,
            text=True,
            timeout=7200,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        for entry, (test, ref, values, dtypes, desc) in zip(
            json.loads((root / "out.json").read_text()), ours, strict=True
        ):
            if entry["error"] or entry["status"] != "TOSA_VALID":
                outcomes.append(Outcome(test, False, False, entry["error"] or entry["status"]))
                continue
            notes = []
            for value, dtype, name, file in zip(values, dtypes, desc["ofm_name"], desc["ofm_file"], strict=True):
                bounds = ref / "precise" / f"bounds_{file}"
                why = tight_mismatch(
                    np.asarray(value),
                    np.load(ref / "precise" / file),
                    np.load(bounds) if bounds.exists() else None,
                    dtype,
                    desc["meta"]["compliance"]["tensors"][name],
                )
                if why:
                    notes.append(f"{name}: {why}")
            compliant = all(entry["verdicts"])
            detail = "; ".join(([] if compliant else ["verifier: NOT COMPLIANT"]) + notes)
            outcomes.append(Outcome(test, compliant, not notes, detail))
    return outcomes


def check_program(program: Program, inputs: Sequence[np.ndarray]) -> Outcome:
    """Compare one hand-built program with the reference model (EXACT for integers, DOT_PRODUCT-like
    tolerance for floats); the program is written with our codec into a one-off test directory."""
    with tempfile.TemporaryDirectory() as tmp:
        test = Path(tmp) / "test"
        test.mkdir()
        (test / "test.tosa").write_bytes(write(program))
        block = program.main
        for i, value in enumerate(inputs):
            save_like_cts(test / f"input-{i}.npy", value, block.tensor(block.inputs[i]).dtype)
        comp = {}
        for name in block.outputs:
            decl = block.tensor(name)
            mode = "DOT_PRODUCT" if decl.dtype.is_float else "EXACT"
            entry = {"mode": mode, "data_type": decl.dtype.name, "shape": list(decl.shape)}
            if mode == "DOT_PRODUCT":
                entry["dot_product_info"] = {"s": 0, "ksb": 64, "abs_bound": 128, "variance_error_bound": 64.0}
            comp[name] = entry
        desc = {
            "tosa_file": "test.tosa",
            "ifm_name": list(block.inputs),
            "ifm_file": [f"input-{i}.npy" for i in range(len(inputs))],
            "ofm_name": list(block.outputs),
            "ofm_file": [f"result-{i}.npy" for i in range(len(block.outputs))],
            "expected_failure": False,
            "meta": {"compliance": {"version": "1.2", "tensors": comp}},
            "test_requirements": {"bounds_file_required": any(c["mode"] == "DOT_PRODUCT" for c in comp.values())},
        }
        (test / "desc.json").write_text(json.dumps(desc))
        (outcome,) = check_cts_tests([test])
    return outcome


# -- choosing conformance tests --------------------------------------------------------------------------
def cached_cts_dir(profile: str, op: str) -> Path | None:
    """The already generated conformance tests of ``op`` (as :func:`cts_dir` would make them), else None."""
    wanted = {"profile": profile, "operators": [op], "extensions": sorted(PROFILES[profile])}
    for marker in sorted(tosa_fixtures.CACHE.glob(f"{profile}-{op}-*/.complete")):
        spec = json.loads(marker.read_text())
        if all(spec.get(k) == (list(v) if isinstance(v, list) else v) for k, v in wanted.items()):
            return marker.parent
    return None


def positive_tests(root: Path) -> list[Path]:
    return [t for t in cts_tests(root) if not json.loads((t / "desc.json").read_text()).get("expected_failure")]


def smoke_tests(profile: str, op: str, per_op: int = 3) -> list[Path]:
    """The smallest few positive tests of an operator, if its tests are generated (never generates)."""
    require_tosa_tools()
    root = cached_cts_dir(profile, op)
    if root is None:
        pytest.skip(f"no generated CTS for {op} ({profile}); `pytest -m slow` generates it once")
    sized = sorted(positive_tests(root), key=lambda t: sum(f.stat().st_size for f in t.iterdir()))
    return sized[:per_op]


def full_tests(profile: str, op: str) -> list[Path]:
    require_tosa_tools()
    return positive_tests(cts_dir(profile, [op], PROFILES[profile]))


def assert_outcomes(outcomes: Sequence[Outcome]) -> None:
    failed = [o for o in outcomes if not (o.compliant and o.tight)]
    summary = "\n".join(f"{o.test.name}: {o.detail}" for o in failed[:15])
    assert not failed, f"{len(failed)}/{len(outcomes)} failed:\n{summary}"


# -- interpreter behaviour ---------------------------------------------------------------------------------
F32, I32, I8, B, SH = DType.FP32, DType.INT32, DType.INT8, DType.BOOL, DType.SHAPE


def _block(name, operators, tensors, inputs, outputs) -> Block:
    return Block(name, tuple(operators), tuple(tensors), tuple(inputs), tuple(outputs))


def _program(*blocks: Block) -> Program:
    return Program((Region("main", tuple(blocks)),))


def _transpose_program() -> Program:
    """x[2,3] -> TRANSPOSE -> y[3,2], plus a constant path folded at load."""
    const = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensors = [
        Tensor("x", (2, 3), F32),
        Tensor("k", (2, 3), F32, const),
        Tensor("kt", (3, 2), F32),
        Tensor("y", (3, 2), F32),
    ]
    ops = [
        Operator(Op.CONST, (), ("k",)),
        Operator(Op.TRANSPOSE, ("k",), ("kt",), ATTRIBUTE_OF[Op.TRANSPOSE](perms=(1, 0))),
        Operator(Op.TRANSPOSE, ("x",), ("y",), ATTRIBUTE_OF[Op.TRANSPOSE](perms=(1, 0))),
    ]
    return _program(_block("main", ops, tensors, ["x"], ["y", "kt"]))


def test_run_accepts_a_program_bytes_and_a_path(tmp_path):
    program = _transpose_program()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) * 2
    path = tmp_path / "p.tosa"
    path.write_bytes(write(program))
    for source in (program, write(program), path, str(path)):
        y, kt = cpu.run(source, [x])
        np.testing.assert_array_equal(y, x.T)
        np.testing.assert_array_equal(kt, np.arange(6, dtype=np.float32).reshape(2, 3).T)


def test_constants_are_folded_once_and_outputs_are_owned():
    compiled = cpu.load(_transpose_program())
    plan = compiled._plans["main"]
    assert [s.ctx.operator.op for s in plan.steps] == [Op.TRANSPOSE]  # CONST and its TRANSPOSE folded
    x = np.ones((2, 3), np.float32)
    y, kt = compiled.run([x])
    assert y.flags.writeable and kt.flags.writeable and not np.may_share_memory(y, x)
    kt[...] = -1  # must not leak into the folded constant
    np.testing.assert_array_equal(compiled.run([x])[1], np.arange(6, dtype=np.float32).reshape(2, 3).T)


def test_identity_of_an_input_returns_a_copy():
    program, (x,) = op_program(Op.IDENTITY, [I(np.arange(4), I32)], [(I32, (4,))])
    (y,) = cpu.run(program, [x])
    y[0] = 99
    assert x[0] == 0


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([], "takes 1 inputs"),
        ([np.zeros((2, 3), np.float64)], "'x': expected fp32"),
        ([np.zeros((3, 2), np.float32)], "'x': expected shape [2, 3]"),
        ([[[0.0] * 3] * 2], "'x': expected a numpy array"),
    ],
)
def test_inputs_are_checked(inputs, message):
    with pytest.raises(InvalidArgument, match=message.replace("[", r"\[").replace("]", r"\]")):
        cpu.run(_transpose_program(), inputs)


def test_operator_without_kernel_is_a_lowering_error():
    tensors = [Tensor("x", (2,), F32), Tensor("y", (2,), F32)]
    program = _program(_block("main", [Operator(Op.CUSTOM, ("x",), ("y",))], tensors, ["x"], ["y"]))
    with pytest.raises(LoweringError, match="CUSTOM"):
        cpu.load(program)


def test_operand_used_before_it_is_produced():
    tensors = [Tensor("x", (2,), F32), Tensor("t", (2,), F32), Tensor("y", (2,), F32)]
    ops = [Operator(Op.IDENTITY, ("t",), ("y",)), Operator(Op.IDENTITY, ("x",), ("t",))]
    with pytest.raises(ValidationError, match="used before"):
        cpu.load(_program(_block("main", ops, tensors, ["x"], ["y"])))


def test_values_are_released_after_their_last_use():
    names = ["x", "a", "b", "c"]
    tensors = [Tensor(n, (2,), F32) for n in names] + [Tensor("dead", (2,), F32)]
    ops = [
        Operator(Op.IDENTITY, ("x",), ("a",)),
        Operator(Op.IDENTITY, ("a",), ("dead",)),
        Operator(Op.IDENTITY, ("a",), ("b",)),
        Operator(Op.IDENTITY, ("b",), ("c",)),
    ]
    compiled = cpu.load(_program(_block("main", ops, tensors, ["x"], ["c"])))
    plan = compiled._plans["main"]
    slot = {n: i for i, n in enumerate(["x", "a", "dead", "b", "c"])}
    released = [sorted(s.release) for s in plan.steps]
    assert released == [[slot["x"]], [slot["dead"]], [slot["a"]], [slot["b"]]]
    np.testing.assert_array_equal(compiled.run([np.ones(2, np.float32)])[0], np.ones(2))


def _shift_loop_program(always: bool = False) -> Program:
    """WHILE_LOOP over a bool vector: while any element is true, drop the first and append false."""
    s = 4
    body = _block(
        "body",
        [
            Operator(Op.CONST_SHAPE, (), ("start",)),
            Operator(Op.CONST_SHAPE, (), ("size",)),
            Operator(Op.CONST, (), ("f",)),
            Operator(Op.SLICE, ("v", "start", "size"), ("tail",)),
            Operator(Op.CONCAT, ("tail", "f"), ("w",), ATTRIBUTE_OF[Op.CONCAT](axis=0)),
        ],
        [
            Tensor("v", (s,), B),
            Tensor("start", (1,), SH, np.array([1])),
            Tensor("size", (1,), SH, np.array([s - 1])),
            Tensor("f", (1,), B, np.array([False])),
            Tensor("tail", (s - 1,), B),
            Tensor("w", (s,), B),
        ],
        ["v"],
        ["w" if not always else "v"],
    )
    cond = _block(
        "cond",
        [Operator(Op.REDUCE_ANY, ("v",), ("any",), ATTRIBUTE_OF[Op.REDUCE_ANY](axis=0))],
        [Tensor("v", (s,), B), Tensor("any", (1,), B)],
        ["v"],
        ["any"],
    )
    main = _block(
        "main",
        [Operator(Op.WHILE_LOOP, ("x",), ("y",), ATTRIBUTE_OF[Op.WHILE_LOOP](cond_graph="cond", body_graph="body"))],
        [Tensor("x", (s,), B), Tensor("y", (s,), B)],
        ["x"],
        ["y"],
    )
    return _program(main, cond, body)


def test_while_loop_runs_until_the_condition_fails():
    (y,) = cpu.run(_shift_loop_program(), [np.array([False, True, False, True])])
    assert y.tolist() == [False] * 4


def test_a_check_hook_and_a_deadline_stop_an_endless_loop():
    compiled = cpu.load(_shift_loop_program(always=True))
    calls = []

    def hook():
        calls.append(1)
        if len(calls) > 50:
            raise DeadlineExpired("stop")

    with pytest.raises(DeadlineExpired, match="stop"):
        compiled.run([np.array([True] * 4)], check=hook)
    with pytest.raises(DeadlineExpired):
        compiled.run([np.array([True] * 4)], deadline=time.monotonic() + 0.05)


def test_cond_if_picks_a_branch():
    then = _block(
        "then",
        [Operator(Op.REVERSE, ("a",), ("r",), ATTRIBUTE_OF[Op.REVERSE](axis=0))],
        [Tensor("a", (3,), I32), Tensor("r", (3,), I32)],
        ["a"],
        ["r"],
    )
    other = _block(
        "else", [Operator(Op.IDENTITY, ("a",), ("r",))], [Tensor("a", (3,), I32), Tensor("r", (3,), I32)], ["a"], ["r"]
    )
    main = _block(
        "main",
        [Operator(Op.COND_IF, ("c", "x"), ("y",), ATTRIBUTE_OF[Op.COND_IF](then_graph="then", else_graph="else"))],
        [Tensor("c", (1,), B), Tensor("x", (3,), I32), Tensor("y", (3,), I32)],
        ["c", "x"],
        ["y"],
    )
    compiled = cpu.load(_program(main, then, other))
    x = np.array([1, 2, 3], np.int32)
    assert compiled.run([np.array([True]), x])[0].tolist() == [3, 2, 1]
    assert compiled.run([np.array([False]), x])[0].tolist() == [1, 2, 3]


def _variable_program(read_op: Op = Op.IDENTITY, write_op: Op = Op.IDENTITY) -> Program:
    """out = v; v = x (tosa-opt writes VARIABLE_READ / VARIABLE_WRITE as IDENTITY on a variable tensor)."""
    var = Tensor("Variable_0", (2,), F32, np.array([1.0, 2.0], np.float32), variable=True, variable_name="state")
    ops = [Operator(read_op, ("Variable_0",), ("out",))]
    if write_op is Op.VARIABLE_WRITE:
        ops.append(Operator(write_op, ("Variable_0", "x"), ()))
    else:
        ops.append(Operator(write_op, ("x",), ("Variable_0",)))
    tensors = [var, Tensor("x", (2,), F32), Tensor("out", (2,), F32)]
    return _program(_block("main", ops, tensors, ["x"], ["out"]))


@pytest.mark.parametrize(("read_op", "write_op"), [(Op.IDENTITY, Op.IDENTITY), (Op.VARIABLE_READ, Op.VARIABLE_WRITE)])
def test_variables_persist_across_runs_of_one_loaded_program(read_op, write_op):
    compiled = cpu.load(_variable_program(read_op, write_op))
    assert compiled.run([np.array([5, 6], np.float32)])[0].tolist() == [1, 2]
    assert compiled.run([np.array([7, 8], np.float32)])[0].tolist() == [5, 6]
    assert compiled.variables()["state"].tolist() == [7, 8]
    compiled.reset_variables()
    assert compiled.run([np.array([0, 0], np.float32)])[0].tolist() == [1, 2]
    other = cpu.load(_variable_program(read_op, write_op))  # a second load has its own store
    assert other.run([np.array([0, 0], np.float32)])[0].tolist() == [1, 2]


def test_variables_serialized_by_tosa_opt_run_like_the_reference_model():
    require_tosa_tools()
    mlir = """
    module {
      tosa.variable @stored_var = dense<[1.0, 2.0]> : tensor<2xf32>
      func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
        %0 = tosa.variable_read @stored_var : tensor<2xf32>
        %1 = tosa.transpose %0 {perms = array<i32: 0>} : (tensor<2xf32>) -> tensor<2xf32>
        tosa.variable_write @stored_var, %arg0 : tensor<2xf32>
        return %1 : tensor<2xf32>
      }
    }
    """
    data = tosa_fixtures.tosa_opt_serialize(mlir, extensions="variable")
    x = np.array([3.0, 4.0], np.float32)
    expected = tosa_fixtures.run_reference_model(data, [x])
    compiled = cpu.load(data)
    np.testing.assert_array_equal(compiled.run([x])[0], expected[0])
    np.testing.assert_array_equal(compiled.run([x])[0], x)  # the second run sees the first run's write


def test_runs_of_one_program_in_parallel_threads():
    compiled = cpu.load(_transpose_program())
    errors = []

    def work(seed):
        x = np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)
        for _ in range(50):
            if not np.array_equal(compiled.run([x])[0], x.T):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_every_group_module_of_mine_registers_its_kernels():
    mine = [
        Op.ARGMAX, Op.AVG_POOL2D, Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.FFT2D, Op.MATMUL, Op.MAX_POOL2D,
        Op.RFFT2D, Op.TRANSPOSE_CONV2D, Op.REDUCE_ALL, Op.REDUCE_ANY, Op.REDUCE_MAX, Op.REDUCE_MIN,
        Op.REDUCE_PRODUCT, Op.REDUCE_SUM, Op.CONCAT, Op.PAD, Op.RESHAPE, Op.REVERSE, Op.SLICE, Op.TILE,
        Op.TRANSPOSE, Op.GATHER, Op.SCATTER, Op.RESIZE, Op.CONST, Op.IDENTITY, Op.COND_IF, Op.WHILE_LOOP,
        Op.VARIABLE, Op.VARIABLE_READ, Op.VARIABLE_WRITE, Op.CONST_SHAPE,
    ]  # fmt: skip
    assert [op.name for op in mine if kernel_for(op) is None] == []


# -- control flow conformance tests -------------------------------------------------------------------------
CONTROL_FLOW_OPS = ["cond_if", "while_loop"]


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("op", CONTROL_FLOW_OPS)
def test_control_flow_cts_smoke(profile, op):
    assert_outcomes(check_cts_tests(smoke_tests(profile, op)))


@pytest.mark.slow
@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("op", CONTROL_FLOW_OPS)
def test_control_flow_cts_full(profile, op):
    assert_outcomes(check_cts_tests(full_tests(profile, op)))
