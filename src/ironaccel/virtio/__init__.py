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

from typing import TYPE_CHECKING

from ..core.lazy import lazy_names

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
__getattr__, __dir__ = lazy_names(__name__, _LAZY)


__all__ = ["DeviceEngine", "GuestQuota", "GuestSession", "ObjectCounts", "ResetReport"]
