"""Arm's TOSA conformance test suite (CTS): finding tosa-tools, generating the suite once, listing tests.

tosa-tools pins its own numpy and flatbuffers, so it lives in a virtual environment of its own and is
only ever run as a subprocess; IronAccel never imports it. Where it is looked for, first match wins:

1. an explicit ``venv`` argument (``--tosa-tools`` on the command line),
2. ``$IRONACCEL_TOSA_TOOLS_VENV``,
3. ``.venv-tosa`` in the current directory or the source checkout (what ``make tosa-tools`` creates).

Generated suites are cached under ``cache`` (default ``$XDG_CACHE_HOME/ironaccel/cts``), one directory per
(profile, operators, extensions, TOSA version, tosa-tools version), so the minutes of generation are paid once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

TOSA_VERSION = "1.0.2"
ENV_VAR = "IRONACCEL_TOSA_TOOLS_VENV"
PROFILES = ("tosa-pro-int", "tosa-pro-fp")
# The 1.0 extensions, by the profile whose tests they add to (the generator filters by profile first).
EXTENSIONS = {
    "tosa-pro-int": (
        "tosa-ext-int16",
        "tosa-ext-int4",
        "tosa-ext-doubleround",
        "tosa-ext-inexactround",
        "tosa-ext-variable",
        "tosa-ext-controlflow",
        "tosa-ext-dynamic",
    ),
    "tosa-pro-fp": (
        "tosa-ext-bf16",
        "tosa-ext-fp8e4m3",
        "tosa-ext-fp8e5m2",
        "tosa-ext-fft",
        "tosa-ext-variable",
        "tosa-ext-controlflow",
        "tosa-ext-dynamic",
    ),
}
_SOURCE_ROOT = Path(__file__).resolve().parents[3]  # the checkout, when running from one


class ToolsNotFound(RuntimeError):
    """tosa-tools is not installed where IronAccel looks; the message says how to get it."""


def _is_tools_venv(path: Path) -> bool:
    return (path / "bin" / "python").exists() and (path / "bin" / "tosa_verif_conformance_generator").exists()


def find_tools(venv: str | os.PathLike[str] | None = None) -> Path:
    """The tosa-tools virtual environment, or :class:`ToolsNotFound` naming every place looked at."""
    candidates = [Path(venv)] if venv else []
    if not venv and os.environ.get(ENV_VAR):
        candidates.append(Path(os.environ[ENV_VAR]))
    if not venv:
        candidates += [Path.cwd() / ".venv-tosa", _SOURCE_ROOT / ".venv-tosa"]
    for path in candidates:
        if _is_tools_venv(path):
            return path.resolve()
    looked = ", ".join(str(p) for p in candidates)
    raise ToolsNotFound(
        f"tosa-tools not found (looked at {looked}). Create it with `make tosa-tools` in a checkout, or "
        f"`python -m venv V && V/bin/pip install tosa-tools==2026.8.0`, then pass --tosa-tools V or set {ENV_VAR}."
    )


def site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise ToolsNotFound(f"no site-packages under {venv}")
    return found[-1]


def tools_version(venv: Path) -> str:
    dists = sorted(site_packages(venv).glob("tosa_tools-*.dist-info"))
    return dists[-1].name.removeprefix("tosa_tools-").removesuffix(".dist-info") if dists else "unknown"


def tools_env(venv: Path) -> dict[str, str]:
    """The environment to run a tosa-tools program in: its bin first, none of our Python path."""
    env = dict(os.environ)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return env


def tosa_opt_to_mlir(tosa: Path, mlir: Path, venv: Path | None = None) -> subprocess.CompletedProcess[str]:
    """tosa-opt turns the .tosa flatbuffer ``tosa`` into TOSA MLIR in generic form at ``mlir`` (the form other
    MLIR tools, IREE's compiler among them, read whatever their own TOSA syntax)."""
    venv = find_tools(venv)
    command = [
        str(site_packages(venv) / "bin" / "tosa-opt"),
        "--tosa-deserialize",
        f"--tosa-deserialize-filename={tosa}",
        "--mlir-print-op-generic",
        *("-o", str(mlir)),
    ]
    return subprocess.run(command, env=tools_env(venv), capture_output=True, text=True, timeout=300)


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ironaccel" / "cts"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclasses.dataclass(frozen=True)
class Suite:
    """One generated selection of the CTS: ``root/operators/<group>/<op>/<test>/desc.json``."""

    root: Path
    profile: str
    operators: tuple[str, ...]  # empty: every operator
    extensions: tuple[str, ...]

    def tests(self) -> list[Path]:
        return sorted(p.parent for p in self.root.glob("operators/*/*/*/desc.json"))


def _key(spec: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def generate(
    profile: str,
    operators: Sequence[str] = (),
    extensions: Sequence[str] | None = None,
    *,
    cache: Path | None = None,
    venv: Path | None = None,
    jobs: int | None = None,
    log: Path | None = None,
    reuse_whole: bool = False,
) -> Suite:
    """The suite for ``profile`` (``tosa-pro-int`` / ``tosa-pro-fp``), generated once and cached.

    ``operators`` empty means all; ``extensions`` None means every 1.0 extension of that profile.
    Generation of a whole profile takes tens of minutes on two cores; a lock file makes concurrent
    callers wait for one generation instead of racing. With ``reuse_whole``, a cached whole suite of the
    profile (every operator, same extensions) is returned instead of generating a subset; the caller
    then selects its operators from ``Suite.tests()``.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: expected one of {', '.join(PROFILES)}")
    venv = find_tools(venv)
    ops = tuple(sorted({o.lower() for o in operators}))
    exts = tuple(sorted(EXTENSIONS[profile] if extensions is None else extensions))
    spec = {
        "profile": profile,
        "operators": ops,
        "extensions": exts,
        "tosa": TOSA_VERSION,
        "tools": tools_version(venv),
    }
    cache = Path(cache or default_cache()).resolve()
    root = cache / f"{profile}-{'-'.join(ops)[:48] or 'all'}-{_key(spec)}"
    suite = Suite(root, profile, ops, exts)
    whole = cache / f"{profile}-all-{_key({**spec, 'operators': ()})}"
    if (
        reuse_whole and ops and (whole / ".complete").exists()
    ):  # the whole suite is here already: callers select from it
        return Suite(whole, profile, (), exts)
    with _locked(cache / f".{root.name}.lock"):
        if (root / ".complete").exists():
            return suite
        shutil.rmtree(root, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=cache))
        try:
            command = [
                str(venv / "bin" / "tosa_verif_conformance_generator"),
                *("--profile", profile, "--tosa-version", TOSA_VERSION, "--output-type", "binary"),
                *("--output-directory", str(work / "out"), "--build-directory", str(work / "build")),
                *("-j", str(jobs or os.cpu_count() or 1)),
                *(("--operators", *ops) if ops else ()),
                *("--extension", *(exts or ("none",))),
            ]
            with open(log or os.devnull, "w") as sink:
                done = subprocess.run(
                    command,
                    cwd=work,
                    env=tools_env(venv),
                    stdout=sink,
                    stderr=subprocess.PIPE,
                    text=True,
                    timeout=4 * 3600,
                )
            if done.returncode != 0 or not (work / "out").is_dir():
                raise RuntimeError(
                    f"CTS generation failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-4000:]}"
                )
            (work / "out").rename(root)
            (root / ".complete").write_text(json.dumps(spec))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return suite
