"""Compiled native libraries are shared while used and closed when unused (backends/cpu/native/library.py).

Each distinct program the CPU backend compiles is a shared object mapped into the process. Programs are
loaded and unloaded through the execution contract (a guest of the virtio daemon can send a new one per
request), so an unloaded program's library must leave the process: at most ``IDLE_LIBRARIES`` unused
libraries stay open for reloads. What is mapped is read from /proc/self/maps, the kernel's own account.
A run in flight on another thread keeps its library open until it returns (closing it under the run
would crash the process, so these tests would not fail quietly).

The slow test loads IRONACCEL_LIFETIME_LOADS (default 10,000) distinct programs and checks that the
mappings and the resident memory stay flat; each one costs a C compile the first time (about 0.1 s).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.backends.cpu.interpreter import load as interpret
from ironaccel.backends.cpu.native import NativeProgram, library, pool, toolchain
from ironaccel.backends.cpu.native import compile as compile_native
from ironaccel.core.errors import Busy, InvalidArgument
from ironaccel.core.settings import Settings
from ironaccel.runtime import ArtifactRef, ReleaseRejected
from ironaccel.tosa import Program
from ironaccel.tosa.builder import ProgramBuilder
from ironaccel.tosa.codec import read, write

pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps"),
    pytest.mark.skipif(toolchain.compiler() is None, reason=f"no C compiler: {toolchain.unavailable_reason()}"),
]

RESIDENT = 64 << 20
JOIN_S = 60.0  # a bound, never a delay
RNG = np.random.default_rng(23)


@pytest.fixture(autouse=True)
def native_required(monkeypatch) -> None:
    """Every program here must run as native code: a compile failure is an error, not a fallback."""
    monkeypatch.setattr(sys.modules["ironaccel.core.settings"], "settings", Settings(cpu_native="require"))


@pytest.fixture
def acc() -> Iterator[CpuAccelerator]:
    accelerator = CpuAccelerator()
    yield accelerator
    assert accelerator.live_resources()["program"] == 0


def _program(n: int) -> bytes:
    """A small program whose C source differs for every ``n`` (its shape is a constant of the code)."""
    b = ProgramBuilder()
    x = b.input("x", (n,), "fp32")
    b.output(b.add(b.mul(x, x), b.const(np.arange(n, dtype=np.float32))))
    return write(b.build())


def _program_ir(n: int) -> Program:
    return read(_program(n))


def _expected(n: int, x: np.ndarray) -> np.ndarray:
    return x * x + np.arange(n, dtype=np.float32)


def _mapped() -> dict[str, int]:
    """Files of the native cache directory mapped into this process: path -> number of mappings."""
    folder = str(toolchain.cache_dir())
    found: dict[str, int] = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith(folder):
                path = fields[5].strip().removesuffix(" (deleted)")
                found[path] = found.get(path, 0) + 1
    return found


def _native(acc: CpuAccelerator, program) -> NativeProgram:
    runner = acc._objects[program.id].native.compiled
    assert isinstance(runner, NativeProgram), "the program was not compiled to native code"
    return runner


def _run_direct(acc: CpuAccelerator, program, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    acc.run_direct(program, [x], [out])
    return out


def test_unloaded_programs_leave_at_most_the_idle_libraries_mapped_and_reload_correctly(acc):
    ctx = acc.create_context()
    sizes = [4096 + 7 * i for i in range(40)]  # shapes no other test uses: 40 sources of their own
    inputs = {n: RNG.standard_normal(n).astype(np.float32) for n in sizes}
    programs = [acc.load_program(ctx, ArtifactRef(_program(n), RESIDENT)) for n in sizes]
    paths = [str(_native(acc, p).library) for p in programs]
    assert len(set(paths)) == len(sizes)
    mapped = _mapped()
    assert all(p in mapped for p in paths), "a loaded library is not mapped"
    first = _run_direct(acc, programs[0], inputs[sizes[0]])
    np.testing.assert_array_equal(first, _expected(sizes[0], inputs[sizes[0]]))
    for p in programs:
        acc.unload_program(p)

    mapped = _mapped()
    still = [p for p in paths if p in mapped]
    assert len(still) <= library.IDLE_LIBRARIES, f"{len(still)} of 40 unloaded libraries still mapped"
    assert paths[0] not in mapped  # the first released is the first closed
    # Everything the cache directory has mapped is a library in the table (or the helper pool).
    in_use, idle = library.open_libraries()
    assert idle <= library.IDLE_LIBRARIES
    assert len(mapped) <= in_use + idle + 1

    # Closed, then loaded again: opened anew, and the same results.
    again = acc.load_program(ctx, ArtifactRef(_program(sizes[0]), RESIDENT))
    assert str(_native(acc, again).library) == paths[0] and paths[0] in _mapped()
    np.testing.assert_array_equal(_run_direct(acc, again, inputs[sizes[0]]), first)
    acc.unload_program(again)
    acc.destroy_context(ctx)


def test_programs_of_one_source_share_one_library_until_the_last_is_released():
    source = interpret(_program_ir(5003))
    a, b = compile_native(source), compile_native(source)
    assert a._library is b._library and a._library.users >= 2
    shared = a._library
    users = shared.users
    a.release()
    a.release()  # idempotent
    assert shared.users == users - 1 and shared.is_open
    with pytest.raises(InvalidArgument, match="released"):
        a.run([np.ones(5003, np.float32)])
    x = RNG.standard_normal(5003).astype(np.float32)
    np.testing.assert_array_equal(b.run([x])[0], _expected(5003, x))
    del b  # collected without release(): it still gives the library back
    gc.collect()
    assert shared.users == users - 2


def _split_program():
    """A convolution large enough to be shared among the helper threads (so each run calls
    ``pool.update_limit`` first, which the test below holds)."""
    b = ProgramBuilder()
    weights = b.const(RNG.standard_normal((24, 3, 3, 8)).astype(np.float32))
    b.output(b.conv2d(b.input("x", (1, 48, 40, 8), "fp32"), weights))
    return b.build()


@pytest.fixture
def held_runs(monkeypatch):
    """Runs of split programs stop just before their foreign call (inside run_into, counted as in flight)
    until ``go`` is set; ``entered`` is set when one arrives there."""
    entered, go = threading.Event(), threading.Event()
    passed_down = pool.update_limit

    def hold() -> None:
        entered.set()
        assert go.wait(JOIN_S)
        passed_down()

    monkeypatch.setattr(pool, "update_limit", hold)
    return entered, go


def test_a_run_in_flight_on_another_thread_keeps_its_library_until_it_returns(monkeypatch, held_runs):
    entered, go = held_runs
    monkeypatch.setattr(library, "IDLE_LIBRARIES", 0)  # released means closed at once
    program = _split_program()
    interpreted = interpret(program)
    native = compile_native(interpreted)
    assert native._splits
    path = str(native.library)
    x = RNG.standard_normal((1, 48, 40, 8)).astype(np.float32)
    want = interpreted.run([x])[0]
    results: list[np.ndarray] = []
    runner = threading.Thread(target=lambda: results.append(native.run([x])[0]), daemon=True)
    runner.start()
    assert entered.wait(JOIN_S)
    native.release()  # while the run is in flight: nothing may close yet
    assert native.released and path in _mapped() and native._library.is_open
    with pytest.raises(InvalidArgument, match="released"):
        native.run([x])  # new runs are refused at once
    go.set()
    runner.join(JOIN_S)
    assert not runner.is_alive()
    np.testing.assert_allclose(results[0], want, rtol=1e-4, atol=1e-4)
    assert path not in _mapped() and not native._library.is_open  # the run's end let it go


@pytest.mark.parametrize("delay_ms", [0, 1, 5])
def test_a_release_racing_runs_on_many_threads_never_closes_the_library_under_one(monkeypatch, delay_ms):
    # Every run either completes with the right value or is refused; the library closes once all are out.
    monkeypatch.setattr(library, "IDLE_LIBRARIES", 0)
    n = 6007 + delay_ms
    native = compile_native(interpret(_program_ir(n)))
    x = RNG.standard_normal(n).astype(np.float32)
    want = _expected(n, x)
    start = threading.Barrier(5)
    outcomes: list[str] = []

    def runner() -> None:
        start.wait(JOIN_S)
        while True:
            try:
                (got,) = native.run([x])
            except InvalidArgument:
                outcomes.append("refused")
                return
            outcomes.append("ok" if np.array_equal(got, want) else "wrong")

    threads = [threading.Thread(target=runner, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    start.wait(JOIN_S)
    time.sleep(delay_ms / 1000)
    native.release()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads)
    assert "wrong" not in outcomes and outcomes.count("refused") == 4
    assert not native._library.is_open and str(native.library) not in _mapped()


def test_through_the_contract_a_direct_run_in_flight_blocks_the_unload_until_it_returns(acc, held_runs):
    entered, go = held_runs
    ctx = acc.create_context()
    program = _split_program()
    handle = acc.load_program(ctx, ArtifactRef(write(program), RESIDENT))
    native = _native(acc, handle)
    x = RNG.standard_normal((1, 48, 40, 8)).astype(np.float32)
    out = np.empty((1, 46, 38, 24), np.float32)
    runner = threading.Thread(target=lambda: acc.run_direct(handle, [x], [out]), daemon=True)
    runner.start()
    assert entered.wait(JOIN_S)
    with pytest.raises(ReleaseRejected) as refused:
        acc.unload_program(handle)
    assert isinstance(refused.value.error, Busy) and not native.released
    go.set()
    runner.join(JOIN_S)
    assert not runner.is_alive()
    np.testing.assert_allclose(out, interpret(program).run([x])[0], rtol=1e-4, atol=1e-4)
    acc.unload_program(handle)
    assert native.released
    acc.destroy_context(ctx)


# -- many loads ---------------------------------------------------------------------------------------
def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _maps_lines() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


@pytest.mark.slow
def test_thousands_of_distinct_programs_keep_mappings_and_memory_flat(acc):
    loads = int(os.environ.get("IRONACCEL_LIFETIME_LOADS", "10000"))
    warm_up = max(2 * library.IDLE_LIBRARIES, min(200, loads // 5))
    assert loads > warm_up
    ctx = acc.create_context()
    # (1, n) shapes: sources of their own, whatever else this process compiled.
    base = 20000
    started = time.monotonic()
    for i in range(loads):
        n = base + i
        b = ProgramBuilder()
        x = b.input("x", (1, n), "fp32")
        b.output(b.add(b.mul(x, x), x))
        handle = acc.load_program(ctx, ArtifactRef(write(b.build()), RESIDENT))
        value = np.full((1, n), 2, np.float32)
        out = np.empty_like(value)
        acc.run_direct(handle, [value], [out])
        assert out[0, -1] == 6 and isinstance(_native(acc, handle), NativeProgram)
        acc.unload_program(handle)
        if i + 1 == warm_up:
            gc.collect()
            maps_then, rss_then = _maps_lines(), _rss_bytes()
    gc.collect()
    maps_now, rss_now = _maps_lines(), _rss_bytes()
    seconds = time.monotonic() - started
    print(
        f"{loads} loads in {seconds:.0f} s ({1000 * seconds / loads:.0f} ms each); after {warm_up}: "
        f"{maps_then} maps lines, RSS {rss_then / 2**20:.1f} MiB; at the end: {maps_now} lines, "
        f"RSS {rss_now / 2**20:.1f} MiB"
    )
    acc.destroy_context(ctx)
    assert maps_now <= maps_then + 8, f"mappings grew from {maps_then} to {maps_now} lines"
    assert rss_now <= rss_then + (16 << 20), f"RSS grew from {rss_then >> 20} to {rss_now >> 20} MiB"
