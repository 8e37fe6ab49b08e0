#!/usr/bin/env python3
"""The Vulkan backend on a GPU against cuBLAS / torch on the same card, in one run.

    python3 benchmarks/vulkan/bench_vulkan.py [--device nvidia] [--out DIR] [--quick] [--iree DIR]

Measures (each IronAccel figure through the runtime contract: buffers allocated and filled once on the
device, the loaded program submitted back to back, per-submission time = total / count; a user-API
wall time beside it where it says something different):

* MATMUL 8192^3 fp32 vs torch.matmul on CUDA with TF32 off (cuBLAS SGEMM); fp16 (fp16 result) vs
  torch fp16 (cuBLAS HGEMM). Checked against float64 on the GPU by ||out - ref|| / ||ref||. INT8 with
  zero points vs torch._int_mm (no zero points; b row-major and column-major, the faster counts), checked
  exactly against torch's int64 sum.
* ADD of two 1 GiB fp32 tensors vs torch's clone of 1 GiB, as bandwidth (bytes read + written).
* submit -> complete latency (median, polled) of a 1-operator and a 50-operator program.
* The bundled framework-produced programs (src/ironaccel/models, fp32) vs torch eager on CUDA; with
  ``--iree DIR`` (modules from iree_vulkan.py compile) also vs IREE's Vulkan driver on the same GPU, and
  the int8 program against IREE alone (torch has no eager int8 model to run).

Every timed window runs with Python's cyclic collector off, after a full collection (``collector_off``).

The buffers are bound the same way at every submission, so the backend replays a direct recording (its
kernels read and write these buffers; ADR 0008) after the first; no Vulkan timestamp query is read here,
so there is no kernel-only figure. Writes results.md / results.json to --out (default benchmarks/vulkan,
the current table; scripts/gpu-check passes $OUT) and prints the table last.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WARM_SECONDS = 0.2  # per_run_seconds warms a program this long before timing it
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "examples"))

import ironaccel  # noqa: E402
from ironaccel.runtime.types import Binding, BufferDesc, BufferUsage, MemoryDomain  # noqa: E402
from ironaccel.tosa import ProgramBuilder, load  # noqa: E402
from ironaccel.tosa.operators import Op  # noqa: E402

TARGETS = {"matmul_fp32": 0.8, "matmul_fp16": 0.6, "add_1gib": 0.85}
INT8_TARGET_TOPS = 600  # kernel throughput asked of INT8 MATMUL 8192^3 on a datacenter GPU
LATENCY_TARGET_US = 20.0
USAGE = BufferUsage.PROGRAM_INPUT | BufferUsage.PROGRAM_OUTPUT | BufferUsage.TRANSFER_SOURCE
USAGE |= BufferUsage.TRANSFER_DESTINATION


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """A timed window: a full collection first, then Python's cyclic collector off until it ends (as timeit
    does). A full collection of this process's heap, torch's objects included, takes tens of milliseconds
    and would land in whichever window its allocation count falls in, as a slow outlier of that row."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Loaded:
    """A program compiled on the device with its inputs and outputs in device buffers."""

    def __init__(self, dev: Any, program: Any, inputs: list[np.ndarray]) -> None:
        self.dev, self.acc = dev, dev.accelerator
        self.exe = dev.compile(program, resident_bytes=1 << 40)
        self.buffers = []
        # set by prepared_latency_us on a Vulkan launcher: its latest route medians, its counter reads
        self.route_medians_us: dict[str, float | None] | None = None
        self.slow_counter_reads: bool | None = None
        specs = (*self.exe.inputs, *self.exe.outputs)
        for spec in specs:
            desc = BufferDesc(max(spec.nbytes, 1), MemoryDomain.DEVICE, USAGE)
            self.buffers.append(self.acc.allocate_buffer(dev.context, desc))
        for buf, value in zip(self.buffers, inputs, strict=False):
            self.acc.write_buffer(buf, 0, np.ascontiguousarray(value).reshape(-1).view(np.uint8))
        self.bindings = [Binding(i, b, 0, s.nbytes) for i, (b, s) in enumerate(zip(self.buffers, specs, strict=True))]

    def submit(self) -> Any:
        return self.acc.submit(self.dev.queue, self.exe.program, self.bindings)

    def per_run_seconds(self, count: int) -> float:
        """Back-to-back submissions, waited for together: device time per submission, after WARM_SECONDS of
        single submissions, so that a program that follows idle time (the IREE rows) is timed warm."""
        warm_until = time.perf_counter() + WARM_SECONDS
        self.finish(self.submit())
        while time.perf_counter() < warm_until:
            self.finish(self.submit())
        with collector_off():
            start = time.perf_counter()
            events = [self.submit() for _ in range(count)]
            for e in events:
                self.finish(e)
            return (time.perf_counter() - start) / count

    def latency_us(self, count: int) -> float:
        """Median submit -> complete, completion observed by polling."""
        samples = []
        with collector_off():
            for _ in range(count):
                start = time.perf_counter()
                event = self.submit()
                while not self.acc.poll_event(event).terminal:
                    pass
                samples.append(time.perf_counter() - start)
                self.acc.destroy_event(event)
        return statistics.median(samples) * 1e6

    def prepared_latency_us(self, count: int) -> tuple[float, float | None]:
        """Median launch -> complete of a prepared submission (checked once): ``launch`` then ``wait_launch``
        (which watches the semaphore, and the device's completion word while launches are marked, before it
        blocks); and the fraction of the timed launches that were marked (None where the backend has no
        Vulkan launcher)."""
        prepared = self.acc.prepare(self.dev.queue, self.exe.program, self.bindings)
        try:
            for _ in range(50):
                self.acc.wait_launch(prepared, self.acc.launch(prepared))
            launcher = self.acc._record(prepared, type(prepared)).native
            marked_before = getattr(launcher, "marked_launches", None)
            samples = []
            with collector_off():
                for _ in range(count):
                    start = time.perf_counter()
                    self.acc.wait_launch(prepared, self.acc.launch(prepared))
                    samples.append(time.perf_counter() - start)
            marked = None if marked_before is None else (launcher.marked_launches - marked_before) / count
            routes = getattr(launcher, "route_times", None)
            if routes is not None:  # why the launcher chose as it did: its latest times, its counter reads
                self.route_medians_us = {
                    label: None if (m := routes.median(key)) is None else m * 1e6
                    for key, label in ((True, "marked"), (False, "unmarked"))
                }
                self.slow_counter_reads = launcher.read_every > 0
        finally:
            self.acc.release_prepared(prepared)
        return statistics.median(samples) * 1e6, marked

    def finish(self, event: Any) -> None:
        self.acc.wait(event, None)
        self.acc.destroy_event(event)

    def output(self, index: int = 0) -> np.ndarray:
        spec = self.exe.outputs[index]
        value = np.empty(spec.shape, spec.numpy_dtype)
        buf = self.buffers[len(self.exe.inputs) + index]
        self.acc.read_buffer(buf, 0, spec.nbytes, out=value.reshape(-1).view(np.uint8))
        return value

    def close(self) -> None:
        for b in self.buffers:
            self.acc.free_buffer(b)
        self.exe.close()


