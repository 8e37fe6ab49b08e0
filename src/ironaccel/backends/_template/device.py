"""The device: what the backend opens (the driver's device, its identity, limits and memory domains);
:mod:`.accelerator` runs the contract on it.

The template's device is the host: every memory domain is host memory, and there is one device.
"""

from __future__ import annotations

import dataclasses

from ...core.errors import InvalidArgument
from ...runtime.types import Limits, MemoryDomain
from .registration import NAME


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
