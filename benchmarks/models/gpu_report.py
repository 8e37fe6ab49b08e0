"""gpu_zoo.py's report: the table (``gpu.md``) and the plot (``gpu.png``) of a run's ``gpu.json``; the plot
needs matplotlib only, so it draws anywhere."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any


def environment() -> dict[str, Any]:
    """The GPU, its driver and the versions, for the table's header."""
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    import numpy as np
    import torch

    import ironaccel

    found = {"python": platform.python_version(), "ironaccel": ironaccel.__version__, "numpy": np.__version__}
    for package in ("torch", "torchvision", "transformers"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    gpu, driver = "no GPU (torch sees no CUDA device)", "n/a"
    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name()
        found["cuda (torch)"] = str(torch.version.cuda)
        try:
            query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            driver = subprocess.run(query, capture_output=True, text=True, timeout=20).stdout.strip() or "unknown"
        except (OSError, subprocess.SubprocessError):
            driver = "unknown (no nvidia-smi)"
    return {
        "gpu": gpu,
        "gpu_short": gpu if torch.cuda.is_available() else "no GPU",
        "driver": driver,
        "host": platform.node(),
        "torch_device": "cuda" if torch.cuda.is_available() else "cpu",
        "versions": found,
    }


def _fmt(entry: dict[str, Any]) -> str:
    if "na" in entry:
        return entry["na"].removeprefix("n/a: ")
    if "median_ms" not in entry:
        return "-"
    return f"{entry['median_ms']:.2f} ({entry['p10_ms']:.2f}-{entry['p90_ms']:.2f})"


def _fastest(record: dict[str, Any]) -> tuple[str, float] | None:
    timed = [(spec, e["median_ms"]) for spec, e in record["devices"].items() if "median_ms" in e]
    return min(timed, key=lambda pair: pair[1]) if timed else None


def _fmt_check(record: dict[str, Any]) -> str:
    if "reference" in record:
        return f"no cpu reference: {record['reference'].removeprefix('n/a: ')}"
    parts = []
    for spec, entry in record["devices"].items():
        found = entry.get("check")
        if not found or spec == "cpu":
            continue
        if record["mode"] == "int8":
            text = f"{spec} {found['max_abs_diff']:.0f} steps"
        else:
            text = f"{spec} {found['max_abs_diff']:.2g} ({found['max_rel_to_peak']:.1g} of peak)"
        parts.append(text + ("" if found["ok"] else " OUT OF BOUND"))
    return "; ".join(parts) or "-"


def _fmt_gpu(record: dict[str, Any]) -> str:
    entry = record["devices"].get("cuda", {})
    gpu = entry.get("gpu_ms")
    if gpu is None:
        return "-"
    if isinstance(gpu, str):
        return gpu.removeprefix("n/a: ")
    wall = entry.get("median_ms")
    return f"{gpu:.2f}" + (f" ({wall / gpu:.2f}x)" if wall else "")


def _earlier(results: dict[str, Any]) -> dict[str, list[str]]:
    """The rows kept from earlier runs (``run --merge``), by the date of their run."""
    found: dict[str, list[str]] = {}
    for record in results["models"]:
        if record.get("run", results["date"]) != results["date"]:
            found.setdefault(record["run"], []).append(f"{record['model']} {record['mode']}")
    return found


def render(results: dict[str, Any]) -> str:
    env, bounds = results["environment"], results["bounds"]
    devices = env["devices"]
    opened = "; ".join(f"{spec}: {what}" for spec, what in env["ironaccel_devices"].items())
    lines = [
        "# Model zoo on a GPU: IronAccel's GPU backends against torch",
        "",
        f"Run {results['date']} on {env['gpu']} (driver {env['driver']}, host {env['host']}, torch peers on "
        f"{env['torch_device']}); {', '.join(f'{k} {v}' for k, v in env['versions'].items())}.",
        f"IronAccel devices: {opened}.",
        "Median ms per inference, batch 1 (p10-p90 in brackets), inputs and outputs held on the device, each "
        "call synchronous; ratio = peer / the fastest IronAccel device (> 1: IronAccel faster). torch: eager "
        "and torch.compile (default mode), fp32 with TF32 off, its own random weights.",
        "IronAccel's weights are drawn at run time (seeded) with the statistics of the exported ones (see "
        "gpu_zoo.py pack). Check: each device's outputs against IronAccel's cpu backend on the same program "
        f"and inputs: fp32 max |diff| relative to the cpu output's largest |value| (bound {bounds['fp32']:g}); "
        f"int8 max |diff| in quantization steps of the int8 outputs (bound {bounds['int8']}). int8 rows time the "
        "int8 program on int8 inputs (quantized outside the timed call); they have no torch peer on the GPU: "
        "the peers' figures are in the fp32 row. Several outputs: the worst one's figures.",
        "cuda GPU ms: the CUDA kernel time of one call (torch.profiler), with wall / GPU in brackets.",
        f"Whole run: {env.get('wall_seconds', 0):.0f} s.",
        *[f"Rows from the run of {when}: {', '.join(rows)}." for when, rows in _earlier(results).items()],
        "",
        f"| model | {' | '.join(f'IronAccel {d}' for d in devices)} | torch eager | torch.compile | vs eager | "
        "vs compile | cuda GPU ms | check |",
        "|---|" + "---|" * (len(devices) + 6),
    ]
    for record in results["models"]:
        if "error" in record:
            lines.append(
                f"| {record['model']} {record['mode']} | failed: {record['error']} |" + " |" * (len(devices) + 5)
            )
            continue
        cells = [_fmt(record["devices"].get(d, {"na": "not run"})) for d in devices]
        peers = [_fmt(record["peers"].get(p, {"na": "not run"})) for p in ("torch", "torch.compile")]
        best = _fastest(record)
        ratios = []
        for peer in ("torch", "torch.compile"):
            theirs = record["peers"].get(peer, {}).get("median_ms")
            ratios.append(f"{theirs / best[1]:.2f}x ({best[0]})" if best and theirs else "-")
        row = [f"{record['model']} {record['mode']}", *cells, *peers, *ratios, _fmt_gpu(record), _fmt_check(record)]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return "\n".join(lines)


def plot(folder: Path) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = json.loads((folder / "gpu.json").read_text())
    rows = results["models"]
    series = [f"IronAccel {d}" for d in results["environment"]["devices"]] + ["torch eager", "torch.compile"]

    def value(record: dict[str, Any], index: int) -> float:
        devices = results["environment"]["devices"]
        if index < len(devices):
            entry = record["devices"].get(devices[index], {})
        else:
            entry = record["peers"].get(("torch", "torch.compile")[index - len(devices)], {})
        return float(entry.get("median_ms", 0.0))

    timed = [value(r, i) for r in rows for i in range(len(series)) if value(r, i)]
    if not timed:
        print("nothing timed to plot", file=sys.stderr)
        return 1
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 4.8))
    width = 0.8 / len(series)
    log = max(timed) / min(timed) > 20  # from well under a ms to hundreds: only a log axis shows both
    floor = min(timed) / 2 if log else 0.0
    for index, name in enumerate(series):
        values = [value(r, index) for r in rows]
        positions = [i + (index - (len(series) - 1) / 2) * width for i in range(len(rows))]
        bars = ax.bar(positions, values, width, label=name)
        for bar, got in zip(bars, values, strict=True):
            if not got:
                ax.text(bar.get_x() + bar.get_width() / 2, floor, "-", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(rows)), [f"{r['model']}\n{r['mode']}" for r in rows], fontsize=8)
    if log:
        ax.set_yscale("log")
        ax.set_ylim(bottom=floor / 1.5)
    ax.set_ylabel("ms per inference (median, batch 1" + (", log scale)" if log else ")"))
    ax.set_title(f"Model zoo on {results['environment']['gpu_short']}, {results['date']}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "gpu.png", dpi=110)
    plt.close(fig)
    print(folder / "gpu.png")
    return 0
