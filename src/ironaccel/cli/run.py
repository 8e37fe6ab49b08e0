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
import sys
import time
from pathlib import Path
from typing import Any

from .run_compare import compare, compare_line
from .run_inputs import bind_inputs, load_inputs, program_and_inputs, random_inputs
from .run_outputs import check_output_count, output_kind, save_outputs

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
    program, input_values = program_and_inputs(args.program, args.input)
    # Without --compare a refused file or device propagates: cli.main reports it in one line, status 2.
    catch = bool(args.compare)
    runs = [DeviceRun(args.device)] + ([DeviceRun(args.compare)] if args.compare else [])
    report: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        for r in runs:
            _open(stack, r, program, catch)
        ready = [r for r in runs if r.error is None]
        if ready:
            check_output_count(args.output, ready[0].exe.outputs)
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
        print(compare_line(i, row["name"], row, done[0].label, done[1].label))
