"""Conformance for a device on another machine: pack the tests here, execute them there, judge them here.

The device under test can sit on a machine with no network and no tosa-tools (a lent GPU box, a board in
a lab), while the verdict needs the reference model and ``tosa_verify``. The work splits in three:

1. :func:`pack` (here) copies the selected tests' programs, inputs and ``desc.json`` into a bundle
   directory with a manifest naming where each came from.
2. :func:`execute` (there; IronAccel and numpy only) runs every test of a bundle through
   :func:`.case.run_case` on the device, after the same applicability check a local run makes against
   that device's own capability descriptor. Outputs and one ``result.json`` per test go to a results
   directory, with the device's name and the Vulkan layers' messages.
3. Judging (here) runs the official runner over the original test directories with
   :mod:`.tosa_sut` in replay mode (``replay=RESULTS``): it hands the runner the recorded outputs and
   outcomes, so compliance is decided as in a local run, by ``tosa_verify`` against the reference model
   in precise mode. :func:`recorded_cases` gives the tests to judge and the ones to report as not
   applicable.

Nothing of a results directory is trusted beyond what a test directory holds anyway: output files are
copied by the names ``desc.json`` gives, a test missing from the results fails.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import IronAccelError
from ..core.files import read_limited
from .applicability import NOT_APPLICABLE, reason
from .case import CaseResult, Status, layer_messages, read_desc, run_case
from .runner import CaseInfo, Outcome

JSON_BYTES = 64 << 20  # a bundle manifest or a recorded result; outputs live in their own files

FORMAT = 1
MANIFEST = "manifest.json"
RESULT = "result.json"
LAYERS_FAILED = "layers"  # the status recorded when the Vulkan layers spoke during a test


def smallest(tests: Iterable[CaseInfo], per_kind: int) -> list[CaseInfo]:
    """The ``per_kind`` smallest tests (by the bytes a device needs: desc.json, program, inputs) of every
    (operator, output types, polarity): every kind of test the suite has, at a size that travels (the
    whole suite is a gigabyte). Outputs earlier runs left in the directories do not count, so the choice
    depends on the suite alone."""
    kinds: dict[tuple[str, tuple[str, ...], bool], list[tuple[int, str, CaseInfo]]] = defaultdict(list)
    for info in tests:
        names = _test_files(read_desc(info.path))
        size = sum((info.path / name).stat().st_size for name in names)
        kinds[(info.operator, info.output_types, info.negative)].append((size, str(info.path), info))
    chosen = [info for entries in kinds.values() for _, _, info in sorted(entries, key=lambda e: e[:2])[:per_kind]]
    return sorted(chosen, key=lambda i: i.path)


def _test_files(desc: dict[str, Any]) -> list[str]:
    """The files of a test that a device needs: desc.json, the program and the inputs (never outputs)."""
    return ["desc.json", str(desc["tosa_file"]), *(str(f) for f in desc.get("ifm_file", []))]


def _safe_name(name: str) -> str:
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(f"not a plain file name: {name!r}")
    return name


def pack(tests: Sequence[CaseInfo], bundle: Path, selection: str = "") -> int:
    """Copy ``tests`` into the new directory ``bundle`` (``tests/<id>/``, ``manifest.json``, with ``selection``
    saying how they were chosen, for the report); bytes written."""
    bundle.mkdir(parents=True, exist_ok=False)
    entries = []
    written = 0
    for index, info in enumerate(tests):
        ident = f"{index:05d}-{info.path.name}"
        target = bundle / "tests" / ident
        target.mkdir(parents=True)
        desc = read_desc(info.path)
        for name in _test_files(desc):
            written += shutil.copyfile(info.path / _safe_name(name), target / name).stat().st_size
        entries.append({"id": ident, "source": str(info.path.resolve()), "profile": info.profile})
    manifest = {"format": FORMAT, "selection": selection, "tests": entries}
    (bundle / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return written


def read_manifest(directory: Path, what: str) -> dict[str, Any]:
    try:
        manifest = json.loads(read_limited(directory / MANIFEST, JSON_BYTES, f"{what} manifest"))
    except (OSError, ValueError, IronAccelError) as exc:
        raise ValueError(f"{directory} is not a conformance {what}: {exc}") from exc
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{directory}: {what} format {manifest.get('format')!r}, expected {FORMAT}")
    return manifest


def execute(
    bundle: Path,
    device: Any,
    spec: str,
    results: Path,
    *,
    level: str = "8k",
    on_result: Callable[[str, str], None] | None = None,
) -> dict[str, int]:
    """Run every test of ``bundle`` on ``device`` (an ``ironaccel.Device`` opened from ``spec``); outputs and
    ``result.json`` per test under ``results/<id>/``. Returns how many tests ended in each status."""
    manifest = read_manifest(bundle, "bundle")
    idents = [_safe_name(str(entry.get("id", ""))) for entry in manifest["tests"]]  # all checked before any run
    results.mkdir(parents=True, exist_ok=False)
    info = device.accelerator.device_info()
    record_of_run = {
        "format": FORMAT,
        "device": spec,
        "device_name": getattr(info, "name", str(info)),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "selection": str(manifest.get("selection", "")),
        "tests": manifest["tests"],
    }
    # Written first, so a run cut short can still be judged: its unrun tests have no record and fail.
    (results / MANIFEST).write_text(json.dumps({**record_of_run, "complete": False}, indent=1))
    descriptor = device.accelerator.capabilities()
    layer_messages(spec)  # start clean: what opening the device said is not a test's
    counts: dict[str, int] = defaultdict(int)
    for ident in idents:
        test, out = bundle / "tests" / ident, results / ident
        out.mkdir()
        started = time.perf_counter()
        why = reason(test, descriptor)
        if why is not None:
            status, message = NOT_APPLICABLE, why
        else:
            result: CaseResult = run_case(device, test, level=level, out=out)
            status, message = result.status.value, result.message
            spoke = layer_messages(spec)
            if spoke:  # a test that made the Vulkan layers speak fails, whatever it computed
                status, message = LAYERS_FAILED, " | ".join(spoke)
        record = {"status": status, "message": message, "seconds": time.perf_counter() - started}
        (out / RESULT).write_text(json.dumps(record))
        counts[status] += 1
        if on_result is not None:
            on_result(ident, status)
    (results / MANIFEST).write_text(json.dumps({**record_of_run, "complete": True, "counts": dict(counts)}, indent=1))
    return dict(counts)


@dataclasses.dataclass(frozen=True)
class Recorded:
    """A results directory that :func:`execute` wrote, indexed by the tests' source directories."""

    root: Path
    device: str
    device_name: str
    by_source: dict[str, str]  # resolved source test directory -> id
    profiles: dict[str, str]  # id -> profile
    date: str = ""  # when the tests ran on the device (UTC)
    selection: str = ""  # how the packed tests were chosen

    @classmethod
    def open(cls, root: Path) -> Recorded:
        manifest = read_manifest(root, "results directory")
        tests = manifest.get("tests", [])
        return cls(
            root.resolve(),
            str(manifest.get("device", "?")),
            str(manifest.get("device_name", "?")),
            {str(Path(t["source"]).resolve()): _safe_name(t["id"]) for t in tests},
            {_safe_name(t["id"]): str(t.get("profile", "")) for t in tests},
            str(manifest.get("date", "")),
            str(manifest.get("selection", "")),
        )

    def result(self, test: Path) -> tuple[str, dict[str, Any]]:
        """(id, the recorded result) of the test whose source directory is ``test``; a missing or unreadable
        record is a failure, never a pass."""
        ident = self.by_source.get(str(Path(test).resolve()))
        if ident is None:
            return "", {"status": Status.FAILED.value, "message": f"{test} is not in {self.root}"}
        try:
            record = json.loads(read_limited(self.root / ident / RESULT, JSON_BYTES, "recorded result"))
        except (OSError, ValueError, IronAccelError) as exc:
            return ident, {"status": Status.FAILED.value, "message": f"no result recorded: {exc}"}
        return ident, record

    def restore_outputs(self, ident: str, test: Path, desc: dict[str, Any]) -> None:
        """Copy the recorded output files of ``ident`` into the test directory, by the names desc.json gives."""
        for name in desc.get("ofm_file", []):
            source = self.root / ident / _safe_name(str(name))
            (test / name).unlink(missing_ok=True)  # an earlier local run's file must not be judged instead
            if source.exists():
                shutil.copyfile(source, test / name)


