#!/usr/bin/env python3
"""The virtio-accel path against the same backend locally, in one run: starts ``ironaccel serve``,
opens ``virtio:SOCKET`` and the backend itself in this process, and prints the ratios.

    .venv/bin/python benchmarks/virtio/bench_virtio.py [--device cpu] [--seconds 2] [--no-write]

Measured (see benchmarks/README.md, "virtio-accel"):
1. round trip of a 1-operator program (ADD over fp32[4]) via ``exe(x, y)``: the per-call overhead of the
   virtio path on top of the local call (target <= 25 us), and one bare command (GET_DEVICE_INFO);
2. bulk WRITE_BUFFER / READ_BUFFER of 16 and 64 MiB through shared memory against a local numpy copy
   of the same size (target >= 0.8x the copy's bandwidth): from and into ordinary arrays (two copies
   each way, overlapped in pieces), and from and into arrays in the guest's memory (``Device.host_empty``;
   the device reads and writes them in place: one copy);
3. the bundled programs end to end: per-call latency, and throughput with several submissions in
   flight (``exe.submit`` x depth, then waits), virtio against local (target >= 0.9x local throughput).

The run replaces its device's section of benchmarks/virtio/results.md (and its entry of results.json):
one current table per device served, the others kept as they are.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import ironaccel as ia
from ironaccel.runtime import BufferDesc, BufferUsage, MemoryDomain
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor, write
from ironaccel.virtio import guest as guest_module
from ironaccel.virtio.wire_constants import Opcode

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "src" / "ironaccel" / "models"
RESULTS = Path(__file__).resolve().parent / "results.md"
TITLE = "# virtio-accel against the same backend locally"
TARGET_OVERHEAD_US, TARGET_TRANSFER, TARGET_MODEL = 25.0, 0.8, 0.9
DEPTH = 8  # submissions in flight for the throughput rows


def add_program(n: int = 4) -> bytes:
    tensors = [Tensor(x, (n,), DType.FP32) for x in "abc"]
    block = Block("main", [Operator(Op.ADD, ("a", "b"), ("c",))], tensors, ("a", "b"), ("c",))
    return write(Program((Region("main", (block,)),)))


def timed(fn: Any, seconds: float, min_calls: int = 20) -> tuple[float, int]:
    """Median seconds per call of ``fn`` over about ``seconds`` (after a warm-up), and the call count."""
    for _ in range(5):
        fn()
    samples: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(samples) < min_calls:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return float(np.median(samples)), len(samples)


def start_daemon(device: str, socket_path: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ironaccel.cli.main", "serve", "--device", device, "--socket", socket_path],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    end = time.monotonic() + 60
    while not os.path.exists(socket_path):
        if proc.poll() is not None or time.monotonic() > end:
            raise SystemExit(f"the daemon did not start: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)
    return proc


def bench_round_trip(local: Any, remote: Any, seconds: float, tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "add.tosa"
    path.write_bytes(add_program())
    x = np.arange(4, dtype=np.float32)
    rows = []
    times = {}
    for name, dev in (("local", local), ("virtio", remote)):
        exe = dev.compile(path)
        np.testing.assert_array_equal(exe(x, x)[0], x + x)
        times[name], _ = timed(lambda exe=exe: exe(x, x), seconds)
        exe.close()
    overhead = (times["virtio"] - times["local"]) * 1e6
    rows.append(
        {
            "what": "1-op program, exe(x, y)",
            "local_us": times["local"] * 1e6,
            "virtio_us": times["virtio"] * 1e6,
            "overhead_us": overhead,
            "target": f"<= {TARGET_OVERHEAD_US:g} us overhead",
            "hit": overhead <= TARGET_OVERHEAD_US,
        }
    )
    acc = remote.accelerator
    command, _ = timed(lambda: acc._command(Opcode.GET_DEVICE_INFO, b""), seconds)
    rows.append(
        {
            "what": "one command (GET_DEVICE_INFO round trip)",
            "local_us": 0.0,
            "virtio_us": command * 1e6,
            "overhead_us": command * 1e6,
            "target": f"<= {TARGET_OVERHEAD_US:g} us",
            "hit": command * 1e6 <= TARGET_OVERHEAD_US,
        }
    )
    return rows


def bench_transfers(remote: Any, seconds: float, pieces_mib: list[float] | None = None) -> list[dict[str, Any]]:
    """Bulk transfers through shared memory; with ``pieces_mib``, once per piece size the guest splits a
    transfer into (the shipped ``SEGMENT_BYTES`` otherwise)."""
    acc = remote.accelerator
    ctx = remote.context
    rows = []
    shipped = guest_module.SEGMENT_BYTES
    for mib in (16, 64):
        size = mib << 20
        src = np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8)
        dst = np.empty_like(src)
        copy, _ = timed(lambda src=src, dst=dst: np.copyto(dst, src), seconds, 5)
        usage = BufferUsage.TRANSFER_SOURCE | BufferUsage.TRANSFER_DESTINATION
        buf = acc.allocate_buffer(ctx, BufferDesc(size, MemoryDomain.SHARED, usage))
        measured = []
        try:
            for piece in pieces_mib or [shipped / (1 << 20)]:
                guest_module.SEGMENT_BYTES = int(piece * (1 << 20))
                wr, _ = timed(lambda buf=buf, src=src: acc.write_buffer(buf, 0, src), seconds, 5)
                rd, _ = timed(lambda buf=buf, dst=dst, n=size: acc.read_buffer(buf, 0, n, out=dst), seconds, 5)
                np.testing.assert_array_equal(dst, src)
                label = f", {piece:g} MiB pieces" if pieces_mib else ""
                measured += [(f"WRITE_BUFFER {mib} MiB{label}", wr), (f"READ_BUFFER {mib} MiB{label}", rd)]
            # The same from and into arrays in the guest's own memory (Device.host_empty): the device reads and
            # writes them in place, as a VM's device does its guest's pages; one copy each way.
            gsrc, gdst = remote.host_empty((size,), np.uint8), remote.host_empty((size,), np.uint8)
            gsrc[:] = src
            wr, _ = timed(lambda buf=buf, src=gsrc: acc.write_buffer(buf, 0, src), seconds, 5)
            rd, _ = timed(lambda buf=buf, dst=gdst, n=size: acc.read_buffer(buf, 0, n, out=dst), seconds, 5)
            np.testing.assert_array_equal(gdst, src)
            measured += [(f"WRITE_BUFFER {mib} MiB, guest memory", wr), (f"READ_BUFFER {mib} MiB, guest memory", rd)]
            del gsrc, gdst
        finally:
            guest_module.SEGMENT_BYTES = shipped
            acc.free_buffer(buf)
        for what, t in measured:
            ratio = copy / t
            rows.append(
                {
                    "what": what,
                    "local_gbps": size / copy / 1e9,
                    "virtio_gbps": size / t / 1e9,
                    "ratio": ratio,
                    "target": f">= {TARGET_TRANSFER:g}x numpy copy",
                    "hit": ratio >= TARGET_TRANSFER,
                }
            )
    return rows


def bench_models(local: Any, remote: Any, local_name: str, seconds: float) -> list[dict[str, Any]]:
    rows = []
    for tosa in sorted(MODELS.glob("*.tosa")):
        name = tosa.stem
        meta = json.loads(tosa.with_suffix(".json").read_text())
        x = np.load(tosa.with_suffix(".torch.npz"))["input_int8" if meta["quantized"] else "input"]
        result: dict[str, Any] = {"what": name}
        outputs = []
        try:
            exes = {"local": local.compile(tosa), "virtio": remote.compile(tosa)}
        except ia.IronAccelError as exc:
            result["refused"] = f"{type(exc).__name__}: {exc}"
            rows.append(result)
            continue
        for where, exe in exes.items():
            outputs.append(exe(x)[0])
            latency, _ = timed(lambda exe=exe, x=x: exe(x), seconds)

            def burst(exe: Any = exe, x: np.ndarray = x) -> None:
                runs = [exe.submit(x) for _ in range(DEPTH)]
                for run in runs:
                    run.wait()

            per_burst, _ = timed(burst, seconds, 5)
            result[f"{where}_ms"] = latency * 1e3
            result[f"{where}_per_s"] = DEPTH / per_burst
            exe.close()
        result["identical"] = bool(np.array_equal(outputs[0], outputs[1]))
        result["latency_ratio"] = result["local_ms"] / result["virtio_ms"]
        result["throughput_ratio"] = result["virtio_per_s"] / result["local_per_s"]
        result["target"] = f">= {TARGET_MODEL:g}x local throughput"
        result["hit"] = result["throughput_ratio"] >= TARGET_MODEL
        rows.append(result)
    return rows


def table(device: str, rt: list[dict[str, Any]], tr: list[dict[str, Any]], models: list[dict[str, Any]]) -> str:
    mark = {True: "hit", False: "MISS"}
    lines = [f"## virtio-accel vs local `{device}`"]
    if rt:
        lines += ["", "| round trip | local | virtio | overhead | target | |", "|---|---:|---:|---:|---|---|"]
    for r in rt:
        local = f"{r['local_us']:.1f} us" if r["local_us"] else "-"
        lines.append(
            f"| {r['what']} | {local} | {r['virtio_us']:.1f} us | {r['overhead_us']:.1f} us | {r['target']}"
            f" | {mark[r['hit']]} |"
        )
    if tr:
        lines += ["", "| transfer | numpy copy | virtio | ratio | target | |", "|---|---:|---:|---:|---|---|"]
    for r in tr:
        lines.append(
            f"| {r['what']} | {r['local_gbps']:.2f} GB/s | {r['virtio_gbps']:.2f} GB/s | {r['ratio']:.2f}x"
            f" | {r['target']} | {mark[r['hit']]} |"
        )
    if models:
        lines += [
            "",
            f"| program | local ms/call | virtio ms/call | latency ratio | local calls/s ({DEPTH} in flight)"
            " | virtio calls/s | throughput ratio | identical | target | |",
            "|---|---:|---:|---:|---:|---:|---:|---|---|---|",
        ]
    for r in models:
        if "refused" in r:
            lines.append(f"| {r['what']} | refused: {r['refused']} | | | | | | | | |")
            continue
        lines.append(
            f"| {r['what']} | {r['local_ms']:.3f} | {r['virtio_ms']:.3f} | {r['latency_ratio']:.2f}x"
            f" | {r['local_per_s']:.0f} | {r['virtio_per_s']:.0f} | {r['throughput_ratio']:.2f}x"
            f" | {'yes' if r['identical'] else 'NO'} | {r['target']} | {mark[r['hit']]} |"
        )
    return "\n".join(lines) + "\n"


def machine(env: dict[str, Any]) -> str:
    """The line under a device's tables that says where and when they were measured."""
    return (
        f"Measured {env['date']} on {env['host']} ({env['cpus']} CPUs, load {env['load'][0]:.2f}, Python"
        f" {env['python']}), {env['seconds']:g} s per measurement.\n"
    )


