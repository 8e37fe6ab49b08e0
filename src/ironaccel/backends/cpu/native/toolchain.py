"""The C compiler behind the native path: finding it, building a generated source once, keeping the result.

The compiler is the one Python was built with (``sysconfig``'s CC) when it is on PATH, else ``cc``, ``gcc``
or ``clang``. It is probed once per process: it must build a shared object with the flags below, and its
predefined macros say which vector instructions ``-march=native`` allows (the generated kernels are shaped
for that width). No compiler, a compiler that fails the probe, or ``IRONACCEL_CPU_NATIVE=0``: the native
path is unavailable, with the reason kept for :func:`unavailable_reason`.

Built objects are cached per user (``$XDG_CACHE_HOME/ironaccel/cpu-native``, or
``IRONACCEL_CPU_NATIVE_CACHE``) under the SHA-256 of compiler identity, flags and source, so a program is
compiled once per machine. The directory must belong to the user and be writable by nobody else, since
whatever lies there is loaded into the process; otherwise a private temporary directory serves this
process. Files are written under a temporary name and renamed into place, so concurrent builders (threads
or processes) never load a half-written object. The cache is pruned (least recently used first) when it
holds more than a few thousand objects, and temporaries left by builds that died are removed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

from ....core.settings import Settings

# -ffp-contract=off: a * b + c is rounded twice, as numpy rounds it (kernels that want fused multiply-adds
# ask for them explicitly). -fno-math-errno / -fno-trapping-math change no result, they let sqrt and
# selects vectorise. Never -ffast-math: IEEE semantics (NaN, signed zero, rounding) are the contract.
BASE_FLAGS = (
    "-O3",
    "-std=gnu11",
    "-fPIC",
    "-shared",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fvisibility=hidden",
    "-w",
)
TUNING_FLAGS = ("-march=native",)  # the cache is per machine, so code may use all of this CPU
BUILD_TIMEOUT_S = 300.0
CACHE_MAX_OBJECTS = 4000  # pruned to three quarters of this, least recently used first

_PROBE_SOURCE = "int ia_probe(int x) { return x + 1; }\n"


def current_settings() -> Settings:
    """The process's settings, looked up on every use (tests replace them)."""
    return importlib.import_module("ironaccel.core.settings").settings


class BuildError(RuntimeError):
    """The compiler failed (or timed out) on a generated source; the message carries its diagnostics."""


@dataclasses.dataclass(frozen=True)
class Toolchain:
    command: tuple[str, ...]  # the compiler and the arguments CC carries with it
    identity: str  # resolved path and version line: part of every cache key
    flags: tuple[str, ...]
    isa: str  # "avx512", "avx2" or "generic": the vector width kernels are generated for
    dot_int8: bool = False  # AVX-512 VNNI: int8 products run as vpdpbusd (gemm.py's dot4 kernels)

    @property
    def vector_floats(self) -> int:
        return {"avx512": 16, "avx2": 8}.get(self.isa, 4)

    @property
    def vector_registers(self) -> int:
        return 32 if self.isa == "avx512" else 16


_lock = threading.Lock()
_found: Toolchain | None = None
_reason: str | None = None  # why there is no toolchain, once probed
_cache: Path | None = None


def _candidates() -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    cc = sysconfig.get_config_var("CC")
    if cc:
        words = tuple(shlex.split(str(cc)))
        if words and shutil.which(words[0]):
            found.append(words)
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name) and (name,) not in found:
            found.append((name,))
    return found


