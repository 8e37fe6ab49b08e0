"""The CPU backend behind the execution contract.

Every memory domain is host memory here, so each buffer is one numpy byte array: Host, Device and
Shared are all host-visible and directly bindable, and binding never copies. Each queue is one worker
thread running its submissions in order (started on demand, gone when idle); ``submit`` only enqueues.
Runs stop at checkpoints (before every operator and loop iteration on the interpreter; between operators
and inside long loops of native code, ADR 0028): a cancellation wins until the run ends, and a deadline
ends the run where it is (runtime/event.py). A program's last operator may write its result straight into
the bound output buffer (see ``_destinations``).

A program runs as native code where :mod:`.native` can compile it, else on the numpy interpreter.
NVFP4 projections (ADR 0012) run on numpy in :mod:`.nvfp4`.
Programs without variables also run directly (``Accelerator.run_direct``): on the caller's thread, on
the caller's arrays.
"""

from __future__ import annotations

import collections
import ctypes
import os
import platform
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.errors import InternalError, IronAccelError
from ...runtime.accelerator import Accelerator, BoundRange
from ...runtime.event import EventCore
from ...runtime.types import NVFP4_FORMAT, TOSA_FORMAT, BufferDesc, BufferInfo, DeviceInfo, Limits, MemoryDomain


class _Worker:
    """Runs one queue's jobs in submission order on a thread of its own, started when a job comes and
    ended after ``IDLE_S`` without one, so idle queues (a guest may create hundreds) hold no thread."""

    IDLE_S = 1.0

    def __init__(self) -> None:
        self._jobs: collections.deque[Any] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._running = False  # a thread is draining the jobs (or about to)

    def put(self, job: Any) -> None:
        with self._cond:
            self._jobs.append(job)
            if self._running:
                self._cond.notify()
                return
            self._running = True
        threading.Thread(target=self._loop, name="ironaccel-cpu-queue", daemon=True).start()

    def close(self) -> None:
        """No job is pending (the queue is destroyed only then): let the thread go at once."""
        with self._cond:
            self._jobs.append(None)
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    self._cond.wait(self.IDLE_S)
                if not self._jobs or self._jobs[0] is None:
                    self._jobs.clear()
                    self._running = False
                    return
                job = self._jobs.popleft()
            job()


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_allocator_tuned = False


def _tune_allocator() -> None:
    """Keep freed blocks of up to 32 MiB in the heap for reuse (glibc only; once per process).

    Every call through the user API allocates fresh host arrays for its outputs (the read-back bytearray
    and the returned numpy array). glibc serves blocks above its mmap threshold with new mappings and
    unmaps them on free, so each call faulted in every page again: about 3000 page faults, 6 ms, for a
    12.8 MB output whose computation takes 2 ms. A fixed 32 MiB threshold (glibc's largest) and a
    trim threshold above it let the same blocks be reused. The cost is that up to that much freed memory
    stays with the process. Set IRONACCEL_CPU_MALLOC=default to leave the allocator alone.
    """
    global _allocator_tuned
    if _allocator_tuned or os.environ.get("IRONACCEL_CPU_MALLOC", "") == "default":
        return
    _allocator_tuned = True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 128 << 20)


