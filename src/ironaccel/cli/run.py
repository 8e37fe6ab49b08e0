"""``ironaccel run PATH [-i [NAME=]FILE ...] [-o OUT] [--device SPEC] [--compare DEVICE] [--warmup K --repeat N]``.

PATH is a .tosa file, or a conformance-suite test directory (its desc.json names the program and the
input files, so no ``-i`` is needed). Inputs:

- ``-i x.npy -i y.npy``: in the order of the program's inputs;
- ``-i a=x.npy -i b=y.npy``: by the names of the program's inputs (mixing the two forms is refused);
- ``-i inputs.npz``: every input by name from the archive's members (a missing or extra name is refused).

A .tosa file given without ``-i`` runs on seeded random inputs (``--seed``; integers over their type's
range, int32 / int48 over 16 bits, floats standard normal) and says so: enough to check that two devices
agree, as ``--compare`` does. Inputs may be in IronAccel's storage dtypes or in the forms the TOSA tools
use for types numpy lacks (bf16 / fp8 as raw void or uint8); outputs are written in the latter, so any
numpy can read them and the reference model's tools can compare them. ``-o OUT.npy`` takes a program
of one output, ``-o OUT.npz`` every output by name, ``-o DIR/`` (or an existing directory) one ``.npy``
per output.

``--warmup K --repeat N`` runs K untimed calls, then N timed ones, and reports their median and the
10th-90th percentile range: the first call of a program pays one-time costs (native code, pipelines).
``--compare DEVICE`` runs the same inputs there and judges every output element by
``|x - ref| <= atol + rtol * |ref|`` (ref: DEVICE's value; NaN equals NaN), with ``--atol`` / ``--rtol``
or defaults per dtype (:data:`TOLERANCES`: exact for integers and booleans).

Every file named (the program, inputs, a test's desc.json) is read bounded and refused when it is not a
regular file of a sensible size (:mod:`ironaccel.core.files`); ``.npy`` inputs must be plain numeric
arrays (:mod:`ironaccel.conformance.npy`). Refusals and device errors reach :mod:`.main`, which prints
them in one line and exits with status 2. Exit status 1 means compared outputs disagreed beyond the
tolerances. When one of the two devices of ``--compare`` fails, the other's outputs are still reported
and written, the failure is printed as ``ironaccel run: DEVICE failed: ...`` and the status is 2.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

log = logging.getLogger("ironaccel.cli.run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("program", help="a .tosa file, or a conformance test directory holding desc.json")
    parser.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="[NAME=]FILE",
        help="an input: FILE.npy in the program's input order, NAME=FILE.npy by input name, "
        "or one FILE.npz holding every input by name",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="OUT.npy (a program of one output), OUT.npz (every output by name) or DIR/ (one .npy per output)",
    )
    parser.add_argument("--device", default="auto", help="cpu, vulkan, vulkan:N or auto (default)")
    parser.add_argument(
        "--compare",
        metavar="DEVICE",
        help="also run on DEVICE; exit status 1 when an output differs beyond --atol / --rtol",
    )
    parser.add_argument(
        "--atol",
        type=float,
        help="absolute tolerance of --compare for every output (default per dtype: 0 for integers, 1e-5 for fp32)",
    )
    parser.add_argument(
        "--rtol",
        type=float,
        help="relative tolerance of --compare for every output (default per dtype: 0 for integers, 1e-4 for fp32)",
    )
    parser.add_argument("--warmup", type=int, default=0, metavar="K", help="untimed calls before timing (default 0)")
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="N", help="timed calls; median and p10-p90 reported (default 1)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random inputs used when a .tosa file gets no -i (default 0)"
    )


MAX_DESCRIPTION_BYTES = 1 << 20  # a conformance test's desc.json: a few hundred bytes in the suite

# numpy storage dtype name -> (atol, rtol) of --compare: about two units in the last place relative, and
# an absolute floor near the type's smallest normal numbers. Integers and booleans: exact.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-8, 1e-6),
    "float32": (1e-5, 1e-4),
    "float16": (1e-3, 1e-2),
    "bfloat16": (1e-2, 2e-2),
    "float8_e4m3fn": (1 / 64, 0.25),
    "float8_e5m2": (1 / 64, 0.5),
}


def default_tolerance(dtype: Any) -> tuple[float, float]:
    """(atol, rtol) for outputs of numpy ``dtype``: exact for integers and booleans, per float type."""
    import numpy as np

    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        return 0.0, 0.0
    return TOLERANCES.get(dtype.name, TOLERANCES["float32"])


# -- program and inputs -------------------------------------------------------------------------------------
def _description(desc_file: Path) -> tuple[str, list[str], list[str]]:
    """(tosa_file, ifm_name, ifm_file) of a test's desc.json, read bounded and checked field by field."""
    from ..core.errors import InvalidArgument
    from ..core.files import read_limited

    try:
        desc = json.loads(read_limited(desc_file, MAX_DESCRIPTION_BYTES, "test description"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"{desc_file}: not JSON: {exc}") from None
    if not isinstance(desc, dict):
        raise InvalidArgument(f"{desc_file}: holds a JSON {type(desc).__name__}, not an object")
    tosa_file = desc.get("tosa_file")
    if not isinstance(tosa_file, str) or not tosa_file:
        raise InvalidArgument(f"{desc_file}: 'tosa_file' must name the program file, got {tosa_file!r}")
    lists = []
    for key in ("ifm_name", "ifm_file"):
        value = desc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidArgument(f"{desc_file}: {key!r} must be a list of strings, got {value!r}")
        lists.append(value)
    if len(lists[0]) != len(lists[1]):
        raise InvalidArgument(f"{desc_file}: {len(lists[0])} ifm_name entries but {len(lists[1])} ifm_file entries")
    return tosa_file, lists[0], lists[1]


def _program_and_inputs(program: str, inputs: list[str]) -> tuple[Path, list[str]]:
    """The program file and the -i values; a test directory stands for its program and, without -i, its
    input files (by the block's input names, in order)."""
    path = Path(program)
    if not path.is_dir():
        return path, inputs
    desc_file = path / "desc.json"
    if not desc_file.exists():
        raise ValueError(f"{path} is a directory without desc.json: give a .tosa file or a conformance test")
    tosa_file, ifm_names, ifm_files = _description(desc_file)
    if inputs:
        return path / tosa_file, inputs
    from ..tosa.codec import read

    tosa = path / tosa_file
    files = dict(zip(ifm_names, ifm_files, strict=True))
    names = read(tosa).main.inputs
    missing = [n for n in names if n not in files]
    if missing:
        raise ValueError(f"{desc_file} names no file for input(s) {', '.join(missing)}")
    return tosa, [str(path / files[n]) for n in names]


def _names(specs: tuple) -> str:
    return ", ".join(repr(s.name) for s in specs) or "none"


def bind_inputs(values: list[str], specs: tuple) -> list[tuple[Any, str, str | None]]:
    """What each of the program's inputs is read from, in input order: (spec, file, archive member or None).

    ``values`` are the ``-i`` arguments: all positional (``FILE``), all named (``NAME=FILE``, NAME one of
    the inputs' names), or one ``.npz`` archive. A value with ``=`` whose prefix names no input is a file
    name when such a file exists, else refused with the known names."""
    from ..core.errors import InvalidArgument

    known = {spec.name: spec for spec in specs}
    archives = [v for v in values if v.lower().endswith(".npz") and v.partition("=")[0] not in known]
    if archives:
        if len(values) != 1:
            raise InvalidArgument(
                f"-i {archives[0]}: an .npz archive feeds every input by name; give it as the only -i "
                f"({len(values)} given)"
            )
        return [(spec, archives[0], spec.name) for spec in specs]
    named: dict[str, str] = {}
    positional: list[str] = []
    for value in values:
        name, eq, file = value.partition("=")
        if eq and name in known:
            if name in named:
                raise InvalidArgument(f"-i {value}: input {name!r} is already given ({named[name]})")
            named[name] = file
        elif eq and not Path(value).exists():
            raise InvalidArgument(f"-i {value}: the program has no input named {name!r}; its inputs: {_names(specs)}")
        else:
            positional.append(value)
    if named and positional:
        raise InvalidArgument(
            f"-i: give every input by name (NAME=FILE) or every one in order, not both "
            f"({', '.join(named)} by name; {', '.join(positional)} in order)"
        )
    if named:
        missing = [spec.name for spec in specs if spec.name not in named]
        if missing:
            raise InvalidArgument(
                f"-i: no file for input(s) {', '.join(map(repr, missing))}; the program's inputs: {_names(specs)}"
            )
        return [(spec, named[spec.name], None) for spec in specs]
    if len(positional) != len(specs):
        wanted = ", ".join(str(s) for s in specs) or "none"
        raise InvalidArgument(f"the program takes {len(specs)} input(s) ({wanted}); {len(positional)} given")
    return [(spec, file, None) for spec, file in zip(specs, positional, strict=True)]


def load_inputs(bound: list[tuple[Any, str, str | None]]) -> list:
    """The arrays ``bind_inputs`` points at, read bounded; an archive's members are checked by name."""
    from ..conformance import npy
    from ..core.errors import InvalidArgument

    if bound and bound[0][2] is not None:
        archive = bound[0][1]
        arrays = npy.load_npz(archive)
        wanted = [spec.name for spec, _, _ in bound]
        missing = [n for n in wanted if n not in arrays]
        extra = [n for n in arrays if n not in wanted]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"holds no array for input(s) {', '.join(map(repr, missing))}")
            if extra:
                parts.append(f"member(s) {', '.join(map(repr, extra))} name no input")
            raise InvalidArgument(
                f"{archive}: {'; '.join(parts)} (the program's inputs: {', '.join(map(repr, wanted))})"
            )
        return [npy.coerce(arrays[spec.name], spec.dtype, f"{archive}[{spec.name}]") for spec, _, _ in bound]
    for spec, file, _ in bound:
        log.debug("input %r (%s) from %s", spec.name, spec, file)
    return [npy.load(Path(file), spec.dtype) for spec, file, _ in bound]


