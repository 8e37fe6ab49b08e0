"""virtio-accel protocol 1.0 for IronAccel: the wire codec, the split virtqueue, the device engine.

- :mod:`.wire`: every request and response of protocol 1.0, typed, exact and bounded.
- :mod:`.engine`: :class:`DeviceEngine` maps commands of many guests onto one runtime Accelerator,
  one :class:`GuestSession` per guest connection (its own ids, quota and cleanup).
- :mod:`.virtqueue` and the transport modules: descriptor rings in shared memory and the daemon.
"""

from __future__ import annotations

from .engine import DeviceEngine
from .engine_objects import ObjectCounts, ResetReport
from .engine_policy import GuestQuota
from .engine_session import GuestSession

__all__ = ["DeviceEngine", "GuestQuota", "GuestSession", "ObjectCounts", "ResetReport"]
