"""``ironaccel conformance --device cpu [--profile pro-fp|pro-int] [--extension E ...] [--operators OP ...]``.

Judges a device by Arm's TOSA 1.0.2 conformance suite: generates the suite with tosa-tools (once; it is
cached), runs the selected tests through the official runner with :mod:`ironaccel.conformance.tosa_sut`
(compliance checked by ``tosa_verify`` against the reference model), shows progress, and writes
``report.md`` and ``junit.xml``. Exit status 0 when every selected test passes, 1 otherwise, 2 when the
suite cannot be run (tosa-tools missing).

``--per-operator N`` generates only what it may run, operator by operator (``--jobs`` at once) with a
line for each: of every generator batch the first N tests of each kind (``cts.generate(per_kind=N)``),
for the operators the device advertises, then N per operator are picked from those. A whole suite
already in the cache is used instead. Progress is a live display on a terminal and plain lines (at most one every
:data:`PLAIN_PROGRESS_PERIOD` seconds) in a log or a pipe.

For a device on a machine without tosa-tools (:mod:`ironaccel.conformance.bundle`):

    ironaccel conformance --device vulkan:lavapipe --smallest 3 --pack BUNDLE  # here: select, copy
    ironaccel conformance --device vulkan:nvidia --execute BUNDLE --results R  # there: run, record
    ironaccel conformance --judge R --report DIR                              # here: official verdict
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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
    parser.add_argument(
        "--smallest",
        type=int,
        metavar="K",
        help="the K smallest tests of every operator x output type x polarity (every kind, little data)",
    )
    parser.add_argument("--jobs", "-j", type=int, default=0, help="parallel tests (default: one per core)")
    parser.add_argument("--report", type=Path, default=Path("conformance-report"), help="report directory")
    parser.add_argument("--tosa-tools", type=Path, help="the tosa-tools virtual environment (see --help text)")
    parser.add_argument("--cache", type=Path, help="where generated suites are kept (default ~/.cache/ironaccel/cts)")
    remote = parser.add_argument_group("a device on another machine (no tosa-tools needed there)")
    modes = remote.add_mutually_exclusive_group()
    modes.add_argument(
        "--pack",
        type=Path,
        metavar="BUNDLE",
        help="copy the tests selected for --device (a stand-in of the same backend) into BUNDLE; run nothing",
    )
    modes.add_argument(
        "--execute",
        type=Path,
        metavar="BUNDLE",
        help="run a packed BUNDLE on --device and record outputs and outcomes in --results",
    )
    modes.add_argument(
        "--judge",
        type=Path,
        metavar="RESULTS",
        help="judge what --execute recorded with the official runner, against the tests packed here",
    )
    remote.add_argument("--results", type=Path, metavar="DIR", help="where --execute records (a new directory)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..conformance import cts

    console = Console(stderr=True)
    if args.execute:
        return _execute(args, console)
    try:
        venv = cts.find_tools(args.tosa_tools)
    except cts.ToolsNotFound as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    jobs = args.jobs or _default_jobs()
    if args.judge:
        return _judge(args, console, venv, jobs)
    try:
        selected, not_applicable, profiles = _select(args, console, venv, jobs)
    except _CannotRun as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    if args.pack:
        return _pack(args, console, selected)
    started = time.monotonic()
    outcomes = _run_tests(console, selected, device=args.device, venv=venv, jobs=jobs) + not_applicable
    extensions = _extensions(args)
    details = {
        "Profiles": ", ".join(profiles),
        "Extensions": "all" if extensions is None else (", ".join(extensions) or "none"),
        "Selection": _selection(args),
    }
    return _report(args, console, args.device, outcomes, details, venv, jobs, started)


class _CannotRun(Exception):
    """The device or the suite cannot be had; the message says which."""


def _default_jobs() -> int:
    from ..conformance import runner

    return runner.default_jobs()


def _extensions(args: argparse.Namespace) -> list[str] | None:
    return None if not args.extension else [e for e in args.extension if e.lower() != "none"]


def _selection(args: argparse.Namespace) -> str:
    if args.smallest:
        return f"the {args.smallest} smallest per operator x output type x polarity"
    return f"{args.per_operator} per operator" if args.per_operator else "whole suite"


def _select(args: argparse.Namespace, console: Any, venv: Path, jobs: int) -> tuple[list, list, list[str]]:
    """The tests to run (generating suites as needed), the not-applicable outcomes, the profiles. When packing,
    ``--device`` is a stand-in opened here (the same backend advertises the same operators on every device,
    only its limits differ); the machine that runs the bundle checks its own device again."""
    from ..conformance import applicability, bundle, cts, runner
    from ..core.errors import IronAccelError

    profiles = [f"tosa-{p}" for p in (args.profile or ["pro-int", "pro-fp"])]
    extensions = _extensions(args)
    try:
        descriptor = applicability.device_capabilities(args.device)
    except IronAccelError as exc:
        raise _CannotRun(f"{args.device}: {exc}") from exc
    selected: list[runner.CaseInfo] = []
    not_applicable: list[runner.Outcome] = []
    for profile in profiles:
        generated = _generated_extensions(profile, extensions)
        # A full selection already cached (the whole suite, or these operators') serves a quick subset too.
        whole = cts.cached_whole(profile, generated, cache=args.cache, venv=venv)
        if whole is None and args.operators:
            whole = cts.cached(profile, args.operators, generated, cache=args.cache, venv=venv)
        if args.per_operator and not args.smallest and whole is None:
            tests, where = _generate_per_operator(args, console, profile, generated, descriptor, venv, jobs)
        else:
            what = f"{profile}: generating the suite with tosa-tools (cached after the first time)"
            with _status(console, what):
                suite = whole or cts.generate(
                    profile, args.operators or (), generated, cache=args.cache, venv=venv, jobs=jobs, reuse_whole=True
                )
            tests, where = suite.tests(), suite.root
        chosen = runner.select(
            tests,
            operators=args.operators or (),
            extensions=extensions,
            test_type=args.test_type,
            profile=profile,
        )
        chosen, skipped = applicability.split(chosen, descriptor)  # what the device does not advertise
        if args.smallest:
            chosen = bundle.smallest(chosen, args.smallest)
        if args.per_operator:
            chosen = runner.pick(chosen, args.per_operator)
        console.print(
            f"{profile}: {len(chosen)} of {len(tests)} tests selected, {len(skipped)} not applicable "
            f"to {args.device} ({where})",
            soft_wrap=True,
        )
        selected += chosen
        not_applicable += skipped
    return selected, not_applicable, profiles


def _generate_per_operator(
    args: argparse.Namespace,
    console: Any,
    profile: str,
    extensions: list[str] | None,
    descriptor: Any,
    venv: Path,
    jobs: int,
) -> tuple[list[Path], str]:
    """The tests of a ``--per-operator`` run, generated operator by operator (``per_kind`` of them per
    generator batch and kind, ``jobs`` operators at once), with a line per operator as it is done;
    operators the device does not advertise are named once and not generated. Returns the tests (in
    operator order) and where they are."""
    from ..conformance import cts
    from ..tosa.operators import Op

    available = cts.operators(profile, extensions, venv=venv)
    wanted = [o.lower() for o in args.operators] if args.operators else available
    unknown = [o for o in wanted if o not in available]
    if unknown:
        console.print(
            f"{profile}: no tests of {', '.join(unknown)} in this profile and these extensions", soft_wrap=True
        )
    ops, unsupported = [], []
    for name in (o for o in wanted if o in available):
        try:
            op = Op.parse(name)
        except ValueError:  # a name of the generator's own; generate it and let the runner judge
            op = None
        (unsupported if op is not None and op not in descriptor.operators else ops).append(name)
    if unsupported:
        console.print(
            f"{profile}: not generated, {args.device} does not advertise: {', '.join(unsupported)}", soft_wrap=True
        )
    # One operator per job, each generated with one job: an operator's few batches keep a core busy less
    # than the generator's startup and listing, which run in parallel this way.
    found: dict[str, list[Path]] = {}

    def one(name: str) -> tuple[str, list[Path], float]:
        started = time.monotonic()
        suite = cts.generate(
            profile,
            (name,),
            extensions,
            cache=args.cache,
            venv=venv,
            jobs=1,
            per_kind=args.per_operator,
            test_type=args.test_type,
        )
        return name, suite.tests(), time.monotonic() - started

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        for i, future in enumerate(concurrent.futures.as_completed([pool.submit(one, n) for n in ops]), 1):
            name, tests, seconds = future.result()
            found[name] = tests
            how = f"generated in {seconds:.1f} s" if seconds > 1 else "cached"
            console.print(f"{profile}: {name} ({i}/{len(ops)}): {len(tests)} tests {how}", soft_wrap=True)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # a failed operator ends the run without starting more
    tests = [t for name in ops for t in found[name]]
    return tests, f"first {args.per_operator} of each kind per operator, under {cts.cache_root(args.cache)}"


def _pack(args: argparse.Namespace, console: Any, selected: list) -> int:
    from ..conformance import bundle

    try:
        written = bundle.pack(selected, args.pack, f"{_selection(args)}, selected for {args.device}")
    except FileExistsError:
        console.print(f"[red]error:[/red] {args.pack} exists: give a new directory")
        return 2
    console.print(f"packed {len(selected)} tests, {written / 1e6:.1f} MB, into {args.pack}")
    console.print(
        f"next, on the device's machine: ironaccel conformance --device SPEC --execute {args.pack} --results DIR"
    )
    return 0


def _execute(args: argparse.Namespace, console: Any) -> int:
    from ..conformance import bundle
    from ..core.errors import IronAccelError
    from ..runtime.session import open_device

    if args.results is None:
        console.print("[red]error:[/red] --execute needs --results DIR (a new directory)")
        return 2
    if args.results.exists():
        console.print(f"[red]error:[/red] {args.results} exists: give a new directory")
        return 2
    try:
        total = len(bundle.read_manifest(args.execute, "bundle")["tests"])
        device = open_device(args.device)
    except (ValueError, IronAccelError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    try:
        with _progress(console) as progress:
            task = progress.add_task(f"{args.device}: running", total=total)
            counts = bundle.execute(
                args.execute,
                device,
                args.device,
                args.results,
                on_result=lambda _ident, _status: progress.advance(task),
            )
    except (OSError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    finally:
        device.close()
    console.print(", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    console.print(f"next, where the tests were packed: ironaccel conformance --judge {args.results} --report DIR")
    return 0


def _judge(args: argparse.Namespace, console: Any, venv: Path, jobs: int) -> int:
    from ..conformance import bundle

    try:
        results, selected, not_applicable = bundle.recorded_cases(args.judge)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    label = f"{results.device} ({results.device_name})"
    started = time.monotonic()
    outcomes = _run_tests(console, selected, device=results.device, venv=venv, jobs=jobs, replay=args.judge)
    profiles = sorted({i.profile for i in selected} | {o.info.profile for o in not_applicable})
    ran = f"run on {results.device_name} at {results.date or 'an unrecorded time'}, judged here"
    details = {"Profiles": ", ".join(profiles), "Selection": f"{results.selection or 'as packed'}; {ran}"}
    return _report(args, console, label, outcomes + not_applicable, details, venv, jobs, started)


PLAIN_PROGRESS_PERIOD = 10.0  # seconds between plain progress lines


def _progress(console: Any) -> Any:
    """A progress bar on a terminal (what is running, the bar, done / total, time left), plain lines
    elsewhere (:class:`PlainProgress`)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    if not console.is_terminal:
        return PlainProgress(console)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    return Progress(*columns, console=console)


