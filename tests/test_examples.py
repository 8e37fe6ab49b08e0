"""The runnable examples under examples/ run as a user runs them: each as its own process, from a directory
outside the checkout, exiting 0 and printing the lines that say it did what it shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TIMEOUT_S = 120  # each takes a few seconds; a two-core CI host under load, several times that

# example -> (its arguments, lines of its output that only a run that did its work prints)
CASES = {
    "quickstart.py": (["cpu"], ["submit/wait into out=: same values"]),
    "decode.py": (["cpu", "--steps", "8"], ["tokens match the numpy reference"]),
    "serve_and_guest.py": ([], ["outputs agree: yes, bit for bit", "daemon stopped: True, socket removed: True"]),
    "nvfp4_projection.py": ([], ["agree: yes"]),
    # Ray: a one-machine instance each (about 15 s on two cores); skipped where the [ray] extra is not installed.
    "ray_batch.py": (
        ["--rows", "32"],
        [
            "Ray Data outputs agree with the CPU backend: yes",
            "pool: 32 outputs, in order; agree with the CPU backend: yes",
        ],
    ),
    "ray_serve.py": (["--check", "16"], ["served outputs agree with the CPU backend: yes"]),
}
NEEDS = {"ray_batch.py": "ray", "ray_serve.py": "ray"}


def _run(name: str, arguments: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(EXAMPLES / name), *arguments]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_runs(name: str, tmp_path: Path) -> None:
    if name in NEEDS:
        pytest.importorskip(NEEDS[name], reason=f"{name} needs the [{NEEDS[name]}] extra")
    arguments, expected = CASES[name]
    done = _run(name, arguments, tmp_path)
    report = f"{name} exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, report
    lines = done.stdout.splitlines()
    assert all(line in lines for line in expected), report


def test_quickstart_on_auto_says_what_it_picked(tmp_path: Path) -> None:
    """With no argument the quickstart opens "auto", and its first line names the device and why."""
    done = _run("quickstart.py", [], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("device: ") and "picked" in first, done.stdout


def test_every_example_but_the_export_script_is_run_here() -> None:
    """A new example must be added to CASES (export_models.py needs torch and is not run)."""
    present = {p.name for p in EXAMPLES.glob("*.py")} - {"export_models.py"}
    assert present == set(CASES)
