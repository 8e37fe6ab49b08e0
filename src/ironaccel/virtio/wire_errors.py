"""What decoding a frame can end in, one class per outcome the protocol distinguishes.

- :class:`FrameTooShort`: fewer bytes than a header. Nothing can be answered (not even the request id),
  so the device reports used length 0.
- :class:`RequestRejected`: a request with a readable header that breaks a rule. It carries the status
  the specification assigns and the request id to echo in a 16-byte error response.
- :class:`ConfigError`: a device configuration block a driver must refuse; ``reason`` names the rule.
- :class:`ResponseError`: a device response a 1.0 driver must not accept; :class:`RecoveryRequired`
  when the driver must also keep the event and reset the device (an unknown event state).
"""

from __future__ import annotations

from ..core.errors import IronAccelError
from .wire_constants import Status, status_name


class WireError(IronAccelError):
    """Base of every frame decoding failure."""


class FrameTooShort(WireError):
    """The frame is shorter than the structure it must hold (the vectors call this outcome ``Size``)."""


class RequestRejected(WireError):
    """A request the device answers with ``status`` and an empty payload, changing nothing."""

    def __init__(self, status: Status, request_id: int, message: str) -> None:
        self.status = status
        self.request_id = request_id
        super().__init__(f"{status_name(status)}: {message}")


class ConfigError(WireError):
    """An invalid WireConfig. ``reason``: Size, Version, CommandQueueCount, ChainDescriptorLimit,
    RequestLimit or ResponseLimit."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {message}")


class ResponseError(WireError):
    """A response frame that breaks the protocol (length, flags, payload shape, reserved bytes)."""


class RecoveryRequired(ResponseError):
    """A response a 1.0 driver cannot interpret safely: keep the objects it names and reset the device."""


__all__ = ["ConfigError", "FrameTooShort", "RecoveryRequired", "RequestRejected", "ResponseError", "WireError"]
