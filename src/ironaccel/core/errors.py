"""One closed error vocabulary for the whole project.

The kinds mirror virtio-accel's ``BackendError`` so an error crosses the virtio wire without losing its
meaning. Everything IronAccel raises on purpose derives from :class:`IronAccelError`.
"""

from __future__ import annotations


class IronAccelError(Exception):
    """Base of every error IronAccel raises on purpose."""


class Unsupported(IronAccelError):
    """The request is well formed but this backend or device cannot do it."""


class Incompatible(IronAccelError):
    """The request targets a different version, format or target than this backend speaks."""


class InvalidArgument(IronAccelError, ValueError):
    """The request is malformed: bad value, bad combination, unknown handle."""


class OutOfBounds(IronAccelError, IndexError):
    """An offset, length or index falls outside the object it addresses."""


class Busy(IronAccelError):
    """The object is in use (a pending event, a full ring); retrying later can succeed."""


class OutOfMemory(IronAccelError, MemoryError):
    """Memory of the requested kind is exhausted."""


class ResourceLimit(IronAccelError):
    """A quota or a fixed limit (count, size, depth) would be exceeded."""


class DeadlineExpired(IronAccelError, TimeoutError):
    """The work did not finish within its timeout."""


class DeviceLost(IronAccelError):
    """The device is gone or poisoned; every object on it is invalid."""


class PermissionDenied(IronAccelError, PermissionError):
    """The caller may not touch this object."""


class NativeError(IronAccelError):
    """A failure code from a vendor runtime, kept with the runtime's name so nothing is lost."""

    def __init__(self, domain: str, code: int, message: str = "") -> None:
        self.domain = domain
        self.code = code
        text = f"{domain} error {code}"
        super().__init__(f"{text}: {message}" if message else text)


class InternalError(IronAccelError):
    """An invariant of IronAccel itself broke: a bug, never a user error."""
