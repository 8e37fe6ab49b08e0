"""Imports point downward only: core -> probe/tosa -> nvfp4 -> runtime -> backends -> conformance/virtio -> cli ->
cluster.

Checked statically over every module (lazy imports inside functions included), so a layering breach
fails here before it can become a cycle or drag a GPU library into the core. Imports by string count as
imports: ``importlib.import_module("ironaccel...")`` with a literal, and every ``"ironaccel.x.y:attr"``
string (a backend registration's factory, ADR 0030). The package root may import only core when it is
imported (the runtime from inside its functions), and each entry point of ``ironaccel.backends`` in
pyproject.toml names a registration in a backend's layer that imports nothing above the runtime.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ironaccel"
# nvfp4 (an artifact format beside TOSA) sits just above tosa, whose error types it uses, and below the runtime.
RANK = {
    "core": 0,
    "probe": 1,
    "tosa": 1,
    "nvfp4": 1.5,
    # PyTorch's front door makes TOSA programs from modules, as tosa's builder does, for the runtime to compile
    # (ADR 0035): Device.compile reaches it from inside the function, a downward edge.
    "torch": 1.75,
    # ONNX's front door (ADR 0046) makes programs too, and names their inputs and outputs with the PyTorch
    # door's renaming (ironaccel.torch.program, which imports no torch).
    "onnx": 1.8,
    "runtime": 2,
    "backends": 3,
    "conformance": 4,
    "virtio": 4,
    "cli": 5,
    # A Ray cluster's pool (ironaccel.cluster) sits on top of everything: its nodes advertise what the command
    # line's device table says runs programs.
    "cluster": 6,
}
HEAVY = {"vulkan", "wgpu", "moderngl", "cupy", "torch", "jax", "openvino", "cuda", "numba", "tosa_reference_model"}


# "package.module:attribute" naming something of ironaccel: an entry point's or a registration's target.
STRING_TARGET = re.compile(r"ironaccel(\.[A-Za-z_]\w*)+:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _package(path: Path) -> str:
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
    return package.rsplit(".", 1)[0] + ".__init__" if path.name == "__init__.py" else package


def _statement_target(node: ast.AST, package: str) -> list[str]:
    """The modules an import statement names (relative ones made absolute against ``package``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: -node.level]
            return [".".join(base + ([node.module] if node.module else []))]
        return [node.module or ""]
    return []


