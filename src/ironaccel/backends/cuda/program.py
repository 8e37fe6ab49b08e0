"""Programs: an admitted TOSA program lowered into kernels, device memory and launches packed once.

``load_program`` (runtime/programs.py) validates and admits the program against :mod:`.capability`'s
descriptor before ``_load`` runs. ``_load`` plans it (:mod:`.plan`: every operator through the operator
table, the intermediates into one arena by liveness, constants apart), refuses a plan that would keep
more than the caller's bound (ResourceLimit, before anything is allocated), then compiles and loads each
distinct kernel (:mod:`.kernels`), allocates the arena and the constants, uploads the constants once and
packs every launch's argument block with its final addresses. A run then only copies the bound inputs in,
launches, and copies the outputs out (:meth:`LoadedProgram.enqueue`).

The arena is the program's own: runs of one program on several queues take turns (:attr:`LoadedProgram.lock`,
held by a run until its work has finished on the device).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.errors import ResourceLimit
from ...runtime.accelerator import Accelerator, BoundRange
from ...runtime.handles import Context
from . import plan as planning
from .device import CudaDevice
from .driver import check
from .kernels import Modules
from .ops.common import BLOCK, Copy, Launch, Place, pack
from .prelude import ARG_WORDS

ARG_BYTES = 8 * ARG_WORDS


def resident_bytes(plan: planning.Plan) -> int:
    """What a loaded program of ``plan`` keeps: its arena, its constants and its packed launches."""
    return plan.arena_bytes + plan.const_bytes + ARG_BYTES * len(plan.launches)


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


class LoadedProgram:
    """A program resident on the device: its arena and constants, its commands, its input and output
    places. Made and destroyed with the device in use by the caller."""

    def __init__(self, device: CudaDevice, modules: Modules, plan: planning.Plan) -> None:
        self.device = device
        self.plan = plan
        self.lock = threading.Lock()
        self.resident_bytes = resident_bytes(plan)
        driver = device.api
        functions = {k.source: modules.function(k) for k in plan.kernels}
        self.arena = int(check(driver.cuMemAlloc(plan.arena_bytes), "cuMemAlloc(arena)")) if plan.arena_bytes else 0
        self.consts = 0
        try:
            if plan.const_bytes:
                self.consts = int(check(driver.cuMemAlloc(plan.const_bytes), "cuMemAlloc(constants)"))
                self._upload()
            self.commands: list[_Launch | _Copy] = []
            for step in plan.steps:
                if isinstance(step, Launch):
                    args = pack(step, self.address)
                    self.commands.append(_Launch(functions[step.kernel.source], step.grid, args))
                elif isinstance(step, Copy):
                    self.commands.append(_Copy(self.address(step.dst), self.address(step.src), step.dst.size))
            self.inputs = tuple(self.address(p) for p in plan.inputs)
            self.outputs = tuple(self.address(p) for p in plan.outputs)
        except BaseException:
            self.destroy()
            raise

    def address(self, place: Place) -> int:
        return (self.arena if place.buffer == "arena" else self.consts) + place.offset

    def _upload(self) -> None:
        staging = np.zeros(self.plan.const_bytes, dtype=np.uint8)
        for offset, data in self.plan.constants:
            raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
            staging[offset : offset + raw.size] = raw
        driver, stream = self.device.api, self.device.transfer_stream
        check(driver.cuMemcpyHtoDAsync(self.consts, staging.ctypes.data, staging.nbytes, stream), "constants")
        self.device.synchronize("uploading constants")

    def enqueue(self, stream: Any, ranges: Sequence[BoundRange]) -> None:
        """Put one run on ``stream``: the bound inputs copied into their places, the commands, the outputs
        copied out to their bound ranges (the device in use by the caller)."""
        driver = self.device.api
        n_inputs = len(self.inputs)
        for r in ranges:
            if r.slot < n_inputs and r.length:
                _Copy(self.inputs[r.slot], r.native.device + r.offset, r.length).enqueue(driver, stream)
        for command in self.commands:
            command.enqueue(driver, stream)
        for r in ranges:
            if r.slot >= n_inputs and r.length:
                _Copy(r.native.device + r.offset, self.outputs[r.slot - n_inputs], r.length).enqueue(driver, stream)

    def destroy(self) -> None:
        driver = self.device.api
        for address in (self.arena, self.consts):
            if address:
                driver.cuMemFree(address)
        self.arena = self.consts = 0


class CudaPrograms(Accelerator):
    """The program hooks of the CUDA accelerator (one of its bases)."""

    device: CudaDevice
    modules: Modules

    def _load(self, context: Context, program: Any, limit: int) -> tuple[LoadedProgram, int]:
        plan = planning.build(program)
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