_opened: dict[str, Recorded] = {}
_opened_lock = threading.Lock()


def recorded(root: str | Path) -> Recorded:
    """The results directory ``root``, opened once per process (the runner calls this from its threads)."""
    key = str(Path(root).resolve())
    with _opened_lock:
        if key not in _opened:
            _opened[key] = Recorded.open(Path(key))
        return _opened[key]


def recorded_cases(root: Path) -> tuple[Recorded, list[CaseInfo], list[Outcome]]:
    """The recorded results at ``root``: the tests to judge, and not-applicable outcomes for the rest
    (the reference model need not run for them). The tests' source directories must exist here."""
    results = Recorded.open(root)
    judge: list[CaseInfo] = []
    skipped: list[Outcome] = []
    for source, ident in sorted(results.by_source.items()):
        path = Path(source)
        if not (path / "desc.json").exists():
            raise ValueError(f"{root}: test {ident} came from {path}, which is not here (generate that suite first)")
        info = CaseInfo.of(path, results.profiles.get(ident, ""))
        _, record = results.result(path)
        if record.get("status") == NOT_APPLICABLE:
            skipped.append(Outcome(info, False, skipped=True, message=f"{NOT_APPLICABLE}: {record.get('message')}"))
        else:
            judge.append(info)
    return results, judge, skipped


__all__ = ["Recorded", "execute", "pack", "read_manifest", "recorded", "recorded_cases", "smallest"]
