"""Throughput of an ironaccel.cluster Pool: the bundled CNN over 1, 2, 4, 8 one-thread CPU replicas against
the ideal linear line, a GPU replica beside them where this host has one, and what the pool adds per item to
the program's own time.

    python benchmarks/cluster/bench_pool.py                       # 1, 2, 4, 8 replicas; writes results.md/.json
    python benchmarks/cluster/bench_pool.py --replicas 1,2 --items 4000
    python benchmarks/cluster/bench_pool.py --no-write            # print only

A one-machine Ray instance (loopback, no dashboard) advertises ``ironaccel_cpu`` for the largest replica
count and, for each GPU backend with a non-software device here, ``ironaccel_<backend>``. Each CPU replica
is pinned to one core (``Pool(threads=1)``, the default), so N replicas are N single-threaded workers; past
the host's cores they share them. Items go in batches of ``--batch`` (32) per call, with two batches in
flight per replica. For each row: items per second over the timed run (after a warm-up of two batches per
replica), the ideal (the one-replica rate times the replicas), the program's own time per item (measured
inside the replicas: the calls alone) and the pool's overhead per item (wall time per item times the
replicas, less the program's time: Ray's transfers, the object store, scheduling).

The plot (``pool.png`` beside results.md: items/s against replicas with the ideal line) is drawn by
plot_pool.py with matplotlib: here when this environment has it, else by the first Python of
``--plot-python`` (default: this repository's .venv-export, which has matplotlib but not Ray) that has it.
results.md says where the plot is, or why there is none.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
COUNTS = (1, 2, 4, 8)
MODEL = resources.files("ironaccel").joinpath("models", "cnn_fp32.tosa")


BOUNDS = """
What bounds these figures: one driver process feeds every replica, and each batch costs it one actor call
(Ray's submission of the task with its arguments), one wait and one read of the result, so the batches it
can hand out per second set a ceiling that does not grow with the replicas; it and Ray's own processes
(raylet, GCS) also share the cores with the replicas whenever the host has fewer cores than replicas plus
one. At one replica the overhead is Ray's time per task around the program's calls. Both shrink against
the program's time as each item's work grows (a larger model, or several items per call).
"""


def measure(pool, images, batch: int, items: int) -> dict:
    replicas = len(pool.live)
    warm = [images[i % len(images)] for i in range(2 * batch * replicas)]
    for _ in pool.map(warm, batch_size=batch, max_in_flight=2 * replicas):
        pass
    before = sum(s["busy_s"] for s in pool.stats()), sum(s["items"] for s in pool.stats())
    feed = (images[i % len(images)] for i in range(items))
    started = time.perf_counter()
    count = sum(1 for _ in pool.map(feed, batch_size=batch, max_in_flight=2 * replicas))
    elapsed = time.perf_counter() - started
    stats = pool.stats()
    busy = sum(s["busy_s"] for s in stats) - before[0]
    ran = sum(s["items"] for s in stats) - before[1]
    assert count == items == ran, (count, items, ran)
    per_item = elapsed / items
    program = busy / items
    return {
        "replicas": replicas,
        "device": ", ".join(sorted({r["device"] for r in pool.live})),
        "items": items,
        "seconds": elapsed,
        "items_per_s": items / elapsed,
        "program_us": program * 1e6,
        "overhead_us": (per_item * replicas - program) * 1e6,
    }


def table(rows: list[dict], base: float | None, cores: int) -> str:
    lines = [
        f"| replicas (host of {cores} cores) | device | items/s | ideal (linear) | of ideal | program per item (us)"
        " | pool overhead per item (us) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cpu = r["device"] == "cpu:0"
        ideal = base * r["replicas"] if cpu and base else None
        shown = f"{ideal:.0f}" if ideal else "—"
        share = f"{r['items_per_s'] / ideal:.0%}" if ideal else "—"
        lines.append(
            f"| {r['replicas']} | {r['device']} | {r['items_per_s']:.0f} | {shown} | {share} |"
            f" {r['program_us']:.1f} | {r['overhead_us']:.1f} |"
        )
    return "\n".join(lines)


def _shown(python: str) -> str:
    path = Path(python)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else python


def plot(document: dict, path: Path, pythons: list[str]) -> str:
    """Draw the plot to ``path`` with matplotlib, here or in the first of ``pythons`` that has it; where it
    is, or why there is none (as results.md says it)."""
    sys.path.insert(0, str(HERE))
    from plot_pool import draw

    try:
        draw(document, path)
        return f"`{path.name}` (matplotlib, in the environment that ran the benchmark)"
    except ImportError:
        pass
    data = path.with_suffix(".json.tmp")
    data.write_text(json.dumps(document))
    try:
        for python in pythons:
            if not Path(python).exists():
                continue
            command = [python, str(HERE / "plot_pool.py"), str(data), str(path)]
            if subprocess.run(command, capture_output=True, check=False).returncode == 0:
                return f"`{path.name}` (matplotlib, drawn by {_shown(python)})"
    finally:
        data.unlink(missing_ok=True)
    tried = ", ".join(_shown(p) for p in pythons) or "no --plot-python"
    return f"none (matplotlib is not installed where this ran, nor for {tried})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,2,4,8", help="CPU replica counts, comma-separated")
    parser.add_argument("--items", type=int, default=4096, help="items timed per row")
    parser.add_argument("--batch", type=int, default=32, help="items per call to a replica")
    parser.add_argument("--no-gpu", action="store_true", help="no GPU row even where this host has a GPU")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--plot-python",
        action="append",
        default=None,
        help="a Python with matplotlib to draw the plot when this one has none (default: .venv-export's)",
    )
    args = parser.parse_args()
    counts = [int(c) for c in args.replicas.split(",")]

    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    import ironaccel
    from ironaccel.cluster import Pool, node_devices, resource_name

    gpus = [] if args.no_gpu else [b for b in node_devices() if b != "cpu"]
    advertised = {resource_name("cpu"): float(max(counts)), **{resource_name(b): 1.0 for b in gpus}}
    ray.init(
        num_cpus=1,
        resources=advertised,
        include_dashboard=False,
        object_store_memory=200 * 2**20,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    program = MODEL.read_bytes()
    images = [np.random.default_rng(i).standard_normal((1, 3, 32, 32)).astype(np.float32) for i in range(64)]
    rows = []
    for count in counts:
        with Pool(program, device="cpu", replicas=count) as pool:
            rows.append(measure(pool, images, args.batch, args.items))
        print(json.dumps(rows[-1]), flush=True)
    for backend in gpus:
        with Pool(program, device=backend, replicas=1) as pool:
            rows.append(measure(pool, images, args.batch, args.items))
        print(json.dumps(rows[-1]), flush=True)
    ray.shutdown()

    cores = len(os.sched_getaffinity(0))
    base = next((r["items_per_s"] for r in rows if r["device"] == "cpu:0" and r["replicas"] == 1), None)
    text = table(rows, base, cores)
    print(text)
    if args.no_write:
        return 0
    host = {
        "machine": platform.machine(),
        "cores": cores,
        "python": platform.python_version(),
        "ironaccel": ironaccel.__version__,
        "ray": ray.__version__,
        "load_average": os.getloadavg(),
    }
    document = {"host": host, "batch": args.batch, "rows": rows}
    pythons = args.plot_python or [str(REPO / ".venv-export" / "bin" / "python")]
    document["plot"] = plot(document, HERE / "pool.png", pythons) if base is not None else "none (no 1-replica row)"
    (HERE / "results.json").write_text(json.dumps(document, indent=2) + "\n")
    left = [c for c in COUNTS if c not in counts]
    untimed = (
        f" {', '.join(map(str, left))} replicas were not run here: each CPU replica wants a core of its own, and"
        f" the driver and Ray's processes one more, which this {cores}-core host does not have."
        if left
        else ""
    )
    (HERE / "results.md").write_text(
        "# ironaccel.cluster Pool: the bundled CNN over CPU replicas\n\n"
        f"`benchmarks/cluster/bench_pool.py --replicas {args.replicas} --items {args.items} --batch {args.batch}`"
        f" on {cores} cores ({host['machine']}), Ray {host['ray']}, Python {host['python']}; load average"
        f" at the end {', '.join(f'{x:.2f}' for x in host['load_average'])}. Each CPU replica runs on one core;"
        " the ideal is the one-replica rate times the replicas; the overhead is wall time per item times the"
        f" replicas, less the program's own time per item.{untimed}\n\n"
        f"Plot (items/s against replicas, with the ideal line): {document['plot']}.\n\n"
        + text
        + "\n"
        + ("\n![items/s against replicas](pool.png)\n" if document["plot"].startswith("`") else "")
        + BOUNDS
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
