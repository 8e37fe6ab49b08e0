#!/usr/bin/env python3
"""Where one virtio-accel command's time goes: a per-stage profile of the round trip, guest to daemon and
back, for a bare GET_DEVICE_INFO and for a 1-operator ``exe(x, y)`` (ADD over fp32[4]).

    .venv/bin/python benchmarks/virtio/profile_virtio.py [--device cpu] [-n 2000] [--repeats 3]

Each repeat starts ``ironaccel serve`` twice as subprocesses: one as it is, for the unwrapped round
trips, and one through ``profile_daemon.py``, which stamps each daemon-side stage. This process wraps its
own stages likewise (nothing in the package changes). After a warm-up, the two are served in alternating
blocks of ``--block`` round trips (so that load from other work on the machine falls on both alike) until
each has ``-n``; the daemon writes its stamps when it exits, and the two lists are lined up by time (every
stamp is ``time.monotonic_ns()``, one clock for both processes). Prints the median and p90 of each stage
and of the whole round trip, and the unwrapped round trip beside it: the difference is the wrappers' own
cost. What each stage includes, and a run: benchmarks/README.md ("virtio-accel"). Prints only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import profile_daemon as stamps  # noqa: E402  (the same stamp list, in this process)
from bench_virtio import add_program  # noqa: E402

import ironaccel as ia  # noqa: E402
from ironaccel.virtio import guest, transport_guest, virtqueue_driver  # noqa: E402
from ironaccel.virtio.wire_constants import Opcode  # noqa: E402

ROOT = HERE.parents[1]

STAGES = (
    ("guest API", "exe's own work outside the batches: checks, staging, output arrays, a poll's back-off"),
    ("guest encode", "header and body packed, arena blocks taken, the request copied into shared memory"),
    ("post + notify", "descriptors and avail ring written, then the kick (an eventfd write)"),
    ("daemon wake-up", "from the kick until the daemon's select() returned and it reads the kick eventfd"),
    ("ring read", "the kick eventfd read, kicks suppressed, the chain walked and its regions mapped"),
    ("decode", "_serve's choice of path, the session lock, decode_request"),
    ("dispatch", "from the decoded request to its handler (device-lost check, handler lookup)"),
    ("backend", "the handler, with the backend call it makes (and a READ_BUFFER's read into the answer)"),
    ("response", "the answer encoded into the chain's writable area, used ring written, the call eventfd"),
    ("next chain", "in a batch: from one answer posted to the next chain popped"),
    ("guest wake-up", "from the daemon's call until the guest's wait for used chains returned"),
    ("guest decode", "used ring reaped, the waiter woken, decode_response, the answer returned"),
)


# ---- the guest's stamps ------------------------------------------------------------------------------
def install_guest() -> Callable[[], None]:
    """Wrap the guest's stages; returns what undoes it."""
    around = stamps.around
    saved: list[tuple[Any, str, Any]] = []

    def put(owner: Any, name: str, value: Any) -> None:
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    put(guest.VirtioAccelerator, "_batch", around(guest.VirtioAccelerator._batch, "g0", "g1"))
    transport = transport_guest.GuestTransport
    put(transport, "exchange_batch", around(transport.exchange_batch, "x0", None))
    put(virtqueue_driver.DriverQueue, "post", around(virtqueue_driver.DriverQueue.post, "post0", "post1"))
    put(os, "eventfd_write", around(os.eventfd_write, None, "kick"))  # this process writes only kicks
    put(transport, "_wait_for_used", around(transport._wait_for_used, "w0", "w1"))
    # The guest's sleep when its spin (poll_s) found no answer: this process selects only there.
    put(select, "select", around(select.select, "sleep0", "sleep1"))
    put(guest, "decode_response", around(guest.decode_response, "d0", "d1"))

    def undo() -> None:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)

    return undo


def reset_stamps() -> None:
    stamps._next = itertools.count()


def taken() -> list[tuple[int, str]]:
    n = min(next(stamps._next), stamps.CAPACITY)
    return list(zip(stamps.times[:n], stamps.codes[:n], strict=True))


# ---- the daemon --------------------------------------------------------------------------------------
def start_daemon(device: str, sock: str, stamps_file: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "profile_daemon.py"), stamps_file, "--device", device, "--socket", sock],
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    end = time.monotonic() + 60
    while not os.path.exists(sock):
        if proc.poll() is not None or time.monotonic() > end:
            raise SystemExit("the daemon did not start")
        time.sleep(0.05)
    return proc


