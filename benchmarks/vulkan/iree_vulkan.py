#!/usr/bin/env python3
"""IREE's Vulkan driver as a peer for the bundled framework-produced programs (src/ironaccel/models).

The GPU machine has no network and no IREE compiler, so the programs are compiled here and the
modules carried there, where only the iree-base-runtime wheel (from .whl) runs them:

    .venv-bench/bin/python benchmarks/vulkan/iree_vulkan.py compile [--out .cache/iree-vulkan]
    python3 benchmarks/vulkan/iree_vulkan.py check [--dir .cache/iree-vulkan] [--targets generic] [--device nvidia]
    python3 benchmarks/vulkan/bench_vulkan.py --iree .cache/iree-vulkan ...   (calls bench_iree)

``compile`` turns each .tosa into TOSA MLIR (tosa-opt from tosa-tools, as benchmarks/peers.py's Iree
does), compiles it with iree-compile for every target below and writes ``<stem>.<target>.vmfb``,
``<stem>.input.npy`` (the recorded input the program takes) and ``manifest.json`` (compiler version,
flags, which recorded output to compare with) into the output folder. A program IREE cannot compile
is recorded as such, not fatal.

Targets: ``ampere`` is the newest NVIDIA architecture IREE's Vulkan target list knows (it has no
Hopper / sm_90 entry): subgroup size 32, SPIR-V 1.6, 8- and 16-bit storage, A100's 163 KiB of shared
memory (an H200 has 227 KiB). ``generic`` is the Android 2022 baseline profile (no subgroup operations)
with SPIR-V 1.6 and 8-bit storage added: Mesa's lavapipe runs it (its subgroups are 8 wide, so the
``ampere`` modules compute wrong results there), which is how the modules are checked on a machine
without a GPU; on the GPU it is the fallback when the ``ampere`` module does not run or disagrees
with the recorded output.

:func:`bench_iree` runs each model's first working target with the runtime's command-line tools
(iree-run-module for the output, compared with the recorded torch output; iree-benchmark-module
for the time): the native binaries inside the installed package, so no Python start-up or import path is
involved (the Python runtime also fails on lavapipe, mapping its outputs). The time is
iree-benchmark-module's: one synchronous call of ``main`` per iteration on inputs already on the
device, results left there (the tool's end-to-end figure, not a kernel time).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODELS = ROOT / "src" / "ironaccel" / "models"
DEFAULT_DIR = ROOT / ".cache" / "iree-vulkan"
SITE = Path("/tmp/site")  # where the GPU machine installs the .whl wheels (pip install --target)

COMMON_FLAGS = ["--iree-input-type=tosa", "--iree-hal-target-device=vulkan"]
TARGETS: dict[str, list[str]] = {
    "ampere": ["--iree-vulkan-target=ampere"],
    "generic": [
        "--iree-vulkan-target=vp_android_baseline_2022",
        # without 8-bit storage the profile emulates int8 buffers in 32-bit words, and cnn_int8 came out
        # wrong on lavapipe that way (up to 103 steps off; exact with it)
        "--iree-vulkan-target-features=spirv:v1.6,cap:Shader,cap:Int8,cap:StorageBuffer8BitAccess,"
        "ext:SPV_KHR_8bit_storage",
    ],
}
TIME_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


# -- compiling (here) -----------------------------------------------------------------------------------
def _compiler() -> str:
    """iree-compile from this Python's environment, else .venv-bench, else PATH."""
    for folder in (Path(sys.executable).parent, ROOT / ".venv-bench" / "bin"):
        if (folder / "iree-compile").exists():
            return str(folder / "iree-compile")
    found = shutil.which("iree-compile")
    if not found:
        raise SystemExit("iree-compile not found (pip install iree-base-compiler, e.g. in .venv-bench)")
    return found


def _first_error(text: str) -> str:
    """The first line saying 'error' (iree-compile follows it with a stack dump), else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors[0] if errors else lines[-1] if lines else "no message")[:300]


def _to_mlir(tosa: Path, mlir: Path) -> str | None:
    """TOSA flatbuffer -> generic-form TOSA MLIR with tosa-tools' tosa-opt; an error message or None."""
    sys.path.insert(0, str(ROOT / "src"))
    from ironaccel.conformance import cts

    done = cts.tosa_opt_to_mlir(tosa, mlir)
    if done.returncode != 0 or not mlir.exists():
        return "tosa-opt could not deserialize: " + _first_error(done.stderr or done.stdout)
    return None


