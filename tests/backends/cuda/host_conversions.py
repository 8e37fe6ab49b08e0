"""The prelude's conversions built for the host with its C compiler, behind array entry points of the
tests' own (``void NAME(const SRC* in, DST* out, long n)``), so that their bits can be compared with numpy
and ml_dtypes without a GPU."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ironaccel.backends.cuda import prelude


def wrappers(entries: tuple[tuple[str, str, str, str], ...]) -> str:
    """One array entry point per (name, source type, result type, C expression over ``in[i]``)."""
    return "".join(
        f"void {name}(const {src}* in, {dst}* out, long n) {{ for (long i = 0; i < n; ++i) out[i] = {expr}; }}\n"
        for name, src, dst, expr in entries
    )


def build(folder: Path, entries: str) -> ctypes.CDLL:
    """The conversions and ``entries`` compiled into a shared library in ``folder``; a skip without a C
    compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler to build the conversions on the host")
    source = Path(folder, "conversions.c")
    source.write_text(prelude.HOST_HEADER + prelude.CONVERSIONS + entries)
    library = Path(folder, "conversions.so")
    subprocess.run([compiler, "-O2", "-std=c99", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return ctypes.CDLL(str(library))


def run(lib: ctypes.CDLL, name: str, values: np.ndarray, out_dtype: type) -> np.ndarray:
    """The entry point ``name`` over ``values``, into a new array of ``out_dtype``."""
    values = np.ascontiguousarray(values)
    out = np.empty(values.shape, out_dtype)
    getattr(lib, name)(
        ctypes.c_void_p(values.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_long(values.size)
    )
    return out
