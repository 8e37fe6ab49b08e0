"""Shared test helpers for TOSA work: the tosa-tools environment, cached conformance tests, the reference model.

tosa-tools pins old numpy / flatbuffers, so it lives in its own virtual environment and is only ever run
as a subprocess. Where it is:

1. ``<repo>/.venv-tosa`` (what ``make tosa-tools`` creates), else
2. the directory named by ``IRONACCEL_TOSA_TOOLS_VENV``, else
3. absent: :func:`require_tosa_tools` skips the test and says how to get it.

API (import it from a test module: ``from tosa_fixtures import cts_dir, ...``):

* :func:`tosa_tools_venv` -> Path | None; :func:`require_tosa_tools` -> Path (or skip)
* :func:`cts_dir(profile, operators, extensions)` -> Path: conformance tests generated once into
  ``<repo>/.cache/cts/`` and reused by later sessions; :func:`cts_tests(root)` lists their directories
* :func:`run_reference_model(tosa_bytes, inputs)` -> outputs (raises :class:`ReferenceModelError`
  unless the graph status is TOSA_VALID); :func:`run_reference_batch(jobs)` runs many files in one process
* :func:`tosa_opt_serialize(mlir_text)` -> bytes: a .tosa written by tosa-opt (the C++ serializer)
* :func:`run_conformance(report, *args)` -> (report Markdown, JUnit test cases): ``ironaccel conformance``
  on the repository's cache, asserted to pass
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ironaccel.conformance import cts

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "cts"
HELPER = Path(__file__).resolve().parent / "tools" / "run_reference_model.py"
ENV_VAR = cts.ENV_VAR
TOSA_VERSION = cts.TOSA_VERSION


def tosa_tools_venv() -> Path | None:
    """The tosa-tools virtual environment: ``<repo>/.venv-tosa``, then ``$IRONACCEL_TOSA_TOOLS_VENV``."""
    try:
        return cts.find_tools()
    except cts.ToolsNotFound:
        return None


def require_tosa_tools() -> Path:
    venv = tosa_tools_venv()
    if venv is None:
        pytest.skip(f"tosa-tools not found: run `make tosa-tools` (creates {REPO / '.venv-tosa'}) or set {ENV_VAR}")
    return venv


site_packages = cts.site_packages
tools_version = cts.tools_version
_env = cts.tools_env


def schema_path(venv: Path | None = None) -> Path:
    """tosa-tools' official ``tosa.fbs``."""
    return site_packages(venv or require_tosa_tools()) / "bin" / "tosa.fbs"


def run_conformance(report: Path, *args: str) -> tuple[str, list[ET.Element]]:
    """``ironaccel conformance ARGS --cache <repo>/.cache/cts --report REPORT``, asserted to exit 0 (the
    failures shown otherwise); returns the report's Markdown and the test cases of its JUnit file."""
    from ironaccel.cli.main import main as cli

    require_tosa_tools()
    code = cli(["conformance", *args, "--cache", str(CACHE), "--report", str(report)])
    text = (report / "report.md").read_text()
    assert code == 0, text[text.find("## Failures") :][:3000]
    return text, list(ET.fromstring((report / "junit.xml").read_bytes()).iter("testcase"))


def cts_dir(profile: str, operators: Sequence[str], extensions: Sequence[str] = (), *, jobs: int | None = None) -> Path:
    """Conformance tests for ``operators`` (binary .tosa, TOSA 1.0.2) generated once and cached in
    ``<repo>/.cache/cts`` (see :func:`ironaccel.conformance.cts.generate`)."""
    require_tosa_tools()
    return cts.generate(profile, operators, tuple(extensions), cache=CACHE, jobs=jobs).root


def cts_tests(root: Path) -> list[Path]:
    """Test directories (each with desc.json, test.tosa, input-N.npy) under a :func:`cts_dir`."""
    return sorted(p.parent for p in root.glob("operators/*/*/*/desc.json"))


def cts_inputs(test: Path) -> list[Path]:
    desc = json.loads((test / "desc.json").read_text())
    return [test / name for name in desc.get("ifm_file", [])]


# -- reference model -----------------------------------------------------------------------------------
class ReferenceModelError(RuntimeError):
    def __init__(self, status: str, error: str | None) -> None:
        self.status = status
        self.error = error
        super().__init__(f"reference model: {status}" + (f" ({error})" if error else ""))


@dataclasses.dataclass(frozen=True)
class RefJob:
    tosa: Path
    inputs: tuple[Path, ...]
    out: Path