def compile_models(out: Path, targets: Sequence[str], models: Path = MODELS) -> dict[str, Any]:
    """Compile every bundled model for every target into ``out``; returns (and writes) the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    compiler = _compiler()
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    found = re.search(r"IREE compiler version (\S+)(?: @ (\S+))?", version)
    manifest: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "iree_compiler": found.group(1) if found else version.strip()[:200],
        "iree_revision": found.group(2) if found else None,
        "compiler": compiler,
        "common_flags": COMMON_FLAGS,
        "targets": {t: TARGETS[t] for t in targets},
        "order": list(targets),
        "models": {},
    }
    with tempfile.TemporaryDirectory(prefix="ironaccel-iree-vulkan-") as work:
        for tosa in sorted(models.glob("*.tosa")):
            stem = tosa.stem
            quantized = json.loads(tosa.with_suffix(".json").read_text())["quantized"]
            recorded = np.load(tosa.with_name(f"{stem}.torch.npz"))
            entry: dict[str, Any] = {
                "tosa": str(tosa.relative_to(ROOT)),
                "tosa_sha256": hashlib.sha256(tosa.read_bytes()).hexdigest(),
                # the integer program takes the quantized input; compare with the quantized model's integers
                "input_key": "input_int8" if quantized else "input",
                "output_key": "output_qmodel_int8" if quantized else "output",
                "input": f"{stem}.input.npy",
                "vmfb": {},
                "errors": {},
            }
            np.save(out / entry["input"], recorded[entry["input_key"]], allow_pickle=False)
            mlir = Path(work) / f"{stem}.mlir"
            failed = _to_mlir(tosa, mlir)
            for target in targets:
                vmfb = out / f"{stem}.{target}.vmfb"
                vmfb.unlink(missing_ok=True)
                if failed:
                    entry["errors"][target] = failed
                    continue
                done = subprocess.run(
                    [compiler, *COMMON_FLAGS, *TARGETS[target], str(mlir), "-o", str(vmfb)],
                    capture_output=True,
                    text=True,
                    timeout=900,
                )
                if done.returncode == 0 and vmfb.exists():
                    entry["vmfb"][target] = vmfb.name
                else:
                    entry["errors"][target] = "iree-compile failed: " + _first_error(done.stderr)
                print(f"{stem} {target}: {entry['vmfb'].get(target) or entry['errors'][target]}", flush=True)
            manifest["models"][stem] = entry
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


# -- running (on the GPU machine) -----------------------------------------------------------------------
def find_tool(name: str) -> tuple[list[str], dict[str, str]]:
    """The command (and environment) for an iree-base-runtime tool.

    The native binary inside the installed package first (iree/_runtime_libs/NAME, on sys.path or
    under /tmp/site): it needs neither a Python start-up nor PYTHONPATH. Else the console script next to
    this Python, in .venv-bench, under /tmp/site/bin (with /tmp/site on PYTHONPATH, which pip --target
    scripts need) or on PATH.
    """
    env = dict(os.environ)
    roots = [Path(p) for p in sys.path if p] + [
        SITE,
        *sorted((ROOT / ".venv-bench" / "lib").glob("python3*/site-packages")),
    ]
    for root in roots:
        binary = root / "iree" / "_runtime_libs" / name
        if binary.is_file() and os.access(binary, os.X_OK):
            return [str(binary)], env
    for folder in (Path(sys.executable).parent, ROOT / ".venv-bench" / "bin", SITE / "bin"):
        script = folder / name
        if script.is_file():
            if folder == SITE / "bin":
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), env.get("PYTHONPATH")]))
            return [str(script)], env
    found = shutil.which(name)
    if found:
        return [found], env
    raise FileNotFoundError(f"{name} not found (install the iree-base-runtime wheel: pip install --target /tmp/site)")


def runtime_version(command: list[str]) -> str:
    """The runtime's version, read from the version.py beside the native binaries (the tools have no --version)."""
    for candidate in (Path(command[0]).with_name("version.py"), *SITE.glob("iree/_runtime_libs/version.py")):
        if candidate.is_file():
            found = re.search(r'VERSION\s*=\s*"([^"]+)"', candidate.read_text())
            if found:
                return found.group(1)
    return "unknown"


