"""``ironaccel run PATH -i x.npy [-i ...] -o OUT [--device SPEC] [--compare cpu]``.

PATH is a .tosa file, or a conformance-suite test directory (its desc.json names the program and the
input files, so no ``-i`` is needed). A .tosa file given without ``-i`` runs on seeded random inputs
(``--seed``; integers over their type's range, int32 / int48 over 16 bits, floats standard normal) and
says so: enough to check that two devices agree, as ``--compare`` does. Inputs may be in IronAccel's
storage dtypes or in the forms the TOSA tools use for types numpy lacks (bf16 / fp8 as raw void or
uint8); outputs are written in the latter, so any numpy can read them and the reference model's tools
can compare them.

Every file named (the program, inputs, a test's desc.json) is read bounded and refused when it is not a
regular file of a sensible size (:mod:`ironaccel.core.files`); ``.npy`` inputs must be plain numeric
arrays (:mod:`ironaccel.conformance.npy`). Refusals and device errors reach :mod:`.main`, which prints
them in one line and exits with status 2; status 1 means outputs that must agree did not.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("program", help="a .tosa file, or a conformance test directory holding desc.json")
    parser.add_argument("-i", "--input", action="append", default=[], metavar="NPY", help="input array, in order")
    parser.add_argument("-o", "--output", metavar="OUT", help="a .npy file for one output, a directory for several")
    parser.add_argument("--device", default="auto", help="cpu, vulkan, vulkan:N or auto (default)")
    parser.add_argument("--compare", metavar="DEVICE", help="also run on DEVICE and report the largest difference")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random inputs used when a .tosa file gets no -i (default 0)"
    )


MAX_DESCRIPTION_BYTES = 1 << 20  # a conformance test's desc.json: a few hundred bytes in the suite


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


def _program_and_inputs(program: str, inputs: list[str]) -> tuple[Path, list[Path]]:
    """A test directory stands for its program and its inputs (by the block's input names)."""
    path = Path(program)
    if not path.is_dir():
        return path, [Path(p) for p in inputs]
    desc_file = path / "desc.json"
    if not desc_file.exists():
        raise ValueError(f"{path} is a directory without desc.json: give a .tosa file or a conformance test")
    tosa_file, ifm_names, ifm_files = _description(desc_file)
    if inputs:
        return path / tosa_file, [Path(p) for p in inputs]
    from ..tosa.codec import read

    tosa = path / tosa_file
    files = dict(zip(ifm_names, ifm_files, strict=True))
    names = read(tosa).main.inputs
    missing = [n for n in names if n not in files]
    if missing:
        raise ValueError(f"{desc_file} names no file for input(s) {', '.join(missing)}")
    return tosa, [path / files[n] for n in names]


def _load_inputs(paths: list[Path], specs: tuple) -> list:
    from ..conformance import npy

    if len(paths) != len(specs):
        wanted = ", ".join(str(s) for s in specs) or "none"
        raise ValueError(f"the program takes {len(specs)} input(s) ({wanted}); {len(paths)} given")
    return [npy.load(p, spec.dtype) for p, spec in zip(paths, specs, strict=True)]


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


def _save(outputs: list, specs: tuple, out: str | None) -> list[str]:
    from ..conformance import npy

    if not out:
        return []
    path = Path(out)
    if len(outputs) == 1 and path.suffix == ".npy":
        npy.save(path, outputs[0], specs[0].dtype)
        return [str(path)]
    path.mkdir(parents=True, exist_ok=True)
    written = []
    for i, (value, spec) in enumerate(zip(outputs, specs, strict=True)):
        p = path / f"output-{i}.npy"
        npy.save(p, value, spec.dtype)
        written.append(str(p))
    return written


def compare(a: list, b: list) -> list[dict]:
    """Per output: differing elements and the largest absolute difference (NaNs equal to NaNs)."""
    import numpy as np

    rows = []
    for x, y in zip(a, b, strict=True):
        xf, yf = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        both_nan = np.isnan(xf) & np.isnan(yf)
        diff = np.where(both_nan, 0.0, np.abs(xf - yf))
        rows.append(
            {
                "shape": list(x.shape),
                "dtype": str(x.dtype),
                "differing": int(np.count_nonzero(diff)),
                "max_abs_diff": float(np.nanmax(diff)) if diff.size else 0.0,
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    from .. import open as open_device

    # A refused file or device propagates: cli.main reports it in one line with exit status 2.
    program, input_paths = _program_and_inputs(args.program, args.input)
    with open_device(args.device) as dev:
        exe = dev.compile(program)
        generated = not input_paths and bool(exe.inputs)
        inputs = random_inputs(exe.inputs, args.seed) if generated else _load_inputs(input_paths, exe.inputs)
        start = time.perf_counter()
        outputs = exe(*inputs)
        seconds = time.perf_counter() - start
        report: dict = {"device": dev.info.name, "why": dev.why, "seconds": seconds}
        report["inputs"] = f"random, seed {args.seed}" if generated else [str(p) for p in input_paths]
        report["written"] = _save(outputs, exe.outputs, args.output)
    if args.compare:
        with open_device(args.compare) as ref:
            other = ref.compile(program)(*inputs)
            report["compare"] = {"device": ref.info.name, "outputs": compare(outputs, other)}
    if args.json:
        print(json.dumps(report))
    else:
        if generated:
            print(f"inputs: seeded random (seed {args.seed}); give -i for real data")
        print(f"ran on {report['device']} in {seconds * 1e3:.2f} ms ({report['why']})")
        for path in report["written"]:
            print(f"wrote {path}")
        for i, row in enumerate(report.get("compare", {}).get("outputs", [])):
            print(
                f"output {i} {row['dtype']}{row['shape']}: {row['differing']} differing elements, "
                f"max |diff| {row['max_abs_diff']:.3g} vs {report['compare']['device']}"
            )
    differs = any(r["differing"] for r in report.get("compare", {}).get("outputs", []))
    return 1 if differs and args.compare and _exact(outputs) else 0


def _exact(outputs: list) -> bool:
    """Integer and boolean outputs must match exactly; floats are reported, not judged."""
    return all(o.dtype.kind in "iub" for o in outputs)
