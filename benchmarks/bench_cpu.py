#!/usr/bin/env python3
"""Compare IronAccel's CPU backend with onnxruntime, IREE (llvm-cpu), torch eager and the TOSA reference
model on the same programs, in one run, and print the times and the speed ratios.

    make bench                         # creates .venv-bench, then runs this script
    .venv-bench/bin/python benchmarks/bench_cpu.py [--workloads conv,matmul] [--seconds 3] [--no-write]

Targets (from the project): IronAccel at >= 0.8x onnxruntime's speed and >= 50x the reference model's on
every workload; a speedup is ``peer_ms / ironaccel_ms``. See benchmarks/README.md for what is measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import peers as peer_mod
from workloads import WORKLOADS, Workload

HERE = Path(__file__).resolve().parent
PEERS = ("ironaccel", "ironaccel-kernel", "ironaccel-interp", "ort", "iree", "torch", "ref")
COMPARED = ("ort", "iree", "torch", "ref")  # ratio columns
TARGETS = {"ort": 0.8, "ref": 50.0}  # minimum speedup of ironaccel over the peer
ROUNDS = 5


def _stats(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1e3
    p10, p50, p90 = np.percentile(ms, [10, 50, 90])
    return {"median_ms": float(p50), "p10_ms": float(p10), "p90_ms": float(p90), "calls": len(seconds)}


def _agreement(ours: list[np.ndarray], theirs: list[np.ndarray]) -> dict[str, Any]:
    """Largest absolute difference from our outputs, and the same relative to our largest magnitude."""
    if len(ours) != len(theirs):
        return {"error": f"{len(theirs)} outputs, ours {len(ours)}"}
    worst, scale = 0.0, 0.0
    for a, b in zip(ours, theirs, strict=True):
        b = np.asarray(b)
        if a.shape != b.shape:
            return {"error": f"shape {list(b.shape)}, ours {list(a.shape)}"}
        wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
        worst = max(worst, float(np.max(np.abs(wide_a - wide_b))) if a.size else 0.0)
        scale = max(scale, float(np.max(np.abs(wide_a))) if a.size else 0.0)
    return {"max_abs_diff": worst, "max_rel_to_peak": worst / scale if scale else worst}


def _run_workload(workload: Workload, peers: dict[str, peer_mod.Peer], seconds: float) -> dict[str, Any]:
    record: dict[str, Any] = {
        "workload": workload.name,
        "description": workload.description,
        "load_before": os.getloadavg(),
        "peers": {},
    }
    if workload.framework_note:
        record["note"] = workload.framework_note
    prepared: dict[str, peer_mod.Prepared] = {}
    for name in PEERS:
        peer = peers.get(name)
        if peer is None:
            continue
        try:
            ready = peer.prepare(workload)
        except Exception as exc:  # noqa: BLE001 - one peer failing must not stop the comparison
            ready = f"n/a: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        if isinstance(ready, str):
            record["peers"][name] = {"na": ready}
        else:
            prepared[name] = ready
            record["peers"][name] = {}
    if "ironaccel" not in prepared:
        raise SystemExit(f"{workload.name}: IronAccel could not run it: {record['peers'].get('ironaccel')}")

    # Agreement: every peer's result against ours, so the times compare equal work.
    ours = prepared["ironaccel"].outputs()
    for name, ready in prepared.items():
        if name == "ironaccel":
            continue
        if name in ("ort", "torch") and not workload.framework_same_work:
            record["peers"][name]["agreement"] = {"not_compared": workload.framework_note}
            continue
        try:
            record["peers"][name]["agreement"] = _agreement(ours, ready.outputs())
        except Exception as exc:  # noqa: BLE001 - reported in the table
            record["peers"][name]["agreement"] = {"error": f"{type(exc).__name__}: {exc}"}

    # Warm-up (also measures a call's cost, to size the batches).
    per_call: dict[str, float] = {}
    for name, ready in prepared.items():
        warm = 1 if name == "ref" else 3
        per_call[name] = float(np.median(ready.measure(warm)))
    fast = [n for n in prepared if n != "ref"]
    budget = seconds / (ROUNDS * max(1, len(fast)))  # seconds per peer per round
    batch = {n: max(1, min(2000, int(budget / max(per_call[n], 1e-6)))) for n in fast}
    if "ref" in prepared:
        batch["ref"] = max(1, math.ceil(workload.ref_reps / ROUNDS))
    samples: dict[str, list[float]] = {n: [] for n in prepared}
    # Interleaved rounds, each in a rotated order, so a change of machine load hits every peer alike.
    order = list(prepared)
    for round_index in range(ROUNDS):
        rotated = order[round_index % len(order) :] + order[: round_index % len(order)]
        for name in rotated:
            if name == "ref" and len(samples["ref"]) >= workload.ref_reps:
                continue
            samples[name] += prepared[name].measure(batch[name])
    for name, times in samples.items():
        record["peers"][name].update(_stats(times))
    ours_ms = record["peers"]["ironaccel"]["median_ms"]
    for name in COMPARED:
        entry = record["peers"].get(name, {})
        if "median_ms" in entry:
            entry["speedup"] = entry["median_ms"] / ours_ms
    record["load_after"] = os.getloadavg()
    return record


def _environment(peers: dict[str, peer_mod.Peer], missing: dict[str, str]) -> dict[str, Any]:
    return {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {_cpu_name()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "load_avg_start": os.getloadavg(),
        "openblas_env": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ},
        "peers": {name: {"version": p.version, "threads": p.threads} for name, p in peers.items()},
        "missing_peers": missing,
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _fmt_ms(entry: dict[str, Any]) -> str:
    if "median_ms" not in entry:
        return entry.get("na", "n/a")
    return f"{entry['median_ms']:.3f} ({entry['p10_ms']:.3f}-{entry['p90_ms']:.3f})"


def _fmt_ratio(name: str, entry: dict[str, Any]) -> str:
    if "speedup" not in entry:
        return "n/a"
    mark = ""
    if name in TARGETS:
        mark = " ok" if entry["speedup"] >= TARGETS[name] else " MISS"
    return f"{entry['speedup']:.2f}x{mark}"


def _fmt_agreement(entry: dict[str, Any]) -> str:
    agreement = entry.get("agreement")
    if agreement is None:
        return "-"
    if "not_compared" in agreement:
        return "not compared"
    if "error" in agreement:
        return f"ERROR {agreement['error']}"
    return f"{agreement['max_abs_diff']:.2g}"


def render(results: dict[str, Any]) -> str:
    env = results["environment"]
    lines = [
        f"# IronAccel CPU backend benchmark, {env['date']}",
        "",
        f"Machine: {env['machine']}; Python {env['python']}, numpy {env['numpy']}.",
        "Load average (1, 5, 15 min) at start: " + ", ".join(f"{v:.2f}" for v in env["load_avg_start"]) + ".",
        f"OpenBLAS environment: {env['openblas_env'] or 'none set'}.",
        "Threads: every library uses its own default on this machine:",
    ]
    for name, info in env["peers"].items():
        lines.append(f"- {name}: " + "; ".join(part for part in (info["version"], info["threads"]) if part))
    for name, why in env["missing_peers"].items():
        lines.append(f"- {name}: not run ({why})")
    lines += [
        "",
        "Median ms per call through each library's user API (p10-p90 in brackets); speedup = peer ms / "
        "ironaccel ms. Targets: >= 0.8x onnxruntime, >= 50x the reference model.",
        "",
        "| workload | ironaccel | kernel only | interpreter | onnxruntime | IREE | torch | ref model "
        "| vs ORT | vs IREE | vs torch | vs ref | load before/after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["workloads"]:
        p = row["peers"]
        cells = [row["workload"]] + [_fmt_ms(p.get(n, {"na": "not run"})) for n in PEERS]
        cells += [_fmt_ratio(n, p.get(n, {})) for n in COMPARED]
        cells.append(f"{row['load_before'][0]:.2f}/{row['load_after'][0]:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Agreement with IronAccel's output (max |diff|):", ""]
    lines += [
        "| workload | kernel only | interpreter | onnxruntime | IREE | torch | ref model |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in results["workloads"]:
        p = row["peers"]
        cells = [row["workload"]] + [_fmt_agreement(p.get(n, {})) for n in PEERS[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {row['workload']}: {row['note']}" for row in results["workloads"] if row.get("note")]
    if notes:
        lines += ["", "Notes:", *notes]
    # A peer that did not run is a target not shown, so it counts as missed rather than silently met.
    missed = [
        f"{row['workload']} vs {name}" + ("" if "speedup" in row["peers"].get(name, {}) else " (no figure)")
        for row in results["workloads"]
        for name, need in TARGETS.items()
        if row["peers"].get(name, {}).get("speedup", -math.inf) < need
    ]
    lines += ["", "Targets missed: " + (", ".join(missed) if missed else "none") + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma list of {', '.join(WORKLOADS)}")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"comma list of {', '.join(PEERS)}")
    parser.add_argument("--seconds", type=float, default=4.0, help="timing budget per workload (default 4)")
    parser.add_argument(
        "--out", default=str(HERE / "results" / "cpu.md"), help="the table (default %(default)s); .json beside it"
    )
    parser.add_argument("--no-write", action="store_true", help="print only; write no result files")
    args = parser.parse_args(argv)

    started = time.monotonic()
    wanted = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}")
    peers: dict[str, peer_mod.Peer] = {}
    missing: dict[str, str] = {}
    for name in [p.strip() for p in args.peers.split(",") if p.strip()]:
        try:
            peers[name] = peer_mod.make(name)
        except Exception as exc:  # noqa: BLE001 - a missing peer becomes a column of n/a
            missing[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
    if "ironaccel" not in peers:
        raise SystemExit(f"ironaccel itself is unavailable: {missing.get('ironaccel')}")
    results: dict[str, Any] = {"environment": _environment(peers, missing), "workloads": []}
    try:
        for key in wanted:
            workload = WORKLOADS[key]()
            print(f"== {workload.name} (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
            results["workloads"].append(_run_workload(workload, peers, args.seconds))
    finally:
        for peer in peers.values():
            peer.close()
    results["environment"]["load_avg_end"] = os.getloadavg()
    results["environment"]["wall_seconds"] = round(time.monotonic() - started, 1)
    text = render(results)
    text += (
        f"\nLoad average at end: {', '.join(f'{v:.2f}' for v in results['environment']['load_avg_end'])}; "
        f"whole run {results['environment']['wall_seconds']} s.\n"
    )
    print(text)
    if not args.no_write:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {out} and {out.with_suffix('.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
