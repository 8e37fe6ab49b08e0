#!/usr/bin/env python3
"""NVFP4 projections on the CUDA backend against torch on the same GPU, in one run.

    python3 benchmarks/cuda/bench_nvfp4.py [--quick] [--out DIR]

For m = 1 (and a few larger m), n = k = 8192 unless ``--quick``, ``y = x @ w_hat.T`` with NVFP4 weights:

* **kernel**: CUDA events around a torch CUDA graph that replays the loaded program's commands ``reps``
  times on resident operands (the projection's own launches and products, no copies), per run;
* **exe()**: the user call with the weights already on the device (``dev.array(q)``) and x from the host;
* peers in the same run, CUDA events around torch: fp16 ``x @ w16.T`` (cuBLAS) and a device copy of the
  weight bytes (packed + scales), for the bandwidth ceiling.

Every result is checked against x @ w_hat.T in float64 (relative to the largest element).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

import ironaccel  # noqa: E402
from ironaccel import nvfp4  # noqa: E402

TARGET_M1_MS = 0.015  # kernel time asked of m = 1, n = k = 8192 on an H100
TARGET_COPY_RATIO = 0.8  # of the device copy's bandwidth (bytes read + written) on the weight bytes
TARGET_TORCH_RATIO = 3.0  # x torch's fp16 GEMV


def _events_ms(torch: Any, fn: Any, reps: int) -> float:
    """Milliseconds per call of ``fn`` between CUDA events, after a warm-up call."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def _kernel_ms(
    dev: Any, torch: Any, projection: Any, operands: list[np.ndarray], reps: int
) -> tuple[float, np.ndarray]:
    """The plan's commands replayed from a torch CUDA graph on the program's own arena, per run; and y."""
    from ironaccel.backends.cuda import nvfp4 as planning
    from ironaccel.backends.cuda.program import LoadedProgram

    acc = dev.accelerator
    device = acc.device
    plan = planning.build(projection)
    with device.use():
        program = LoadedProgram(device, acc.modules, plan)
        try:
            driver = device.api
            for place, array in zip(plan.inputs, operands, strict=True):
                data = np.ascontiguousarray(array)
                driver.cuMemcpyHtoD(program.address(place), data.ctypes.data, data.nbytes)
            stream = torch.cuda.Stream()
            graph = torch.cuda.CUDAGraph()
            torch.cuda.synchronize()
            with torch.cuda.graph(graph, stream=stream):
                handle = driver.CUstream(torch.cuda.current_stream().cuda_stream)
                for _ in range(reps):
                    for command in program.commands:
                        command.enqueue(driver, handle)
            ms = _events_ms(torch, graph.replay, 3) / reps
            y = np.empty(projection.outputs[0].shape, np.float32)
            driver.cuMemcpyDtoH(y.ctypes.data, program.address(plan.outputs[0]), y.nbytes)
            return ms, y
        finally:
            program.destroy()


def _rel_err(y: np.ndarray, x: np.ndarray, w_hat: np.ndarray) -> float:
    want = x.astype(np.float64) @ w_hat.astype(np.float64).T
    return float(np.abs(y - want).max() / np.abs(want).max())


