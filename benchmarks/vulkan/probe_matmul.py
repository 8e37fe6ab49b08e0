#!/usr/bin/env python3
"""Time alternative MATMUL kernels on a GPU beside the shipped ones, in one run.

    python3 benchmarks/vulkan/probe_matmul.py [--device nvidia] [--n 8192]
        [--fp16-spirv LABEL=PATH[@ROWSxCOLS] ...] [--fp32-spirv LABEL=PATH[@TX,TY,TM,TN,BK] ...]
        [--fp32-tile TX,TY,TM,TN,BK ...]
        [--int8-spirv LABEL=PATH[@ROWSxCOLS] ...] [--int8-zero-points A,B] [--memory mapped,staged]
        [--shapes fixed,push]

Kernel work needs a quick answer to "is this variant faster, and still right?" without shipping it:
each ``--fp16-spirv`` replaces ``matmul_coop.spv`` and each ``--fp32-spirv`` replaces ``matmul.spv``
for one measurement (a fresh device each, so no pipeline is reused; with ``@TX,TY,TM,TN,BK`` at that
specialization); each ``--fp32-tile`` forces ``matmul.comp``'s specialization; each ``--int8-spirv``
replaces ``matmul_int_coop.spv`` (INT8 with the zero points of ``--int8-zero-points``, against
torch._int_mm, the error column the fraction of results that differ from the exact ones).
Every row is timed like bench_vulkan.py (through the runtime
contract, device buffers, 10 back-to-back submissions) and checked against float64 on the GPU; cuBLAS
on the same card is the first row of each type. ``--memory`` repeats every row with Device-domain
buffers in each placement: ``mapped`` (the shipped order: host-visible device-local memory first) and
``staged`` (device-local memory that is never mapped; host reads and writes through a staging buffer).
``--shapes`` does the same for how kernels learn the shape: ``fixed`` (the shipped rule: compiled in as
specialization constants, ADR 0022) and ``push`` (read from push constants, as for small products).
Prints a table last.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_vulkan

import ironaccel
from ironaccel.backends.vulkan import kernels
from ironaccel.backends.vulkan import memory as vk_memory
from ironaccel.backends.vulkan.ops import matmul as matmul_ops

REPS = 10


def _measure(device: str, n: int, dtype: str, data: dict[str, Any], torch: Any) -> dict[str, Any]:
    dev = ironaccel.open(f"vulkan:{device}")
    try:
        program = data["program"] if "program" in data else bench_vulkan.matmul_program(n, dtype)
        loaded = bench_vulkan.Loaded(dev, program, data["inputs"])
        try:
            ms = loaded.per_run_seconds(REPS) * 1e3
            if dtype == "int8":  # exact: the fraction of results that differ
                got = torch.from_numpy(loaded.output().reshape(n, n)).cuda()
                rel = float((got != data["ref"]).sum()) / n**2
            else:
                got = torch.from_numpy(loaded.output().reshape(n, n).astype(np.float64)).cuda()
                rel = float(torch.linalg.norm(got - data["ref"]) / torch.linalg.norm(data["ref"]))
            shaders = sorted({s.shader for s in bench_vulkan._plan_of(loaded).steps if hasattr(s, "shader")})
        finally:
            loaded.close()
    finally:
        dev.close()
    return {"ms": ms, "tflops": 2.0 * n**3 / ms / 1e9, "rel_error": rel, "kernels": "+".join(shaders)}


def _int8_data(torch: Any, n: int, a_zp: int, b_zp: int) -> dict[str, Any]:
    gen = torch.Generator(device="cuda").manual_seed(7)
    ta = torch.randint(-128, 128, (n, n), device="cuda", generator=gen, dtype=torch.int8)
    tb = torch.randint(-128, 128, (n, n), device="cuda", generator=gen, dtype=torch.int8)
    return {
        "peer_ms": bench_vulkan.cuda_ms(torch, lambda: torch._int_mm(ta, tb), REPS),
        "inputs": [ta.cpu().numpy()[None], tb.cpu().numpy()[None]],
        "ref": bench_vulkan.int8_reference(torch, ta, tb, a_zp, b_zp),
        "program": bench_vulkan.matmul_int8_program(n, a_zp, b_zp),
    }


def _data(torch: Any, n: int, dtype: str) -> dict[str, Any]:
    tdt = torch.float32 if dtype == "fp32" else torch.float16
    gen = torch.Generator(device="cuda").manual_seed(7)
    ta = torch.randn((n, n), device="cuda", generator=gen).to(tdt)
    tb = torch.randn((n, n), device="cuda", generator=gen).to(tdt)
    npdt = np.float32 if dtype == "fp32" else np.float16
    return {
        "peer_ms": bench_vulkan.cuda_ms(torch, lambda: torch.matmul(ta, tb), REPS),
        "inputs": [ta.cpu().numpy().astype(npdt).reshape(1, n, n), tb.cpu().numpy().astype(npdt).reshape(1, n, n)],
        "ref": torch.matmul(ta.double(), tb.double()),
    }


def _tiled_variant(item: str) -> tuple[str, bytes, tuple[int, int] | None]:
    """LABEL=PATH[@ROWSxCOLS] as (label, SPIR-V, workgroup tile or None for the replaced kernel's own)."""
    label, path = item.split("=", 1)
    path, _, tile = path.partition("@")
    shape = (int(tile.split("x")[0]), int(tile.split("x")[1])) if tile else None
    return label, Path(path).read_bytes(), shape


def _variants(args: argparse.Namespace) -> list[tuple[str, str, str, Any]]:
    """(dtype, label, shader replaced or "", replacement): the replacement is SPIR-V bytes, (SPIR-V, its
    workgroup tile), a forced Tile or None."""
    rows: list[tuple[str, str, str, Any]] = []
    if args.fp32_spirv or args.fp32_tile:
        rows.append(("fp32", "shipped", "", None))
        for item in args.fp32_spirv:
            label, path = item.split("=", 1)
            path, _, tile = path.partition("@")
            code = Path(path).read_bytes()
            forced = matmul_ops.Tile(*(int(v) for v in tile.split(","))) if tile else None
            rows.append(("fp32", label, "matmul", (code, forced) if forced else code))
        for item in args.fp32_tile:
            tile = matmul_ops.Tile(*(int(v) for v in item.split(",")))
            rows.append(("fp32", f"tile {item}", "", tile))
    if args.fp16_spirv:
        rows.append(("fp16", "shipped", "", None))
        for label, code, tile in map(_tiled_variant, args.fp16_spirv):
            rows.append(("fp16", label, "matmul_coop", (code, tile or matmul_ops.COOP_TILE)))
    if args.int8_spirv:
        rows.append(("int8", "shipped", "", None))
        for label, code, tile in map(_tiled_variant, args.int8_spirv):
            rows.append(("int8", label, "matmul_int_coop", (code, tile or matmul_ops.INT8_COOP_TILE)))
    return rows


@contextlib.contextmanager
def replaced(
    dtype: str, shader: str, replacement: Any, staged: bool = False, fixed_shapes: bool = True
) -> Iterator[None]:
    """Within the block, devices opened run ``replacement`` (a row of :func:`_variants`) in place of the
    shipped kernel or tile; ``staged`` puts their Device-domain buffers in never-mapped memory;
    ``fixed_shapes`` False keeps every shape in push constants."""
    shipped_tile_for, shipped_coop_tile = matmul_ops.tile_for, matmul_ops.COOP_TILE
    shipped_int_tile = matmul_ops.INT8_COOP_TILE
    shipped_fixed = matmul_ops.FIXED_SHAPE_WORK
    if not fixed_shapes:
        matmul_ops.FIXED_SHAPE_WORK = 1 << 62
    original = kernels._spirv_cache.get(shader) if shader else None
    vk_memory.Memory.__init__.__defaults__ = (staged,)
    try:
        if isinstance(replacement, bytes):
            kernels._spirv_cache[shader] = replacement
        elif isinstance(replacement, tuple) and dtype == "fp32":
            kernels._spirv_cache[shader], forced = replacement
            matmul_ops.tile_for = lambda h, w, m, t=forced: t
        elif isinstance(replacement, tuple) and dtype == "int8":
            kernels._spirv_cache[shader], matmul_ops.INT8_COOP_TILE = replacement
        elif isinstance(replacement, tuple):
            kernels._spirv_cache[shader], matmul_ops.COOP_TILE = replacement
        elif replacement is not None:
            matmul_ops.tile_for = lambda h, w, m, t=replacement: t
        yield
    finally:
        matmul_ops.FIXED_SHAPE_WORK = shipped_fixed
        vk_memory.Memory.__init__.__defaults__ = (False,)
        matmul_ops.tile_for = shipped_tile_for
        matmul_ops.COOP_TILE = shipped_coop_tile
        matmul_ops.INT8_COOP_TILE = shipped_int_tile
        if shader:
            kernels._spirv_cache.pop(shader, None)
            if original is not None:
                kernels._spirv_cache[shader] = original


def add_variant_options(parser: argparse.ArgumentParser) -> None:
    """The options :func:`_variants` reads (shared with pipeline_stats.py)."""
    parser.add_argument("--fp16-spirv", action="append", default=[], metavar="LABEL=PATH[@ROWSxCOLS]")
    parser.add_argument("--fp32-spirv", action="append", default=[], metavar="LABEL=PATH[@TX,TY,TM,TN,BK]")
    parser.add_argument("--fp32-tile", action="append", default=[], metavar="TX,TY,TM,TN,BK")
    parser.add_argument("--int8-spirv", action="append", default=[], metavar="LABEL=PATH[@ROWSxCOLS]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="nvidia")
    parser.add_argument("--n", type=int, default=8192, help="H = C = W (default 8192)")
    add_variant_options(parser)
    parser.add_argument("--int8-zero-points", default="-3,5", help="A,B zero points of the int8 rows")
    parser.add_argument("--memory", default="mapped", help="comma-separated placements: mapped, staged")
    parser.add_argument("--shapes", default="fixed", help="comma-separated: fixed (compiled in), push")
    args = parser.parse_args()
    placements = args.memory.split(",")
    if not set(placements) <= {"mapped", "staged"}:
        parser.error("--memory takes mapped and/or staged")
    shapes = args.shapes.split(",")
    if not set(shapes) <= {"fixed", "push"}:
        parser.error("--shapes takes fixed and/or push")
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    table = ["| type | kernel | ms | TFLOP/s | vs cuBLAS | rel error |", "|---|---|---|---|---|---|"]
    data: dict[str, dict[str, Any]] = {}
    rows = [(p, f, *v) for v in _variants(args) for p in placements for f in shapes]
    for placement, shape_rule, dtype, label, shader, replacement in rows:
        if len(placements) > 1:
            label = f"{label}, {placement}"
        if len(shapes) > 1:
            label = f"{label}, {shape_rule} shape"
        if dtype not in data:
            if dtype == "int8":
                a_zp, b_zp = (int(v) for v in args.int8_zero_points.split(","))
                data[dtype] = _int8_data(torch, args.n, a_zp, b_zp)
            else:
                data[dtype] = _data(torch, args.n, dtype)
            peer = data[dtype]["peer_ms"]
            name = "torch._int_mm" if dtype == "int8" else "cuBLAS"
            table.append(f"| {dtype} | {name} | {peer:.2f} | {2.0 * args.n**3 / peer / 1e9:.1f} | 1.00x | |")
        try:
            with replaced(dtype, shader, replacement, placement == "staged", shape_rule == "fixed"):
                r = _measure(args.device, args.n, dtype, data[dtype], torch)
            row = (
                f"| {dtype} | {label} ({r['kernels']}) | {r['ms']:.2f} | {r['tflops']:.1f} | "
                f"{data[dtype]['peer_ms'] / r['ms']:.2f}x | {r['rel_error']:.1e} |"
            )
        except Exception as exc:  # noqa: BLE001 - a failing variant is a row of the table
            row = f"| {dtype} | {label} | error: {type(exc).__name__}: {str(exc)[:100]} | | | |"
        print(row, flush=True)
        table.append(row)
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