def random_inputs(specs: tuple, seed: int) -> list:
    """Seeded random values for every input: integers over their type's range (int32 / int48 over 16 bits,
    so sums and products stay far from wrapping), booleans, floats standard normal rounded to their type."""
    import numpy as np

    from ..tosa.dtypes import DType

    rng = np.random.default_rng(seed)
    values = []
    for spec in specs:
        if spec.dtype is DType.SHAPE:
            raise ValueError(f"input {spec} is a shape: give it with -i")
        storage = spec.numpy_dtype
        if storage.kind == "b":
            value = rng.integers(0, 2, spec.shape)
        elif storage.kind in "iu":
            bits = min(spec.dtype.bits if isinstance(spec.dtype, DType) else storage.itemsize * 8, 16)
            low = -(1 << (bits - 1)) if storage.kind == "i" else 0
            value = rng.integers(low, low + (1 << bits), spec.shape)
        else:
            value = rng.standard_normal(spec.shape)
        values.append(np.asarray(value).astype(storage))
    return values


# -- outputs ------------------------------------------------------------------------------------------------
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}")


def _file_names(specs: tuple) -> list[str]:
    """A file (or archive member) name per output: its tensor name where every name is plain and distinct
    (even ignoring case), else ``output-N`` for all, so names never reach outside the target."""
    names = [spec.name for spec in specs]
    plain = all(_PLAIN_NAME.fullmatch(n) for n in names) and len({n.lower() for n in names}) == len(names)
    return names if plain else [f"output-{i}" for i in range(len(names))]


