"""The Vulkan backend behind the execution contract.

One accelerator owns one VkDevice (on the process's shared instance) with its compute queue, its
pipeline cache, its buffers, loaded programs and submission rings. Contexts are bookkeeping only (the
runtime keeps them); a contract queue is a :class:`~.submit.Ring` on the device's one VkQueue.

Completion is observed, not delivered (``observes_completion``): there is no worker thread, and the
runtime's ``poll_event`` / ``wait`` call :meth:`VulkanAccelerator._progress`, which reads or waits on
the fences of the submission rings. Submitted work cannot be cancelled (it is on the device); a finite
timeout is honoured when the work would start (after a host gate), not once it runs. A prepared
submission's launches skip the ring: each is one vkQueueSubmit2 signalling a timeline semaphore
(:mod:`.launcher`).

Objects are released by the contract's release calls; :meth:`VulkanAccelerator.close` (or garbage
collection of the accelerator) waits for the device to go idle and destroys whatever is left, then the
device, so the validation layer never sees a leaked child object.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from ...core.errors import DeviceLost, ResourceLimit
from ...nvfp4.bounds import Form
from ...nvfp4.projection import ProjectionArtifact
from ...runtime.accelerator import Accelerator, BoundRange
from ...runtime.event import EventCore
from ...runtime.types import NVFP4_FORMAT, TOSA_FORMAT, BufferDesc, BufferInfo, DeviceInfo, Limits, MemoryDomain
from . import nvfp4, statistics
from . import plan as planning
from .capability import descriptor
from .device import Device, PhysicalDevice
from .instance import Instance
from .kernels import Kernels
from .launcher import Launcher
from .memory import Allocation, Memory
from .program import LoadedProgram, plan_resident_bytes
from .submit import Ring

_VENDORS = {
    0x10DE: "NVIDIA",
    0x1002: "AMD",
    0x8086: "Intel",
    0x13B5: "Arm",
    0x5143: "Qualcomm",
    0x106B: "Apple",
    0x10005: "Mesa",
}
_GATED_POLL_S = 0.05  # how long a waiter sleeps between looks at work still parked on a host gate


class _Native:
    """Everything the device owns, kept apart from the accelerator so that a finalizer can tear it
    down without keeping the accelerator alive."""

    def __init__(self, device: Device, memory: Memory, kernels: Kernels) -> None:
        self.device = device
        self.memory = memory
        self.kernels = kernels
        self.lock = threading.Lock()
        self.buffers: set[Allocation] = set()
        self.programs: set[LoadedProgram] = set()
        self.rings: set[Ring] = set()
        self.launchers: set[Launcher] = set()
        self.closed = False

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            rings, programs, buffers = list(self.rings), list(self.programs), list(self.buffers)
            launchers = list(self.launchers)
            self.launchers.clear()
            self.rings.clear()
            self.programs.clear()
            self.buffers.clear()
        try:
            self.device.wait_idle()
        except Exception:  # noqa: BLE001 - a lost device is torn down all the same
            pass
        for launcher in launchers:  # before the programs whose command buffers they submit
            launcher.destroy(lost=True)
        for ring in rings:
            for slot in ring.slots:  # the device is idle: nothing is in flight any more
                slot.event = None
                slot.waiters = 0
            ring.destroy()
        for program in programs:
            program.destroy()
        for a in buffers:
            self.memory.free(a)
        self.kernels.destroy()
        self.memory.destroy()
        self.device.destroy()


class VulkanAccelerator(Accelerator):
    supports_cancellation = False
    observes_completion = True
    artifact_formats = frozenset({TOSA_FORMAT, NVFP4_FORMAT})  # NVFP4 projections: :mod:`.nvfp4`
    nvfp4_forms = frozenset(Form)  # the mixture of experts too (ADR 0042)

    def __init__(
        self,
        inst: Instance,
        physical: PhysicalDevice,
        *,
        staging: bool = False,
        pipeline_statistics: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.physical = physical
        device = Device(inst, physical, pipeline_statistics=pipeline_statistics)
        try:
            memory = Memory(device, staging=staging)
            kernels = Kernels(device)
        except BaseException:
            device.destroy()
            raise
        self._native = _Native(device, memory, kernels)
        self._finalizer = weakref.finalize(self, self._native.close)
        self._descriptor = descriptor(device.limits)
        self._where: dict[EventCore, Ring] = {}  # submitted events -> their ring, until retired
        self._where_lock = threading.Lock()
        self._changed = threading.Condition()  # notified when work is submitted or retired

    # ---- identity -----------------------------------------------------------------------------
    def _device_info(self) -> DeviceInfo:
        p, limits = self.physical, self._native.device.limits
        vendor = _VENDORS.get(p.vendor_id, f"{p.vendor_id:#06x}")
        return DeviceInfo(
            name=p.name,
            kind="vulkan",
            vendor=vendor,
            uuid=p.uuid,
            vendor_id=p.vendor_id,
            device_id=p.device_id,
            domains=self._native.memory.domains,
            cancellation=False,
            software=p.software,
            limits=Limits(max_buffer_bytes=min(limits.max_memory_allocation, limits.max_buffer_size)),
        )

    def _capabilities(self) -> Any:
        return self._descriptor

    def pipeline_statistics(self) -> dict[str, list[statistics.Executable]]:
        """What the driver compiled each kernel used so far into (registers, shared and local memory, in
        the driver's own terms), keyed ``shader(spec, ...)``; see :mod:`.statistics`. Raises Unsupported
        unless opened with ``pipeline_statistics=True`` on a driver that reports them."""
        return self._native.kernels.statistics()

    def close(self) -> None:
        """Wait for the device, destroy everything still alive on it, then the device. The accelerator is
        unusable afterwards (calls fail with DeviceLost; pending events fail with it, and releasing
        handles still works). Also runs when the accelerator is garbage-collected."""
        with self._lock:
            if self._poisoned is None:
                self._poison(DeviceLost("the Vulkan accelerator was closed"))
        self._finalizer()

    # ---- buffers ------------------------------------------------------------------------------
    def _allocate(self, context: Any, desc: BufferDesc) -> tuple[Any, BufferInfo]:
        native = self._native
        a = native.memory.allocate(desc.size, MemoryDomain(desc.domain))
        with native.lock:
            native.buffers.add(a)
        # The device sees the buffer at an address aligned to its memory requirements, the host (when
        # mapped) at minMemoryMapAlignment or better; what the caller asked for is never less.
        alignment = max(desc.alignment, native.device.limits.min_storage_buffer_offset_alignment)
        info = BufferInfo(desc.size, a.allocation_bytes, alignment, a.domain, a.host_visible, direct_binding=False)
        return a, info

    def _write(self, native: Allocation, offset: int, data: memoryview) -> None:
        self._native.memory.write(native, offset, data)

    def _read(self, native: Allocation, offset: int, out: memoryview) -> None:
        self._native.memory.read(native, offset, out)

    def _free(self, native: Allocation) -> None:
        if self._forget(self._native.buffers, native):
            self._native.memory.free(native)

    def _forget(self, owned: set[Any], native: Any) -> bool:
        """Drop ``native`` from the live set; False when close() already destroyed it."""
        with self._native.lock:
            if native not in owned:
                return False
            owned.discard(native)
            return True

    # ---- programs -----------------------------------------------------------------------------
    def _load(self, context: Any, program: Any, limit: int) -> tuple[Any, int]:
        native = self._native
        limits = native.device.limits
        device_limits: dict[str, Any] = {
            "min_offset_alignment": limits.min_storage_buffer_offset_alignment,
            "max_groups": limits.max_group_count,
            "max_buffer_bytes": min(limits.max_memory_allocation, limits.max_buffer_size),
            "max_loop_iterations": limits.max_loop_iterations,
            "max_shared_memory": limits.max_shared_memory,
            "matrix_tiles": native.device.matrix_tiles,
        }
        if isinstance(program, ProjectionArtifact):  # an NVFP4 projection (ADR 0012)
            plan = nvfp4.build(program, max_binding_bytes=limits.max_storage_buffer_range, **device_limits)
        else:
            plan = planning.build(program, **device_limits)
        # The plan says what the program keeps (its arena holds inputs, outputs and scratch besides the
        # intermediates): refused before any device memory is allocated for it.
        planned = plan_resident_bytes(plan)
        if planned > limit:
            raise ResourceLimit(
                f"the program's plan keeps {planned} bytes on {native.device.physical.name} (arena {plan.arena_bytes},"
                f" constants {plan.const_bytes}); {limit} allowed"
            )
        loaded = LoadedProgram(native.memory, native.kernels, plan)
        with native.lock:
            native.programs.add(loaded)
        return loaded, loaded.resident_bytes

    def _unload(self, native: LoadedProgram) -> None:
        if self._forget(self._native.programs, native):
            native.destroy()

    # ---- queues and submission ----------------------------------------------------------------
    def _create_queue(self, context: Any) -> Any:
        ring = Ring(self._native.device)
        with self._native.lock:
            self._native.rings.add(ring)
        return ring

    def _destroy_queue(self, native: Ring) -> None:
        if self._forget(self._native.rings, native):
            native.destroy()

    def _prepare(self, queue: Ring, program: LoadedProgram, ranges: Sequence[BoundRange]) -> Launcher:
        launcher = Launcher(self._native.device, self._native.memory, program, ranges)
        with self._native.lock:
            self._native.launchers.add(launcher)
        return launcher

    def _release_launcher(self, native: Launcher) -> None:
        if self._forget(self._native.launchers, native):
            native.destroy()

    def _submit(self, queue: Ring, program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore) -> None:
        if queue.full():
            self._complete(queue.collect())  # retire what finished before refusing
        with self._where_lock:
            self._where[event] = queue
        try:
            queue.submit(program, ranges, event)
        except BaseException:
            with self._where_lock:
                self._where.pop(event, None)
            raise
        if event.state.terminal:  # never started (cancelled, or its deadline passed at a host gate)
            with self._where_lock:
                self._where.pop(event, None)
        with self._changed:
            self._changed.notify_all()

    def _complete(self, events: list[EventCore]) -> None:
        """Complete retired events: outside every backend lock (their callbacks take the runtime's)."""
        if not events:
            return
        with self._where_lock:
            for e in events:
                self._where.pop(e, None)
        for e in events:
            e.complete()
        with self._changed:
            self._changed.notify_all()

    def _progress(self, event: EventCore | None, timeout: float | None) -> None:
        if self._native.closed:
            return
        if event is None:
            with self._native.lock:
                rings = list(self._native.rings)
            for ring in rings:
                self._complete(ring.collect())
            return
        with self._where_lock:
            ring = self._where.get(event)
        if ring is not None and ring.holds(event):
            if timeout == 0:
                self._complete(ring.collect(event))
            else:
                self._complete(ring.wait(event, timeout))
            return
        if timeout == 0 or event.state.terminal:
            return
        # Not on the device yet: parked on a host gate (or being submitted right now). Sleep until a
        # submission or retirement happens, a bounded while at most, then let the caller look again.
        with self._changed:
            self._changed.wait(_GATED_POLL_S if timeout is None else min(timeout, _GATED_POLL_S))


__all__ = ["VulkanAccelerator"]
