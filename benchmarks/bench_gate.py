#!/usr/bin/env python3
"""How soon work parked on a host gate runs once the gate is signalled, beside the same work submitted plainly.

    python3 benchmarks/bench_gate.py [--device cpu --device vulkan ...] [--count 2000]

For each device: a 1-operator program (ADD of 256 floats) in device buffers, then ``--count`` rounds of

* plain: ``submit`` -> completion observed (``wait``), timed from the submit;
* gated: ``submit(after=(gate, v))`` made beforehand, then ``gate.signal(v)`` -> completion observed, timed
  from the signal.

The difference of the medians is what a gate adds between the signal and the work's end: the signalling
thread hands the parked work to its queue itself (no thread of the runtime's own wakes), so it is the cost
of that hand-off. Prints one table; writes nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

import numpy as np

import ironaccel
from ironaccel.runtime import Binding, BufferDesc, BufferUsage, MemoryDomain
from ironaccel.tosa import DType, Op, ProgramBuilder
from ironaccel.tosa.codec import write

USAGE = (
    BufferUsage.PROGRAM_INPUT
    | BufferUsage.PROGRAM_OUTPUT
    | BufferUsage.TRANSFER_SOURCE
    | BufferUsage.TRANSFER_DESTINATION
)


def add_program(n: int) -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (n,), DType.FP32)
    y = b.input("y", (n,), DType.FP32)
    b.output(b.op(Op.ADD, [x, y]))
    return write(b.build())


def measure(device: str, count: int) -> dict[str, Any]:
    dev = ironaccel.open(device)
    acc, n = dev.accelerator, 256
    exe = dev.compile(add_program(n))
    bufs = [acc.allocate_buffer(dev.context, BufferDesc(4 * n, MemoryDomain.DEVICE, USAGE)) for _ in range(3)]
    for buf in bufs[:2]:
        acc.write_buffer(buf, 0, np.ones(n, np.float32))
    bindings = [Binding(i, b, 0, 4 * n) for i, b in enumerate(bufs)]
    gate = acc.host_gate(dev.context)
    plain, gated = [], []
    gc.disable()
    try:
        for _ in range(50):  # warm: the first runs record and cache what later runs replay
            ev = acc.submit(dev.queue, exe.program, bindings)
            acc.wait(ev)
            acc.destroy_event(ev)
        for i in range(count):
            start = time.perf_counter()
            ev = acc.submit(dev.queue, exe.program, bindings)
            acc.wait(ev)
            plain.append(time.perf_counter() - start)
            acc.destroy_event(ev)
            ev = acc.submit(dev.queue, exe.program, bindings, after=(gate, i + 1))
            start = time.perf_counter()
            gate.signal(i + 1)
            acc.wait(ev)
            gated.append(time.perf_counter() - start)
            acc.destroy_event(ev)
    finally:
        gc.enable()
        for buf in bufs:
            acc.free_buffer(buf)
        exe.close()
        name = acc.device_info().name
        dev.close()
    p, g = statistics.median(plain) * 1e6, statistics.median(gated) * 1e6
    return {"device": device, "name": name, "plain_us": p, "gated_us": g, "added_us": g - p}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", action="append", help="a device to open (repeatable; default cpu)")
    parser.add_argument("--count", type=int, default=2000, help="rounds per device (default %(default)s)")
    args = parser.parse_args(argv)
    rows = [measure(d, args.count) for d in args.device or ["cpu"]]
    print("| device | submit -> complete (us) | signal -> complete (us) | gate adds (us) |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['device']} ({r['name']}) | {r['plain_us']:.1f} | {r['gated_us']:.1f} | {r['added_us']:+.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
