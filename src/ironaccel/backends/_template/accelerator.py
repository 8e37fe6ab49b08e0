"""The accelerator: the execution contract on one opened device, joining the roles' hooks (:mod:`.memory`,
:mod:`.program`, :mod:`.submit`) as its bases, and the factory the registration names.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import DeviceLost
from ...runtime.types import DeviceInfo, Quota
from . import capability
from .device import NativeDevice, open_device
from .memory import TemplateMemory
from .program import TemplatePrograms
from .registration import NAME
from .submit import TemplateSubmission


class TemplateAccelerator(TemplateMemory, TemplatePrograms, TemplateSubmission):
    """The execution contract on one :class:`~.device.NativeDevice`. Each base is one role's hooks; the
    runtime's ``Accelerator`` (below them all) checks every call before a hook runs."""

    def __init__(self, device: NativeDevice, quota: Quota | None = None) -> None:
        super().__init__(quota=quota)
        self.device = device

    def _device_info(self) -> DeviceInfo:
        # TODO(backend): the driver's name, vendor and ids of the device, whether it is a software device
        # (then "auto" passes it over), and the limits of its memory and queues.
        return DeviceInfo(
            name=self.device.name,
            kind=NAME,
            vendor="IronAccel",
            uuid=self.device.uuid,
            domains=self.device.domains,
            cancellation=self.supports_cancellation,
            software="host memory, no kernels",
            limits=self.device.limits,
        )

    def _capabilities(self) -> Any:
        return capability.descriptor()

    def close(self) -> None:
        """The device is closed: every later call fails with DeviceLost and pending events fail with it;
        releasing handles still works. Idempotent."""
        # TODO(backend): wait for the device, destroy what is still alive on it, then the device itself.
        with self._lock:
            if self._poisoned is None:
                self._poison(DeviceLost(f"the {NAME} accelerator was closed"))


def open_accelerator(selector: str | None = None, **kwargs: Any) -> TemplateAccelerator:
    """The accelerator on the device ``selector`` names (None: the default one); keyword arguments go to the
    accelerator (``quota``). Raises InvalidArgument for a selector that names no device."""
    return TemplateAccelerator(open_device(selector), **kwargs)


__all__ = ["TemplateAccelerator", "open_accelerator"]
