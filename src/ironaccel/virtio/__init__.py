"""virtio-accel protocol 1.0 for IronAccel: the wire codec, the split virtqueue, the device engine.

- :mod:`.wire`: every request and response of protocol 1.0, typed, exact and bounded.
- :mod:`.engine`: :class:`DeviceEngine` maps commands of many guests onto one runtime Accelerator,
  one :class:`GuestSession` per guest connection (its own ids, quota and cleanup).
- :mod:`.virtqueue` and the transport modules: descriptor rings in shared memory and the daemon.

The names below are imported when first asked for (``from ironaccel.virtio import DeviceEngine``), not
with the package: reading the backend's registration (:mod:`.registration`) imports the package, and
that must not load the engine and the runtime's accelerator behind it (ADR 0030).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import DeviceEngine
    from .engine_objects import ObjectCounts, ResetReport
    from .engine_policy import GuestQuota
    from .engine_session import GuestSession

# name -> the submodule that defines it
_LAZY = {
    "DeviceEngine": "engine",
    "GuestQuota": "engine_policy",
    "GuestSession": "engine_session",
    "ObjectCounts": "engine_objects",
    "ResetReport": "engine_objects",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = ["DeviceEngine", "GuestQuota", "GuestSession", "ObjectCounts", "ResetReport"]
