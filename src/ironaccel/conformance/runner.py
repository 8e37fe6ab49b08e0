"""Drive Arm's conformance runner (``tosa_verif_run_tests``) with :mod:`.tosa_sut` and collect outcomes.

The runner runs in the tosa-tools environment; this module starts it as a subprocess with a one-entry
``PYTHONPATH`` that exposes only the ``ironaccel`` package (never our environment's numpy), follows its
output line by line for progress, and reads the per-test verdicts back from its xunit file. The verdict
is the runner's own: positive tests must be compliant by ``tosa_verify`` against the reference model's
precise (fp64) results, negative tests must end in ``TOSA_ERROR``.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .case import read_desc
from .cts import tools_env

SUT_MODULE = "ironaccel.conformance.tosa_sut"
_LINE = re.compile(rf"^{re.escape(SUT_MODULE)}: Result(?: code)? (PASS|FAIL) (\S+)")
_SKIP = re.compile(r"^Skipping .* test (\S+)$")


@dataclasses.dataclass(frozen=True)
class CaseInfo:
    """What the report needs to know of one test, from its desc.json."""

    path: Path
    operator: str
    negative: bool
    extensions: tuple[str, ...]
    output_types: tuple[str, ...]
    profile: str = ""  # the suite it was generated for (tosa-pro-int / tosa-pro-fp)

    @classmethod
    def of(cls, path: Path, profile: str = "") -> CaseInfo:
        desc = read_desc(path)
        details = desc.get("test_details", {})
        needs = desc.get("test_requirements", {})
        return cls(
            path,
            str(details.get("operator", path.parent.name)).upper(),
            bool(desc.get("expected_failure")),
            tuple(e.removeprefix("tosa-ext-") for e in needs.get("extensions_required", [])),
            tuple(details.get("output_types", [])),
            profile,
        )


@dataclasses.dataclass(frozen=True)
class Outcome:
    info: CaseInfo
    passed: bool
    skipped: bool = False
    message: str = ""
    seconds: float = 0.0


def select(
    tests: Iterable[Path],
    *,
    operators: Sequence[str] = (),
    extensions: Sequence[str] | None = None,
    test_type: str = "both",
    per_operator: int | None = None,
    seed: int = 0,
    profile: str = "",
) -> list[CaseInfo]:
    """Tests to run: of these ``operators`` (all when empty), needing only ``extensions`` (names without
    ``tosa-ext-``; None allows all), positive / negative / both; at most ``per_operator`` per operator,
    chosen so that every (output type, polarity) of an operator is present before repeats."""
    wanted_ops = {o.upper() for o in operators}
    allowed = None if extensions is None else {e.lower().removeprefix("tosa-ext-") for e in extensions}
    chosen = []
    for path in tests:
        info = CaseInfo.of(path, profile)
        if wanted_ops and info.operator not in wanted_ops:
            continue
        if allowed is not None and not set(info.extensions) <= allowed:
            continue
        if (test_type == "positive" and info.negative) or (test_type == "negative" and not info.negative):
            continue
        chosen.append(info)
    return chosen if per_operator is None else pick(chosen, per_operator, seed)


def pick(tests: Iterable[CaseInfo], per_operator: int, seed: int = 0) -> list[CaseInfo]:
    """At most ``per_operator`` of ``tests`` per operator, chosen so that every (output type, polarity)
    of an operator is present before repeats; the same ``seed`` picks the same tests."""
    rng = random.Random(seed)
    by_op: dict[str, dict[tuple, list[CaseInfo]]] = defaultdict(lambda: defaultdict(list))
    for info in tests:
        by_op[info.operator][(info.output_types, info.negative)].append(info)
    picked = []
    for kinds in by_op.values():
        pools = [rng.sample(v, len(v)) for _, v in sorted(kinds.items(), key=lambda kv: repr(kv[0]))]
        take: list[CaseInfo] = []
        while len(take) < per_operator and any(pools):
            for pool in pools:
                if pool and len(take) < per_operator:
                    take.append(pool.pop())
        picked += take
    return sorted(picked, key=lambda i: i.path)


def _package_path(scratch: Path) -> Path:
    """A directory holding only a link to the ``ironaccel`` package, for the runner's PYTHONPATH."""
    package = Path(__file__).resolve().parents[1]
    link = scratch / "ironaccel"
    link.symlink_to(package, target_is_directory=True)
    return scratch


def run(
    tests: Sequence[CaseInfo],
    *,
    device: str,
    venv: Path,
    jobs: int = 1,
    on_result: Callable[[str, bool], None] | None = None,
    timeout: float = 6 * 3600,
    replay: Path | None = None,
) -> list[Outcome]:
    """Run ``tests`` through the official runner on ``device``; one :class:`Outcome` per test, in order.
    With ``replay``, the outputs recorded in that results directory (:mod:`.bundle`) are judged instead."""
    if not tests:
        return []
    with tempfile.TemporaryDirectory(prefix="ironaccel-cts-") as tmp:
        scratch = Path(tmp)
        (scratch / "pkg").mkdir()
        env = tools_env(venv)
        env["PYTHONPATH"] = str(_package_path(scratch / "pkg"))
        listing = scratch / "tests.txt"
        listing.write_text("".join(f"{t.path}\n" for t in tests))
        xunit = scratch / "result.xml"
        command = [
            str(venv / "bin" / "tosa_verif_run_tests"),
            *("--sut-module", SUT_MODULE, "--sut-module-args", f"{SUT_MODULE}:device={device}"),
            *((f"{SUT_MODULE}:replay={replay.resolve()}",) if replay else ()),
            *("-T", str(listing), "-j", str(max(1, jobs)), "--xunit-file", str(xunit), "--no-color"),
        ]
        tail: list[str] = []
        with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip()
                tail = [*tail, line][-40:]
                if on_result is None:
                    continue
                if match := _LINE.match(line):
                    on_result(match.group(2), match.group(1) == "PASS")
                elif match := _SKIP.match(line):
                    on_result(Path(match.group(1)).name, True)
            code = proc.wait(timeout=timeout)
        if not xunit.exists():
            raise RuntimeError(f"the conformance runner exited {code} without results:\n" + "\n".join(tail))
        verdicts = _read_xunit(xunit)
    outcomes = []
    for info in tests:
        verdict = verdicts.get(str(info.path))
        if verdict is None:
            outcomes.append(Outcome(info, False, message="no result from the runner"))
        else:
            outcomes.append(dataclasses.replace(verdict, info=info))
    return outcomes


def _read_xunit(path: Path) -> dict[str, Outcome]:
    verdicts = {}
    for suite in ET.parse(path).getroot().iter("testsuite"):
        if suite.get("name") != SUT_MODULE:
            continue
        for case in suite.iter("testcase"):
            name = case.get("name", "")
            failure = case.find("failure")
            skipped = case.find("skipped") is not None
            message = (failure.text or "failed") if failure is not None else ""
            info = CaseInfo(Path(name), "", False, (), ())
            seconds = float(case.get("time") or 0)
            verdicts[name] = Outcome(info, failure is None, skipped, message.strip(), seconds)
    return verdicts


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)
