"""Compile the fake vendor drivers (cuda/hip/ze) and the layout programs of their probe tests with gcc.

``shared_object("cuda_fake.c")`` is a session fixture giving the path of the built .so; ``c_values``
compiles one program that includes a fake's header declarations (``-DFAKE_DECLARATIONS_ONLY``) and prints
``sizeof``/``offsetof``/enum values, so a test compares the ctypes model with what the C compiler lays out.
Without gcc the tests that need it are skipped, saying why.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

FAKES = Path(__file__).resolve().parent


def gcc() -> str:
    path = shutil.which("gcc")
    if path is None:
        pytest.skip("gcc is not installed: the fake-driver and layout tests compile C with gcc")
    return path


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{proc.stderr}")


def build_shared(source: str, out_dir: Path, defines: Sequence[str] = ()) -> Path:
    """``fakes/<source>`` compiled with ``gcc -shared -fPIC`` (and ``-D`` each define) into ``out_dir``."""
    stem = "_".join([Path(source).stem, *defines]).lower()
    out = out_dir / f"lib{stem}.so"
    flags = [f"-D{d}" for d in defines]
    _run([gcc(), "-shared", "-fPIC", "-O0", "-Wall", "-Werror", *flags, "-o", str(out), str(FAKES / source)])
    return out


def compile_shared(source: str | Path, out_dir: Path, name: str, defines: Sequence[str] = ()) -> Path:
    """``source`` (a path, or C text) compiled with ``gcc -shared -fPIC`` into ``out_dir/name``."""
    src = source if isinstance(source, Path) else out_dir / f"{name}.c"
    if not isinstance(source, Path):
        src.write_text(source)
    out = out_dir / name
    _run([gcc(), "-shared", "-fPIC", "-O1", "-Wall", "-o", str(out), str(src), *(f"-D{d}" for d in defines)])
    return out


def run_c(text: str, out_dir: Path, name: str) -> dict[str, int]:
    """Compile and run a C program printing ``key value`` lines; the values as a dict."""
    src = out_dir / f"{name}.c"
    src.write_text(text)
    exe = out_dir / name
    _run([gcc(), "-O0", "-o", str(exe), str(src)])
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout
    return {key: int(value) for key, value in (line.split() for line in out.splitlines() if line.strip())}


def shared_object(source: str, defines: Sequence[str] = ()) -> Any:
    """A session-scoped fixture building ``tests/support/fakes/<source>`` once per test session."""

    @pytest.fixture(scope="session")
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return build_shared(source, tmp_path_factory.mktemp(Path(source).stem), defines)

    return fixture


def c_values(source: str, out_dir: Path, expressions: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Each ``(key, C expression)`` evaluated by a program that includes ``source``'s declarations."""
    lines = "\n".join(f'    printf("%s %lld\\n", "{key}", (long long)({expr}));' for key, expr in expressions)
    text = (
        "#define FAKE_DECLARATIONS_ONLY\n"
        f'#include "{FAKES / source}"\n'
        "#include <stddef.h>\n#include <stdio.h>\n"
        f"int main(void) {{\n{lines}\n    return 0;\n}}\n"
    )
    stem = Path(source).stem + "_values"
    src, exe = out_dir / f"{stem}.c", out_dir / stem
    src.write_text(text)
    _run([gcc(), "-O0", "-Wall", "-Werror", "-o", str(exe), str(src)])
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30, check=True).stdout
    return {key: int(value) for key, value in (line.split() for line in out.splitlines() if line.strip())}


def layout_expressions(c_type: str, fields: Iterable[str]) -> list[tuple[str, str]]:
    """``c_values`` expressions for ``sizeof``/``alignof`` of ``c_type`` and ``offsetof`` each field, keyed
    ``"<c_type>.sizeof"``, ``"<c_type>.alignof"`` and ``"<c_type>.<field>"``."""
    exprs = [(f"{c_type}.sizeof", f"sizeof({c_type})"), (f"{c_type}.alignof", f"_Alignof({c_type})")]
    return exprs + [(f"{c_type}.{name}", f"offsetof({c_type}, {name})") for name in fields]


def ctypes_layout(model: type, c_type: str) -> dict[str, int]:
    """The same keys as :func:`layout_expressions`, answered by a ctypes Structure modelling ``c_type``."""
    names = [name for name, *_ in model._fields_]
    got = {f"{c_type}.sizeof": ctypes.sizeof(model), f"{c_type}.alignof": ctypes.alignment(model)}
    return got | {f"{c_type}.{name}": getattr(model, name).offset for name in names}
