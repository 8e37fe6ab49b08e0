"""Arm's TOSA conformance test suite (CTS): finding tosa-tools, generating the suite once, listing tests.

tosa-tools pins its own numpy and flatbuffers, so it lives in a virtual environment of its own and is
only ever run as a subprocess; IronAccel never imports it. Where it is looked for, first match wins:

1. an explicit ``venv`` argument (``--tosa-tools`` on the command line),
2. ``$IRONACCEL_TOSA_TOOLS_VENV``,
3. ``.venv-tosa`` in the current directory or the source checkout (what ``make tosa-tools`` creates).

Generated suites are cached under ``cache`` (default ``$XDG_CACHE_HOME/ironaccel/cts``), one directory per
(profile, operators, extensions, TOSA version, tosa-tools version), so the minutes of generation are paid once.

A quick subset need not pay for the whole suite: :func:`generate` with ``per_kind=K`` has the generator
serialize, of the tests its official selection picks in each of its batches, only the first K by name of
every (operator, types, polarity), through :data:`CAPPED_BUILD` standing in for ``tosa_verif_build_tests``.
:func:`operators` lists the operators a profile and extensions generate tests for, so such a subset can be
generated one operator at a time (and reported as it goes).
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
from typing import Any

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


def cache_root(cache: Path | None = None) -> Path:
    """Where generated suites are kept: ``cache`` or :func:`default_cache`, made absolute."""
    return Path(cache or default_cache()).resolve()


def _capped_env(env: dict[str, str], venv: Path, work: Path, per_kind: int) -> dict[str, str]:
    """``env`` with :data:`CAPPED_BUILD` as ``tosa_verif_build_tests`` first on PATH, keeping ``per_kind``."""
    shim = work / "shim"
    shim.mkdir()
    build = shim / "tosa_verif_build_tests"
    build.write_text(f"#!{venv / 'bin' / 'python'}\n" + CAPPED_BUILD.replace("{limit}", str(int(per_kind))))
    build.chmod(0o755)
    return {**env, "PATH": f"{shim}{os.pathsep}{env['PATH']}"}


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


# Run by the tosa-tools Python in place of tosa_verif_build_tests (first on the generator's PATH): the same
# program, whose test selection keeps only the first LIMIT tests by name of each kind (LIMIT is set where
# the shim is written). The official selection runs unchanged first (same random stream), so what is kept
# is a subset of it.
CAPPED_BUILD = """\
import sys

from generator import tosa_test_select
from generator.tosa_verif_build_tests import main

LIMIT = {limit}
_official = tosa_test_select.TosaTestSelectList.select


def _kind(test):
    dtype = test.dtype
    dtype = tuple(dtype) if isinstance(dtype, (list, tuple)) else dtype
    args = test.argsDict
    return (test.opName, str(dtype), str(args.get("out_type", "")), str(args.get("output_dtype", "")), test.isError())


def _capped(self, *args, **kwargs):
    kept, seen = [], {}
    for test in sorted(_official(self, *args, **kwargs), key=str):
        kind = _kind(test)
        if seen.get(kind, 0) < LIMIT:
            seen[kind] = seen.get(kind, 0) + 1
            kept.append(test)
    return kept