def vulkan_device(run: tuple[list[str], dict[str, str]], name: str | None) -> tuple[str, str]:
    """The --device= URI and name of the first Vulkan device whose name contains ``name`` (any case);
    plain ``vulkan`` (IREE's first device) when ``name`` is empty or nothing matches the listing."""
    done = _run([*run[0], "--dump_devices=vulkan"], run[1], 120)
    found = re.findall(r"^# --device=(vulkan://\S+)\n#\s+(.+)$", done.stdout, re.MULTILINE)
    for uri, title in found:
        if not name or name.lower() in title.lower():
            return uri, title.strip()
    return "vulkan", f"first Vulkan device (none named {name!r} in {[t for _, t in found]})"


def _run(command: list[str], env: dict[str, str], timeout: int) -> subprocess.CompletedProcess[str]:
    """A tool's run; a hang or a binary that cannot start comes back as a failed run, not an exception."""
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, "", f"TIMEOUT; no result after {timeout} s")
    except OSError as exc:
        return subprocess.CompletedProcess(command, 126, "", f"NOT_STARTED; {exc}")


def _tool_error(tool: str, done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stderr or "") + (done.stdout or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    status = [line for line in lines if re.search(r"[A-Z_]+;|error|ERROR", line)]
    return f"{tool} exit {done.returncode}: " + (status[0] if status else lines[-1] if lines else "no message")[:300]


def _one(
    run: tuple[list[str], dict[str, str]],
    bench: tuple[list[str], dict[str, str]],
    vmfb: Path,
    given: Path,
    want: np.ndarray,
    reps: int,
    device: str,
) -> dict[str, Any]:
    """Output agreement and time of one module; {'error': ...} when a tool fails."""
    call = [f"--device={device}", f"--module={vmfb}", "--function=main", f"--input=@{given}"]
    with tempfile.TemporaryDirectory(prefix="ironaccel-iree-out-") as work:
        out = Path(work) / "out.npy"
        done = _run([*run[0], *call, f"--output=@{out}"], run[1], 300)
        if done.returncode != 0 or not out.exists():
            return {"error": _tool_error("iree-run-module", done)}
        got = np.load(out)
    if got.shape != want.shape:
        return {"error": f"output shape {got.shape}, recorded {want.shape}"}
    diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    done = _run(
        [
            *bench[0],
            *call,
            "--benchmark_format=json",
            f"--benchmark_min_time={max(reps, 1)}x",
            "--benchmark_repetitions=5",
            "--benchmark_min_warmup_time=0.2",
            "--benchmark_time_unit=ms",
        ],
        bench[1],
        600,
    )
    if done.returncode != 0:
        return {"error": _tool_error("iree-benchmark-module", done), "iree_max_abs_diff_vs_recorded": diff}
    try:
        report = json.loads(done.stdout[done.stdout.index("{") :])
        runs = [b for b in report["benchmarks"] if b.get("run_type") == "iteration"]
        times = [float(b["real_time"]) * TIME_UNITS_MS[b.get("time_unit", "ns")] for b in runs]
    except (ValueError, KeyError) as exc:
        return {"error": f"iree-benchmark-module output not understood: {exc}", "iree_max_abs_diff_vs_recorded": diff}
    if not times:
        return {"error": "iree-benchmark-module reported no runs", "iree_max_abs_diff_vs_recorded": diff}
    return {
        "iree_ms": statistics.median(times),
        "iree_repetitions_ms": times,
        "iree_iterations": int(runs[0].get("iterations", 0)),
        "iree_max_abs_diff_vs_recorded": diff,
        "iree_output_dtype": str(got.dtype),
    }


def bench_iree(
    iree_dir: Path,
    reps: int,
    targets: Sequence[str] | None = None,
    models: Path = MODELS,
    device: str | None = None,
) -> list[dict[str, Any]]:
    """Per compiled model: IREE Vulkan time (ms per synchronous call) and agreement with the recorded
    torch output, from the first target in ``targets`` (default: the manifest's order) whose module
    runs and agrees; a row carries ``iree_error`` instead when none runs. ``device`` picks the Vulkan
    device by name (e.g. ``nvidia``), so a software driver listed first is not measured by mistake.
    Never raises for a model's failure."""
    iree_dir = Path(iree_dir)
    manifest = json.loads((iree_dir / "manifest.json").read_text())
    order = list(targets or manifest["order"])
    try:
        run, bench = find_tool("iree-run-module"), find_tool("iree-benchmark-module")
    except FileNotFoundError as exc:
        return [{"model": stem, "iree_error": f"n/a: {exc}"} for stem in manifest["models"]]
    version = runtime_version(run[0])
    uri, device_name = vulkan_device(run, device)
    rows = []
    for stem, entry in manifest["models"].items():
        row: dict[str, Any] = {
            "model": stem,
            "iree_runtime": version,
            "iree_compiler": manifest["iree_compiler"],
            "iree_device": device_name,
        }
        tosa = models / f"{stem}.tosa"
        if tosa.exists() and hashlib.sha256(tosa.read_bytes()).hexdigest() != entry["tosa_sha256"]:
            row["iree_stale"] = "the .tosa changed since the modules were compiled"
        recorded = np.load(models / f"{stem}.torch.npz")
        want = recorded[entry["output_key"]]
        row["iree_reference"] = entry["output_key"] + (" (int8 steps)" if want.dtype == np.int8 else "")
        # integers may differ by one rounding step; floats by what a different summation order gives
        tolerance = 1.0 if want.dtype.kind in "iu" else 1e-3 * max(1.0, float(np.max(np.abs(want))))
        failures, disagreeing = [], None
        for target in order:
            if target not in entry["vmfb"]:
                failures.append(f"{target}: {entry['errors'].get(target, 'not compiled')}")
                continue
            result = _one(run, bench, iree_dir / entry["vmfb"][target], iree_dir / entry["input"], want, reps, uri)
            if "error" in result:
                failures.append(f"{target}: {result['error']}")
                continue
            result.update(iree_target=target, iree_agrees=result["iree_max_abs_diff_vs_recorded"] <= tolerance)
            if result["iree_agrees"]:
                row.update(result)
                break
            # a wrong result is not IREE's time for this program: try the next target, keep it as a last resort
            failures.append(f"{target}: max |diff| {result['iree_max_abs_diff_vs_recorded']:.3g} > {tolerance:.3g}")
            disagreeing = disagreeing or result
        if "iree_ms" not in row and disagreeing:
            row.update(disagreeing)
        if "iree_ms" not in row:
            row["iree_error"] = "; ".join(failures) or "no target to run"
        elif failures:
            row["iree_failed_targets"] = failures
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    make = sub.add_parser("compile", help="compile the bundled models (needs iree-compile and tosa-tools)")
    make.add_argument("--out", default=str(DEFAULT_DIR))
    make.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, first preferred: {list(TARGETS)}")
    check = sub.add_parser("check", help="run the compiled modules and print agreement and time")
    check.add_argument("--dir", default=str(DEFAULT_DIR))
    check.add_argument("--targets", default="", help="comma-separated, first preferred (default: the manifest's order)")
    check.add_argument("--reps", type=int, default=50)
    check.add_argument("--device", default="", help="a Vulkan device name to pick (e.g. nvidia); default IREE's first")
    args = parser.parse_args()
    if args.cmd == "compile":
        targets = [t for t in args.targets.split(",") if t]
        unknown = set(targets) - set(TARGETS)
        if unknown:
            parser.error(f"unknown targets {sorted(unknown)}; known: {list(TARGETS)}")
        manifest = compile_models(Path(args.out), targets)
        failed = [f"{s} {t}" for s, e in manifest["models"].items() for t in e["errors"]]
        print(
            f"wrote {args.out}/manifest.json (iree-compile {manifest['iree_compiler']})"
            + (f"; failed: {failed}" if failed else "")
        )
        return 0
    rows = bench_iree(Path(args.dir), args.reps, [t for t in args.targets.split(",") if t] or None, device=args.device)
    for row in rows:
        print(json.dumps(row))
    return 1 if any("iree_error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
