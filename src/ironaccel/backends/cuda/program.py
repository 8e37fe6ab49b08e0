"""Programs: an admitted TOSA program lowered into kernels, device memory and launches packed once.

``load_program`` (runtime/programs.py) validates and admits the program against :mod:`.capability`'s
descriptor before ``_load`` runs. ``_load`` plans it (:mod:`.plan`: every operator through the operator
table, the intermediates into one arena by liveness, constants apart), refuses a plan that would keep
more than the caller's bound (ResourceLimit, before anything is allocated), then compiles and loads each
distinct kernel (:mod:`.kernels`), allocates the arena, the constants, the lowerings' scratch and (for a
program with products) cuBLASLt's workspace, uploads the constants once, packs every launch's argument
block with its final addresses and plans each product (:mod:`.blas`). A run copies the bound inputs in,
runs the commands, and copies the outputs out (:meth:`LoadedProgram.enqueue`).

One launch per run: the first run with a set of bound ranges is captured from its stream into a CUDA
graph, and every later run with the same ranges replays it (``cuGraphLaunch``), which costs the host one
driver call where each command would cost one. Graphs are keyed by the ranges' device addresses, as the
captured copies hold them.

The arena is the program's own: runs of one program on several queues take turns (:attr:`LoadedProgram.lock`,
held by a run until its work has finished on the device).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...core.errors import ResourceLimit
from ...nvfp4.projection import ProjectionArtifact
from ...runtime.accelerator import Accelerator, BoundRange
from ...runtime.handles import Context
from ...tosa.dtypes import DType
from . import nvfp4
from . import plan as planning
from .binding import direct_addresses
from .device import CudaDevice
from .driver import check, status_name
from .kernels import Modules
from .ops.common import BLOCK, Copy, Gemm, Launch, Place, pack
from .prelude import ARG_WORDS

ARG_BYTES = 8 * ARG_WORDS
FP8_CAPABILITY = (8, 9)  # cuBLASLt's fp8 products start with Ada (sm_89) and Hopper
RUNS_KEPT = 8  # sets of bound ranges a program keeps commands and a graph for, the least recent dropped


def resident_bytes(plan: planning.Plan) -> int:
    """What a loaded program of ``plan`` keeps: its arena, constants, scratch, cuBLASLt workspace and
    packed launches."""
    from .blas import WORKSPACE_BYTES

    workspace = WORKSPACE_BYTES if plan.gemms else 0
    return plan.arena_bytes + plan.const_bytes + plan.scratch_bytes + workspace + ARG_BYTES * len(plan.launches)


class _Launch:
    """A launch with its argument block packed (``args``) and the parameter array pointing at it."""

    def __init__(self, function: Any, grid: int, args: bytes) -> None:
        self.function = function
        self.grid = grid
        self.args = np.frombuffer(args, dtype=np.uint8).copy()
        self.params = np.array([self.args.ctypes.data], dtype=np.uint64)  # void*[1]: the one parameter

    def enqueue(self, driver: Any, stream: Any) -> None:
        # One block dimension, no dynamic shared memory, the parameters by pointer, no "extra".
        result = driver.cuLaunchKernel(
            self.function, self.grid, 1, 1, BLOCK, 1, 1, 0, stream, self.params.ctypes.data, 0
        )
        check(result, "cuLaunchKernel")


class _Copy:
    def __init__(self, dst: int, src: int, size: int) -> None:
        self.dst, self.src, self.size = dst, src, size

    def enqueue(self, driver: Any, stream: Any) -> None:
        check(driver.cuMemcpyAsync(self.dst, self.src, self.size, stream), "cuMemcpyAsync")


class _Gemm:
    """A product planned for its operands' addresses (:class:`.blas.MatmulPlan`)."""

    def __init__(self, plan: Any, a: int, b: int, d: int, workspace: int) -> None:
        self.plan, self.a, self.b, self.d, self.workspace = plan, a, b, d, workspace

    def enqueue(self, driver: Any, stream: Any) -> None:
        self.plan.enqueue(self.a, self.b, self.d, self.workspace, int(stream))


def _types(step: Gemm) -> Any:
    from . import blas

    fp = {DType.FP32: blas.R_32F, DType.FP16: blas.R_16F, DType.BF16: blas.R_16BF, DType.FP8E4M3: blas.R_8F_E4M3}
    if step.operands is DType.INT8:
        return blas.Types(blas.R_8I, blas.R_32I, blas.COMPUTE_32I, blas.R_32I)
    return blas.Types(fp[step.operands], fp[step.result], blas.COMPUTE_32F, blas.R_32F)


