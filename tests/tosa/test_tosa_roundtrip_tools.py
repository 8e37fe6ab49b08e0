"""The codec against Arm's tosa-tools: the official schema, conformance files, tosa-opt files, the reference model.

Every generated conformance file (negative tests too: they are invalid only semantically) must read,
and read -> write -> read must be the identity. tosa-tools' flatc, reading a file and our rewrite of it
with the official schema, must see the same program; and rewritten files must run on the reference
model with the same status and bit-identical outputs as the originals. Both on a sample in the default
run, on the whole suite of both profiles under ``-m slow`` (the reference-model run takes hours on two
cores for PRO-FP; ``IRONACCEL_ROUNDTRIP_SHARD`` splits it). Hand-made programs check the meaning of INT4
and INT48 constants against the reference model, not just our own consistency.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from ironaccel.conformance import cts
from ironaccel.conformance.cts import site_packages
from ironaccel.tosa import Block, DType, Op, Operator, Program, ProgramBuilder, Region, Tensor, load, read, write
from ironaccel.tosa.attributes import Conv2dAttribute, RescaleAttribute, RoundingMode
from ironaccel.tosa.schema import ENUMS, TABLES, UNIONS, Kind
from tosa_fixtures import (
    RefJob,
    cts_dir,
    cts_inputs,
    cts_tests,
    require_tosa_tools,
    run_reference_batch,
    run_reference_model,
    schema_path,
    tosa_opt_serialize,
)

pytestmark = pytest.mark.tosa_tools

INT4_INT16_CF = ("tosa-ext-int4", "tosa-ext-int16", "tosa-ext-controlflow")
LOW_FP = ("tosa-ext-bf16", "tosa-ext-fp8e4m3", "tosa-ext-fp8e5m2")
DEFAULT_SETS = {
    "int": ("tosa-pro-int", ("slice", "tile", "table", "const", "cond_if", "while_loop"), INT4_INT16_CF),
    "fp": ("tosa-pro-fp", ("add", "matmul", "const"), LOW_FP),
}
# The whole suite of each profile with every 1.0 extension (the same cache entries as `make conformance`).
SLOW_SETS = {
    "int-all": ("tosa-pro-int", (), cts.EXTENSIONS["tosa-pro-int"]),
    "fp-all": ("tosa-pro-fp", (), cts.EXTENSIONS["tosa-pro-fp"]),
}
SAMPLE = 16  # files per default set run on the reference model in the default run
CHUNK = 50  # files per reference-model process in the whole-suite runs


def _cts(name: str) -> list[Path]:
    sets = {**DEFAULT_SETS, **SLOW_SETS}
    profile, operators, extensions = sets[name]
    return cts_tests(cts_dir(profile, operators, extensions))


# -- the official schema ---------------------------------------------------------------------------------
_FBS_KINDS = {"bool": Kind.BOOL, "int32": Kind.INT32, "uint32": Kind.UINT32, "ulong": Kind.UINT64}
_FBS_KINDS |= {"uint64": Kind.UINT64, "string": Kind.STRING, "[int32]": Kind.INT32_VECTOR}
_FBS_KINDS |= {"[ubyte]": Kind.UBYTE_VECTOR, "[string]": Kind.STRING_VECTOR}


def _parse_fbs(text: str):
    text = re.sub(r"//[^\n]*", "", text)
    enums = {
        name: [v.strip() for v in body.split(",") if v.strip()]
        for name, body in re.findall(r"enum (\w+)\s*:\s*\w+\s*\{([^}]*)\}", text)
    }
    unions = {
        name: [v.strip() for v in body.split(",") if v.strip()]
        for name, body in re.findall(r"union (\w+)\s*\{([^}]*)\}", text)
    }
    tables = {}
    for name, body in re.findall(r"table (\w+)\s*\{([^}]*)\}", text):
        fields = []
        for decl in filter(None, (d.strip() for d in body.split(";"))):
            m = re.fullmatch(r"(\w+)\s*:\s*(\[?\w+\]?)\s*(?:=\s*([-\w]+))?\s*(?:\((.*)\))?", decl)
            assert m, decl
            fields.append(m.groups())
        tables[name] = fields
    return enums, unions, tables


def test_schema_matches_official_fbs():
    enums, unions, tables = _parse_fbs(schema_path(require_tosa_tools()).read_text())
    for name, values in enums.items():
        code, expected = -1, []
        for entry in values:
            member, _, number = (p.strip() for p in entry.partition("="))
            code = int(number) if number else code + 1
            expected.append((member, code))
        assert [(m.name, int(m)) for m in ENUMS[name]] == expected, name
    assert {k: list(v) for k, v in UNIONS.items()} == unions
    assert set(TABLES) == set(tables)
    for name, fields in tables.items():
        expected = []
        for field, ftype, default, attrs in fields:
            attrs = attrs or ""
            if ftype in unions:
                expected += [(f"{field}_type", Kind.UNION_TYPE, 0, ftype), (field, Kind.UNION, 0, ftype)]
                continue
            inner = ftype.strip("[]")
            if ftype in _FBS_KINDS:
                kind, ref = _FBS_KINDS[ftype], ""
            elif ftype in enums:
                kind, ref = Kind.ENUM, ftype
            else:
                kind, ref = (Kind.TABLE_VECTOR if ftype.startswith("[") else Kind.TABLE), inner
            value = {"true": 1, "false": 0, None: 0}.get(default, default)
            expected.append((field, kind, int(value), ref, "required" in attrs, 8 if "force_align: 8" in attrs else 1))
        ours = []
        for f in TABLES[name].fields:
            ours.append(
                (f.name, f.kind, f.default, f.ref)
                if f.kind in (Kind.UNION, Kind.UNION_TYPE)
                else (f.name, f.kind, f.default, f.ref, f.required, f.align)
            )
        assert ours == expected, name


# -- conformance files ---------------------------------------------------------------------------------------
def _round_trip_all(tests: list[Path]) -> int:
    negatives = 0
    for test in tests:
        prog = load(test / "test.tosa")
        data = write(prog)
        assert read(data) == prog, test.name
        negatives += json.loads((test / "desc.json").read_text()).get("expected_failure", False)
    return negatives


def _sample(tests: list[Path], count: int) -> list[Path]:
    by_size = sorted(tests, key=lambda t: sum(p.stat().st_size for p in t.iterdir()))[: max(count * 3, 1)]
    step = max(len(by_size) // count, 1)
    return by_size[::step][:count]


def _reference_equivalence(tests: list[Path], work: Path) -> int:
    """Run every test's original and rewritten file on the reference model, assert the same status and
    bit-identical outputs; returns how many of the original runs were valid."""
    jobs = []
    for index, test in enumerate(tests):
        rewritten = work / f"{index}.tosa"
        rewritten.write_bytes(write(load(test / "test.tosa")))
        inputs = tuple(cts_inputs(test))
        jobs += [
            RefJob(test / "test.tosa", inputs, work / f"{index}-orig"),
            RefJob(rewritten, inputs, work / f"{index}-ours"),
        ]
    results = run_reference_batch(jobs)
    differ = [t.name for i, t in enumerate(tests) if not results[2 * i].same_as(results[2 * i + 1])]
    assert not differ, f"{len(differ)} of {len(tests)} rewritten files run differently: {differ[:10]}"
    return sum(r.status == "TOSA_VALID" for r in results[::2])


@pytest.mark.parametrize("name", list(DEFAULT_SETS))
def test_cts_files_read_and_round_trip(name):
    tests = _cts(name)
    assert len(tests) > 100
    assert _round_trip_all(tests) > 0  # negative (ERROR_IF) tests are among them and read too


@pytest.mark.parametrize("name", list(DEFAULT_SETS))
def test_cts_sample_runs_identically_on_reference_model(name, tmp_path):
    assert _reference_equivalence(_sample(_cts(name), SAMPLE), tmp_path) > 0


def _shard(tests: list[Path]) -> tuple[list[Path], str]:
    """``IRONACCEL_ROUNDTRIP_SHARD=I/N``: every N-th test from the I-th (so a machine can take part of the
    suite; the N shards together are the whole of it)."""
    spec = os.environ.get("IRONACCEL_ROUNDTRIP_SHARD", "0/1")
    index, count = (int(v) for v in spec.split("/"))
    assert 0 <= index < count, f"IRONACCEL_ROUNDTRIP_SHARD={spec}: expected I/N with 0 <= I < N"
    return tests[index::count], spec


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW_SETS))
def test_cts_all_run_identically_on_reference_model(name, tmp_path):
    tests, shard = _shard(_cts(name))
    negatives = _round_trip_all(tests)

    # In chunks, one reference-model process each, as many at once as there are cores: a chunk stays well
    # inside its timeout on a loaded machine, and its rewritten files are removed when it is done (the
    # PRO-FP suite is over 1 GB).
    def chunk(start: int) -> int:
        work = tmp_path / f"chunk-{start}"
        work.mkdir()
        valid = _reference_equivalence(tests[start : start + CHUNK], work)
        shutil.rmtree(work)
        return valid

    # A chunk that fails stops the run: the chunks not started are dropped (the whole PRO-FP suite takes
    # hours on two cores, so a difference should not wait for the rest).
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    try:
        valid = sum(pool.map(chunk, range(0, len(tests), CHUNK)))
    finally:
        pool.shutdown(cancel_futures=True)
    assert valid > 0
    print(
        f"{name} shard {shard}: {len(tests)} files ({negatives} negative tests) read, rewritten and run on the "
        f"reference model with the same status and bit-identical outputs ({valid} valid runs)"
    )


# -- the whole suite through tosa-tools' own reader ---------------------------------------------------------
# The writer's stamp, not the program: tosa-tools records its own version and the oldest reader it allows;
# our writer records neither (and the reference model runs our files all the same, above).
WRITER_FIELDS = ("software_version", "compatibility")


def _program_view(doc):
    """flatc's JSON of a file, every field with its default, as a program: a vector or string that is
    empty reads as absent (the schema's readers cannot tell them apart), the writer's stamp dropped, and
    a shape's value is its rank's 8-byte integers (tosa-tools writes 8 zero bytes for a rank-0 shape's
    empty value; the reference model runs our files without them the same)."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if v != [] and v != ""}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    for region in doc.get("regions", []):
        for block in region.get("blocks", []):
            for shape in block.get("shapes", []):
                shape["data"] = shape.get("data", [])[: 8 * shape.get("rank", 0)]
    return strip({k: v for k, v in doc.items() if k not in WRITER_FIELDS})


def _flatc_views(files: list[Path], work: Path, venv: Path) -> list[dict]:
    """Each file read by tosa-tools' flatc with the official schema, as :func:`_program_view`s."""
    bin_dir = site_packages(venv) / "bin"
    names = []
    for index, file in enumerate(files):
        (work / f"{index}.tosa").symlink_to(file.resolve())
        names.append(f"{index}.tosa")
    command = [str(bin_dir / "flatc"), "--json", "--strict-json", "--defaults-json", "--raw-binary"]
    done = subprocess.run(
        [*command, "-o", str(work), str(bin_dir / "tosa.fbs"), "--", *names],
        cwd=work, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, f"flatc failed: {done.stderr[-2000:]}"
    return [_program_view(json.loads((work / f"{i}.json").read_text())) for i in range(len(files))]


def _flatc_differences(tests: list[Path], work: Path, venv: Path) -> list[str]:
    """The tests whose file and our rewrite of it tosa-tools' flatc reads differently."""
    files = []
    for index, test in enumerate(tests):
        ours = work / f"ours-{index}.tosa"
        ours.write_bytes(write(load(test / "test.tosa")))
        files += [test / "test.tosa", ours]
    views = _flatc_views(files, work, venv)
    return [t.name for i, t in enumerate(tests) if views[2 * i] != views[2 * i + 1]]


def test_flatc_views_tell_programs_apart(tmp_path):
    """The comparison above can fail: one changed constant element shows; the same program written
    twice does not."""
    venv = require_tosa_tools()
    files = []
    for name, value in (("a", 1.0), ("b", 1.0), ("c", 2.0)):
        b = ProgramBuilder()
        x = b.input("x", (2,), "fp32")
        b.output(b.add(x, b.const(np.array([0.5, value], np.float32))))
        files.append(tmp_path / f"{name}.tosa")
        files[-1].write_bytes(write(b.build()))
    work = tmp_path / "work"
    work.mkdir()
    a, same, changed = _flatc_views(files, work, venv)
    assert a == same and a != changed


def _read_identically(tests: list[Path], root: Path) -> None:
    venv = require_tosa_tools()

    def chunk(start: int) -> list[str]:
        work = root / f"flatc-{start}"
        work.mkdir()
        differ = _flatc_differences(tests[start : start + CHUNK], work, venv)
        shutil.rmtree(work)
        return differ

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        differ = [name for part in pool.map(chunk, range(0, len(tests), CHUNK)) for name in part]
    assert not differ, f"{len(differ)} of {len(tests)} rewritten files read differently: {differ[:10]}"


@pytest.mark.parametrize("name", list(DEFAULT_SETS))
def test_cts_files_and_their_rewrites_read_the_same_in_tosa_tools_flatc(name, tmp_path):
    _read_identically(_sample(_cts(name), 4 * SAMPLE), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW_SETS))
def test_cts_all_files_and_their_rewrites_read_the_same_in_tosa_tools_flatc(name, tmp_path):
    tests = _cts(name)
    _read_identically(tests, tmp_path)
    print(f"{name}: {len(tests)} files and their rewrites read the same by tosa-tools' flatc")


# -- files written by tosa-opt (the C++ serializer) -------------------------------------------------------
VARIABLES = """
module {
  tosa.variable @acc = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  func.func @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %0 = tosa.variable_read @acc : tensor<2x2xf32>
    %1 = tosa.add %0, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    tosa.variable_write @acc, %1 : tensor<2x2xf32>
    return %1 : tensor<2x2xf32>
  }
}
"""
SHAPES = """
module {
  func.func @main(%x: tensor<2x3xf32>) -> tensor<5x2xf32> {
    %s = tosa.const_shape {values = dense<[3, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
    %0 = tosa.reshape %x, %s : (tensor<2x3xf32>, !tosa.shape<2>) -> tensor<3x2xf32>
    %p = tosa.const_shape {values = dense<[1, 1, 0, 0]> : tensor<4xindex>} : () -> !tosa.shape<4>
    %c = "tosa.const"() <{values = dense<-7.5> : tensor<1xf32>}> : () -> tensor<1xf32>
    %1 = tosa.pad %0, %p, %c : (tensor<3x2xf32>, !tosa.shape<4>, tensor<1xf32>) -> tensor<5x2xf32>
    %2 = tosa.clamp %1 {min_val = -2.0 : f32, max_val = 4.0 : f32} : (tensor<5x2xf32>) -> tensor<5x2xf32>
    return %2 : tensor<5x2xf32>
  }
}
"""
CONV = """
module {
  func.func @main(%x: tensor<1x5x5x2xf32>) -> tensor<1x3x3x3xf32> {
    %w = "tosa.const"() <{values = dense<[[[[0.5, -1.0], [1.5, 2.0]], [[0.25, 1.0], [-0.5, 0.0]]]]>
                               : tensor<1x2x2x2xf32>}> : () -> tensor<1x2x2x2xf32>
    %m = tosa.const_shape {values = dense<[3, 1, 1, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
    %ww = tosa.tile %w, %m : (tensor<1x2x2x2xf32>, !tosa.shape<4>) -> tensor<3x2x2x2xf32>
    %b = "tosa.const"() <{values = dense<[0.0, 1.0, -1.0]> : tensor<3xf32>}> : () -> tensor<3xf32>
    %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
    %0 = tosa.conv2d %x, %ww, %b, %zp, %zp
           {acc_type = f32, dilation = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1>}
           : (tensor<1x5x5x2xf32>, tensor<3x2x2x2xf32>, tensor<3xf32>, tensor<1xf32>, tensor<1xf32>)
           -> tensor<1x3x3x3xf32>
    return %0 : tensor<1x3x3x3xf32>
  }
}
"""


@pytest.mark.parametrize(
    ("mlir", "extensions", "shape"),
    [(VARIABLES, "variable", (2, 2)), (SHAPES, "", (2, 3)), (CONV, "", (1, 5, 5, 2))],
    ids=["variables", "shapes-pad-clamp", "conv2d"],
)
def test_tosa_opt_files_round_trip_and_run_identically(mlir, extensions, shape):
    original = tosa_opt_serialize(mlir, extensions=extensions)
    prog = read(original)
    assert prog.version.is_tosa_1_0
    assert all(op.location for _, _, op in prog.operators())
    rewritten = write(prog)
    assert read(rewritten) == prog
    x = np.linspace(-3, 3, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    expected = run_reference_model(original, [x])
    got = run_reference_model(rewritten, [x])
    assert [a.tobytes() for a in got] == [a.tobytes() for a in expected]


def test_tosa_opt_variable_is_a_variable_tensor_with_initial_value():
    prog = read(tosa_opt_serialize(VARIABLES, extensions="variable"))
    (variable,) = [t for t in prog.main.tensors if t.variable]
    assert variable.variable_name == "acc" and variable.data.tolist() == [[1, 2], [3, 4]]
    kinds = {type(op.attribute).__name__ for op in prog.main.operators}
    assert {"VariableReadAttribute", "VariableWriteAttribute"} <= kinds


# -- meaning of packed constants, checked by the reference model ----------------------------------------------
def _single_block(tensors: list[Tensor], operators: list[Operator], outputs: tuple[str, ...]) -> bytes:
    return write(Program((Region("main", (Block("main", operators, tensors, (), outputs),)),)))


def test_int48_constants_mean_what_the_reference_model_reads():
    values = np.array([-1, 12345, -70000, 0, -(2**31), 2**31 - 1], np.int64)  # exercise the sign extension
    tensors = [
        Tensor("x", values.shape, DType.INT48, values),
        Tensor("m", (1,), DType.INT16, np.array([1 << 14], np.int16)),
        Tensor("s", (1,), DType.INT8, np.array([14], np.int8)),
        Tensor("izp", (1,), DType.INT48, np.zeros(1, np.int64)),
        Tensor("ozp", (1,), DType.INT32, np.zeros(1, np.int32)),
        Tensor("y", values.shape, DType.INT32),
    ]
    ops = [Operator(Op.CONST, (), (t.name,)) for t in tensors[:5]]
    attr = RescaleAttribute(scale32=False, rounding_mode=RoundingMode.SINGLE_ROUND)
    ops.append(Operator(Op.RESCALE, ("x", "m", "s", "izp", "ozp"), ("y",), attr))
    (out,) = run_reference_model(_single_block(tensors, ops, ("y",)), [])
    assert out.tolist() == values.tolist()


def test_int4_constants_mean_what_the_reference_model_reads():
    # The reference model zeroes a convolution whose int4 weights hold -8, so the values span [-7, 7].
    weights = np.resize(np.arange(-7, 8, dtype=np.int8), 15 * 3).reshape(15, 1, 1, 3)
    tensors = [
        Tensor("x", (1, 1, 1, 3), DType.INT8, np.array([1, 10, 100], np.int8).reshape(1, 1, 1, 3)),
        Tensor("w", weights.shape, DType.INT4, weights),
        Tensor("b", (15,), DType.INT32, np.zeros(15, np.int32)),
        Tensor("izp", (1,), DType.INT8, np.zeros(1, np.int8)),
        Tensor("wzp", (1,), DType.INT4, np.zeros(1, np.int8)),
        Tensor("y", (1, 1, 1, 15), DType.INT32),
    ]
    ops = [Operator(Op.CONST, (), (t.name,)) for t in tensors[:5]]
    attr = Conv2dAttribute(pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1), acc_type=DType.INT32)
    ops.append(Operator(Op.CONV2D, ("x", "w", "b", "izp", "wzp"), ("y",), attr))
    (out,) = run_reference_model(_single_block(tensors, ops, ("y",)), [])
    assert out.ravel().tolist() == (weights[:, 0, 0, :].astype(np.int32) @ np.array([1, 10, 100])).tolist()


BUNDLED = sorted((Path(__file__).resolve().parents[2] / "src" / "ironaccel" / "models").glob("*.tosa"))


@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_bundled_models_run_identically_after_rewrite(path, tmp_path):
    prog = load(path)
    rng = np.random.default_rng(3)
    inputs = []
    for index, tensor in enumerate(prog.main.input_tensors):
        if tensor.dtype.is_float:
            array = rng.standard_normal(tensor.shape).astype(tensor.dtype.numpy)
        else:
            array = rng.integers(-100, 100, tensor.shape).astype(tensor.dtype.numpy)
        inputs.append(tmp_path / f"input-{index}.npy")
        np.save(inputs[-1], array)
    rewritten = tmp_path / "rewritten.tosa"
    rewritten.write_bytes(write(prog))
    jobs = [RefJob(path, tuple(inputs), tmp_path / "orig"), RefJob(rewritten, tuple(inputs), tmp_path / "ours")]
    original, ours = run_reference_batch(jobs)
    assert original.status == "TOSA_VALID", original.error
    assert ours.same_as(original)