def _string_target(node: ast.AST) -> list[str]:
    """The module a string names as an import: ``import_module("ironaccel...")`` (or ``__import__``) with a
    literal, or a ``"ironaccel.x.y:attr"`` constant anywhere."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        first = node.args[0] if node.args else None
        if name in ("import_module", "__import__") and isinstance(first, ast.Constant) and isinstance(first.value, str):
            return [first.value]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and STRING_TARGET.fullmatch(node.value):
        return [node.value.partition(":")[0]]
    return []


def _imports_of(source: str, package: str, filename: str = "<source>") -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        found += _statement_target(node, package) + _string_target(node)
    return found


def _imports(path: Path) -> list[str]:
    return _imports_of(path.read_text(), _package(path), str(path))


def _eager_and_lazy(path: Path) -> tuple[list[str], list[str]]:
    """The imports of ``path`` made when it is imported, and those made later: inside a function, only for
    type checkers (``if TYPE_CHECKING:``), or by string (a registration's factory)."""
    package = _package(path)
    eager: list[str] = []
    lazy: list[str] = []

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            later = deferred or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                later = True
            (lazy if later else eager).extend(_statement_target(child, package))
            lazy.extend(_string_target(child))  # a string is imported when someone loads it, never now
            visit(child, later)

    visit(ast.parse(path.read_text(), str(path)), False)
    return eager, lazy


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "ironaccel" and parts[1] in RANK else None


def _modules() -> list[Path]:
    """Every module but the package root's ``__init__.py`` (tested on its own below)."""
    return sorted(p for p in SRC.rglob("*.py") if p != SRC / "__init__.py")


def _own_layer(path: Path) -> str:
    parts = path.relative_to(SRC).parts
    # ``python -m ironaccel`` (__main__.py) is the command line's entry: the top layer.
    return "cli" if parts == ("__main__.py",) else parts[0]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_downward(path: Path):
    own = _own_layer(path)
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


def test_string_imports_are_imports():
    """The scan sees what a string import reaches, so a registration or a lazy table cannot hide a breach."""
    source = (
        "import importlib\n"
        "def f():\n"
        "    return importlib.import_module('ironaccel.virtio.guest')\n"
        "FACTORY = 'ironaccel.backends.vulkan:open_accelerator'\n"
        "LOGGER = 'ironaccel.runtime'  # a logger's name, no attribute: not an import\n"
        "NOTE = 'see ironaccel.backends.cpu:load in the docs'  # prose, not a target\n"
    )
    found = _imports_of(source, "ironaccel.runtime.example")
    assert "ironaccel.virtio.guest" in found and "ironaccel.backends.vulkan" in found
    assert "ironaccel.runtime" not in found and "ironaccel.backends.cpu" not in found
    assert sorted(t for t in found if _layer(t)) == ["ironaccel.backends.vulkan", "ironaccel.virtio.guest"]


def test_the_package_root_imports_only_core_when_imported():
    """``import ironaccel`` must stay the standard-library core: only core at import; ``open`` and ``init``
    reach the runtime (and discovery) from inside their functions."""
    path = SRC / "__init__.py"
    eager, lazy = _eager_and_lazy(path)
    assert eager, "the scan found no import in the package root"
    for target in eager:
        layer = _layer(target)
        assert layer in (None, "core"), f"src/ironaccel/__init__.py imports {target} ({layer}) when imported"
        top = target.split(".")[0]
        assert top in sys.stdlib_module_names or top in ("ironaccel", "__future__"), target
    assert lazy, "the scan found no lazy import in the package root"
    for target in lazy:
        layer = _layer(target)
        assert layer is None or RANK[layer] <= RANK["runtime"], f"src/ironaccel/__init__.py reaches {target} ({layer})"


def _entry_points() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project.get("entry-points", {}).get("ironaccel.backends", {})


def _module_path(module: str) -> Path:
    base = SRC.parent.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def test_pyproject_declares_the_backends():
    assert {"cpu", "vulkan", "virtio", "null"} <= set(_entry_points()), _entry_points()


@pytest.mark.parametrize(("name", "target"), sorted(_entry_points().items()))
def test_each_entry_point_names_a_light_registration_in_a_backend_layer(name: str, target: str):
    """The runtime imports what an entry point names, to read it: it must be a registration inside a backend
    (``backends/<name>/`` or ``virtio/``), named like the entry point, importing nothing above the runtime
    and no third-party package when it is imported."""
    assert STRING_TARGET.fullmatch(target), f"entry point {name} = {target!r} is not 'ironaccel.module:attribute'"
    module, _, attribute = target.partition(":")
    layer = _layer(module)
    assert layer in ("backends", "virtio"), f"entry point {name} = {target} lies in {layer}, not in a backend's layer"
    path = _module_path(module)
    assert path.is_file(), f"entry point {name} = {target}: no module {path.relative_to(ROOT)}"
    tree = ast.parse(path.read_text(), str(path))
    calls = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == attribute for t in node.targets)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "BackendRegistration"
    ]
    assert len(calls) == 1, f"{path.relative_to(ROOT)} does not assign {attribute} = BackendRegistration(...) once"
    names = [k.value for k in calls[0].keywords if k.arg == "name"]
    assert names and isinstance(names[0], ast.Constant | ast.Name), f"{attribute} has no name= keyword"
    if isinstance(names[0], ast.Constant):
        assert names[0].value == name, f"entry point {name} names a registration called {names[0].value!r}"
    eager, _ = _eager_and_lazy(path)
    for imported in eager:
        target_layer = _layer(imported)
        if target_layer is not None:
            assert RANK[target_layer] <= RANK["runtime"], (
                f"{path.relative_to(ROOT)} imports {imported} ({target_layer}) when the runtime reads it"
            )
        else:
            top = imported.split(".")[0]
            assert top in sys.stdlib_module_names or top in ("ironaccel", "__future__"), (
                f"{path.relative_to(ROOT)} imports {imported} when the runtime reads it"
            )


def test_the_module_size_check_fails_on_a_long_module(tmp_path: Path):
    """``make lint`` runs scripts/check-module-size over src/: a hand-written module of 501 lines fails it."""
    script = ROOT / "scripts" / "check-module-size"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * 500)
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 501)
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 1 and "pkg/long.py: 501 lines, over 500" in done.stdout, done.stdout
    assert "short.py" not in done.stdout