@contextlib.contextmanager
def _status(console: Any, text: str) -> Iterator[None]:
    """A spinner with ``text`` on a terminal; elsewhere ``text`` once, as a line."""
    if console.is_terminal:
        with console.status(text):
            yield
    else:
        console.print(text, soft_wrap=True)
        yield


class PlainProgress:
    """The part of rich's Progress this command uses, as lines for a log or a pipe: ``DESCRIPTION: done /
    total`` when a task starts, at most every ``period`` seconds while it advances, and when it ends."""

    def __init__(self, console: Any, period: float = PLAIN_PROGRESS_PERIOD) -> None:
        self.console, self.period = console, period
        self.tasks: dict[int, dict[str, Any]] = {}

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for task in self.tasks.values():
            if task["shown"] != (task["completed"], task["description"]):
                self._line(task)

    def add_task(self, description: str, total: int) -> int:
        ident = len(self.tasks)
        self.tasks[ident] = {"description": description, "total": total, "completed": 0, "shown": None, "at": 0.0}
        self._line(self.tasks[ident])
        return ident

    def advance(self, task: int, advance: int = 1) -> None:
        self.update(task, advance=advance)

    def update(
        self, task: int, *, advance: int = 0, completed: int | None = None, description: str | None = None
    ) -> None:
        state = self.tasks[task]
        state["completed"] = completed if completed is not None else state["completed"] + advance
        if description is not None:
            state["description"] = description
        if time.monotonic() - state["at"] >= self.period:
            self._line(state)

    def _line(self, state: dict[str, Any]) -> None:
        state["shown"], state["at"] = (state["completed"], state["description"]), time.monotonic()
        self.console.print(f"{state['description']}: {state['completed']}/{state['total']}", soft_wrap=True)


def _run_tests(console: Any, selected: list, *, device: str, venv: Path, jobs: int, replay: Path | None = None) -> list:
    from ..conformance import runner

    with _progress(console) as progress:
        task = progress.add_task(f"{device}: running", total=len(selected))
        failed = 0

        def seen(name: str, passed: bool) -> None:
            nonlocal failed
            failed += not passed
            progress.update(task, advance=1, description=f"{device}: {failed} failed")

        outcomes = runner.run(selected, device=device, venv=venv, jobs=jobs, on_result=seen, replay=replay)
        # Lines from parallel runner threads can interleave and hide a few; the xunit file is complete.
        progress.update(task, completed=len(selected))
    return outcomes


def _report(
    args: argparse.Namespace,
    console: Any,
    device: str,
    outcomes: list,
    details: dict[str, str],
    venv: Path,
    jobs: int,
    started: float,
) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..conformance import cts
    from ..conformance.report import Report

    elapsed = time.monotonic() - started
    details = {**details, "tosa-tools": cts.tools_version(venv), "Time": f"{elapsed:.0f} s with {jobs} job(s)"}
    report = Report(device, f"TOSA {cts.TOSA_VERSION} conformance: {device}", outcomes, details)
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
