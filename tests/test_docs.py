"""The user's documentation keeps up with the code: docs/operators.md is what scripts/operators-doc writes
from the capability descriptors, docs/guide.md names every environment variable the package reads and
every command, and the guide's Python snippets run as one session against the CPU backend."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ironaccel.cli.main import COMMANDS
from ironaccel.core.kinds import BackendKind

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide.md"
MODELS = ROOT / "src" / "ironaccel" / "models"
# An environment variable's name as the source spells it; "IRONACCEL_" alone is the prefix of a name put
# together at run time (IRONACCEL_<FAMILY>, checked on its own below).
VARIABLE = re.compile(r"\bIRONACCEL_[A-Z0-9_]*[A-Z0-9]\b")


def variables_in(text: str) -> set[str]:
    return set(VARIABLE.findall(text))


def source_variables() -> dict[str, str]:
    """Every IRONACCEL_* name in the package's Python source -> the first file naming it. Only .py files:
    the shaders' include guards (IRONACCEL_FP16_GLSL...) are preprocessor macros, not variables."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "src" / "ironaccel").rglob("*.py")):
        for name in variables_in(path.read_text()):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_variable_names_are_found_whole() -> None:
    text = 'env.get(f"IRONACCEL_{key}") or os.environ["IRONACCEL_CPU_NATIVE"]; IRONACCEL_DEBUG=1, XIRONACCEL_NO'
    assert variables_in(text) == {"IRONACCEL_CPU_NATIVE", "IRONACCEL_DEBUG"}


def test_every_environment_variable_in_the_source_is_in_the_guide() -> None:
    found = source_variables()
    assert "IRONACCEL_CPU_NATIVE" in found and "IRONACCEL_VIRTIO_SOCKET" in found, "the source scan found nothing"
    documented = variables_in(GUIDE.read_text())
    missing = {name: where for name, where in found.items() if name not in documented}
    assert not missing, f"docs/guide.md does not document {missing} (name: the file that reads it)"


def test_the_per_family_variables_are_in_the_guide() -> None:
    """core/settings.py reads IRONACCEL_<FAMILY> and IRONACCEL_<FAMILY>_LIBRARY for every family."""
    guide = GUIDE.read_text()
    assert "`IRONACCEL_<FAMILY>`" in guide and "`IRONACCEL_<FAMILY>_LIBRARY`" in guide
    for kind in BackendKind:
        key = kind.value.upper().replace("-", "_")
        assert re.search(rf"\b{key}\b", guide), f"docs/guide.md does not name the family {key} (IRONACCEL_{key})"


def test_the_guide_names_every_command() -> None:
    guide = GUIDE.read_text()
    missing = [name for name in COMMANDS if f"`ironaccel {name}" not in guide]
    assert not missing, f"docs/guide.md does not describe: {', '.join(missing)}"


def test_operators_doc_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "operators-doc"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_the_guide_snippets_run_as_one_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``"model.tosa"`` stands for the reader's program: here the bundled CNN; ``cnn_int8.tosa`` with its
    sidecar .json is the bundled quantized one."""
    blocks = re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(), flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) >= 3
    shutil.copy(MODELS / "cnn_fp32.tosa", tmp_path / "model.tosa")
    for name in ("cnn_int8.tosa", "cnn_int8.json"):
        shutil.copy(MODELS / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    session: dict[str, Any] = {"__name__": "guide"}
    try:
        for number, block in enumerate(blocks, 1):
            exec(compile(block, f"docs/guide.md python block {number}", "exec"), session)
        q_in = session["q_in"]
        assert (round(q_in.scale, 4), q_in.zero_point, q_in.dtype) == (0.0306, 7, "int8")  # as the guide says
        nvfp4, q, x = session["nvfp4"], session["q"], session["x"]
        v = (x @ nvfp4.dequantize(q).T).astype(np.float64)
        want = (v / (1.0 + np.exp(-v))).astype(np.float32)
        np.testing.assert_allclose(session["y"], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    finally:
        if "dev" in session:
            session["dev"].close()
