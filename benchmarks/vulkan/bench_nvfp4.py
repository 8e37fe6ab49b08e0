#!/usr/bin/env python3
"""NVFP4 projections on Vulkan against torch on the same GPU, in one run.

    python3 benchmarks/vulkan/bench_nvfp4.py [--device nvidia] [--out DIR] [--quick] [--sweep]

For each shape, ``y = x @ w_hat.T`` with NVFP4 weights (n = k = 8192 unless noted):

* **kernel**: GPU timestamps around the loaded program's dispatches, repeated (``gpu_timer.py``);
* **submit**: back-to-back submissions of the loaded program on resident buffers (a direct recording:
  no copies), per submission;
* **exe()**: the user call ``exe(x, packed, scales, tensor_scale)`` with numpy arrays, end to end
  (uploads the weights, runs, reads y back);
* peers in the same run, CUDA events around torch: fp16 ``x @ w.T`` (cuBLAS), a plain-torch decode of
  the NVFP4 weights then the product, and a 1 GiB device copy for the bandwidth ceiling.

Every Vulkan result is checked against act(x @ w_hat.T) in float64 (relative to the largest element).
``--sweep`` also times GEMV against the MATMUL path at m = 32, 64, 128 and the cooperative-matrix
path's k slices at m = 64 and 4096. Prints the table last; with ``--out DIR`` (as scripts/gpu-check
passes) also writes nvfp4.md / nvfp4.json there. benchmarks/vulkan/results.md carries this table from
the same run as bench_vulkan.py's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE))

from bench_vulkan import Loaded, cuda_ms  # noqa: E402
from gpu_timer import kernel_ms, loaded_program  # noqa: E402

import ironaccel  # noqa: E402
from ironaccel import nvfp4  # noqa: E402
from ironaccel.backends.vulkan import nvfp4 as planning  # noqa: E402

PATHS = {"nvfp4_gemv": "gemv", "nvfp4_decode16": "coop fp16 hi/lo", "nvfp4_decode": "decode+fp32 matmul"}
TARGET_M1_MS = 0.013  # kernel time asked of m = 1, n = k = 8192 (3x torch fp16 on a datacenter GPU)
TARGET_LARGE_M = 0.5  # x cuBLAS HGEMM, from m = 64


def _torch_peers(torch: Any, q: nvfp4.QuantizedWeights, x: np.ndarray, reps: int) -> dict[str, float]:
    """fp16 GEMM on the decoded weights, and decode-then-GEMM in plain torch from the packed form."""
    cuda = torch.device("cuda")
    w16 = torch.from_numpy(nvfp4.dequantize(q)).to(cuda, torch.float16)
    x16 = torch.from_numpy(x).to(cuda, torch.float16)
    x32 = torch.from_numpy(x).to(cuda)
    packed = torch.from_numpy(q.packed).to(cuda)
    scales = torch.from_numpy(np.asarray(q.scales).view(np.uint8)).to(cuda)
    e2m1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], device=cuda)
    e4m3 = torch.from_numpy(nvfp4.codec.E4M3.copy()).to(cuda)
    ts = float(q.tensor_scale)

    def decode_then_gemm() -> Any:
        codes = torch.stack([packed & 15, packed >> 4], dim=-1).reshape(packed.shape[0], -1).long()
        w = e2m1[codes].reshape(codes.shape[0], -1, 16) * e4m3[scales.long()][..., None] * ts
        return x32 @ w.reshape(codes.shape[0], -1).T

    return {
        "torch_fp16_ms": cuda_ms(torch, lambda: x16 @ w16.T, reps),
        "torch_decode_gemm_ms": cuda_ms(torch, decode_then_gemm, max(3, reps // 5)),
    }


def _check(y: np.ndarray, x: np.ndarray, w_hat: np.ndarray) -> float:
    want = x.astype(np.float64) @ w_hat.astype(np.float64).T
    return float(np.abs(y - want).max() / np.abs(want).max())


def bench_projection(dev: Any, torch: Any, m: int, n: int, k: int, reps: int) -> dict[str, Any]:
    rng = np.random.default_rng(m)
    q = nvfp4.quantize((rng.standard_normal((n, k)) * 0.02).astype(np.float32))
    x = rng.standard_normal((m, k)).astype(np.float32)
    projection = nvfp4.Projection(m=m, n=n, k=k)
    loaded = Loaded(dev, projection, [x, q.packed, q.scales, np.asarray(q.tensor_scale)])
    try:
        program = loaded_program(dev.accelerator)
        kernel = kernel_ms(dev.accelerator, program, reps)
        path = PATHS[program.plan.steps[0].shader]
        submit = loaded.per_run_seconds(reps) * 1e3
        err = _check(loaded.output(), x, nvfp4.dequantize(q))
    finally:
        loaded.close()
    exe = dev.compile(projection, resident_bytes=1 << 40)
    exe(x, q.packed, q.scales, q.tensor_scale)  # warm
    start = time.perf_counter()
    for _ in range(3):
        exe(x, q.packed, q.scales, q.tensor_scale)
    call = (time.perf_counter() - start) / 3 * 1e3
    exe.close()
    peers = _torch_peers(torch, q, x, reps)
    weight_bytes = q.packed.nbytes + q.scales.nbytes
    return {
        "shape": f"m={m} n={n} k={k}",
        "m": m,
        "path": path,
        "kernel_ms": kernel,
        "submit_ms": submit,
        "call_ms": call,
        "rel_err": err,
        "weights_tb_s": weight_bytes / (kernel * 1e-3) / 1e12,
        "tflops": 2 * m * n * k / (kernel * 1e-3) / 1e12,
        **peers,
    }


def bench_batched(dev: Any, torch: Any, batch: int, n: int, k: int, reps: int) -> dict[str, Any]:
    rng = np.random.default_rng(batch)
    q = nvfp4.quantize((rng.standard_normal((batch, n, k)) * 0.02).astype(np.float32))
    x = rng.standard_normal((batch, k)).astype(np.float32)
    loaded = Loaded(dev, nvfp4.BatchedProjection(batch=batch, n=n, k=k), [x, q.packed, q.scales, q.tensor_scale])
    try:
        kernel = kernel_ms(dev.accelerator, loaded_program(dev.accelerator), reps)
        loaded.finish(loaded.submit())  # the timer runs in the program's arena; y comes from a submission
        y = loaded.output()
    finally:
        loaded.close()
    w_hat = nvfp4.dequantize(q)
    err = max(_check(y[b : b + 1], x[b : b + 1], w_hat[b]) for b in range(batch))
    cuda = torch.device("cuda")
    w16 = torch.from_numpy(w_hat).to(cuda, torch.float16)
    x16 = torch.from_numpy(x).to(cuda, torch.float16)[:, :, None]
    torch_ms = cuda_ms(torch, lambda: torch.bmm(w16, x16), reps)
    weight_bytes = q.packed.nbytes + q.scales.nbytes
    return {
        "shape": f"batched {batch} x (n={n} k={k})",
        "kernel_ms": kernel,
        "rel_err": err,
        "weights_tb_s": weight_bytes / (kernel * 1e-3) / 1e12,
        "torch_fp16_ms": torch_ms,
    }


def _time(dev: Any, q: nvfp4.QuantizedWeights, x: np.ndarray, reps: int) -> tuple[float, np.ndarray]:
    n, k = q.packed.shape[0], x.shape[1]
    loaded = Loaded(dev, nvfp4.Projection(m=len(x), n=n, k=k), [x, q.packed, q.scales, q.tensor_scale])
    try:
        ms = kernel_ms(dev.accelerator, loaded_program(dev.accelerator), reps)
        loaded.finish(loaded.submit())
        return ms, loaded.output()
    finally:
        loaded.close()


def sweep(dev: Any, reps: int) -> list[dict[str, Any]]:
    """GEMV against the MATMUL path where the plan switches between them (m = 32, 64, 128), and the
    cooperative-matrix path's k slice (its accuracy and its time) at m = 64 and 4096."""
    rows = []
    rng = np.random.default_rng(0)
    n = k = 8192
    q = nvfp4.quantize((rng.standard_normal((n, k)) * 0.02).astype(np.float32))
    w_hat = nvfp4.dequantize(q)
    shipped = (planning.TILED_FROM_M, planning.COOP_SLICE)
    try:
        for m in (32, 64, 128):
            x = rng.standard_normal((m, k)).astype(np.float32)
            for variant, threshold in (("gemv", 1 << 30), ("matmul path", 1)):
                planning.TILED_FROM_M = threshold
                rows.append({"variant": variant, "m": m, "kernel_ms": _time(dev, q, x, reps)[0]})
        planning.TILED_FROM_M = 1
        for m in (64, 4096):
            x = rng.standard_normal((m, k)).astype(np.float32)
            for ks in (512, 1024, 2048, 8192):
                planning.COOP_SLICE = ks
                ms, y = _time(dev, q, x, reps if m < 4096 else 5)
                rows.append({"variant": f"slice {ks}", "m": m, "kernel_ms": ms, "rel_err": _check(y, x, w_hat)})
    finally:
        planning.TILED_FROM_M, planning.COOP_SLICE = shipped
    return rows


