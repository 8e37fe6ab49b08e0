"""The user's documentation keeps up with the code: docs/operators.md is what scripts/operators-doc writes
from the capability descriptors, docs/guide.md names every environment variable the package reads and
every command, and the guide's Python snippets run as one session against the CPU backend.

The benchmarks keep one current table per backend and no logs, every benchmarks/ path the tree names
exists, and the package's comments quote no GPU model's timings: figures live in benchmarks/README.md
and the ADRs, next to what they decided."""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
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


# ---- benchmarks and figures ------------------------------------------------------------------------------
BENCHMARKS = ROOT / "benchmarks"
# The one current table of each backend, which its script rewrites on every whole run.
RESULT_TABLES = {
    "cpu": "benchmarks/results/cpu.md",
    "vulkan": "benchmarks/vulkan/results.md",
    "cuda": "benchmarks/cuda/results.md",
    "virtio": "benchmarks/virtio/results.md",
    "models": "benchmarks/models/results.md",
    "cluster": "benchmarks/cluster/results.md",
}
# Files that may name GPU models (never a timing).
QUOTES_ALLOWED = {
    # The device tier rule names data-centre GPU models; no timing.
    "src/ironaccel/probe/vulkan.py",
}
QUOTE = re.compile(r"\bH[12]00\b|\bNOTES\b")
C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
BENCHMARK_PATH = re.compile(r"\bbenchmarks/[A-Za-z0-9_./<>*-]*")


def python_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python source."""
    found = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    found.append((first.lineno, first.value.value))
    return found


def c_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every // and /* */ comment of a GLSL or C source."""
    return [(source.count("\n", 0, m.start()) + 1, m.group()) for m in C_COMMENT.finditer(source)]


def comments_quoting(path: Path) -> list[str]:
    source = path.read_text()
    comments = python_comments(source) if path.suffix == ".py" else c_comments(source)
    found = ((line, QUOTE.search(text)) for line, text in comments)
    return [f"{path.relative_to(ROOT)}:{line}: {quote.group()}" for line, quote in found if quote]


def test_the_comment_scan_finds_quotes_in_comments_only() -> None:
    source = '"""Measured on the H200."""\nGPUS = ("H100",)  # names\n# NOTES v3\nx = "NOTES"\n'
    assert [t for _, t in python_comments(source) if QUOTE.search(t)] == ["# NOTES v3", "Measured on the H200."]
    glsl = "uint h = 100u; // H100 took 4 ms\n/* see\n NOTES */ float x = 1.0;\n"
    assert [line for line, t in c_comments(glsl) if QUOTE.search(t)] == [1, 2]


def test_source_comments_quote_no_gpu_timings() -> None:
    """Comments say why the code is shaped so; what a GPU measured belongs in benchmarks/README.md or an ADR
    (the diary those comments cited is gone)."""
    sources = [
        path
        for pattern in ("*.py", "*.comp", "*.glsl", "*.c", "*.h")
        for path in sorted((ROOT / "src" / "ironaccel").rglob(pattern))
        if str(path.relative_to(ROOT)) not in QUOTES_ALLOWED
    ]
    assert len(sources) > 100, "the source scan found too little"
    quotes = [quote for path in sources for quote in comments_quoting(path)]
    assert not quotes, "comments quote GPU figures or the old notes: " + "; ".join(quotes)


def test_benchmarks_hold_no_logs() -> None:
    logs = sorted(str(p.relative_to(ROOT)) for p in BENCHMARKS.rglob("*.log"))
    assert not logs, f"benchmarks/ holds logs (a run's output goes to $OUT, not the tree): {logs}"


def test_each_backend_keeps_one_results_table() -> None:
    tables = {str(p.relative_to(ROOT)) for p in BENCHMARKS.rglob("*.md") if p.name != "README.md"}
    assert tables == set(RESULT_TABLES.values()), (
        f"benchmarks/ should hold exactly {sorted(RESULT_TABLES.values())} besides its README; found {sorted(tables)}"
    )
    assert sorted(p.name for p in BENCHMARKS.rglob("README.md")) == ["README.md"], "one README, benchmarks/README.md"
    readme = (BENCHMARKS / "README.md").read_text()
    for backend, table in RESULT_TABLES.items():
        text = (ROOT / table).read_text()
        assert re.search(r"^\|.*\|$", text, flags=re.MULTILINE), f"{table} ({backend}) has no table"
        assert table.removeprefix("benchmarks/") in readme, f"benchmarks/README.md does not point at {table}"


def test_named_benchmark_paths_exist() -> None:
    """Docs, scripts, sources and tests name only benchmark files that are there."""
    texts = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").rglob("*.md"))]
    texts += [p for p in sorted((ROOT / "scripts").iterdir()) if p.is_file()]
    texts += [p for p in sorted(BENCHMARKS.rglob("*")) if p.suffix in (".py", ".md")]
    texts += [p for ext in ("py", "comp", "glsl") for p in sorted((ROOT / "src" / "ironaccel").rglob(f"*.{ext}"))]
    texts += sorted((ROOT / "tests").glob("*.py"))
    missing = []
    for path in texts:
        for match in BENCHMARK_PATH.finditer(path.read_text()):
            named = match.group().rstrip(".,:;)*")
            if not (ROOT / named).exists():
                missing.append(f"{path.relative_to(ROOT)} names {named}")
    assert not missing, "; ".join(missing)


def test_docs_cite_no_benchmark_diary() -> None:
    """The per-version notes of the GPU work were folded into the ADRs and benchmarks/README.md."""
    cited = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), BENCHMARKS / "README.md"]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bNOTES\b", line)
    ]
    assert not cited, f"these lines cite the old benchmark notes: {cited}"
