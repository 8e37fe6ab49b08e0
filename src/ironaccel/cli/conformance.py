"""``ironaccel conformance --device cpu [--profile pro-fp|pro-int] [--extension E ...] [--operators OP ...]``.

Judges a device by Arm's TOSA 1.0.2 conformance suite: generates the suite with tosa-tools (once; it is
cached), runs the selected tests through the official runner with :mod:`ironaccel.conformance.tosa_sut`
(compliance checked by ``tosa_verify`` against the reference model), shows progress, and writes
``report.md`` and ``junit.xml``. Exit status 0 when every selected test passes, 1 otherwise, 2 when the
suite cannot be run (tosa-tools missing).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="device to judge, as ironaccel.open takes it (default: cpu)")
    parser.add_argument(
        "--profile",
        action="append",
        choices=["pro-int", "pro-fp"],
        help="profile(s) to run (repeatable; default: both)",
    )
    parser.add_argument(
        "--extension",
        action="append",
        metavar="EXT",
        help="allow tests that need this 1.0 extension (bf16, int16, fft, ...; repeatable; 'none' for the "
        "base profile only; default: every extension)",
    )
    parser.add_argument("--operators", nargs="+", metavar="OP", help="only these operators (e.g. conv2d matmul)")
    parser.add_argument("--test-type", default="both", choices=["positive", "negative", "both"])
    parser.add_argument(
        "--per-operator",
        type=int,
        metavar="N",
        help="at most N tests per operator, covering every output type and both polarities first (a quick subset)",
    )
    parser.add_argument("--jobs", "-j", type=int, default=0, help="parallel tests (default: one per core)")
    parser.add_argument("--report", type=Path, default=Path("conformance-report"), help="report directory")
    parser.add_argument("--tosa-tools", type=Path, help="the tosa-tools virtual environment (see --help text)")
    parser.add_argument("--cache", type=Path, help="where generated suites are kept (default ~/.cache/ironaccel/cts)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    from ..conformance import applicability, cts, runner
    from ..conformance.report import Report
    from ..core.errors import IronAccelError

    console = Console(stderr=True)
    try:
        venv = cts.find_tools(args.tosa_tools)
    except cts.ToolsNotFound as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    profiles = [f"tosa-{p}" for p in (args.profile or ["pro-int", "pro-fp"])]
    extensions = None
    if args.extension:
        extensions = [e for e in args.extension if e.lower() != "none"]
    jobs = args.jobs or runner.default_jobs()
    try:
        descriptor = applicability.device_capabilities(args.device)
    except IronAccelError as exc:
        console.print(f"[red]error:[/red] {args.device}: {exc}")
        return 2
    selected: list[runner.CaseInfo] = []
    not_applicable: list[runner.Outcome] = []
    for profile in profiles:
        with console.status(f"{profile}: generating the suite with tosa-tools (cached after the first time)"):
            suite = cts.generate(
                profile,
                args.operators or (),
                _generated_extensions(profile, extensions),
                cache=args.cache,
                venv=venv,
                jobs=jobs,
                reuse_whole=True,
            )
        chosen = runner.select(
            suite.tests(),
            operators=args.operators or (),
            extensions=extensions,
            test_type=args.test_type,
            profile=profile,
        )
        chosen, skipped = applicability.split(chosen, descriptor)  # what the device does not advertise
        if args.per_operator:
            chosen = runner.pick(chosen, args.per_operator)
        console.print(
            f"{profile}: {len(chosen)} of {len(suite.tests())} tests selected, {len(skipped)} not applicable "
            f"to {args.device} ({suite.root})"
        )
        selected += chosen
        not_applicable += skipped
    started = time.monotonic()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(f"{args.device}: running", total=len(selected))
        failed = 0

        def seen(name: str, passed: bool) -> None:
            nonlocal failed
            failed += not passed
            progress.update(task, advance=1, description=f"{args.device}: {failed} failed")

        outcomes = runner.run(selected, device=args.device, venv=venv, jobs=jobs, on_result=seen) + not_applicable
        # Lines from parallel runner threads can interleave and hide a few; the xunit file is complete.
        progress.update(task, completed=len(selected))
    elapsed = time.monotonic() - started
    report = Report(
        args.device,
        f"TOSA {cts.TOSA_VERSION} conformance: {args.device}",
        outcomes,
        {
            "Profiles": ", ".join(profiles),
            "Extensions": "all" if extensions is None else (", ".join(extensions) or "none"),
            "tosa-tools": cts.tools_version(venv),
            "Selection": f"{args.per_operator} per operator" if args.per_operator else "whole suite",
            "Time": f"{elapsed:.0f} s with {jobs} job(s)",
        },
    )
    args.report.mkdir(parents=True, exist_ok=True)
    (args.report / "report.md").write_text(report.markdown())
    (args.report / "junit.xml").write_bytes(report.junit())
    table = Table(title=report.title)
    table.add_column("tests")
    table.add_column("passed / run", justify="right")
    for key, tally in report.totals().items():
        table.add_row(key, str(tally))
    Console().print(table)
    console.print(f"report: {args.report / 'report.md'}, {args.report / 'junit.xml'}")
    for outcome in report.failures()[:20]:
        first = outcome.message.splitlines()[0] if outcome.message else "failed"
        console.print(f"[red]FAIL[/red] {outcome.info.path.name}: {first[:200]}")
    return 0 if report.ok else 1


def _generated_extensions(profile: str, allowed: list[str] | None) -> list[str] | None:
    """The profile's extensions that ``--extension`` allows (None: all): tests needing any other would
    only be selected out, and generating them is most of a whole suite's time."""
    from ..conformance import cts  # the command's imports stay lazy (ADR 0003)

    if allowed is None:
        return None
    short = {e.lower().removeprefix("tosa-ext-") for e in allowed}
    return [e for e in cts.EXTENSIONS[profile] if e.removeprefix("tosa-ext-") in short]
