"""The accelerator: the execution contract on one CUDA device, joining the roles' hooks (:mod:`.memory`,
:mod:`.program`, :mod:`.submit`) as its bases, and the factory the registration names.

Objects are released by the contract's release calls; :meth:`CudaAccelerator.close` (or garbage collection
of the accelerator) waits for the device and destroys whatever is left on it, then releases the primary
context (:meth:`.device.CudaDevice.close`).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from ...core.errors import DeviceLost
from ...nvfp4.bounds import Form
from ...runtime.accelerator import BoundRange
from ...runtime.types import NVFP4_FORMAT, TOSA_FORMAT, DeviceInfo, Quota
from . import capability
from .device import CudaDevice, open_device
from .kernels import Modules, require_architecture
from .launcher import CudaLauncher
from .memory import CudaMemory
from .program import CudaPrograms, LoadedProgram
from .registration import NAME
from .submit import CudaQueue, CudaSubmission

NVIDIA = 0x10DE  # the PCI vendor id


class CudaAccelerator(CudaMemory, CudaPrograms, CudaSubmission):
    """The execution contract on one :class:`~.device.CudaDevice`. Each base is one role's hooks; the
    runtime's ``Accelerator`` (below them all) checks every call before a hook runs."""

    artifact_formats = frozenset({TOSA_FORMAT, NVFP4_FORMAT})  # NVFP4 projections: :mod:`.nvfp4`
    nvfp4_forms = frozenset(Form)  # the mixture of experts too (ADR 0042)

    def __init__(self, device: CudaDevice, quota: Quota | None = None) -> None:
        super().__init__(quota=quota)
        self.device = device
        self._init_submission()
        self.modules = Modules(device)
        device.adopt("modules", self.modules)
        self._finalizer = weakref.finalize(self, device.close)

    def _device_info(self) -> DeviceInfo:
        d = self.device
        return DeviceInfo(
            name=d.name,
            kind=NAME,
            vendor="NVIDIA",
            uuid=d.uuid,
            vendor_id=NVIDIA,
            domains=d.domains,
            cancellation=self.supports_cancellation,
            software=None,
            limits=d.limits,
        )

    def _capabilities(self) -> Any:
        return capability.descriptor()

    def _prepare(self, queue: CudaQueue, program: LoadedProgram, ranges: Sequence[BoundRange]) -> CudaLauncher:
        # Launched from the caller's thread, no worker in between (.launcher).
        return CudaLauncher(queue, program, ranges)

    def close(self) -> None:
        """Wait for the device, destroy everything still alive on it, and release it. The accelerator is
        unusable afterwards (calls fail with DeviceLost; pending events fail with it, and releasing handles
        still works). Idempotent; also runs when the accelerator is garbage-collected."""
        with self._lock:
            if self._poisoned is None:
                self._poison(DeviceLost(f"the {NAME} accelerator was closed"))
        self._finalizer()


def open_accelerator(selector: str | None = None, **kwargs: Any) -> CudaAccelerator:
    """The accelerator on the device ``selector`` names (None: device 0; an index, a UUID or part of the
    name); keyword arguments go to the accelerator (``quota``). Unsupported when no device can open (no
    cuda-bindings, no driver, no matching device, an NVRTC that cannot compile for it), InvalidArgument for
    a selector that names several."""
    device = open_device(selector)
    try:
        require_architecture(device.arch)
        return CudaAccelerator(device, **kwargs)
    except BaseException:
        device.close()
        raise


__all__ = ["CudaAccelerator", "open_accelerator"]
