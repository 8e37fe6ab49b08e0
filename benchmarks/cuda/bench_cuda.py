#!/usr/bin/env python3
"""The CUDA backend against torch (cuBLAS / cuBLASLt, eager and CUDA graphs) on the same card, in one run.

    python3 benchmarks/cuda/bench_cuda.py [--out DIR] [--quick] [--skip NAMES]

Measures, each IronAccel figure through the runtime contract (buffers filled once on the device, the
loaded program submitted back to back, per-submission time = total / count) unless it says otherwise:

* MATMUL 8192^3: fp16 vs torch.matmul (cuBLAS HGEMM); fp32 vs torch.matmul with TF32 off (SGEMM); fp8
  E4M3 to fp16 vs torch._scaled_mm with unit scales and B column-major (cuBLASLt's fp8 form); int8
  with zero points vs torch._int_mm in its faster form (B column-major, cuBLASLt's fast path, and B
  row-major are both timed), checked exactly against torch's int64 sum; and without zero points, the
  product alone.
  Float results against float64 on the GPU.
* ADD of two 2^28-element fp32 tensors as bandwidth (bytes read + written) vs a device copy (clone).
* Small programs: ``exe(x)`` with x and the result device arrays (median wall time of the user call), vs
  torch eager running one tiny kernel and synchronizing; a prepared launch of a 1-operator and a
  50-operator program (launch -> complete), vs torch replaying a CUDA graph of 1 and of 50 tiny kernels.
* The bundled programs (src/ironaccel/models) end to end (``exe`` wall time) vs torch eager and
  torch.compile on the same inputs; the fp32 ones against their recorded torch outputs.

The MATMUL, ADD, latency and bundled-program measurements are bench_vulkan.py's own functions, run on the
CUDA device: the two scripts measure the same things the same way. Writes results.md / results.json
to --out (default benchmarks/cuda) and prints the table last.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "vulkan"))

from bench_vulkan import (  # noqa: E402
    Loaded,
    add_chain,
    bench_add,
    bench_latency,
    bench_matmul,
    bench_matmul_int8,
    bench_models,
    collector_off,
    cuda_ms,
)

import ironaccel  # noqa: E402
from ironaccel.tosa import ProgramBuilder  # noqa: E402

# (measurement, target): ratios are ours relative to the peer (higher is better) unless marked "us"
TARGETS = {
    "matmul_fp16": 0.95,
    "matmul_fp32": 0.95,
    "matmul_fp8": 0.9,
    "matmul_int8": 1.0,
    "add": 0.9,
    "exe_us": 12.0,
    "prepared_1_us": 8.0,
    "prepared_50_us": 60.0,
    "models": 2.0,
}


def bench_matmul_fp8(dev: Any, torch: Any, n: int, reps: int) -> dict[str, Any]:
    """fp8 E4M3 MATMUL to fp16 against torch._scaled_mm (unit scales, B column-major: the form cuBLASLt's fp8
    kernels take), each checked against the float64 product of the same fp8 values."""
    import ml_dtypes

    gen = torch.Generator(device="cuda").manual_seed(7)
    ta = torch.randn((n, n), device="cuda", generator=gen).to(torch.float8_e4m3fn)
    tb = torch.randn((n, n), device="cuda", generator=gen).to(torch.float8_e4m3fn)
    tb_columns = tb.t().contiguous().t()
    one = torch.ones((), device="cuda")

    def peer_call() -> Any:
        return torch._scaled_mm(ta, tb_columns, scale_a=one, scale_b=one, out_dtype=torch.float16)

    peer = cuda_ms(torch, peer_call, reps)
    host = [t.cpu().view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn).reshape(1, n, n) for t in (ta, tb)]
    b = ProgramBuilder()
    x, y = b.input("a", (1, n, n), "fp8e4m3"), b.input("b", (1, n, n), "fp8e4m3")
    zero = np.zeros(1, ml_dtypes.float8_e4m3fn)
    b.output(b.matmul(x, y, b.const(zero, "fp8e4m3"), b.const(zero, "fp8e4m3")))
    loaded = Loaded(dev, b.build(), host)
    try:
        ours = loaded.per_run_seconds(reps) * 1e3
        got = torch.from_numpy(loaded.output().reshape(n, n).astype(np.float64)).cuda()
    finally:
        loaded.close()
    ref = torch.matmul(ta.float().double(), tb.float().double())
    rel = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
    peer_rel = float(torch.linalg.norm(peer_call().double() - ref) / torch.linalg.norm(ref))
    flop = 2.0 * n**3
    return {"ironaccel_ms": ours, "peer_ms": peer, "ratio": peer / ours, "ironaccel_tflops": flop / ours / 1e9,
            "peer_tflops": flop / peer / 1e9, "rel_error": rel, "peer_rel_error": peer_rel}  # fmt: skip


def _wall_us(fn: Any, count: int) -> float:
    for _ in range(50):
        fn()
    samples = []
    with collector_off():
        for _ in range(count):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def bench_small(dev: Any, torch: Any, count: int) -> dict[str, Any]:
    """exe(x) on device arrays vs one torch eager kernel; torch's graph replays of 1 and 50 kernels."""
    b = ProgramBuilder()
    x = b.input("x", (256,), "fp32")
    b.output(b.add(x, x))
    exe = dev.compile(b.build())
    try:
        xd, yd = dev.array(np.ones(256, np.float32)), dev.empty((256,), np.float32)
        exe_us = _wall_us(lambda: exe(xd, out=[yd]), count)
        correct = bool(np.array_equal(yd.numpy(), np.full(256, 2, np.float32)))
    finally:
        exe.close()
    t = torch.ones(256, device="cuda")

    def eager() -> None:
        torch.add(t, t)
        torch.cuda.synchronize()

    graphs = {}
    for ops in (1, 50):
        stream = torch.cuda.Stream()
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                v = t
                for _ in range(ops):
                    v = v + t
        torch.cuda.synchronize()

        def replay(g: Any = graph) -> None:
            g.replay()
            torch.cuda.synchronize()

        graphs[ops] = _wall_us(replay, count)
    return {"exe_us": exe_us, "correct": correct, "torch_eager_us": _wall_us(eager, count),
            "torch_graph_1_us": graphs[1], "torch_graph_50_us": graphs[50]}  # fmt: skip


