"""``ironaccel validate PATH... [--json] [--profile P ...] [--extension E ...] [--level none|8k]``.

Checks .tosa files against the TOSA 1.0 specification for a target. Built for sweeps over thousands of
files (the conformance suite's negative tests): the specification tables and operator rules load
once, each file is read and validated in this process. A directory argument means every ``*.tosa``
under it. A path that is not a regular file (a FIFO, a device) or is larger than the codec's
``max_file_bytes`` is reported as unreadable without being read.

``--device SPEC`` also says, for every valid file, whether that device would admit it (its backend's
capability descriptor, as ``compile`` checks it), naming every unsupported operator, type, constraint
and limit, not only the first. Exit status 0 when every file is valid (and admitted), 1 otherwise, 2
when the target or the device cannot be had.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the TOSA layer is imported only when the command runs
    from ..tosa.capability import CapabilityDescriptor
    from ..tosa.ir import Program
    from ..tosa.target import Target


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help=".tosa files or directories holding them")
    parser.add_argument("--json", action="store_true", help="one JSON object per file: path, status, message")
    parser.add_argument(
        "--profile",
        action="append",
        metavar="PROFILE",
        help="pro-int or pro-fp (repeatable; default: both)",
    )
    parser.add_argument(
        "--extension",
        action="append",
        metavar="EXT",
        help="bf16, int16, fp8e4m3, ... or none (repeatable; default: every extension of the chosen profiles)",
    )
    parser.add_argument("--level", default="none", choices=["none", "8k", "8K"], help="TOSA level (default: none)")
    parser.add_argument(
        "--device",
        metavar="SPEC",
        help="also check that this device (cpu, vulkan, vulkan:N, ...) would admit each valid file, "
        "naming everything it lacks",
    )


def _target(args: argparse.Namespace) -> Target:
    from ..tosa.target import Extension, Profile, Target

    profiles = [Profile.parse(p) for p in args.profile] if args.profile else list(Profile)
    if args.extension is None:
        extensions = [e for e in Extension if e.profiles & set(profiles)]
    else:
        extensions = [Extension.parse(e) for e in args.extension if e.lower() != "none"]
    return Target.of(profiles, extensions, args.level)


def _files(paths: list[str]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(path.rglob("*.tosa"))
        else:
            yield path


def check_file(path: Path, target: Target) -> tuple[str, str]:
    """(status, message) of one file: valid, error, unpredictable or unreadable."""
    status, message, _ = _check(path, target)
    return status, message


def _check(path: Path, target: Target) -> tuple[str, str, Program | None]:
    from ..core.errors import IronAccelError
    from ..tosa.codec import read
    from ..tosa.errors import ValidationError
    from ..tosa.validate import validate

    try:
        program = read(path)  # bounded: a FIFO, device or oversize file is refused, never read
    except (IronAccelError, OSError) as exc:
        return "unreadable", str(exc), None
    try:
        validate(program, target)
    except ValidationError as exc:
        return ("unpredictable" if exc.unpredictable else "error"), str(exc), None
    return "valid", "", program


# -- admission --------------------------------------------------------------------------------------------
# tosa.capability.admit stops at the first failure; a user fixing a model for a device wants them all.


def admission_problems(program: Program, descriptor: CapabilityDescriptor) -> list[str]:
    """Every reason ``descriptor``'s backend would refuse ``program`` (see tosa.capability.problems)."""
    from ..tosa.capability import problems

    return problems(program, descriptor)


def lacking(program: Program, descriptor: CapabilityDescriptor) -> dict[str, list[str]]:
    """The operators and tensor types of ``program`` its backend does not list at all (the short summary
    of :func:`admission_problems`, which also names type combinations, constraints and limits)."""
    from ..tosa.dtypes import DType

    blocks = list(program.blocks())
    ops = sorted({op.op.name for b in blocks for op in b.operators if op.op not in descriptor.operators})
    dtypes = {t.dtype for b in blocks for t in b.tensors if t.dtype is not DType.SHAPE}
    return {"operators": ops, "dtypes": sorted(str(d) for d in dtypes - descriptor.dtypes)}


def _device(spec: str) -> tuple[str, CapabilityDescriptor]:
    """The name and capability descriptor of the device ``spec`` names, opened for the purpose and closed."""
    from .. import open as open_device

    with open_device(spec) as device:
        return device.info.name, device.accelerator.capabilities()


def _admission_text(path: Path, device: dict[str, Any]) -> str:
    label = f"{device['spec']} ({device['name']})"
    if device["admitted"]:
        return f"{path}: admitted by {label}\n"
    summary = [f"{kind} not supported: {', '.join(items)}" for kind, items in device["lacking"].items() if items]
    count = len(device["problems"])
    head = f"{path}: not admitted by {label}: {count} problem(s)" + (f"; {'; '.join(summary)}" if summary else "")
    return head + "\n" + "".join(f"  {problem}\n" for problem in device["problems"])


def run(args: argparse.Namespace) -> int:
    from ..core.errors import InvalidArgument

    try:
        target = _target(args)
    except InvalidArgument as exc:
        print(f"ironaccel validate: {exc}", file=sys.stderr)
        return 2
    # A device that cannot be opened propagates: cli.main reports it in one line with exit status 2.
    name, descriptor = _device(args.device) if args.device else ("", None)
    counts: dict[str, int] = {}
    refused = 0
    out = sys.stdout
    for path in _files(args.paths):
        status, message, program = _check(path, target)
        counts[status] = counts.get(status, 0) + 1
        row: dict[str, Any] = {"path": str(path), "status": status, "message": message}
        if program is not None and descriptor is not None:
            problems = admission_problems(program, descriptor)
            refused += bool(problems)
            row["device"] = {
                "spec": args.device,
                "name": name,
                "admitted": not problems,
                "problems": problems,
                "lacking": lacking(program, descriptor),
            }
        if args.json:
            out.write(json.dumps(row) + "\n")
        else:
            out.write(f"{path}: {status}" + (f": {message}" if message else "") + "\n")
            if "device" in row:
                out.write(_admission_text(path, row["device"]))
    if not args.json:
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no files"
        if descriptor is not None:
            summary += f"; {counts.get('valid', 0) - refused} admitted by {args.device}, {refused} not"
        print(f"{summary} (target: {target})", file=sys.stderr)
    return 0 if counts and set(counts) == {"valid"} and not refused else 1
