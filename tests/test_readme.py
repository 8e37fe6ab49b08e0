"""README.md's Python snippets run, in order, as one session against the CPU backend, and compute what
they say; its Install section names every extra the package declares.

The snippets compile ``"model.tosa"``, a name that stands for the reader's own program: here it is the
bundled CNN (src/ironaccel/models/cnn_fp32.tosa), copied into the directory the session runs in.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ironaccel.core.errors import IronAccelError

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MODEL = ROOT / "src" / "ironaccel" / "models" / "cnn_fp32.tosa"


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def section(text: str, title: str) -> str:
    """The body of the ``## title`` section: up to the next second-level heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def test_python_blocks_are_found() -> None:
    blocks = python_blocks("a\n```python\nx = 1\n```\n```sh\nls\n```\n```python\ny = 2\n```\n")
    assert blocks == ["x = 1\n", "y = 2\n"]


def test_the_readme_snippets_run_as_one_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(README.read_text())
    launching = [i for i, block in enumerate(blocks) if "acc.launch(" in block]
    projecting = [i for i, block in enumerate(blocks) if "nvfp4.Projection(" in block]
    assert len(blocks) >= 3 and launching and projecting, "the README's Python snippets were not found"
    shutil.copy(MODEL, tmp_path / "model.tosa")
    monkeypatch.chdir(tmp_path)
    session: dict[str, Any] = {"__name__": "readme"}
    try:
        for number, block in enumerate(blocks):
            if number == launching[0]:
                # The launch snippet reads its output into y: poison y first, so only that read can restore it.
                called = session["y"].copy()
                session["y"][...] = np.nan
            # A failure's traceback names the block: "README.md python block N".
            exec(compile(block, f"README.md python block {number + 1}", "exec"), session)
            if number == launching[0]:
                np.testing.assert_array_equal(session["y"], called)  # the launch computed what exe(x) did
                acc = session["acc"]
                assert acc.live_resources()["prepared"] == 0, "the prepared submission was not released"
                for buffer in session["buffers"]:
                    with pytest.raises(IronAccelError):  # already freed by the snippet
                        acc.free_buffer(buffer)
            if number == projecting[0]:
                nvfp4, x, q = session["nvfp4"], session["x"], session["q"]
                v = (x @ nvfp4.dequantize(q).T).astype(np.float64)
                want = (v / (1.0 + np.exp(-v))).astype(np.float32)
                np.testing.assert_allclose(session["y"], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    finally:
        if "dev" in session:
            session["dev"].close()
    assert session["dev"].accelerator.live_resources()["context"] == 0


def test_install_names_every_extra_before_the_command_line() -> None:
    text = README.read_text()
    assert text.index("## Install") < text.index("## The command line")
    install = section(text, "Install")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in sorted(set(extras) - {"test"}):
        assert f'"ironaccel[{extra}]"' in install, f"the Install section does not show pip install of [{extra}]"
    assert "pip install ironaccel" in install and "ironaccel devices" in install
    for package in ("gcc", "libvulkan1", "mesa-vulkan-drivers"):
        assert f"`{package}`" in install, f"the Install section does not name the Debian package {package}"
    assert "docs/guide.md" in install


# What the Install section promises of a wheel, checked without building one (scripts/wheel-check builds it).


def test_the_makefile_installs_only_declared_extras() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    line = re.search(r"^EXTRAS \?= (.*)$", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    assert line, "the Makefile sets no EXTRAS"
    named = set(line.group(1).strip().split(","))
    assert named <= extras, f"the Makefile's EXTRAS names {sorted(named - extras)}, which pyproject.toml lacks"
    assert {"test", "vulkan"} <= named


def test_package_data_covers_every_file_of_the_package_that_is_not_a_module() -> None:
    """Every file under src/ironaccel but the modules is read at run time or shipped on purpose (models,
    shaders, the TOSA tables, the CPU backend's C sources, py.typed): a wheel must carry each one."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["*"]
    package = ROOT / "src" / "ironaccel"
    files = [p for p in package.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")]
    assert any(p.name == "pool.c" for p in files) and (package / "py.typed").is_file()
    uncovered = [str(p.relative_to(package)) for p in files if not any(fnmatch.fnmatch(p.name, m) for m in patterns)]
    assert not uncovered, f"pyproject.toml's package-data misses {uncovered}"