def bench_compiled_models(torch: Any, reps: int) -> dict[str, float]:
    """torch.compile of the fp32 modules the bundled programs came from (wall time per call, ms)."""
    import export_models

    torch.manual_seed(0)
    modules = {"cnn_fp32": export_models.SmallCNN().eval(), "attention_fp32": export_models.AttentionBlock().eval()}
    out = {}
    root = HERE.parents[1] / "src" / "ironaccel" / "models"
    for name, module in modules.items():
        x = torch.from_numpy(np.load(root / f"{name}.torch.npz")["input"]).cuda()
        compiled = torch.compile(module.cuda())
        with torch.no_grad():
            for _ in range(3):
                compiled(x)
            torch.cuda.synchronize()

            def call(c: Any = compiled, t: Any = x) -> None:
                c(t)
                torch.cuda.synchronize()

            out[name] = _wall_us(call, reps) / 1e3
    return out


def planned_launches(ops: int) -> int:
    """Kernel launches in the CUDA plan of bench_latency's chain of ``ops`` ADDs (fusion joins them)."""
    from ironaccel.backends.cuda import plan

    return len(plan.build(add_chain(ops)).launches)


def _hit(value: float | None, target: float, smaller: bool = False) -> str:
    if value is None:
        return "-"
    return "hit" if (value <= target if smaller else value >= target) else "miss"