def _run(command: list[str], *, input_text: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(command, input=input_text, capture_output=True, text=True, timeout=timeout, check=False)


def _probe(command: tuple[str, ...]) -> Toolchain | str:
    """A working toolchain from ``command``, or why not."""
    try:
        version = _run([*command, "--version"], timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{command[0]}: {exc}"
    identity = f"{shutil.which(command[0])} {version[0] if version else '?'}"
    with tempfile.TemporaryDirectory(prefix="ironaccel-probe-") as tmp:
        source = Path(tmp) / "probe.c"
        source.write_text(_PROBE_SOURCE)
        failure = ""
        for tuning in (TUNING_FLAGS, ()):
            flags = (*BASE_FLAGS, *tuning)
            try:
                done = _run([*command, *flags, str(source), "-o", str(Path(tmp) / "probe.so")])
            except (OSError, subprocess.SubprocessError) as exc:
                return f"{command[0]}: {exc}"
            if done.returncode == 0:
                macros = _run([*command, *tuning, "-dM", "-E", "-x", "c", "-"], input_text="").stdout
                isa = _isa(macros)
                return Toolchain(command, identity, flags, isa, isa == "avx512" and "#define __AVX512VNNI__" in macros)
            failure = done.stderr.strip()[-400:]
    return f"{command[0]} cannot build a shared object: {failure}"


def _isa(macros: str) -> str:
    defined = {line.split()[1] for line in macros.splitlines() if line.startswith("#define ")}
    if "__AVX512F__" in defined:
        return "avx512"
    if {"__AVX2__", "__FMA__"} <= defined:
        return "avx2"
    return "generic"


def compiler() -> Toolchain | None:
    """The compiler to build native programs with, probed once per process; None when there is none."""
    global _found, _reason
    if current_settings().cpu_native == "off":
        return None
    with _lock:
        if _found is None and _reason is None:
            reasons = []
            for command in _candidates():
                result = _probe(command)
                if isinstance(result, Toolchain):
                    _found = result
                    break
                reasons.append(result)
            else:
                _reason = "; ".join(reasons) or "no C compiler on PATH (looked for CC, cc, gcc, clang)"
        return _found


def unavailable_reason() -> str | None:
    """Why :func:`compiler` returns None (None while a toolchain is available)."""
    if current_settings().cpu_native == "off":
        return "switched off (IRONACCEL_CPU_NATIVE=0)"
    return None if compiler() is not None else _reason


def _private_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = path.stat()
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


def cache_dir() -> Path:
    """Where built objects are kept: the user's cache if it is private to the user, else a temporary one."""
    global _cache
    with _lock:
        if _cache is None:
            configured = current_settings().cpu_native_cache
            base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            path = Path(configured) if configured else Path(base) / "ironaccel" / "cpu-native"
            _cache = path if _private_dir(path) else Path(tempfile.mkdtemp(prefix="ironaccel-native-"))
        return _cache


def build(source: str, tools: Toolchain, libraries: tuple[str, ...] = ("-lm",)) -> Path:
    """The shared object built from ``source`` (linked with ``libraries``): from the cache, or compiled
    now. Raises BuildError."""
    parts = (tools.identity, *tools.command, *tools.flags, *libraries, source)
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    folder = cache_dir()
    target = folder / f"{key[:40]}.so"
    if target.exists():
        try:
            os.utime(target)  # recently used: kept when the cache is pruned
        except OSError:
            pass
        return target
    fd, c_path = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".c", dir=folder)
    so_path = c_path[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(source)
        try:
            done = _run([*tools.command, *tools.flags, c_path, "-o", so_path, *libraries], timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"the C compiler ran past {BUILD_TIMEOUT_S:.0f} s") from exc
        except OSError as exc:
            raise BuildError(f"the C compiler could not run: {exc}") from exc
        if done.returncode != 0:
            raise BuildError(f"the C compiler failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        os.replace(so_path, target)
    finally:
        for leftover in (c_path, so_path):
            try:
                os.unlink(leftover)
            except OSError:
                pass
    _prune(folder)
    return target


def _prune(folder: Path) -> None:
    """Keep the cache to CACHE_MAX_OBJECTS objects (least recently used go first), and remove the
    temporaries of builds that died (killed with their compiler) once they are far older than a build
    may take. Runs after every build, so the common case only lists names."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    objects = [e for e in entries if e.name.endswith(".so") and not e.name.startswith(".")]
    stale_before = time.time() - 4 * BUILD_TIMEOUT_S
    for entry in entries:
        if entry.name.startswith("."):  # a build's temporary (see build)
            try:
                if entry.stat().st_mtime < stale_before:
                    os.unlink(entry.path)
            except OSError:
                pass
    if len(objects) <= CACHE_MAX_OBJECTS:
        return
    dated = []
    for entry in objects:
        try:
            dated.append((entry.stat().st_mtime, entry.path))
        except OSError:
            pass
    dated.sort()
    for _, path in dated[: len(dated) - CACHE_MAX_OBJECTS * 3 // 4]:
        try:
            os.unlink(path)  # a process that loaded it keeps its mapping (and the library table its handle)
        except OSError:
            pass
