"""The virtio guest's registration (the entry point ``virtio`` of the group ``ironaccel.backends``): a
device served by another process, opened as ``virtio:PATH`` (the daemon's socket).

Never tried by ``auto``: a socket is the user's to name. The module imports only the runtime's
registration type.
"""

from __future__ import annotations

from ..runtime.registration import BackendRegistration

REGISTRATION = BackendRegistration(
    name="virtio",
    open="ironaccel.virtio.guest:open_accelerator",
    why_not="ironaccel.virtio.registration:why_not",
    summary="a device another process serves over virtio-accel (ironaccel serve): virtio:PATH",
)


def why_not() -> str | None:
    """Why ``virtio`` alone cannot open a device here (no socket named), or None when a socket is named (then
    opening tries it)."""
    from ..core.settings import settings

    if not settings.virtio_socket:
        return "no daemon socket named: open 'virtio:PATH' or set IRONACCEL_VIRTIO_SOCKET"
    return None