def table(r: dict[str, Any]) -> str:
    lines = [f"# CUDA backend on {r['device']} ({r['when']})", ""]
    lines += ["| measurement | IronAccel CUDA | peer (torch) | ratio | target | hit |", "|---|---|---|---|---|---|"]
    for key, label, unit in (("matmul_fp16", "MATMUL 8192^3 fp16", "tflops"),
                             ("matmul_fp32", "MATMUL 8192^3 fp32 (no TF32)", "tflops"),
                             ("matmul_fp8", "MATMUL 8192^3 fp8 e4m3 to fp16 (_scaled_mm)", "tflops")):  # fmt: skip
        m = r.get(key)
        if m and "error" not in m:
            lines.append(f"| {label} | {m['ironaccel_ms']:.3f} ms = {m['ironaccel_' + unit]:.0f} TFLOP/s (rel err "
                         f"{m['rel_error']:.1e}) | {m['peer_ms']:.3f} ms = {m['peer_' + unit]:.0f} TFLOP/s (rel err "
                         f"{m['peer_rel_error']:.1e}) | {m['ratio']:.2f}x | >= {TARGETS[key]}x | "
                         f"{_hit(m['ratio'], TARGETS[key])} |")  # fmt: skip
        elif m:
            lines.append(f"| {label} | {m['error'][:100]} | | | | miss |")
    for key in ("matmul_int8", "matmul_int8_no_zero_points"):
        m = r.get(key)
        if m and "error" not in m:
            forms = m["peer_forms_ms"]
            lines.append(f"| MATMUL 8192^3 int8, zero points {m['zero_points']} | {m['ironaccel_ms']:.3f} ms = "
                         f"{m['ironaccel_tops']:.0f} TOP/s, {m['mismatches']} results differ | torch._int_mm, "
                         f"the faster form ({m['peer_form']}): {m['peer_ms']:.3f} ms = {m['peer_tops']:.0f} TOP/s "
                         f"(column-major B {forms['column-major b']:.3f} ms, row-major B "
                         f"{forms['row-major b']:.3f} ms) | "
                         f"{m['ratio']:.2f}x | >= 1.0x, 0 differ | "
                         f"{_hit(m['ratio'], 1.0) if not m['mismatches'] else 'miss'} |")  # fmt: skip
        elif m:
            lines.append(f"| MATMUL 8192^3 int8 ({key}) | {m['error'][:100]} | | | | miss |")
    m = r.get("add")
    if m and "error" not in m:
        lines.append(f"| ADD 2^28 fp32 | {m['ironaccel_ms']:.3f} ms = {m['ironaccel_gbps']:.0f} GB/s (exact: "
                     f"{m['exact']}) | copy {m['peer_ms']:.3f} ms = {m['peer_gbps']:.0f} GB/s | {m['ratio']:.2f}x |"
                     f" >= 0.9x | {_hit(m['ratio'], 0.9)} |")  # fmt: skip
    elif m:
        lines.append(f"| ADD 2^28 fp32 | {m['error'][:100]} | | | | miss |")
    s = r.get("small")
    if s and "error" not in s:
        lines.append(f"| exe(x), 1-operator program, device arrays | {s['exe_us']:.1f} us median (correct: "
                     f"{s['correct']}) | torch eager, one kernel + sync: {s['torch_eager_us']:.1f} us | | <= 12 us |"
                     f" {_hit(s['exe_us'], 12.0, True)} |")  # fmt: skip
    for ops, key in ((1, "latency_1"), (50, "latency_50")):
        m = r.get(key)
        peer = s.get(f"torch_graph_{ops}_us") if s and "error" not in s else None
        target = TARGETS[f"prepared_{ops}_us"]
        if m and "error" not in m:
            fused = f" ({m['launches']} kernel launch(es) after fusion)" if "launches" in m else ""
            lines.append(f"| prepared launch -> complete, {ops}-operator program{fused} | "
                         f"{m['prepared_median_us']:.1f} us "
                         f"median (submit -> complete {m['median_us']:.1f} us) | torch CUDA graph replay + sync: "
                         f"{'-' if peer is None else f'{peer:.1f} us'} | | <= {target:.0f} us | "
                         f"{_hit(m['prepared_median_us'], target, True)} |")  # fmt: skip
        elif m:
            lines.append(f"| prepared launch, {ops}-operator program | {m['error'][:100]} | | | | miss |")
    compiled = r.get("torch_compile_ms") or {}
    for m in r.get("models", []):
        name = m["model"]
        if "error" in m:
            lines.append(f"| {name} end to end | {m['error'][:100]} | | | >= 2x eager | miss |")
            continue
        peer = f"{m['peer_ms']:.3f} ms eager" if "peer_ms" in m else "-"
        if name in compiled:
            peer += f", {compiled[name]:.3f} ms torch.compile"
        ratio = m.get("ratio")
        lines.append(f"| {name} end to end | {m['ironaccel_ms']:.3f} ms (contract {m['ironaccel_submit_ms']:.3f} ms;"
                     f" max diff vs recorded {m['max_abs_diff_vs_recorded']:.1e}) | {peer} | "
                     f"{'-' if ratio is None else f'{ratio:.2f}x'} | >= 2x eager | "
                     f"{_hit(ratio, 2.0) if ratio is not None else '-'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="the device to open (default %(default)s)")
    parser.add_argument("--out", default=str(HERE), help="folder for results.md / .json (default %(default)s)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    names = "matmul_fp16,matmul_fp32,matmul_fp8,matmul_int8,matmul_int8_no_zero_points,add,small,latency,models"
    parser.add_argument("--skip", default="", help=f"comma-separated: {names}")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n, elements, reps = (1024, 1 << 20, 5) if args.quick else (8192, 1 << 28, 20)
    dev = ironaccel.open(args.device)
    results: dict[str, Any] = {"device": torch.cuda.get_device_name(), "when": dt.datetime.now(dt.UTC).isoformat(
        timespec="seconds"), "ironaccel_device": dev.name}  # fmt: skip
    jobs = {
        "matmul_fp16": lambda: bench_matmul(dev, torch, n, "fp16", reps),
        "matmul_fp32": lambda: bench_matmul(dev, torch, n, "fp32", max(3, reps // 4)),
        "matmul_fp8": lambda: bench_matmul_fp8(dev, torch, n, reps),
        "matmul_int8": lambda: bench_matmul_int8(dev, torch, n, reps),
        "matmul_int8_no_zero_points": lambda: bench_matmul_int8(dev, torch, n, reps, 0, 0),
        "add": lambda: bench_add(dev, torch, reps, elements),
        "small": lambda: bench_small(dev, torch, 2000),
        "latency_1": lambda: {**bench_latency(dev, 1, 2000), "launches": planned_launches(1)},
        "latency_50": lambda: {**bench_latency(dev, 50, 1000), "launches": planned_launches(50)},
    }
    for key, job in jobs.items():
        if key in skip or key.split("_")[0] in skip:
            continue
        print(f"{key} ...", flush=True)
        try:
            results[key] = job()
        except Exception as exc:  # noqa: BLE001 - reported in the table; the rest still runs
            results[key] = {"error": f"{type(exc).__name__}: {exc}"}
    if "models" not in skip:
        print("models ...", flush=True)
        results["models"] = bench_models(dev, torch, 200)
        try:
            results["torch_compile_ms"] = bench_compiled_models(torch, 200)
        except Exception as exc:  # noqa: BLE001 - torch.compile needs a compiler toolchain
            results["torch_compile_error"] = f"{type(exc).__name__}: {exc}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = table(results)
    (out / "results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
