"""What ``ironaccel devices`` shows of a virtio-accel device: the daemon at a socket, as it reports itself."""

from __future__ import annotations

from typing import Any

from ..core.errors import IronAccelError
from .guest import VirtioAccelerator
from .wire_constants import AcceleratorClass


def describe(path: str) -> dict[str, Any]:
    """The device behind the daemon at ``path`` as it reports itself (for ``ironaccel devices``):
    ``{"socket", "available", "reason"}`` plus, when reachable, ``"device"`` with its identity and limits."""
    try:
        guest = VirtioAccelerator(path)
    except (IronAccelError, OSError) as exc:
        return {"socket": path, "available": False, "reason": str(exc)}
    try:
        info, wire = guest.device_info(), guest.wire_info
        try:
            klass = AcceleratorClass(wire.accelerator_class).name.lower()
        except ValueError:
            klass = str(wire.accelerator_class)
        device = {
            "id": f"virtio:{path}",
            "name": info.name,
            "class": klass,
            "vendor_id": wire.vendor_id,
            "device_id": wire.device_id,
            "uuid": bytes(wire.uuid).hex(),
            "memory_domains": sorted(d.name.lower() for d in info.domains),
            "cancellation": info.cancellation,
            "limits": {k: getattr(info.limits, k) for k in info.limits.__dataclass_fields__},
            "max_request_bytes": guest.config.max_request_bytes,
            "max_response_bytes": guest.config.max_response_bytes,
        }
    finally:
        guest.close()
    return {"socket": path, "available": True, "reason": None, "device": device}


__all__ = ["describe"]