def _verdict(us: float, targeted: bool) -> str:
    if not targeted:
        return ""
    return "hit" if us <= LATENCY_TARGET_US else "miss"


def cuda_ms(torch: Any, fn: Any, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    with collector_off():
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def matmul_program(n: int, dtype: str) -> Any:
    b = ProgramBuilder()
    x, y = b.input("a", (1, n, n), dtype), b.input("b", (1, n, n), dtype)
    b.output(b.op(Op.MATMUL, [x, y, 0, 0], out_dtype=dtype))
    return b.build()


def bench_matmul(dev: Any, torch: Any, n: int, dtype: str, reps: int) -> dict[str, Any]:
    npdt = np.float32 if dtype == "fp32" else np.float16
    tdt = torch.float32 if dtype == "fp32" else torch.float16
    gen = torch.Generator(device="cuda").manual_seed(7)
    ta = torch.randn((n, n), device="cuda", generator=gen).to(tdt)
    tb = torch.randn((n, n), device="cuda", generator=gen).to(tdt)
    peer = cuda_ms(torch, lambda: torch.matmul(ta, tb), reps)
    a, b = ta.cpu().numpy().astype(npdt), tb.cpu().numpy().astype(npdt)
    loaded = Loaded(dev, matmul_program(n, dtype), [a.reshape(1, n, n), b.reshape(1, n, n)])
    try:
        ours = loaded.per_run_seconds(reps) * 1e3
        got = torch.from_numpy(loaded.output().reshape(n, n).astype(np.float64)).cuda()
        ref = torch.matmul(ta.double(), tb.double())
        rel = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
        ref_low = torch.matmul(ta, tb).double()
        peer_rel = float(torch.linalg.norm(ref_low - ref) / torch.linalg.norm(ref))
        kernels = _shaders(loaded)
    finally:
        loaded.close()
    flop = 2.0 * n**3
    return {
        "ironaccel_ms": ours,
        "peer_ms": peer,
        "ratio": peer / ours,
        "ironaccel_tflops": flop / ours / 1e9,
        "peer_tflops": flop / peer / 1e9,
        "rel_error": rel,
        "peer_rel_error": peer_rel,
        "kernels": kernels,
    }


def matmul_int8_program(n: int, a_zp: int, b_zp: int) -> Any:
    b = ProgramBuilder()
    x, y = b.input("a", (1, n, n), "int8"), b.input("b", (1, n, n), "int8")
    b.output(b.matmul(x, y, b.const(np.array([a_zp]), "int8"), b.const(np.array([b_zp]), "int8")))
    return b.build()


def int8_reference(torch: Any, ta: Any, tb: Any, a_zp: int, b_zp: int) -> Any:
    """sum (a - a_zp)(b - b_zp) for int8 CUDA matrices, exact in int64 and narrowed to int32 (wrapping)."""
    n = ta.shape[1]
    want = torch._int_mm(ta, tb).long()
    want -= b_zp * ta.long().sum(1, keepdim=True) + a_zp * tb.long().sum(0, keepdim=True) - n * a_zp * b_zp
    return ((want + 2**31) % 2**32 - 2**31).int()


def bench_matmul_int8(dev: Any, torch: Any, n: int, reps: int, a_zp: int = -3, b_zp: int = 5) -> dict[str, Any]:
    """INT8 MATMUL with zero points against torch._int_mm (no zero points: what a torch user calls), in
    its faster form: b as created (row-major) and b column-major (the same values contiguous along k, the
    layout cuBLASLt's int8 kernels take) are both timed, and the peer is the faster. Checked exactly
    against sum (a - a_zp)(b - b_zp) computed by torch in int64, narrowed to int32."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    ta = torch.randint(-128, 128, (n, n), device="cuda", generator=gen, dtype=torch.int8)
    tb = torch.randint(-128, 128, (n, n), device="cuda", generator=gen, dtype=torch.int8)
    tb_columns = tb.t().contiguous().t()
    forms = {
        "row-major b": cuda_ms(torch, lambda: torch._int_mm(ta, tb), reps),
        "column-major b": cuda_ms(torch, lambda: torch._int_mm(ta, tb_columns), reps),
    }
    peer_form = min(forms, key=forms.__getitem__)
    peer = forms[peer_form]
    loaded = Loaded(dev, matmul_int8_program(n, a_zp, b_zp), [ta.cpu().numpy()[None], tb.cpu().numpy()[None]])
    try:
        ours = loaded.per_run_seconds(reps) * 1e3
        got = torch.from_numpy(loaded.output().reshape(n, n)).cuda()
        want = int8_reference(torch, ta, tb, a_zp, b_zp)
        mismatches = int((got != want).sum())
        kernels = _shaders(loaded)
    finally:
        loaded.close()
    op = 2.0 * n**3
    return {
        "ironaccel_ms": ours,
        "peer_ms": peer,
        "peer_form": peer_form,
        "peer_forms_ms": forms,
        "ratio": peer / ours,
        "ironaccel_tops": op / ours / 1e9,
        "peer_tops": op / peer / 1e9,
        "zero_points": [a_zp, b_zp],
        "mismatches": mismatches,
        "kernels": kernels,
    }


def _shaders(loaded: Loaded) -> list[str]:
    """The compute shaders the loaded program's plan runs (none named on a backend other than Vulkan)."""
    native = getattr(loaded.acc, "_native", None)
    for p in getattr(native, "programs", ()):
        return sorted({s.shader for s in p.plan.steps if hasattr(s, "shader")})
    return []


def bench_add(dev: Any, torch: Any, reps: int, elements: int) -> dict[str, Any]:
    gib = elements * 4
    src = torch.randn(elements, device="cuda")
    copy_ms = cuda_ms(torch, lambda: src.clone(), reps)
    copy_bw = 2 * gib / copy_ms / 1e6  # GB/s, read + write
    b = ProgramBuilder()
    x, y = b.input("x", (elements,), "fp32"), b.input("y", (elements,), "fp32")
    b.output(b.add(x, y))
    xs = np.random.default_rng(1).standard_normal(elements, dtype=np.float32)
    loaded = Loaded(dev, b.build(), [xs, xs[::-1].copy()])
    try:
        ours = loaded.per_run_seconds(reps) * 1e3
        got = loaded.output()
        exact = bool(np.array_equal(got, xs + xs[::-1]))
    finally:
        loaded.close()
    add_bw = 3 * gib / ours / 1e6
    return {
        "ironaccel_ms": ours,
        "peer_ms": copy_ms,
        "ironaccel_gbps": add_bw,
        "peer_gbps": copy_bw,
        "ratio": add_bw / copy_bw,
        "exact": exact,
    }


def add_chain(ops: int) -> Any:
    """``ops`` ADDs in a chain over 256 fp32 values: v = x + x + ... + x."""
    b = ProgramBuilder()
    x = b.input("x", (256,), "fp32")
    v = x
    for _ in range(ops):
        v = b.add(v, x)
    b.output(v)
    return b.build()


def bench_latency(dev: Any, ops: int, count: int) -> dict[str, Any]:
    loaded = Loaded(dev, add_chain(ops), [np.ones(256, np.float32)])
    try:
        for _ in range(50):
            loaded.finish(loaded.submit())
        median = loaded.latency_us(count)
        prepared, marked = loaded.prepared_latency_us(count)
        exe = loaded.exe
        user = []
        value = np.ones(256, np.float32)
        with collector_off():
            for _ in range(count // 4):
                start = time.perf_counter()
                exe(value)
                user.append(time.perf_counter() - start)
    finally:
        loaded.close()
    return {
        "ops": ops,
        "median_us": median,
        "prepared_median_us": prepared,
        "prepared_marked": marked,
        "route_medians_us": loaded.route_medians_us,
        "slow_counter_reads": loaded.slow_counter_reads,
        "user_api_median_us": statistics.median(user) * 1e6,
    }


def _ironaccel_model(dev: Any, path: Path, x: np.ndarray, reps: int) -> tuple[np.ndarray, float, float]:
    """A bundled program's output, user-API wall time (median, ms) and per-submission time (ms)."""
    exe = dev.compile(load(path), resident_bytes=1 << 32)
    try:
        (got,) = exe(x)
        walls = []
        with collector_off():
            for _ in range(reps):
                start = time.perf_counter()
                exe(x)
                walls.append(time.perf_counter() - start)
        loaded = Loaded(dev, load(path), [x])
        try:
            device_ms = loaded.per_run_seconds(reps) * 1e3
        finally:
            loaded.close()
    finally:
        exe.close()
    return got, statistics.median(walls) * 1e3, device_ms


def bench_models(dev: Any, torch: Any, reps: int, iree: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The fp32 programs against torch eager; with ``iree`` (bench_iree rows) every program IREE has a
    row for also gets its IREE columns, the int8 one included (its ours-vs-recorded difference then in
    int8 steps against the quantized model's integers)."""
    import export_models  # examples/: the modules the bundled programs were exported from

    torch.manual_seed(0)  # same construction order as export_models.main, so the same weights
    modules = {"cnn_fp32": export_models.SmallCNN().eval(), "attention_fp32": export_models.AttentionBlock().eval()}
    by_model = {r["model"]: r for r in iree or []}
    rows = []
    for path in sorted((ROOT / "src" / "ironaccel" / "models").glob("*.tosa")):
        meta = json.loads(path.with_suffix(".json").read_text())
        torch_peer = not meta["quantized"] and path.stem in modules
        if not torch_peer and path.stem not in by_model:
            continue
        recorded = np.load(path.with_name(f"{path.stem}.torch.npz"))
        x = recorded["input_int8" if meta["quantized"] else "input"]
        reference = recorded["output_qmodel_int8" if meta["quantized"] else "output"]
        row: dict[str, Any] = {"model": path.stem}
        try:
            got, wall_ms, device_ms = _ironaccel_model(dev, path, x, reps)
            row["ironaccel_ms"], row["ironaccel_submit_ms"] = wall_ms, device_ms
        except Exception as exc:  # noqa: BLE001 - reported in the table; the other programs still run
            row["error"] = f"{type(exc).__name__}: {exc}"
        if torch_peer:
            module = modules[path.stem].cuda()
            tx = torch.from_numpy(x).cuda()
            with torch.no_grad():
                eager_ms = cuda_ms(torch, lambda m=module, t=tx: m(t), reps)
                walls_t = []
                with collector_off():
                    for _ in range(reps):
                        start = time.perf_counter()
                        module(tx)
                        torch.cuda.synchronize()
                        walls_t.append(time.perf_counter() - start)
            row["peer_ms"] = statistics.median(walls_t) * 1e3
            row["peer_event_ms"] = eager_ms
            if "error" not in row:
                row["ratio"] = row["peer_ms"] / row["ironaccel_ms"]
        if "error" not in row:
            row["max_abs_diff_vs_recorded"] = float(np.max(np.abs(got.astype(np.float64) - reference)))
            if meta["quantized"]:
                row["reference"] = "output_qmodel_int8 (int8 steps)"
        found = by_model.get(path.stem)
        if found is not None:
            row.update({k: v for k, v in found.items() if k != "model"})
            if "iree_ms" in row and "error" not in row:
                row["iree_ratio"] = row["iree_ms"] / row["ironaccel_ms"]
                row["iree_contract_ratio"] = row["iree_ms"] / row["ironaccel_submit_ms"]
        rows.append(row)
    return rows


def _model_line(r: dict[str, Any]) -> str:
    """One bundled program's table row: IronAccel, then torch eager and IREE where measured."""
    if "error" in r:
        ours = f"error: {r['error'][:80]}"
    else:
        ours = f"{r['ironaccel_ms']:.3f} ms (contract {r['ironaccel_submit_ms']:.3f} ms)"
    peers, ratios = [], []
    if "peer_ms" in r:
        peers.append(f"{r['peer_ms']:.3f} ms torch eager ({r['peer_event_ms']:.3f} ms by events)")
        if "ratio" in r:
            ratios.append(f"{r['ratio']:.2f}x")
    if "iree_ms" in r:
        agrees = "" if r.get("iree_agrees", True) else ", DISAGREES"
        peers.append(
            f"IREE vulkan {r['iree_ms']:.3f} ms ({r['iree_target']}, max diff {r['iree_max_abs_diff_vs_recorded']:.2g}"
            f"{agrees})"
        )
        if "iree_ratio" in r:
            ratios.append(f"IREE {r['iree_ratio']:.2f}x (contract {r['iree_contract_ratio']:.2f}x)")
    elif "iree_error" in r:
        peers.append(f"IREE: {r['iree_error'][:100]}")
    return f"| {r['model']} end to end | {ours} | {'; '.join(peers)} | {'; '.join(ratios)} | | |"


def table(results: dict[str, Any]) -> str:
    lines = [
        "| measurement | IronAccel Vulkan | peer (torch / cuBLAS) | ratio | target | hit |",
        "|---|---|---|---|---|---|",
    ]
    for key, label in (("matmul_fp32", "MATMUL 8192^3 fp32 (SGEMM, no TF32)"), ("matmul_fp16", "MATMUL 8192^3 fp16")):
        r = results.get(key)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {label} | error: {r['error'][:80]} | | | {TARGETS[key]} | miss |")
            continue
        hit = "hit" if r["ratio"] >= TARGETS[key] else "miss"
        lines.append(
            f"| {label} | {r['ironaccel_ms']:.2f} ms ({r['ironaccel_tflops']:.1f} TFLOP/s, err {r['rel_error']:.1e}, "
            f"{'+'.join(r['kernels'])}) | {r['peer_ms']:.2f} ms ({r['peer_tflops']:.1f} TFLOP/s) | "
            f"{r['ratio']:.2f}x | >= {TARGETS[key]}x | {hit} |"
        )
    r = results.get("matmul_int8")
    if r is not None and "error" in r:
        lines.append(f"| MATMUL 8192^3 int8 | error: {r['error'][:80]} | | | >= {INT8_TARGET_TOPS} TOP/s | miss |")
    elif r is not None:
        hit = "hit" if r["ironaccel_tops"] >= INT8_TARGET_TOPS and not r["mismatches"] else "miss"
        lines.append(
            f"| MATMUL 8192^3 int8, zero points {r['zero_points']} | {r['ironaccel_ms']:.2f} ms "
            f"({r['ironaccel_tops']:.1f} TOP/s, {r['mismatches']} results differ, {'+'.join(r['kernels'])}) | "
            f"torch._int_mm, {r.get('peer_form', 'row-major b')}, {r['peer_ms']:.2f} ms ({r['peer_tops']:.1f} TOP/s)"
            f" | {r['ratio']:.2f}x | "
            f">= {INT8_TARGET_TOPS} TOP/s | {hit} |"
        )
    r = results.get("add_1gib")
    if r is not None:
        hit = "hit" if r["ratio"] >= TARGETS["add_1gib"] else "miss"
        lines.append(
            f"| ADD 2^28 fp32 (1 GiB each) vs clone 1 GiB | "
            f"{r['ironaccel_ms']:.2f} ms ({r['ironaccel_gbps']:.0f} GB/s) | "
            f"{r['peer_ms']:.2f} ms ({r['peer_gbps']:.0f} GB/s) | {r['ratio']:.2f}x | >= 0.85x | {hit} |"
        )
    for r in results.get("latency", []):
        one = r["ops"] == 1
        target = f"<= {LATENCY_TARGET_US:.0f} us" if one else ""
        lines.append(
            f"| submit->complete, {r['ops']}-operator program | {r['median_us']:.1f} us median "
            f"(user API call {r['user_api_median_us']:.1f} us) | | | {target} | {_verdict(r['median_us'], one)} |"
        )
        if "prepared_median_us" in r:
            marked = r.get("prepared_marked")
            note = "" if marked is None else f" ({100 * marked:.0f}% of launches marked)"
            if r.get("route_medians_us"):
                times = ", ".join(
                    f"{k} {'untimed' if v is None else f'{v:.1f} us'}" for k, v in r["route_medians_us"].items()
                )
                slow = "; counter reads slow" if r.get("slow_counter_reads") else ""
                note += f" (latest route medians: {times}{slow})"
            lines.append(
                f"| launch->complete, {r['ops']}-operator program, prepared | {r['prepared_median_us']:.1f} us median"
                f"{note} | | | {target} | {_verdict(r['prepared_median_us'], one)} |"
            )
    for r in results.get("models", []):
        lines.append(_model_line(r))
    iree = results.get("iree")
    if iree and "error" not in iree:
        lines.append(
            f"\nIREE {iree['runtime']} (compiled by {iree['compiler']}) on {iree['device']}, timed by "
            "iree-benchmark-module: one synchronous "
            "call per iteration, inputs resident, outputs left on the device; ratio = IREE time / IronAccel time "
            "(user API; contract in brackets), > 1 where IronAccel is faster."
        )
    elif iree:
        lines.append(f"\nIREE not measured: {iree['error']}")
    return "\n".join(lines)


def run_iree(folder: Path, reps: int, device: str) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """IREE's rows for bench_models, or None with the reason when there is nothing to run."""
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        return {"error": f"no {manifest} (run iree_vulkan.py compile and carry the folder)"}, None
    sys.path.insert(0, str(HERE))
    import iree_vulkan  # beside this file

    try:
        rows = iree_vulkan.bench_iree(folder, reps, device=device)
    except Exception as exc:  # noqa: BLE001 - reported; the rest still runs
        return {"error": f"{type(exc).__name__}: {exc}"}, None
    info = json.loads(manifest.read_text())
    first = next((r for r in rows if "iree_runtime" in r), {})
    return {
        "dir": str(folder),
        "runtime": first.get("iree_runtime", "not found"),
        "device": first.get("iree_device"),
        "compiler": info["iree_compiler"],
        "targets": info["targets"],
    }, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="nvidia")
    parser.add_argument("--out", default=str(HERE), help="folder for results.md / .json (default %(default)s)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    measurements = "matmul_fp32,matmul_fp16,matmul_int8,add,latency,models"
    parser.add_argument("--skip", default="", help=f"comma-separated: {measurements}")
    parser.add_argument(
        "--iree", metavar="DIR", help="IREE Vulkan modules from iree_vulkan.py compile: IREE beside each program"
    )
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n = 1024 if args.quick else 8192
    elements = (1 << 24) if args.quick else (1 << 28)
    dev = ironaccel.open(f"vulkan:{args.device}")
    info = dev.accelerator._native.device
    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": info.physical.name,
        "matrix_tiles": sorted(info.matrix_tiles),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "n": n,
    }
    print(f"device {results['device']}, matrix tiles {results['matrix_tiles']}", flush=True)
    for key, dtype in (("matmul_fp32", "fp32"), ("matmul_fp16", "fp16")):
        if key in skip:
            continue
        try:
            results[key] = bench_matmul(dev, torch, n, dtype, 10)
        except Exception as exc:  # noqa: BLE001 - reported in the table; the rest still runs
            results[key] = {"error": f"{type(exc).__name__}: {exc}"}
        print(key, results[key], flush=True)
    if "matmul_int8" not in skip:
        try:
            results["matmul_int8"] = bench_matmul_int8(dev, torch, n, 10)
        except Exception as exc:  # noqa: BLE001 - reported in the table; the rest still runs
            results["matmul_int8"] = {"error": f"{type(exc).__name__}: {exc}"}
        print("matmul_int8", results["matmul_int8"], flush=True)
    if "add" not in skip:
        try:
            results["add_1gib"] = bench_add(dev, torch, 20, elements)
        except Exception as exc:  # noqa: BLE001 - reported; the rest still runs
            results["add_error"] = f"{type(exc).__name__}: {exc}"
        print("add", results.get("add_1gib", results.get("add_error")), flush=True)
    if "latency" not in skip:
        results["latency"] = [bench_latency(dev, ops, 2000) for ops in (1, 50)]
        print("latency", results["latency"], flush=True)
    if "models" not in skip:
        iree_rows = None
        if args.iree:
            results["iree"], iree_rows = run_iree(Path(args.iree), 50, args.device)
            print("iree", results["iree"], iree_rows, flush=True)
        results["models"] = bench_models(dev, torch, 50, iree_rows)
        print("models", results["models"], flush=True)
    dev.close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = table(results)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(f"# Vulkan backend on {results['device']} ({results['date']})\n\n{text}\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
