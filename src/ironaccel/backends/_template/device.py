"""The device: what the backend opens (the driver's device, its identity, limits and memory domains), and the
accelerator that joins the roles (:mod:`.memory`, :mod:`.program`, :mod:`.submit`) on it.

The template's device is the host: every memory domain is host memory, and there is one device.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...core.errors import DeviceLost, InvalidArgument
from ...runtime.types import DeviceInfo, Limits, MemoryDomain, Quota
from . import NAME, capability
from .memory import TemplateMemory
from .program import TemplatePrograms
from .submit import TemplateSubmission


@dataclasses.dataclass(frozen=True)
class NativeDevice:
    """What opening the device gives: its identity, the memory domains it offers and its limits."""

    # TODO(backend): the driver's handle of the opened device (and its context, queues, allocator).
    name: str
    uuid: bytes
    domains: frozenset[MemoryDomain]
    limits: Limits


def open_device(selector: str | None) -> NativeDevice:
    """The device ``selector`` names: None or ``"0"``, the one device there is. InvalidArgument otherwise."""
    # TODO(backend): load the driver (Unsupported, with the reason, when it is missing), list its devices and
    # pick the one ``selector`` names: an index, a UUID or part of a name, as ``vulkan:N`` does.
    if selector is not None and selector.strip() != "0":
        shown = selector if len(selector) <= 80 else selector[:80] + "..."
        raise InvalidArgument(f"the {NAME} backend has one device, {NAME}:0; got the selector {shown!r}")
    return NativeDevice(
        name=f"{NAME} device (host memory, no kernels)",
        uuid=bytes(16),
        domains=frozenset(MemoryDomain),
        limits=Limits(),
    )


class TemplateAccelerator(TemplateMemory, TemplatePrograms, TemplateSubmission):
    """The execution contract on one :class:`NativeDevice`. Each base is one role's hooks; the runtime's
    ``Accelerator`` (below them all) checks every call before a hook runs."""

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