def with_section(text: str, device: str, section: str) -> str:
    """``text`` (results.md) with ``device``'s section replaced by ``section``, or added after the others."""
    sections: dict[str, str] = {}
    current = None
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            current = line.strip()
            sections[current] = ""
        if current is not None:
            sections[current] += line
    sections[section.splitlines()[0].strip()] = section
    return TITLE + "\n\n" + "\n".join(body.rstrip("\n") + "\n" for body in sections.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="the backend behind the daemon and run locally")
    parser.add_argument("--seconds", type=float, default=2.0, help="timing budget per measurement")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--pieces", metavar="MIB,...", help="measure the transfers once per piece size (MiB) the guest splits them into"
    )
    parser.add_argument(
        "--only", metavar="WHAT,...", default="round-trip,transfers,models", help="a subset of: %(default)s"
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    unknown = only - {"round-trip", "transfers", "models"}
    if unknown:
        parser.error(f"--only: unknown {sorted(unknown)}")
    pieces = [float(v) for v in args.pieces.split(",")] if args.pieces else None
    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, "bench.sock")
        daemon = start_daemon(args.device, sock)
        try:
            with ia.open(args.device) as local, ia.open(f"virtio:{sock}") as remote:
                rt = bench_round_trip(local, remote, args.seconds, Path(tmp)) if "round-trip" in only else []
                tr = bench_transfers(remote, args.seconds, pieces) if "transfers" in only else []
                models = bench_models(local, remote, args.device, args.seconds) if "models" in only else []
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(60)
    env = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "python": platform.python_version(),
        "device": args.device,
        "seconds": args.seconds,
    }
    text = table(args.device, rt, tr, models) + "\n" + machine(env)
    print(text)
    if not args.no_write:
        RESULTS.write_text(with_section(RESULTS.read_text() if RESULTS.exists() else "", args.device, text))
        store = RESULTS.with_suffix(".json")
        payload = json.loads(store.read_text()) if store.exists() else {}
        payload[args.device] = {"env": env, "round_trip": rt, "transfers": tr, "models": models}
        store.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"written: the {args.device} section of {RESULTS} and {store}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