@dataclasses.dataclass(frozen=True)
class RefResult:
    status: str  # TOSA_VALID, TOSA_ERROR, TOSA_UNPREDICTABLE, OTHER_ERROR, or CRASHED
    error: str | None
    outputs: tuple[np.ndarray, ...]

    def same_as(self, other: RefResult) -> bool:
        """Same status and bit-identical outputs (dtype, shape and bytes)."""
        return (
            self.status == other.status
            and len(self.outputs) == len(other.outputs)
            and all(
                a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
                for a, b in zip(self.outputs, other.outputs, strict=True)
            )
        )


def _collect(out: Path) -> RefResult | None:
    status_file = out / "status.json"
    if not status_file.exists():
        return None
    status = json.loads(status_file.read_text())
    outputs = tuple(np.load(out / f"output-{i}.npy", allow_pickle=False) for i in range(status["outputs"]))
    return RefResult(status["status"], status["error"], outputs)


def run_reference_batch(jobs: Sequence[RefJob], *, timeout: float = 1800) -> list[RefResult]:
    """Run every job in as few processes as possible; a job that kills the process is marked CRASHED."""
    venv = require_tosa_tools()
    python = venv / "bin" / "python"
    results: list[RefResult | None] = [None] * len(jobs)
    pending = list(range(len(jobs)))
    while pending:
        with tempfile.TemporaryDirectory() as tmp:
            manifest = Path(tmp) / "jobs.json"
            manifest.write_text(
                json.dumps(
                    [
                        {"tosa": str(jobs[i].tosa), "inputs": [str(p) for p in jobs[i].inputs], "out": str(jobs[i].out)}
                        for i in pending
                    ]
                )
            )
            done = subprocess.run(
                [str(python), str(HELPER), "--batch", str(manifest)],
                env=_env(venv),
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        still = []
        for i in pending:
            results[i] = _collect(jobs[i].out)
            if results[i] is None:
                still.append(i)
        if still and done.returncode == 0:
            raise RuntimeError(f"reference helper finished without results: {done.stderr[-2000:]}")
        if still:  # the first unfinished job crashed the process: record it, go on with the rest
            results[still[0]] = RefResult("CRASHED", f"exit {done.returncode}: {done.stderr[-500:]}", ())
            still = still[1:]
        pending = still
    return [r for r in results if r is not None]


def run_reference_model(tosa_bytes: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run one flatbuffer on the reference model; outputs as numpy arrays (bf16 / fp8 come back as void)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = root / "model.tosa"
        model.write_bytes(tosa_bytes)
        paths = []
        for index, array in enumerate(inputs):
            paths.append(root / f"input-{index}.npy")
            np.save(paths[-1], np.asarray(array), allow_pickle=False)
        (result,) = run_reference_batch([RefJob(model, tuple(paths), root / "out")])
    if result.status != "TOSA_VALID":
        raise ReferenceModelError(result.status, result.error)
    return list(result.outputs)


def tosa_opt_serialize(mlir: str, *, profiles: str = "pro_fp", extensions: str = "") -> bytes:
    """Serialize TOSA MLIR to a .tosa flatbuffer with tosa-opt (the C++ serializer), stamped TOSA 1.0."""
    venv = require_tosa_tools()
    target = f"specification_version=1.0 profiles={profiles}" + (f" extensions={extensions}" if extensions else "")
    with tempfile.TemporaryDirectory() as tmp:
        source, output = Path(tmp) / "in.mlir", Path(tmp) / "out.tosa"
        source.write_text(mlir)
        done = subprocess.run(
            [
                str(site_packages(venv) / "bin" / "tosa-opt"),
                f"--tosa-attach-target={target}",
                "--tosa-validate=strict-op-spec-alignment",
                "--tosa-serialize",
                f"--tosa-flatbuffer-filename={output}",
                str(source),
            ],
            env=_env(venv),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0 or not output.exists():
            raise RuntimeError(f"tosa-opt failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return output.read_bytes()


def main() -> int:
    """``python tests/support/tosa_fixtures.py``: print where tosa-tools is (for humans debugging skips)."""
    venv = tosa_tools_venv()
    print(venv or f"not found (looked at {REPO / '.venv-tosa'} and ${ENV_VAR})")
    return 0 if venv else 1


if __name__ == "__main__":
    sys.exit(main())


# -- hypothesis strategies ----------------------------------------------------------------------------
def tosa_programs(max_regions: int = 2, max_blocks: int = 2, max_operators: int = 6, max_tensors: int = 8):
    """Random TOSA 1.0 programs the codec must round-trip exactly: every 1.0 dtype (with constant data
    of random bit patterns, NaNs included), every 1.0 operator with random attribute values (sometimes
    another operator's attribute record, as tosa-opt writes for variables), locations, variables,
    SHAPE values, dynamic and negative dims on non-constants. SHAPE tensors come last in each block,
    as the reader returns them; zero-size constants are not generated (a file cannot tell them from
    tensors without data unless a CONST produces them)."""
    from hypothesis import strategies as st

    from ironaccel.tosa import TOSA_1_0_OPS, Block, DType, Operator, Program, Region, Tensor, Version
    from ironaccel.tosa.attributes import ATTRIBUTE_OF
    from ironaccel.tosa.operators import Op
    from ironaccel.tosa.schema import ATTRIBUTE_MEMBERS, ENUMS, TABLES, Kind

    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)
    int32 = st.integers(-(2**31), 2**31 - 1)
    data_dtypes = [d for d in DType if d.is_tosa_1_0 and d is not DType.SHAPE]
    kind_values = {
        Kind.INT32: int32,
        Kind.BOOL: st.booleans(),
        Kind.STRING: text,
        Kind.INT32_VECTOR: st.lists(int32, max_size=6).map(tuple),
        Kind.UBYTE_VECTOR: st.binary(max_size=16),
    }

    def field_values(field):
        if field.kind is Kind.ENUM:
            members = [m for m in ENUMS[field.ref] if field.ref != "DType" or m is DType.UNKNOWN or m.is_tosa_1_0]
            return st.sampled_from(members)
        return kind_values[field.kind]

    def attribute(op: Op):
        cls = ATTRIBUTE_OF[op]
        fields = TABLES[ATTRIBUTE_MEMBERS[op - 1]].fields
        return st.fixed_dictionaries({f.name: field_values(f) for f in fields}).map(lambda kw: cls(**kw))

    def values(dtype: DType, count: int):
        if dtype is DType.BOOL:
            return st.lists(st.booleans(), min_size=count, max_size=count).map(lambda v: np.array(v, np.bool_))
        if dtype is DType.INT4:
            return st.lists(st.integers(-8, 7), min_size=count, max_size=count).map(lambda v: np.array(v, np.int8))
        if dtype is DType.INT48:
            ints = st.integers(-(2**47), 2**47 - 1)
            return st.lists(ints, min_size=count, max_size=count).map(lambda v: np.array(v, np.int64))
        size = count * dtype.numpy.itemsize
        return st.binary(min_size=size, max_size=size).map(lambda b: np.frombuffer(b, dtype.numpy).copy())

    @st.composite
    def tensor(draw, name: str, constant: bool):
        dtype = draw(st.sampled_from(data_dtypes))
        dims = st.integers(1, 3) if constant else st.integers(-3, 4)
        shape = tuple(draw(st.lists(dims, max_size=4)))
        data = draw(values(dtype, int(np.prod(shape)))).reshape(shape) if constant else None
        variable = draw(st.booleans())
        return Tensor(name, shape, dtype, data, variable, draw(text) if variable else "", unranked=draw(st.booleans()))

    @st.composite
    def shape_value(draw, name: str, constant: bool):
        rank = draw(st.integers(0 if constant else 1, 8))
        data = draw(values(DType.SHAPE, rank)) if constant and rank else None
        return Tensor(name, (rank,), DType.SHAPE, data)

    @st.composite
    def block(draw):
        names = draw(st.lists(text, min_size=1, max_size=max_tensors, unique=True))
        tensors, shapes = [], []
        for name in names:
            constant = draw(st.booleans())
            if draw(st.integers(0, 4)) == 0:
                shapes.append(draw(shape_value(name, constant)))
            else:
                tensors.append(draw(tensor(name, constant)))
        constants = [t.name for t in (*tensors, *shapes) if t.data is not None]
        fresh = [f"\x01fresh{i}" for i in range(3)]
        any_name = st.sampled_from(names) | text
        operators = []
        for _ in range(draw(st.integers(0, max_operators))):
            op = draw(st.sampled_from(TOSA_1_0_OPS))
            outputs_from = st.sampled_from(constants + fresh) if op in (Op.CONST, Op.CONST_SHAPE) else any_name
            record_op = draw(st.sampled_from(TOSA_1_0_OPS)) if draw(st.integers(0, 5)) == 0 else op
            operators.append(
                Operator(
                    op,
                    tuple(draw(st.lists(any_name, max_size=4))),
                    tuple(draw(st.lists(outputs_from, max_size=3))),
                    draw(attribute(record_op)),
                    draw(st.none() | text),
                )
            )
        io = st.lists(any_name, max_size=3).map(tuple)
        return Block(draw(text), operators, (*tensors, *shapes), draw(io), draw(io))

    regions = st.lists(
        st.builds(Region, text, st.lists(block(), min_size=1, max_size=max_blocks).map(tuple)),
        min_size=1,
        max_size=max_regions,
    )
    versions = st.builds(Version, st.just(1), st.just(0), st.integers(0, 5), st.booleans())
    return st.builds(Program, regions.map(tuple), versions)
