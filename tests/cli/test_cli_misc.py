"""The command line as a whole: ``python -m ironaccel``, -v / -q logging, IRONACCEL_DEBUG, plain progress
lines off a terminal, and conformance suites generated per operator for a quick subset."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from rich.console import Console

from ironaccel import __version__
from ironaccel.cli import conformance as conformance_command
from ironaccel.cli import demo as demo_command
from ironaccel.cli.main import configure_logging
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor, Version, save


def cli(*args: str, cwd=None, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("IRONACCEL_LOG_LEVEL", "IRONACCEL_DEBUG")}
    return subprocess.run(
        [sys.executable, "-m", "ironaccel", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**environment, **env},
    )


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    root = tmp_path_factory.mktemp("misc")
    tensors = (Tensor("a", (2,), DType.FP32), Tensor("b", (2,), DType.FP32))
    block = Block("main", (Operator(Op.ABS, ("a",), ("b",)),), tensors, ("a",), ("b",))
    path = root / "abs.tosa"
    save(Program((Region("main", (block,)),), Version(1, 0, 2)), path)
    np.save(root / "a.npy", np.array([1.0, -2.0], np.float32))
    return path


def test_python_dash_m_runs_the_command():
    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"ironaccel {__version__}"
    done = cli()
    assert done.returncode == 2 and "COMMAND" in done.stdout


# -- logging ------------------------------------------------------------------------------------------------
def _records(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ironaccel.")]


def test_verbose_and_quiet_set_the_level_of_ironaccels_loggers(program):
    argv = ["run", str(program), "-i", str(program.with_name("a.npy")), "--device", "cpu"]
    quiet = cli(*argv)
    assert quiet.returncode == 0 and _records(quiet.stderr) == [], quiet.stderr
    info = cli("-v", *argv)
    assert any(line.startswith("ironaccel.cli.run: INFO: cpu: compiled") for line in _records(info.stderr))
    assert not any(": DEBUG: " in line for line in info.stderr.splitlines())
    debug = cli("-vv", *argv, "--warmup", "1")
    assert any(
        line.startswith("ironaccel.cli.run: DEBUG: cpu: warm-up call 1 took") for line in debug.stderr.splitlines()
    )
    from_environment = cli(*argv, IRONACCEL_LOG_LEVEL="info")
    assert any(": INFO: " in line for line in _records(from_environment.stderr))
    assert _records(cli("-q", *argv, IRONACCEL_LOG_LEVEL="info").stderr) == []


def test_an_unknown_log_level_is_said_once_and_warnings_are_kept(program):
    done = cli(
        "run", str(program), "-i", str(program.with_name("a.npy")), "--device", "cpu", IRONACCEL_LOG_LEVEL="loud"
    )
    assert done.returncode == 0
    assert done.stderr.splitlines()[0] == (
        "ironaccel: WARNING: IRONACCEL_LOG_LEVEL='loud' is not a level (debug, info, warning, error); logging warnings"
    )


def test_verbose_and_quiet_exclude_each_other():
    done = cli("-v", "-q", "devices")
    assert done.returncode == 2 and "not allowed with argument" in done.stderr


def test_every_record_is_one_line_and_printed_once(capsys):
    root = logging.getLogger("ironaccel")
    try:
        assert configure_logging(0, False, "info") == logging.INFO
        assert configure_logging(2, False, "error") == logging.DEBUG  # a second call replaces the handler
        log = logging.getLogger("ironaccel.test")
        try:
            raise ValueError("inner\nproblem")
        except ValueError:
            log.exception("first line\nsecond line")
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert err.startswith("ironaccel.test: ERROR: first line | second line | Traceback (most recent call last):")
        assert err.rstrip().endswith("ValueError: inner | problem")
        assert configure_logging(0, True, "debug") == logging.ERROR
        log.warning("hidden")
        assert capsys.readouterr().err == ""
    finally:
        root.handlers = [h for h in root.handlers if not getattr(h, "_ironaccel_cli", False)]
        root.setLevel(logging.NOTSET)
        root.propagate = True


def test_ironaccel_debug_shows_the_traceback(tmp_path):
    missing = str(tmp_path / "missing.tosa")
    plain = cli("run", missing, "--device", "cpu")
    assert plain.returncode == 2 and plain.stderr.startswith("ironaccel run: ") and "Traceback" not in plain.stderr
    loud = cli("run", missing, "--device", "cpu", IRONACCEL_DEBUG="1")
    assert loud.returncode == 1 and "Traceback (most recent call last)" in loud.stderr


# -- progress off a terminal --------------------------------------------------------------------------------
def _console() -> tuple[Console, io.StringIO]:
    sink = io.StringIO()
    return Console(file=sink, force_terminal=False, width=40), sink


def test_conformance_progress_is_plain_lines_in_a_log():
    console, sink = _console()
    progress = conformance_command._progress(console)
    assert isinstance(progress, conformance_command.PlainProgress)
    with progress:
        task = progress.add_task("cpu: running a long description that is wider than the console", total=3)
        for _ in range(3):
            progress.update(task, advance=1, description="cpu: 0 failed")
    # The first line when it starts and the last when it ends (the period is seconds; this took less).
    assert sink.getvalue().splitlines() == [
        "cpu: running a long description that is wider than the console: 0/3",
        "cpu: 0 failed: 3/3",
    ]


def test_conformance_progress_lines_come_every_period():
    console, sink = _console()
    with conformance_command.PlainProgress(console, period=0.0) as progress:
        task = progress.add_task("x", total=2)
        progress.advance(task)
        progress.advance(task)
    assert sink.getvalue().splitlines() == ["x: 0/2", "x: 1/2", "x: 2/2"]


def test_a_terminal_still_gets_rich_live_displays():
    from rich.progress import Progress

    console = Console(file=io.StringIO(), force_terminal=True)
    assert isinstance(conformance_command._progress(console), Progress)


def test_long_steps_say_what_they_do_in_a_log():
    console, sink = _console()
    with conformance_command._status(console, "tosa-pro-int: generating the suite with tosa-tools"):
        pass
    with demo_command._step(console, "compiling cnn_fp32.tosa for CPU, then 20 timed runs"):
        pass
    lines = sink.getvalue().splitlines()
    assert lines[:2] == [
        "tosa-pro-int: generating the suite with tosa-tools",
        "compiling cnn_fp32.tosa for CPU, then 20 timed runs...",
    ]
    assert lines[2].startswith("  done in ")


# -- a quick subset of the conformance suite: only what runs is generated -------------------------------------
@pytest.mark.tosa_tools
def test_a_capped_suite_is_a_small_subset_of_the_full_one(tmp_path):
    from ironaccel.conformance import cts
    from tosa_fixtures import require_tosa_tools

    venv = require_tosa_tools()
    assert {"add", "conv2d", "rescale", "while_loop"} <= set(cts.operators("tosa-pro-int", venv=venv))
    assert "while_loop" not in cts.operators("tosa-pro-int", [], venv=venv)  # needs EXT-CONTROLFLOW
    assert "sin" not in cts.operators("tosa-pro-int", venv=venv) and "sin" in cts.operators("tosa-pro-fp", venv=venv)
    full = cts.generate("tosa-pro-int", ("add",), [], cache=tmp_path, venv=venv, jobs=2)
    capped = cts.generate("tosa-pro-int", ("add",), [], cache=tmp_path, venv=venv, jobs=2, per_kind=1)
    positive = cts.generate(
        "tosa-pro-int", ("add",), [], cache=tmp_path, venv=venv, jobs=2, per_kind=1, test_type="positive"
    )
    names = {t.name for t in full.tests()}
    assert capped.root != full.root and positive.root != capped.root
    assert 0 < len(capped.tests()) < len(names)
    assert {t.name for t in capped.tests()} <= names
    assert any("ERRORIF" in t.name for t in capped.tests())
    assert not any("ERRORIF" in t.name for t in positive.tests())
    # Full selections in the cache are found without generating anything (a quick run then uses them).
    assert cts.cached("tosa-pro-int", ["ADD"], [], cache=tmp_path, venv=venv) == full
    assert cts.cached("tosa-pro-int", ["sub"], [], cache=tmp_path, venv=venv) is None
    assert cts.cached_whole("tosa-pro-int", [], cache=tmp_path, venv=venv) is None


@pytest.mark.tosa_tools
def test_a_quick_conformance_run_generates_only_its_operators_and_says_so(tmp_path):
    from tosa_fixtures import require_tosa_tools

    require_tosa_tools()
    argv = ["conformance", "--device", "cpu", "--profile", "pro-int", "--extension", "none", "--per-operator", "1"]
    done = cli(*argv, "--operators", "add", "SUB", "--cache", str(tmp_path / "c"), "--report", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    generated = sorted(line.split(" (")[0] for line in lines if "tests generated in" in line)
    assert generated == ["tosa-pro-int: add", "tosa-pro-int: sub"]
    assert any(line.startswith("tosa-pro-int: 2 of ") and "tests selected" in line for line in lines)
    assert "cpu: running: 0/2" in lines and "cpu: 0 failed: 2/2" in lines  # plain progress lines in a pipe
    assert sorted(p.name.split("-first")[0] for p in (tmp_path / "c").iterdir() if not p.name.startswith(".")) == [
        "tosa-pro-int-add",
        "tosa-pro-int-sub",
    ]
