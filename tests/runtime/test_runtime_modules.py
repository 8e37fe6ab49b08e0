"""The execution contract's modules: public import paths that other code and external backends use, one base
per concept under the Accelerator, and one name for runs outside every queue ("direct", ADR 0029)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "ironaccel"


def test_the_public_import_paths_still_lead_to_the_contract():
    from ironaccel import runtime
    from ironaccel.runtime import bindings, direct, hooks, prepared, programs, records, submission
    from ironaccel.runtime.accelerator import Accelerator, BoundRange, DirectRun, InternalError

    assert runtime.Accelerator is Accelerator and runtime.BoundRange is BoundRange is bindings.BoundRange
    assert DirectRun is direct.DirectRun
    assert InternalError.__module__ == "ironaccel.core.errors"
    # Every part is a base of the Accelerator, so a backend subclass and code holding an Accelerator see the
    # methods (and the bookkeeping the tests and tools read) where they always were.
    for base in (
        hooks.BackendHooks,
        records.Book,
        bindings.Binder,
        programs.Programs,
        submission.Submission,
        prepared.PreparedSubmissions,
        direct.DirectRuns,
    ):
        assert issubclass(Accelerator, base), base
    acc = Accelerator()  # the base alone: no hook runs until a method needs the device
    for name in ("_record", "_objects", "_lock", "_guard", "_bind", "_work", "_poison", "launch", "run_direct"):
        assert hasattr(acc, name), name
    assert acc.live_resources()["buffer_bytes"] == 0 and not acc.launches_natively


def test_each_runtime_part_stays_one_readable_module():
    for name in ("accelerator", "hooks", "records", "bindings", "programs", "submission", "prepared", "direct"):
        path = SRC / "runtime" / f"{name}.py"
        lines = len(path.read_text().splitlines())
        assert lines <= 400, f"runtime/{name}.py has {lines} lines; split it by concept (ADR 0029)"


_OLD_NAMES = {
    "_inline",
    "runs_inline",
    "run_inline",
    "starts_inline",
    "start_inline",
    "InlineRun",
    "_Inline",
    "InlineRunner",
    "guest_inline",
}


def _identifiers(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update(node.module.split("."))
        elif isinstance(node, ast.alias):
            found.update(node.name.split("."))
    return found


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_runs_outside_the_queue_have_one_name_in_the_code(path: Path):
    old = sorted(_identifiers(path) & _OLD_NAMES)
    assert not old, f"{path.relative_to(SRC)} still uses {', '.join(old)}: these runs are 'direct' (ADR 0029)"


def test_the_virtio_guest_offers_direct_runs_from_its_own_module():
    module = importlib.import_module("ironaccel.virtio.guest_direct")
    assert module.DirectRunner.__name__ == "DirectRunner"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ironaccel.virtio.guest_inline")
