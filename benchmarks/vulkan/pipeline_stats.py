#!/usr/bin/env python3
"""What the driver compiled the MATMUL kernels (and any variant of them) into, next to each other.

    python3 benchmarks/vulkan/pipeline_stats.py [--device nvidia] [--n 8192] [--types fp32,fp16,int8]
        [--fp16-spirv LABEL=PATH[@ROWSxCOLS] ...] [--fp32-spirv LABEL=PATH[@TX,TY,TM,TN,BK] ...]
        [--fp32-tile TX,TY,TM,TN,BK ...] [--int8-spirv LABEL=PATH[@ROWSxCOLS] ...]

For each type, loads the n^3 MATMUL program with the shipped kernels, then once per variant (the options
probe_matmul.py takes, on a fresh device each), and prints the driver's statistics of every pipeline the
program made: registers per invocation, shared and local memory, spills, in whatever terms the driver
reports (VK_KHR_pipeline_executable_properties; see src/ironaccel/backends/vulkan/statistics.py). Nothing
runs on the device: loading a program creates its pipelines. A variant's speed is probe_matmul.py's job;
this says what stands behind it, such as how many workgroups fit on a multiprocessor.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_vulkan
import probe_matmul

from ironaccel.backends import vulkan
from ironaccel.runtime import ArtifactRef
from ironaccel.tosa import write


def _program(dtype: str, n: int) -> Any:
    if dtype == "int8":
        return bench_vulkan.matmul_int8_program(n, -3, 5)
    return bench_vulkan.matmul_program(n, dtype)


def statistics_of(device: str, program: Any) -> dict[str, list[Any]]:
    """The statistics of every pipeline ``program`` makes on a fresh device."""
    acc = vulkan.open_accelerator(device, pipeline_statistics=True)
    try:
        ctx = acc.create_context()
        artifact = write(program)
        loaded = acc.load_program(ctx, ArtifactRef(artifact, 1 << 36))
        try:
            return acc.pipeline_statistics()
        finally:
            acc.unload_program(loaded)
            acc.destroy_context(ctx)
    finally:
        acc.close()


def table(rows: list[tuple[str, str, str, dict[str, Any]]]) -> str:
    """A markdown table: one line per (type, variant, pipeline), one column per statistic any row has."""
    names: list[str] = []
    for *_, stats in rows:
        names += [k for k in stats if k not in names]
    lines = [
        "| type | variant | pipeline | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for dtype, label, key, stats in rows:
        cells = [_cell(stats.get(name, "")) for name in names]
        lines.append(f"| {dtype} | {label} | {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="nvidia", help="vulkan device selector (index, name, uuid)")
    parser.add_argument("--n", type=int, default=8192, help="H = C = W (default 8192): the shape picks the tiles")
    parser.add_argument("--types", default="fp32,fp16,int8", help="which shipped MATMUL kernels to list")
    probe_matmul.add_variant_options(parser)
    args = parser.parse_args()
    probe = vulkan.open_accelerator(args.device)
    name, reports = probe.physical.name, probe.physical.reports_pipelines
    probe.close()
    if not reports:
        print(f"{name} does not report pipeline statistics (no VK_KHR_pipeline_executable_properties)")
        return 1
    rows: list[tuple[str, str, str, dict[str, Any]]] = []
    types = [dtype for dtype in args.types.split(",") if dtype]
    # the shipped kernels with the shape compiled in (ADR 0022) and read from push constants
    wanted = [(f"shipped{rule}", dtype, "", None, not rule) for dtype in types for rule in ("", ", push shape")]
    variants = [(label, t, shader, r, True) for t, label, shader, r in probe_matmul._variants(args) if shader or r]
    for label, dtype, shader, replacement, fixed in [*wanted, *variants]:
        try:
            with probe_matmul.replaced(dtype, shader, replacement, fixed_shapes=fixed):
                found = statistics_of(args.device, _program(dtype, args.n))
        except Exception as exc:  # noqa: BLE001 - a variant that fails is a line of the table
            rows.append((dtype, label, f"error: {type(exc).__name__}: {str(exc)[:120]}", {}))
            continue
        for key, executables in sorted(found.items()):
            for ex in executables:
                stats = dict(ex.statistics)
                stats["subgroup size"] = ex.subgroup_size
                rows.append((dtype, label, key if len(executables) == 1 else f"{key} {ex.name}", stats))
        print(f"{dtype} {label}: {len(found)} pipelines", flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
