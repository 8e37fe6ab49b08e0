"""The runtime error each device status stands for, as a guest raises it.

STALE_OBJECT is InvalidArgument (a stale handle is the caller's mistake); a status with no class here is an
opaque failure (IronAccelError) rather than a guess.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import (
    Busy,
    DeadlineExpired,
    DeviceLost,
    Incompatible,
    InternalError,
    InvalidArgument,
    IronAccelError,
    OutOfBounds,
    OutOfMemory,
    PermissionDenied,
    ResourceLimit,
    Unsupported,
)
from .wire_constants import Status, status_name
from .wire_frames import Response

_ERRORS: dict[int, type[IronAccelError]] = {
    Status.UNSUPPORTED: Unsupported,
    Status.INCOMPATIBLE: Incompatible,
    Status.INVALID_ARGUMENT: InvalidArgument,
    Status.OUT_OF_BOUNDS: OutOfBounds,
    Status.BUSY: Busy,
    Status.OUT_OF_MEMORY: OutOfMemory,
    Status.RESOURCE_LIMIT: ResourceLimit,
    Status.DEADLINE_EXPIRED: DeadlineExpired,
    Status.DEVICE_LOST: DeviceLost,
    Status.PERMISSION_DENIED: PermissionDenied,
    Status.STALE_OBJECT: InvalidArgument,
    Status.INTERNAL_ERROR: InternalError,
}


def error_for(status: int, what: str) -> IronAccelError:
    """The runtime error a device status stands for."""
    cls = _ERRORS.get(status, IronAccelError)
    return cls(f"{what}: the device answered {status_name(status)}")


def raise_failed(responses: Sequence[Response], what: str) -> None:
    for response in responses:
        if response.status != Status.OK:
            raise error_for(response.status, what)


__all__ = ["error_for", "raise_failed"]
