"""IronAccel: find every accelerator on a host and run TOSA 1.0 programs on it.

``import ironaccel`` loads only the standard-library discovery core; numpy, the TOSA codec and every
backend library load on first use.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .core import BackendKind, BackendRegistry, DeviceDescriptor, IronAccelError

if TYPE_CHECKING:
    from .core import BackendReport
    from .runtime.session import Device

__version__ = "0.1.0"

_registry: BackendRegistry | None = None
_registry_lock = threading.Lock()


def init() -> BackendRegistry:
    """The process-wide registry holding the discovery backends of all twelve families."""
    global _registry
    with _registry_lock:
        if _registry is None:
            from .probe import default_registry

            _registry = default_registry()
        return _registry


def devices() -> list[DeviceDescriptor]:
    """Every device every family reports, family order then ordinal."""
    return [d for report in init().describe_all() for d in report.devices]


def open(spec: str | DeviceDescriptor = "auto") -> Device:
    """Open an execution device: ``"auto"``, ``"cpu"``, ``"vulkan"``, ``"vulkan:1"``, ``"virtio:PATH"``, or a
    descriptor from :func:`devices` (see runtime.session.open_device)."""
    from .runtime.session import open_device

    return open_device(spec)


def describe() -> list[BackendReport]:
    """One report per family: available or why not, and its devices."""
    return init().describe_all()


__all__ = [
    "BackendKind",
    "BackendRegistry",
    "DeviceDescriptor",
    "IronAccelError",
    "__version__",
    "describe",
    "devices",
    "init",
    "open",
]
