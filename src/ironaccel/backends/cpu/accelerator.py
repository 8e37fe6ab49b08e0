"""The CPU backend behind the execution contract: :class:`CpuAccelerator` joins the roles' hooks as its
bases (:mod:`.memory` buffers, :mod:`.program` loading and direct runs, :mod:`.submit` queues and
submission) on the host device (:mod:`.device`), admitting what :mod:`.capability` describes.

The registration (:mod:`.registration`) names this class as the backend's factory.
"""

from __future__ import annotations

from typing import Any

from ...runtime.types import DeviceInfo
from ...tosa.capability import CapabilityDescriptor
from . import capability
from .device import device_info, tune_allocator
from .memory import CpuMemory
from .program import CpuPrograms
from .submit import CpuSubmission


class CpuAccelerator(CpuMemory, CpuPrograms, CpuSubmission):
    """The execution contract on the host. Each base is one role's hooks; the runtime's ``Accelerator``
    (below them all) checks every call before a hook runs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        tune_allocator()

    def _device_info(self) -> DeviceInfo:
        return device_info()

    def _capabilities(self) -> CapabilityDescriptor:
        return capability.descriptor()


__all__ = ["CpuAccelerator"]