def _scalar_addresses(step: Launch, address: Callable[[Place], int]) -> Launch:
    """``step`` with the addresses of the places a kernel reads beyond ``IaArgs.in`` (a
    :class:`.nvfp4.WideLaunch`'s ``scalar_places``) in their scalar words."""
    extra = getattr(step, "scalar_places", ())
    if not extra:
        return step
    scalars = list(step.scalars)
    for word, place in extra:
        scalars[word] = address(place)
    return dataclasses.replace(step, scalars=tuple(scalars))


class _Run:
    """What runs with one set of bound ranges: the commands, the slots whose ranges they use in place (the
    others are copied in and out), the captured graph (graph, executable) or None."""

    def __init__(self, commands: list[Any], direct: frozenset[int]) -> None:
        self.commands, self.direct = commands, direct
        self.graph: tuple[Any, Any] | None = None


def run_key(ranges: Sequence[BoundRange]) -> tuple[Any, ...]:
    """What tells one run's bindings from another's: each range's slot, device address and length."""
    return tuple((r.slot, r.native.device + r.offset, r.length) for r in ranges)


class LoadedProgram:
    """A program resident on the device: its arena and constants, its commands, its input and output
    places. Made and destroyed with the device in use by the caller."""

    def __init__(self, device: CudaDevice, modules: Modules, plan: planning.Plan) -> None:
        self.device = device
        self.plan = plan
        self.lock = threading.Lock()
        self.resident_bytes = resident_bytes(plan)
        driver = device.api
        self.arena = int(check(driver.cuMemAlloc(plan.arena_bytes), "cuMemAlloc(arena)")) if plan.arena_bytes else 0
        self.consts = self.scratch = self.workspace = 0
        self.gemms: list[Any] = []  # the products' cuBLASLt plans, in step order, destroyed with the program
        # Per set of bound ranges (the least recent dropped past RUNS_KEPT): its commands, whether they
        # read and write the bound ranges in place (.binding), and its captured graph (or None).
        self.runs: collections.OrderedDict[tuple, _Run] = collections.OrderedDict()
        self.graphs_refused: str | None = None
        # The event after the latest run (.launcher, .submit) and the stream it was recorded on: a run on
        # another stream waits for it first (on the same stream, the stream's order already does).
        self.tail: Any = None
        self.tail_stream: Any = None
        try:
            if plan.scratch_bytes:
                self.scratch = int(check(driver.cuMemAlloc(plan.scratch_bytes), "cuMemAlloc(scratch)"))
            if plan.gemms:
                from .blas import WORKSPACE_BYTES

                self.workspace = int(check(driver.cuMemAlloc(WORKSPACE_BYTES), "cuMemAlloc(workspace)"))
            if plan.const_bytes:
                self.consts = int(check(driver.cuMemAlloc(plan.const_bytes), "cuMemAlloc(constants)"))
                self._upload()
            self.functions = {k.source: modules.function(k) for k in plan.kernels}
            self.commands = self._commands(self.address)
            self.inputs = tuple(self.address(p) for p in plan.inputs)
            self.outputs = tuple(self.address(p) for p in plan.outputs)
        except BaseException:
            self.destroy()
            raise

    def address(self, place: Place) -> int:
        base = {"arena": self.arena, "const": self.consts, "scratch": self.scratch}[place.buffer]
        return base + place.offset

    def _commands(self, address: Callable[[Place], int]) -> list[_Launch | _Copy | _Gemm]:
        """The plan's steps as commands with ``address``'s places (each product planned once, at load)."""
        commands: list[_Launch | _Copy | _Gemm] = []
        products = iter(self.gemms) if self.gemms else None
        for step in self.plan.steps:
            if isinstance(step, Launch):
                args = pack(_scalar_addresses(step, address), address)
                commands.append(_Launch(self.functions[step.kernel.source], step.grid, args))
            elif isinstance(step, Copy):
                commands.append(_Copy(address(step.dst), address(step.src), step.dst.size))
            elif isinstance(step, Gemm):
                found = next(products) if products is not None else self._plan_product(step)
                commands.append(_Gemm(found, address(step.a), address(step.b), address(step.out), self.workspace))
        return commands

    def _plan_product(self, step: Gemm) -> Any:
        from .blas import WORKSPACE_BYTES, MatmulPlan

        shape = (step.batch, step.m, step.n, step.k)
        found = MatmulPlan(self.device.blas(), _types(step), *shape, step.b_transposed, WORKSPACE_BYTES)
        self.gemms.append(found)
        return found

    def _upload(self) -> None:
        staging = np.zeros(self.plan.const_bytes, dtype=np.uint8)
        for offset, data in self.plan.constants:
            raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
            staging[offset : offset + raw.size] = raw
        driver, stream = self.device.api, self.device.transfer_stream
        check(driver.cuMemcpyHtoDAsync(self.consts, staging.ctypes.data, staging.nbytes, stream), "constants")
        self.device.synchronize("uploading constants")

    def enqueue(self, stream: Any, ranges: Sequence[BoundRange], key: tuple[Any, ...] | None = None) -> None:
        """Put one run on ``stream`` (the device in use by the caller): the run's graph for these bound
        ranges, captured on first use where the driver has graphs; otherwise its commands one by one.
        ``key``: :func:`run_key` of ``ranges``, where the caller keeps it (a launcher's ranges never change)."""
        if key is None:
            key = run_key(ranges)
        run = self.runs.get(key)
        if run is None:
            direct = direct_addresses(self.plan, ranges, self.address)
            if direct is None:
                run = _Run(self.commands, frozenset())
            else:
                run = _Run(self._commands(direct[0]), direct[1])
            if self.device.graphs and self.graphs_refused is None:
                run.graph = self._capture(stream, ranges, run)
            self.runs[key] = run
            while len(self.runs) > RUNS_KEPT:
                self._forget(self.runs.popitem(last=False)[1])
        else:
            self.runs.move_to_end(key)
        if run.graph is not None:
            check(self.device.api.cuGraphLaunch(run.graph[1], stream), "cuGraphLaunch")
        else:
            self._enqueue_commands(stream, ranges, run)

    def _capture(self, stream: Any, ranges: Sequence[BoundRange], run: _Run) -> tuple[Any, Any] | None:
        """The run's commands for ``ranges`` captured from ``stream`` into an instantiated graph; None (and
        the reason kept in :attr:`graphs_refused`, after which runs go command by command) when the
        driver refuses to capture or instantiate it."""
        driver = self.device.api
        mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(driver.cuStreamBeginCapture(stream, mode), "cuStreamBeginCapture")
        try:
            self._enqueue_commands(stream, ranges, run)
        except BaseException:
            driver.cuStreamEndCapture(stream)
            raise
        result, graph = driver.cuStreamEndCapture(stream)
        if status_name(result) != "CUDA_SUCCESS":
            self.graphs_refused = f"cuStreamEndCapture: {status_name(result)}"
            return None
        result, executable = driver.cuGraphInstantiate(graph, 0)
        if status_name(result) != "CUDA_SUCCESS":
            driver.cuGraphDestroy(graph)
            self.graphs_refused = f"cuGraphInstantiate: {status_name(result)}"
            return None
        return graph, executable

    def _forget(self, run: _Run) -> None:
        if run.graph is not None:
            self.device.api.cuGraphExecDestroy(run.graph[1])
            self.device.api.cuGraphDestroy(run.graph[0])
            run.graph = None

    def _enqueue_commands(self, stream: Any, ranges: Sequence[BoundRange], run: _Run) -> None:
        """``run``'s commands; the bound inputs they do not use in place copied into their places before, and
        such outputs copied out to their bound ranges after."""
        driver = self.device.api
        n_inputs = len(self.inputs)
        for r in ranges:
            if r.slot not in run.direct and r.slot < n_inputs and r.length:
                _Copy(self.inputs[r.slot], r.native.device + r.offset, r.length).enqueue(driver, stream)
        for command in run.commands:
            command.enqueue(driver, stream)
        for r in ranges:
            if r.slot not in run.direct and r.slot >= n_inputs and r.length:
                _Copy(r.native.device + r.offset, self.outputs[r.slot - n_inputs], r.length).enqueue(driver, stream)

    def destroy(self) -> None:
        driver = self.device.api
        while self.runs:
            self._forget(self.runs.popitem()[1])
        while self.gemms:
            self.gemms.pop().destroy()
        for address in (self.arena, self.consts, self.scratch, self.workspace):
            if address:
                driver.cuMemFree(address)
        self.arena = self.consts = self.scratch = self.workspace = 0


class CudaPrograms(Accelerator):
    """The program hooks of the CUDA accelerator (one of its bases)."""

    device: CudaDevice
    modules: Modules

    def _load(self, context: Context, program: Any, limit: int) -> tuple[LoadedProgram, int]:
        if isinstance(program, ProjectionArtifact):  # an NVFP4 projection (ADR 0012, 0040)
            plan = nvfp4.build(program, limit)
        else:
            plan = planning.build(program, native_fp8=self.device.capability >= FP8_CAPABILITY)
        planned = resident_bytes(plan)
        if planned > limit:
            raise ResourceLimit(
                f"the program's plan keeps {planned} bytes on {self.device.name} (arena {plan.arena_bytes},"
                f" constants {plan.const_bytes}); {limit} allowed"
            )
        with self.device.use():
            loaded = LoadedProgram(self.device, self.modules, plan)
        try:
            self.device.adopt("program", loaded)
        except BaseException:
            loaded.destroy()
            raise
        return loaded, loaded.resident_bytes

    def _unload(self, native: LoadedProgram) -> None:
        self.device.release("program", native)
