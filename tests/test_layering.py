"""Imports point downward only: core -> probe/tosa -> nvfp4 -> runtime -> backends -> conformance/virtio -> cli.

Checked statically over every module (lazy imports inside functions included), so a layering breach
fails here before it can become a cycle or drag a GPU library into the core.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ironaccel"
# nvfp4 (an artifact format beside TOSA) sits just above tosa, whose error types it uses, and below the runtime.
RANK = {
    "core": 0,
    "probe": 1,
    "tosa": 1,
    "nvfp4": 1.5,
    "runtime": 2,
    "backends": 3,
    "conformance": 4,
    "virtio": 4,
    "cli": 5,
}
HEAVY = {"vulkan", "wgpu", "moderngl", "cupy", "torch", "jax", "openvino", "cuda", "numba", "tosa_reference_model"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.rsplit(".", 1)[0] + "." + "__init__"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: -node.level]
                found.append(".".join(base + ([node.module] if node.module else [])))
            else:
                found.append(node.module or "")
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "ironaccel" and parts[1] in RANK else None


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.parent != SRC)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_downward(path: Path):
    own = path.relative_to(SRC).parts[0]
    for target in _imports(path):
        layer = _layer(target)
        if layer is None or layer == own:
            continue
        assert RANK[layer] < RANK[own], f"{path.relative_to(SRC)} ({own}) imports {target} ({layer})"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_backends_never_import_each_other(path: Path):
    parts = path.relative_to(SRC).parts
    if parts[0] != "backends" or len(parts) < 3:
        return
    for target in _imports(path):
        tparts = target.split(".")
        if tparts[:2] == ["ironaccel", "backends"] and len(tparts) > 2:
            assert tparts[2] == parts[1], f"{'/'.join(parts)} imports another backend: {target}"


def test_core_and_tosa_import_no_accelerator_library():
    for path in [*(SRC / "core").rglob("*.py"), *(SRC / "tosa").rglob("*.py"), *(SRC / "nvfp4").rglob("*.py")]:
        for target in _imports(path):
            assert target.split(".")[0] not in HEAVY, f"{path.relative_to(SRC)} imports {target}"


def test_core_is_standard_library_only():
    for path in (SRC / "core").rglob("*.py"):
        for target in _imports(path):
            top = target.split(".")[0]
            assert top in sys.stdlib_module_names or top in ("ironaccel", "__future__"), (path, target)


def test_import_ironaccel_loads_no_numpy_and_no_backend():
    code = (
        "import sys, time; t = time.perf_counter(); import ironaccel; dt = time.perf_counter() - t; "
        "bad = sorted(m for m in ('numpy', 'vulkan', 'wgpu', 'moderngl', 'rich', 'flatbuffers') if m in sys.modules); "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