tosa_test_select.TosaTestSelectList.select = _capped
sys.exit(main())
"""


def _config(venv: Path) -> dict[str, object]:
    """The generator's CTS configuration for TOSA 1.0 (operator -> generation groups), read as data."""
    path = site_packages(venv) / "conformance" / "cts-config_v1.0.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ToolsNotFound(f"cannot read the CTS configuration of tosa-tools at {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise ToolsNotFound(f"{path}: not the CTS configuration this version of IronAccel reads")
    return config


def _version(text: object) -> tuple[int, ...]:
    return tuple(int(part) for part in str(text).removeprefix("v").split("-")[0].split("."))


def _in_version(entry: dict[str, object]) -> bool:
    tosa = _version(TOSA_VERSION)
    low = entry.get("from_version")
    high = entry.get("to_version")
    return (low is None or _version(low) <= tosa) and (high is None or tosa <= _version(high))


def operators(profile: str, extensions: Sequence[str] | None = None, *, venv: Path | None = None) -> list[str]:
    """The operators (the generator's lower-case names) that ``profile`` with ``extensions`` (None: all of
    the profile's) has tests of in TOSA 1.0.2, by the generator's own configuration and rules: a generation
    group counts when it supports one of the chosen profile / extensions and every one it requires is chosen."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: expected one of {', '.join(PROFILES)}")
    chosen = {profile, *(EXTENSIONS[profile] if extensions is None else extensions)}
    found = []
    for name, entry in sorted(_config(find_tools(venv)).items()):
        if not isinstance(entry, dict) or not _in_version(entry):
            continue
        groups = entry.get("generation", {})
        for group in groups.values() if isinstance(groups, dict) else ():
            every = list(group.get("supports_all", []))
            supported = list(group.get("supports_any", [])) + every or list(entry.get("profile", []))
            if chosen & set(supported) and set(every) <= chosen and _in_version(group):
                found.append(name)
                break
    return found


def _spec(profile: str, ops: tuple[str, ...], extensions: Sequence[str] | None, venv: Path) -> dict[str, Any]:
    return {
        "profile": profile,
        "operators": ops,
        "extensions": tuple(sorted(EXTENSIONS[profile] if extensions is None else extensions)),
        "tosa": TOSA_VERSION,
        "tools": tools_version(venv),
    }


def cached(
    profile: str,
    operators: Sequence[str] = (),
    extensions: Sequence[str] | None = None,
    *,
    cache: Path | None = None,
    venv: Path | None = None,
) -> Suite | None:
    """The full selection of ``operators`` (empty: the whole suite) of ``profile`` with ``extensions``, as
    :func:`generate` without ``per_kind`` keeps it, when it is cached complete; else None. Nothing is generated."""
    ops = tuple(sorted({o.lower() for o in operators}))
    spec = _spec(profile, ops, extensions, find_tools(venv))
    root = cache_root(cache) / f"{profile}-{'-'.join(ops)[:48] or 'all'}-{_key(spec)}"
    return Suite(root, profile, ops, spec["extensions"]) if (root / ".complete").exists() else None


def cached_whole(
    profile: str, extensions: Sequence[str] | None = None, *, cache: Path | None = None, venv: Path | None = None
) -> Suite | None:
    """The whole suite of ``profile`` with ``extensions`` (every operator, every test) when it is cached
    complete, else None; nothing is generated."""
    return cached(profile, (), extensions, cache=cache, venv=venv)


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
    per_kind: int | None = None,
    test_type: str = "both",
) -> Suite:
    """The suite for ``profile`` (``tosa-pro-int`` / ``tosa-pro-fp``), generated once and cached.

    ``operators`` empty means all; ``extensions`` None means every 1.0 extension of that profile.
    Generation of a whole profile takes tens of minutes on two cores; a lock file makes concurrent
    callers wait for one generation instead of racing. With ``reuse_whole``, a cached whole suite of the
    profile (every operator, same extensions, every test) is returned instead of generating a subset; the
    caller then selects its operators from ``Suite.tests()``. ``per_kind`` keeps, of each generator batch,
    the first ``per_kind`` tests of every kind (:data:`CAPPED_BUILD`); ``test_type`` "positive" or
    "negative" generates only those. Either makes a suite of its own in the cache.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: expected one of {', '.join(PROFILES)}")
    if per_kind is not None and per_kind < 1:
        raise ValueError(f"per_kind must be 1 or more, got {per_kind}")
    if test_type not in ("positive", "negative", "both"):
        raise ValueError(f"test_type must be positive, negative or both, got {test_type!r}")
    venv = find_tools(venv)
    ops = tuple(sorted({o.lower() for o in operators}))
    spec = _spec(profile, ops, extensions, venv)
    exts = spec["extensions"]
    # Keys of the whole suite's and of full selections stay as they were: caches made before still match.
    if per_kind is not None:
        spec["per_kind"] = per_kind
    if test_type != "both":
        spec["test_type"] = test_type
    cache = cache_root(cache)
    label = "-".join(ops)[:48] or "all"
    root = cache / f"{profile}-{label}{'' if per_kind is None else f'-first{per_kind}'}-{_key(spec)}"
    suite = Suite(root, profile, ops, exts)
    if reuse_whole and (ops or per_kind is not None or test_type != "both"):
        whole = cached_whole(profile, extensions, cache=cache, venv=venv)
        if whole is not None:  # the whole suite is here already: callers select from it
            return whole
    with _locked(cache / f".{root.name}.lock"):
        if (root / ".complete").exists():
            return suite
        shutil.rmtree(root, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=cache))
        try:
            env = tools_env(venv)
            if per_kind is not None:
                env = _capped_env(env, venv, work, per_kind)
            command = [
                str(venv / "bin" / "tosa_verif_conformance_generator"),
                *("--profile", profile, "--tosa-version", TOSA_VERSION, "--output-type", "binary"),
                *("--output-directory", str(work / "out"), "--build-directory", str(work / "build")),
                *("-j", str(jobs or os.cpu_count() or 1)),
                *(("--operators", *ops) if ops else ()),
                *("--extension", *(exts or ("none",))),
                *(("--test-type", test_type) if test_type != "both" else ()),
            ]
            with open(log or os.devnull, "w") as sink:
                done = subprocess.run(
                    command,
                    cwd=work,
                    env=env,
                    stdout=sink,
                    stderr=subprocess.PIPE,
                    text=True,
                    timeout=4 * 3600,
                )
            if done.returncode != 0 or (not (work / "out").is_dir() and per_kind is None):
                raise RuntimeError(
                    f"CTS generation failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-4000:]}"
                )
            (work / "out").mkdir(exist_ok=True)  # an operator with no test of the chosen kinds: an empty suite
            (work / "out").rename(root)
            (root / ".complete").write_text(json.dumps(spec))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return suite