def table(results: dict[str, Any]) -> str:
    lines = [
        "| shape | path | kernel ms | TB/s weights | submit ms | exe() ms | torch fp16 ms | torch decode+GEMM ms"
        " | kernel vs fp16 | rel err |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["projections"]:
        lines.append(
            f"| {r['shape']} | {r['path']} | {r['kernel_ms']:.4f} | {r['weights_tb_s']:.2f} | {r['submit_ms']:.4f}"
            f" | {r['call_ms']:.2f} | {r['torch_fp16_ms']:.4f} | {r['torch_decode_gemm_ms']:.3f}"
            f" | {r['torch_fp16_ms'] / r['kernel_ms']:.2f}x | {r['rel_err']:.1e} |"
        )
    for r in results["batched"]:
        lines.append(
            f"| {r['shape']} | gemv | {r['kernel_ms']:.4f} | {r['weights_tb_s']:.2f} | | | {r['torch_fp16_ms']:.4f}"
            f" (bmm) | | {r['torch_fp16_ms'] / r['kernel_ms']:.2f}x | {r['rel_err']:.1e} |"
        )
    lines.append(f"\nDevice copy (torch clone of 1 GiB): {results['copy_tb_s']:.2f} TB/s read + write.")
    m1 = next((r for r in results["projections"] if r["m"] == 1), None)
    if m1:
        verdict = "met" if m1["kernel_ms"] <= TARGET_M1_MS else "missed"
        lines.append(f"m = 1 kernel {m1['kernel_ms']:.4f} ms against the target {TARGET_M1_MS} ms: {verdict}.")
    for r in results["projections"]:
        if r["m"] >= 64:
            ratio = r["torch_fp16_ms"] / r["kernel_ms"]
            verdict = "met" if ratio >= TARGET_LARGE_M else "missed"
            lines.append(f"m = {r['m']}: {ratio:.2f}x cuBLAS HGEMM against the target {TARGET_LARGE_M}x: {verdict}.")
    if results.get("sweep"):
        lines.append("\nSweep, kernel ms (n = k = 8192):")
        lines += [
            f"- {s['variant']} m={s['m']}: {s['kernel_ms']:.4f}"
            + (f" (rel err {s['rel_err']:.1e})" if "rel_err" in s else "")
            for s in results["sweep"]
        ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="nvidia", help="Vulkan device: index, UUID or name (default nvidia)")
    parser.add_argument("--out", type=Path, help="folder for nvfp4.md / nvfp4.json (default: print only)")
    parser.add_argument("--quick", action="store_true", help="small shapes (a check that the script runs)")
    parser.add_argument("--sweep", action="store_true", help="also time the GEMV kernel's tile alternatives")
    args = parser.parse_args()
    import torch

    dev = ironaccel.open(f"vulkan:{args.device}")
    warm = torch.randn(4096, 4096, device="cuda")
    start = time.perf_counter()
    while time.perf_counter() - start < 1.0:  # the GPU's clocks up before the first figure
        warm @ warm
    torch.cuda.synchronize()
    size, reps = (1024, 5) if args.quick else (8192, 50)
    ms = [1, 8] if args.quick else [1, 2, 4, 8, 16, 64, 4096]
    results: dict[str, Any] = {
        "device": dev.info.name,
        "date": dt.date.today().isoformat(),
        "torch": torch.__version__,
        "projections": [bench_projection(dev, torch, m, size, size, reps if m < 4096 else 5) for m in ms],
        "batched": [bench_batched(dev, torch, 8, size // 2, size // 2, reps)],
    }
    src = torch.empty(1 << 28, device="cuda")  # 1 GiB of fp32
    copy_ms = cuda_ms(torch, lambda: src.clone(), 20)
    results["copy_tb_s"] = 2 * src.numel() * 4 / (copy_ms * 1e-3) / 1e12
    if args.sweep:
        results["sweep"] = sweep(dev, reps)
    dev.close()
    text = table(results)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "nvfp4.json").write_text(json.dumps(results, indent=1))
        title = f"# NVFP4 projections on {results['device']} ({results['date']})"
        (args.out / "nvfp4.md").write_text(f"{title}\n\n{text}\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
