"""Compile the C fakes and layout programs of the qnn/neuron/tpu/metal/dx12 probe tests (gcc, else skip)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

FAKES = Path(__file__).resolve().parent


def _gcc() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed")
    return gcc


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")


def build_shared(source: str | Path, out_dir: Path, name: str, defines: Sequence[str] = ()) -> Path:
    """``source`` (a path, or C text) compiled with ``gcc -shared -fPIC`` into ``out_dir/name``."""
    src = Path(source) if isinstance(source, Path) else None
    if src is None:
        src = out_dir / f"{name}.c"
        src.write_text(str(source))
    out = out_dir / name
    _run([_gcc(), "-shared", "-fPIC", "-O1", "-Wall", "-o", str(out), str(src), *(f"-D{d}" for d in defines)])
    return out


def run_c(text: str, out_dir: Path, name: str) -> dict[str, int]:
    """Compile and run a C program printing ``key value`` lines; the values as a dict."""
    src = out_dir / f"{name}.c"
    src.write_text(text)
    exe = out_dir / name
    _run([_gcc(), "-O0", "-o", str(exe), str(src)])
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout
    return {key: int(value) for key, value in (line.split() for line in out.splitlines() if line.strip())}