def stop_daemon(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


# ---- one run -----------------------------------------------------------------------------------------
def workloads(remote: Any, tmp: Path, spin_s: float | None) -> dict[str, Callable[[], Any]]:
    path = tmp / "add.tosa"
    path.write_bytes(add_program())
    exe = remote.compile(path)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(exe(x, x)[0], x + x)
    acc = remote.accelerator
    if spin_s is not None:
        acc.transport.poll_s = spin_s
    return {
        "GET_DEVICE_INFO": lambda: acc._command(Opcode.GET_DEVICE_INFO, b""),
        "exe(x, y)": lambda: exe(x, x),
    }


Windows = dict[str, list[tuple[int, int]]]
Stamps = list[tuple[int, str]]


def interleaved(
    device: str, n: int, warmup: int, block: int, tmp: Path, spin_s: float | None
) -> tuple[dict[str, list[int]], dict[str, int], Windows, Stamps, Stamps]:
    """Two daemons side by side, one as it is and one stamped, served in alternating blocks of ``block``
    round trips (this process's wrappers on only for the stamped blocks), so that the load of the
    machine, which other work shares, falls on both alike. Returns the unwrapped round trips (ns each),
    the stamped ones' (start, end) windows, this process's stamps and the daemon's."""
    stamps_file = str(tmp / "daemon-stamps.json")
    plain_proc = start_daemon(device, str(tmp / "plain.sock"), "-")
    proc = start_daemon(device, str(tmp / "stamped.sock"), stamps_file)
    bare: dict[str, list[int]] = {}
    windows: Windows = {}
    mine: Stamps = []
    now = time.monotonic_ns
    real_select, sleeps = select.select, [0]
    bare_slept: dict[str, int] = {}

    def counted(*args: Any) -> Any:  # the unwrapped guest's sleeps, counted only (on its slow path)
        sleeps[0] += 1
        return real_select(*args)

    try:
        with ia.open(f"virtio:{tmp / 'plain.sock'}") as plain, ia.open(f"virtio:{tmp / 'stamped.sock'}") as stamped:
            plain_work, stamped_work = workloads(plain, tmp, spin_s), workloads(stamped, tmp, spin_s)
            for name, plain_fn in plain_work.items():
                fn = stamped_work[name]
                for _ in range(warmup):
                    plain_fn()
                    fn()
                reset_stamps()
                sleeps[0] = 0
                bare[name], windows[name] = [], []
                while len(bare[name]) < n:
                    select.select = counted
                    for _ in range(block):
                        t0 = now()
                        plain_fn()
                        bare[name].append(now() - t0)
                    select.select = real_select
                    undo = install_guest()
                    try:
                        for _ in range(block):
                            t0 = now()
                            fn()
                            windows[name].append((t0, now()))
                    finally:
                        undo()
                mine += taken()
                bare_slept[name] = sleeps[0]
    finally:
        stop_daemon(plain_proc)
        stop_daemon(proc)
    with open(stamps_file) as f:
        data = json.load(f)
    theirs = list(zip(data["times"], data["codes"], strict=True))
    return bare, bare_slept, windows, sorted(mine), sorted(theirs)


# ---- lining up ---------------------------------------------------------------------------------------
def between(events: list[tuple[int, str]], times: np.ndarray, t0: int, t1: int) -> list[tuple[int, str]]:
    lo, hi = np.searchsorted(times, t0, "left"), np.searchsorted(times, t1, "right")
    return events[lo:hi]


def first(events: list[tuple[int, str]], code: str, after: int = 0) -> int | None:
    for t, c in events:
        if c == code and t >= after:
            return t
    return None


def split_batch(g: list[tuple[int, str]], d: list[tuple[int, str]], into: dict[str, int]) -> None:
    """Add one batch's stages (guest stamps ``g`` from g0 to g1, daemon stamps ``d`` in that window) to
    ``into``: consecutive pieces of one path, so they add up to the batch's time."""
    g0, g1 = g[0][0], g[-1][0]
    post0 = first(g, "post0") or g0
    kick = first(g, "kick", post0) or first(g, "post1", post0) or post0
    into["guest encode"] += post0 - g0
    into["post + notify"] += kick - post0
    at = kick
    wake = first(d, "wake")
    popped = first(d, "popped")
    if wake is not None and popped is not None and wake <= popped:
        into["daemon wake-up"] += max(0, wake - at)
        at = max(at, wake)
    chains = [t for t, c in d if c == "popped"]
    for i, start in enumerate(chains):
        end = chains[i + 1] if i + 1 < len(chains) else g1
        own = [(t, c) for t, c in d if start <= t < end]
        key = "ring read" if i == 0 else "next chain"
        into[key] += max(0, start - at)
        dec1 = first(own, "decode1") or start
        h0, h1 = first(own, "h0") or dec1, first(own, "h1") or dec1
        fill0, fill1 = first(own, "fill0"), first(own, "fill1")
        served = first(own, "served") or h1
        into["decode"] += dec1 - start
        into["dispatch"] += h0 - dec1
        into["backend"] += h1 - h0 + (fill1 - fill0 if fill0 and fill1 else 0)
        into["response"] += served - h1 - (fill1 - fill0 if fill0 and fill1 else 0)
        at = served
    w1 = [t for t, c in g if c == "w1"]
    woke = max(at, w1[-1]) if w1 else at
    into["guest wake-up"] += woke - at
    into["guest decode"] += g1 - woke


def profile(windows: list[tuple[int, int]], mine: list, theirs: list) -> tuple[dict[str, list[int]], list[int], int]:
    mt, tt = np.array([t for t, _ in mine]), np.array([t for t, _ in theirs])
    per: dict[str, list[int]] = {name: [] for name, _ in STAGES}
    batches: list[int] = []
    slept = 0
    for t0, t1 in windows:
        g, d = between(mine, mt, t0, t1), between(theirs, tt, t0, t1)
        into = dict.fromkeys(per, 0)
        starts = [i for i, (_, c) in enumerate(g) if c == "g0"]
        inside = 0
        for i in starts:
            j = next(j for j in range(i, len(g)) if g[j][1] == "g1")
            b0, b1 = g[i][0], g[j][0]
            split_batch(g[i : j + 1], [e for e in d if b0 <= e[0] <= b1], into)
            inside += b1 - b0
        into["guest API"] = (t1 - t0) - inside
        batches.append(len(starts))
        slept += sum(c == "sleep0" for _, c in g)
        for name in per:
            per[name].append(into[name])
    return per, batches, slept


# ---- the report --------------------------------------------------------------------------------------
def us(values: list[int] | np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) / 1e3


def report(
    name: str, per: dict[str, list[int]], total: list[int], bare: list[int], batches: list[int], slept: int
) -> None:
    print(
        f"\n{name}: {len(total)} round trips, {np.median(batches):g} batch(es) each (max {max(batches)}),"
        f" {slept / len(total):.2f} guest sleeps (select) per round trip"
    )
    print("| stage | median us | p90 us |\n|---|---:|---:|")
    for stage, _ in STAGES:
        if any(per[stage]):
            print(f"| {stage} | {us(per[stage], 50):.1f} | {us(per[stage], 90):.1f} |")
    print(f"| **round trip, wrapped** | {us(total, 50):.1f} | {us(total, 90):.1f} |")
    print(f"| round trip, unwrapped | {us(bare, 50):.1f} | {us(bare, 90):.1f} |")
    print(f"| wrappers' own cost | {us(total, 50) - us(bare, 50):.1f} | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("-n", type=int, default=2000, help="stamped round trips of each kind")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--block", type=int, default=50, help="round trips per block, unwrapped and stamped in turn")
    ap.add_argument(
        "--guest-spin-us",
        type=float,
        action="append",
        help="the guest's spin before it sleeps (its transport's poll_s); repeatable; default: as shipped",
    )
    args = ap.parse_args()
    print(f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, device {args.device}")
    spins = [None] if not args.guest_spin_us else [s * 1e-6 for s in args.guest_spin_us]
    summary: list[str] = []
    for repeat in range(args.repeats):
        for spin_s in spins:
            spin = "as shipped" if spin_s is None else f"{spin_s * 1e6:g} us"
            load0 = os.getloadavg()
            with tempfile.TemporaryDirectory() as tmp:
                bare, bare_slept, windows, mine, theirs = interleaved(
                    args.device, args.n, args.warmup, args.block, Path(tmp), spin_s
                )
            load1 = os.getloadavg()
            print(
                f"\n## repeat {repeat + 1}, guest spin {spin}: load {load0[0]:.2f} before,"
                f" {load1[0]:.2f} after (1-minute average)"
            )
            for name, spans in windows.items():
                per, batches, slept = profile(spans, mine, theirs)
                total = [t1 - t0 for t0, t1 in spans]
                report(name, per, total, bare[name], batches, slept)
                summary.append(
                    f"| {repeat + 1} | {spin} | {name} | {us(bare[name], 50):.1f} | {us(total, 50):.1f}"
                    f" | {bare_slept[name] / len(bare[name]):.2f} | {slept / len(total):.2f}"
                    f" | {load0[0]:.2f} / {load1[0]:.2f} |"
                )
    print("\n## round trips, median us\n")
    print(
        "| repeat | guest spin | command | unwrapped | wrapped | guest sleeps per call, unwrapped | wrapped"
        " | load before / after |"
    )
    print("|---|---|---|---:|---:|---:|---:|---|")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