class CpuAccelerator(Accelerator):
    supports_cancellation = True
    artifact_formats = frozenset({TOSA_FORMAT, NVFP4_FORMAT})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _tune_allocator()

    def _device_info(self) -> DeviceInfo:
        return DeviceInfo(
            name=f"CPU ({platform.machine()}, {os.cpu_count()} threads)",
            kind="cpu",
            vendor="host",
            cancellation=True,
            limits=Limits(),
        )

    def _capabilities(self) -> Any:
        from ...tosa.capability import descriptor_for_all_of_tosa_1_0

        return descriptor_for_all_of_tosa_1_0()

    def _allocate(self, context: Any, desc: BufferDesc) -> tuple[Any, BufferInfo]:
        try:
            backing = np.zeros(desc.size + desc.alignment, dtype=np.uint8)
        except MemoryError as exc:
            from ...core.errors import OutOfMemory

            raise OutOfMemory(f"cannot allocate {desc.size} bytes of host memory") from exc
        # Align the start so views of any dtype are aligned as the caller asked.
        skip = (-backing.ctypes.data) % desc.alignment
        data = backing[skip : skip + desc.size]
        info = BufferInfo(desc.size, backing.nbytes, desc.alignment, MemoryDomain(desc.domain), True, True)
        return data, info

    def _write(self, native: np.ndarray, offset: int, data: memoryview) -> None:
        native[offset : offset + data.nbytes] = np.frombuffer(data, dtype=np.uint8)

    def _read(self, native: np.ndarray, offset: int, out: memoryview) -> None:
        np.frombuffer(out, dtype=np.uint8)[:] = native[offset : offset + out.nbytes]

    def _load(self, context: Any, program: Any, limit: int) -> tuple[Any, int]:
        # The runtime refused the program before this if its working set exceeds ``limit`` (ADR 0024);
        # what is built here stays within that estimate.
        from ...nvfp4.projection import ProjectionArtifact

        if isinstance(program, ProjectionArtifact):
            from .nvfp4 import RESIDENT_BYTES, ProjectionRunner

            return _Loaded(ProjectionRunner(program), len(program.inputs), True, "NVFP4 projection"), RESIDENT_BYTES
        from ...tosa.analysis import storage_size
        from ...tosa.working_set import NUMPY_SHARING, estimate
        from . import native
        from .interpreter import load

        compiled = load(program)
        # Constants are kept once; the IR and plan cost about a small record per tensor and operator.
        blocks = list(program.blocks())
        records = sum(len(b.tensors) + len(b.operators) for b in blocks)
        resident = sum(t.data.nbytes for b in blocks for t in b.tensors if t.data is not None) + 256 * records
        # Folded results stay with the program; a run may copy each output once more (out of a view, or into
        # a fresh array where no bound buffer takes it).
        static = [t for t in program.main.output_tensors if not t.unranked and all(d >= 0 for d in t.shape)]
        resident += compiled.folded_bytes + sum(storage_size(t) for t in static)
        runner, why = native.load(compiled)
        if runner is not None:
            resident += runner.resident_bytes  # the constants it packed and one arena of intermediates
        else:
            # The interpreter's kernels are numpy's and return views (of SLICE, TRANSPOSE, ...): a run holds
            # at most this peak of intermediates, besides the variables' store.
            working = estimate(program, sharing=NUMPY_SHARING)
            resident += working.peak_bytes + working.variable_bytes
        loaded = _Loaded(runner or compiled, len(program.main.inputs), not compiled.has_variables, why)
        return loaded, resident

    def _unload(self, native: _Loaded) -> None:
        # The runtime unloads only programs no pending or direct run holds, so this frees at once.
        native.release()

    def _direct(self, program: _Loaded) -> Any:
        if not program.stateless:
            return None  # runs share the variables: they stay in queue order
        runner = program.compiled
        run_into = getattr(runner, "run_into", None)
        if run_into is not None:
            return run_into

        def run(inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
            results = runner.run(inputs, destinations=outputs)
            for result, out in zip(results, outputs, strict=True):
                if result is not out:
                    out[...] = result

        return run

    def _create_queue(self, context: Any) -> Any:
        return _Worker()

    def _destroy_queue(self, native: _Worker) -> None:
        native.close()

    def _submit(self, queue: _Worker, program: _Loaded, ranges: Sequence[BoundRange], event: EventCore) -> None:
        queue.put(lambda: _execute(program, ranges, event))


class _Loaded:
    __slots__ = ("compiled", "n_inputs", "stateless", "why")

    def __init__(self, compiled: Any, n_inputs: int, stateless: bool, why: str = "") -> None:
        # A native.NativeProgram, the interpreter's CompiledProgram, or an NVFP4 ProjectionRunner.
        self.compiled = compiled
        self.n_inputs = n_inputs
        self.stateless = stateless
        self.why = why  # why the program is not native ("" when it is)

    def release(self) -> None:
        """Give back what the runner holds beyond its Python objects: a native program's compiled library
        (the other runners hold only memory, freed with them). Idempotent."""
        from .native.program import NativeProgram

        if isinstance(self.compiled, NativeProgram):
            self.compiled.release()


def _view(r: BoundRange) -> np.ndarray:
    raw = r.native[r.offset : r.offset + r.length]
    return raw.view(r.spec.numpy_dtype).reshape(r.spec.shape)


def _overlaps(a: BoundRange, b: BoundRange) -> bool:
    # Distinct buffers are distinct allocations: only ranges of one buffer can overlap.
    return a.native is b.native and a.offset < b.offset + b.length and b.offset < a.offset + a.length


def _destinations(ranges: Sequence[BoundRange], out_ranges: Sequence[BoundRange]) -> list[np.ndarray | None]:
    """Output buffers the kernels may write into directly: those that share no byte with any other bound
    range (an input still being read, or another output), so writing early changes nothing observable."""
    return [
        None if any(o is not r and _overlaps(o, r) for r in ranges) or not o.length else _view(o) for o in out_ranges
    ]


def _execute(program: _Loaded, ranges: Sequence[BoundRange], event: EventCore) -> None:
    # Stoppable: the interpreter looks at the event before every operator (and every loop iteration), and
    # native code polls a control block between operators and inside long loops, so a cancellation or the
    # deadline ends the run there, not only before it starts.
    if not event.try_start(stoppable=True):
        return
    try:
        inputs = [_view(r) for r in ranges if r.slot < program.n_inputs]
        out_ranges = [r for r in ranges if r.slot >= program.n_inputs]
        # The last operator of a program often writes its result straight into the output buffer (no copy).
        destinations = _destinations(ranges, out_ranges)
        runner = program.compiled
        control_block = getattr(runner, "control_block", None)  # native programs: they cannot call checkpoint
        if control_block is not None:
            # The code polls the block; a winning cancel sets its stop word, and the deadline is in it.
            control = control_block(event.deadline)
            event.on_stop(control.stop)
            outputs = runner.run(inputs, destinations=destinations, check=event.checkpoint, control=control)
        else:
            outputs = runner.run(inputs, destinations=destinations, check=event.checkpoint)
        if len(outputs) != len(out_ranges):
            raise InternalError(f"program produced {len(outputs)} outputs for {len(out_ranges)} slots")
        for r, value, dest in zip(out_ranges, outputs, destinations, strict=True):
            if value is not dest:
                _view(r)[...] = value
    except IronAccelError as exc:
        event.fail(exc)
    except Exception as exc:  # noqa: BLE001 - a kernel defect fails the event, never the worker thread
        event.fail(InternalError(f"CPU kernel failed: {type(exc).__name__}: {exc}"))
    else:
        event.complete()
