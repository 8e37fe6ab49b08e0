"""``ironaccel validate PATH... [--json] [--profile P ...] [--extension E ...] [--level none|8k]``.

Checks .tosa files against the TOSA 1.0 specification for a target. Built for sweeps over thousands of
files (the conformance suite's negative tests): the specification tables and operator rules load
once, each file is read and validated in this process. A directory argument means every ``*.tosa``
under it. A path that is not a regular file (a FIFO, a device) or is larger than the codec's
``max_file_bytes`` is reported as unreadable without being read. Exit status 0 when every file is
valid, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the TOSA layer is imported only when the command runs
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
    from ..core.errors import IronAccelError
    from ..tosa.codec import read
    from ..tosa.errors import ValidationError
    from ..tosa.validate import validate

    try:
        program = read(path)  # bounded: a FIFO, device or oversize file is refused, never read
    except (IronAccelError, OSError) as exc:
        return "unreadable", str(exc)
    try:
        validate(program, target)
    except ValidationError as exc:
        return ("unpredictable" if exc.unpredictable else "error"), str(exc)
    return "valid", ""


def run(args: argparse.Namespace) -> int:
    from ..core.errors import InvalidArgument

    try:
        target = _target(args)
    except InvalidArgument as exc:
        print(f"ironaccel validate: {exc}", file=sys.stderr)
        return 2
    counts: dict[str, int] = {}
    out = sys.stdout
    for path in _files(args.paths):
        status, message = check_file(path, target)
        counts[status] = counts.get(status, 0) + 1
        if args.json:
            out.write(json.dumps({"path": str(path), "status": status, "message": message}) + "\n")
        else:
            out.write(f"{path}: {status}" + (f": {message}" if message else "") + "\n")
    if not args.json:
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no files"
        print(f"{summary} (target: {target})", file=sys.stderr)
    return 0 if counts and set(counts) == {"valid"} else 1