def output_kind(out: str) -> str:
    """How ``-o out`` is written: "npy", "npz" or "dir"; anything else is refused before the program runs."""
    from ..core.errors import InvalidArgument

    path = Path(out)
    if out.endswith(("/", os.sep)) or path.is_dir():
        return "dir"
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        return suffix[1:]
    raise InvalidArgument(
        f"-o {out}: give OUT.npy (one output), OUT.npz (every output by name) or a directory "
        f"(an existing one, or end the name with /)"
    )


def _check_output_count(out: str | None, specs: tuple) -> None:
    from ..core.errors import InvalidArgument

    if out and output_kind(out) == "npy" and len(specs) != 1:
        names = ", ".join(repr(s.name) for s in specs)
        raise InvalidArgument(f"-o {out}: the program has {len(specs)} outputs ({names}); give OUT.npz or a directory")


def save_outputs(outputs: list, specs: tuple, out: str | None) -> list[str]:
    """Write ``outputs`` where ``-o out`` says (:func:`output_kind`); the paths written."""
    from ..conformance import npy

    if not out:
        return []
    kind, path = output_kind(out), Path(out)
    if kind == "npy":
        _check_output_count(out, specs)
        npy.save(path, outputs[0], specs[0].dtype)
        return [str(path)]
    files = _file_names(specs)
    if kind == "dir":
        path.mkdir(parents=True, exist_ok=True)
        written = []
        for value, spec, name in zip(outputs, specs, files, strict=True):
            npy.save(path / f"{name}.npy", value, spec.dtype)
            written.append(str(path / f"{name}.npy"))
        return written
    # One member per output, each written by npy.save so bf16 / fp8 keep the suite's raw forms.
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for i, (value, spec, name) in enumerate(zip(outputs, specs, files, strict=True)):
            member = Path(scratch) / f"{i}.npy"
            npy.save(member, value, spec.dtype)
            archive.write(member, f"{name}.npy")
    return [str(path)]