def bench_shape(dev: Any, torch: Any, m: int, n: int, k: int, reps: int) -> dict[str, Any]:
    """One projection shape: our kernel time, exe() with device-resident weights, torch's fp16 product and
    a device copy of the weight bytes."""
    rng = np.random.default_rng(m)
    q = nvfp4.quantize((rng.standard_normal((n, k)) * 0.02).astype(np.float32))
    x = rng.standard_normal((m, k)).astype(np.float32)
    projection = nvfp4.Projection(m=m, n=n, k=k)
    kernel, y = _kernel_ms(dev, torch, projection, [x, q.packed, q.scales, np.asarray(q.tensor_scale)], reps)
    w_hat = nvfp4.dequantize(q)
    exe = dev.compile(projection, resident_bytes=1 << 40)
    weights = dev.array(q)
    try:
        exe(x, weights)  # warm
        start = time.perf_counter()
        for _ in range(reps):
            (called,) = exe(x, weights)
        call = (time.perf_counter() - start) / reps * 1e3
    finally:
        exe.close()
    weight_bytes = q.packed.nbytes + q.scales.nbytes
    result: dict[str, Any] = {
        "shape": f"m={m} n={n} k={k}",
        "m": m,
        "kernel_ms": kernel,
        "exe_ms": call,
        "rel_err": _rel_err(y, x, w_hat),
        "exe_rel_err": _rel_err(called, x, w_hat),
        "weights_tb_s": weight_bytes / (kernel * 1e-3) / 1e12,
    }
    if torch is not None:
        cuda = torch.device("cuda")
        w16 = torch.from_numpy(w_hat).to(cuda, torch.float16)
        x16 = torch.from_numpy(x).to(cuda, torch.float16)
        source = torch.empty(weight_bytes, dtype=torch.uint8, device=cuda)
        target = torch.empty_like(source)
        result["torch_fp16_ms"] = _events_ms(torch, lambda: x16 @ w16.T, reps)
        copy = _events_ms(torch, lambda: target.copy_(source), reps)
        result["copy_ms"] = copy
        result["copy_tb_s"] = 2 * weight_bytes / (copy * 1e-3) / 1e12  # read + written
        result["vs_torch"] = result["torch_fp16_ms"] / kernel
        result["vs_copy"] = result["weights_tb_s"] / result["copy_tb_s"]
    return result


def bench_nvfp4(dev: Any, torch: Any, quick: bool = False, ms: tuple[int, ...] | None = None) -> dict[str, Any]:
    """Every shape of the run (n = k = 8192; 1024 with ``quick``; rows of x ``ms``, the first being 1) and
    whether m = 1 met its targets."""
    size, reps = (1024, 5) if quick else (8192, 50)
    ms = ms or ((1, 8) if quick else (1, 2, 8, 32, 64, 256))
    rows = [bench_shape(dev, torch, m, size, size, reps) for m in ms]
    first = rows[0]
    met = first["kernel_ms"] <= TARGET_M1_MS and first.get("vs_torch", 0) >= TARGET_TORCH_RATIO
    met = met and first.get("vs_copy", 0) >= TARGET_COPY_RATIO
    return {"device": dev.info.name, "rows": rows, "m1_targets_met": bool(met)}


def table(result: dict[str, Any]) -> str:
    verdict = "met" if result["m1_targets_met"] else "missed"
    lines = [
        f"NVFP4 projections on {result['device']} (targets for m=1: <= {TARGET_M1_MS} ms,"
        f" >= {TARGET_TORCH_RATIO}x torch fp16, >= {TARGET_COPY_RATIO}x copy bandwidth: {verdict})",
        "| shape | kernel ms | weights TB/s | exe() ms | torch fp16 ms | x torch | copy TB/s | x copy | rel err |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        peers = [f"{r[key]:.4f}" if key in r else "-" for key in ("torch_fp16_ms", "vs_torch", "copy_tb_s", "vs_copy")]
        lines.append(
            f"| {r['shape']} | {r['kernel_ms']:.4f} | {r['weights_tb_s']:.2f} | {r['exe_ms']:.3f} | "
            + " | ".join(peers)
            + f" | {r['rel_err']:.1e} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = k = 1024, few repetitions")
    parser.add_argument("--out", type=Path, help="also write nvfp4.md and nvfp4.json here")
    parser.add_argument("--m", type=int, nargs="+", help="rows of x to measure (default: a sweep from 1)")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device for torch", file=sys.stderr)
        return 1
    torch.cuda.init()
    with ironaccel.open("cuda") as dev:
        result = bench_nvfp4(dev, torch, args.quick, tuple(args.m) if args.m else None)
    text = table(result)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "nvfp4.md").write_text(text + "\n")
        (args.out / "nvfp4.json").write_text(json.dumps(result, indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