# -- comparison ---------------------------------------------------------------------------------------------
def _number(value: float) -> float | str:
    """A float JSON can hold: non-finite values as "nan", "inf", "-inf"."""
    return value if math.isfinite(value) else str(value)


def compare(a: list, b: list, atol: float | None = None, rtol: float | None = None) -> list[dict]:
    """Per output of ``a`` against the reference ``b``: differing elements, the largest absolute
    difference, and the verdict of ``|a - b| <= atol + rtol * |b|`` (NaN equals NaN, an infinity itself;
    None: :func:`default_tolerance` of the output's dtype) with the worst element."""
    import numpy as np

    rows = []
    for x, y in zip(a, b, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        default_atol, default_rtol = default_tolerance(x.dtype)
        row: dict[str, Any] = {
            "shape": list(x.shape),
            "dtype": str(x.dtype),
            "atol": default_atol if atol is None else atol,
            "rtol": default_rtol if rtol is None else rtol,
        }
        if x.shape != y.shape:
            mismatch = {"differing": x.size, "max_abs_diff": math.inf, "beyond": x.size, "agree": False, "worst": None}
            rows.append({**row, **mismatch, "shape_mismatch": [list(x.shape), list(y.shape)]})
            continue
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        same = (xf == yf) | (np.isnan(xf) & np.isnan(yf))
        with np.errstate(invalid="ignore"):
            diff = np.where(same, 0.0, np.abs(xf - yf))  # NaN where only one side is NaN
            allowed = row["atol"] + row["rtol"] * np.abs(yf)
            excess = np.where(np.isnan(diff) | np.isinf(diff), np.inf, diff - allowed)
            excess[same] = -np.inf  # equal elements (NaN with NaN, an infinity with itself) are never worst
        beyond = int(np.count_nonzero(excess > 0))
        row.update(
            differing=int(np.count_nonzero(~same)),
            max_abs_diff=float(np.nanmax(diff)) if diff.size and not np.isnan(diff).all() else 0.0,
            beyond=beyond,
            agree=beyond == 0,
            worst=None,
        )
        if diff.size and row["differing"]:
            flat = int(np.argmax(excess))
            index = [int(i) for i in np.unravel_index(flat, x.shape)]
            row["worst"] = {
                "index": index,
                "value": float(xf.reshape(-1)[flat]),
                "reference": float(yf.reshape(-1)[flat]),
                "abs_diff": float(diff.reshape(-1)[flat]),
            }
        rows.append(row)
    return rows


def _compare_line(i: int, name: str, row: dict, device: str, reference: str) -> str:
    head = f"output {i} {name} {row['dtype']}{row['shape']}"
    if "shape_mismatch" in row:
        mine, theirs = row["shape_mismatch"]
        return f"{head}: shape {mine} on {device} but {theirs} on {reference}"
    text = f"{head}: {row['differing']} differing elements, max |diff| {row['max_abs_diff']:.3g} vs {reference}"
    tolerance = (
        "exactly" if row["atol"] == 0 and row["rtol"] == 0 else f"atol {row['atol']:.3g}, rtol {row['rtol']:.3g}"
    )
    if row["agree"]:
        return f"{text}; agree ({tolerance})"
    worst = row["worst"]
    where = ", ".join(map(str, worst["index"]))
    return (
        f"{text}; {row['beyond']} beyond {tolerance}, worst at [{where}]: {worst['value']:.7g} on {device} "
        f"vs {worst['reference']:.7g} on {reference} (|diff| {worst['abs_diff']:.3g})"
    )


# -- running ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class DeviceRun:
    """One device's part of the command: opened and compiled (or why not), then its outputs and times."""

    spec: str
    name: str = ""
    why: str = ""
    exe: Any = None
    outputs: list | None = None
    seconds: list[float] = dataclasses.field(default_factory=list)
    error: BaseException | None = None

    @property
    def label(self) -> str:
        return self.name or self.spec


def timing(seconds: list[float], warmup: int) -> dict[str, Any]:
    """Median and 10th / 90th percentiles of the timed calls, in milliseconds."""
    import numpy as np

    ms = np.asarray(seconds) * 1e3
    p10, median, p90 = (float(v) for v in np.percentile(ms, [10, 50, 90]))
    return {"warmup": warmup, "repeat": len(seconds), "median_ms": median, "p10_ms": p10, "p90_ms": p90}


def _timing_text(run: DeviceRun, warmup: int) -> str:
    t = timing(run.seconds, warmup)
    warmed = f" after {warmup} warm-up call(s)" if warmup else ""
    if t["repeat"] == 1:
        return f"in {t['median_ms']:.2f} ms{warmed or ', one cold call'}"
    spread = f"p10-p90 {t['p10_ms']:.3f}-{t['p90_ms']:.3f} ms"
    return f"in {t['median_ms']:.3f} ms median, {spread} over {t['repeat']} calls{warmed}"


def _open(stack: contextlib.ExitStack, run: DeviceRun, program: Path, catch: bool) -> None:
    from .. import open as open_device

    try:
        started = time.perf_counter()
        dev = stack.enter_context(open_device(run.spec))
        run.name, run.why = dev.info.name, dev.why
        log.info("%s: opened %s in %.1f ms (%s)", run.spec, run.name, (time.perf_counter() - started) * 1e3, run.why)
        started = time.perf_counter()
        run.exe = dev.compile(program)
        log.info("%s: compiled %s in %.1f ms: %r", run.spec, program, (time.perf_counter() - started) * 1e3, run.exe)
    except Exception as exc:  # with --compare, either device failing is reported, not fatal
        if not catch:
            raise
        run.error = exc


def _execute(run: DeviceRun, inputs: list, warmup: int, repeat: int, catch: bool) -> None:
    try:
        for i in range(warmup):
            started = time.perf_counter()
            run.exe(*inputs)
            log.debug("%s: warm-up call %d took %.3f ms", run.spec, i + 1, (time.perf_counter() - started) * 1e3)
        for _ in range(repeat):
            start = time.perf_counter()
            run.outputs = run.exe(*inputs)
            run.seconds.append(time.perf_counter() - start)
    except Exception as exc:  # as in _open
        if not catch:
            raise
        run.error, run.outputs = exc, None


def _check_arguments(args: argparse.Namespace) -> None:
    from ..core.errors import InvalidArgument

    if args.warmup < 0:
        raise InvalidArgument(f"--warmup must be 0 or more, got {args.warmup}")
    if args.repeat < 1:
        raise InvalidArgument(f"--repeat must be 1 or more, got {args.repeat}")
    for flag in ("atol", "rtol"):
        value = getattr(args, flag)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise InvalidArgument(f"--{flag} must be a finite number >= 0, got {value}")
        if value is not None and not args.compare:
            raise InvalidArgument(f"--{flag} applies to --compare DEVICE, which is not given")
    if args.output:
        output_kind(args.output)


def run(args: argparse.Namespace) -> int:
    from .main import one_line

    _check_arguments(args)
    program, input_values = _program_and_inputs(args.program, args.input)
    # Without --compare a refused file or device propagates: cli.main reports it in one line, status 2.
    catch = bool(args.compare)
    runs = [DeviceRun(args.device)] + ([DeviceRun(args.compare)] if args.compare else [])
    report: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        for r in runs:
            _open(stack, r, program, catch)
        ready = [r for r in runs if r.error is None]
        if ready:
            _check_output_count(args.output, ready[0].exe.outputs)
            specs = ready[0].exe.inputs
            generated = not input_values and bool(specs)
            if generated:
                inputs = random_inputs(specs, args.seed)
            else:
                inputs = load_inputs(bind_inputs(input_values, specs))
            for r in ready:
                _execute(r, inputs, args.warmup, args.repeat, catch)
            report["inputs"] = f"random, seed {args.seed}" if generated else input_values
        done = [r for r in runs if r.outputs is not None]
        if done:
            report.update(_results(args, done))
    failed = [r for r in runs if r.error is not None]
    if failed:
        report["failed"] = [{"device": r.spec, "error": one_line(r.error)} for r in failed]
    _print(args, report, done)
    for r in failed:
        if getattr(args, "debug", False):  # cli.main sets it from --debug or IRONACCEL_DEBUG
            raise r.error
        kind = "" if _plain(r.error) else f"{type(r.error).__name__}: "
        print(f"ironaccel run: {r.spec} failed: {kind}{one_line(r.error)}", file=sys.stderr)
    if failed:
        return 2
    return 0 if report.get("compare", {}).get("agree", True) else 1


def _results(args: argparse.Namespace, done: list[DeviceRun]) -> dict[str, Any]:
    """The report of the devices that ran: the first one's timing and outputs (written to -o), and with
    two, the comparison of the first against the second."""
    first = done[0]
    specs = first.exe.outputs
    result: dict[str, Any] = {"device": first.name, "why": first.why, "timing": timing(first.seconds, args.warmup)}
    result["seconds"] = result["timing"]["median_ms"] / 1e3
    result["outputs"] = [{"name": s.name, "dtype": str(s.dtype), "shape": list(s.shape)} for s in specs]
    result["written"] = save_outputs(first.outputs, specs, args.output)
    if len(done) == 2:
        ref = done[1]
        rows = compare(first.outputs, ref.outputs, args.atol, args.rtol)
        for row, spec in zip(rows, specs, strict=True):
            row["name"] = spec.name
        result["compare"] = {
            "device": ref.name,
            "timing": timing(ref.seconds, args.warmup),
            "agree": all(r["agree"] for r in rows),
            "outputs": rows,
        }
    return result


def _plain(exc: BaseException) -> bool:
    """A user-facing error whose message speaks for itself (the kinds cli.main prints without a type)."""
    from ..core.errors import IronAccelError

    return isinstance(exc, IronAccelError | ValueError | OSError)


def _print(args: argparse.Namespace, report: dict, done: list[DeviceRun]) -> None:
    if args.json:
        print(json.dumps(report))
        return
    if not done:
        return
    if report["inputs"] == f"random, seed {args.seed}":
        print(f"inputs: seeded random (seed {args.seed}); give -i for real data")
    print(f"ran on {done[0].label} {_timing_text(done[0], args.warmup)} ({done[0].why})")
    if len(done) == 2:
        print(f"ran on {done[1].label} {_timing_text(done[1], args.warmup)} (compared)")
    if args.repeat == 1 and args.warmup == 0:
        print("a first call includes one-time setup: --warmup 3 --repeat 20 times steady calls")
    for path in report["written"]:
        print(f"wrote {path}")
    for i, row in enumerate(report.get("compare", {}).get("outputs", [])):
        print(_compare_line(i, row["name"], row, done[0].label, done[1].label))
