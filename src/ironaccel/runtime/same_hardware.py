"""Which devices of another family are the same hardware as a given device.

Discovery lists one GPU once per API that reaches it (``cuda:0``, ``vulkan:0``, ``opengl:0``, ...). Only a
few families have an execution backend, so a device of another family is run through its counterpart in
one of those. The evidence, strongest first: the same device UUID (CUDA and Vulkan report the same one on
NVIDIA), the same PCI bus address, the same vendor and device name. The first kind of evidence that
matches any candidate decides; weaker evidence is never mixed in, so a UUID match is never diluted by a
same-named twin.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ..core.descriptor import DeviceDescriptor

_BUS = re.compile(r"^(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$")


def uuid_key(uuid: str | None) -> str | None:
    """A UUID as 32 lower-case hex digits (dashes and a ``GPU-`` prefix dropped); None when absent,
    malformed or all zeros (drivers without one report zeros, which would match every such device)."""
    if not uuid:
        return None
    text = uuid.strip().lower()
    if text.startswith("gpu-"):
        text = text[4:]
    text = text.replace("-", "")
    if len(text) != 32 or any(c not in "0123456789abcdef" for c in text) or not text.strip("0"):
        return None
    return text


def bus_key(device: DeviceDescriptor) -> tuple[int, int, int, int] | None:
    """The PCI address as (domain, bus, device, function); None when unknown. CUDA writes the domain with
    4 digits, NVML with 8, some tools not at all (domain 0)."""
    bus_id = device.pci.bus_id if device.pci is not None else None
    if not bus_id:
        return None
    m = _BUS.match(bus_id.strip().lower())
    if m is None:
        return None
    domain, bus, dev, fn = m.groups()
    return int(domain or "0", 16), int(bus, 16), int(dev, 16), int(fn, 16)


def name_key(device: DeviceDescriptor) -> tuple[str, str] | None:
    name = " ".join(device.name.split()).casefold()
    return (device.vendor.value, name) if name else None


_EVIDENCE: tuple[tuple[str, Callable[[DeviceDescriptor], object]], ...] = (
    ("uuid", lambda d: uuid_key(d.uuid)),
    ("pci bus id", bus_key),
    ("vendor and name", name_key),
)


def counterparts(
    device: DeviceDescriptor, candidates: Iterable[DeviceDescriptor]
) -> tuple[str, list[DeviceDescriptor]]:
    """The candidates that are ``device``'s hardware, and the evidence that says so ("uuid", "pci bus id"
    or "vendor and name"); ``("", [])`` when none is. Several are returned only when the evidence cannot
    tell them apart (identical GPUs known by name alone)."""
    pool = [c for c in candidates if c.id != device.id]
    for evidence, key in _EVIDENCE:
        wanted = key(device)
        if wanted is None:
            continue
        found = [c for c in pool if key(c) == wanted]
        if found:
            return evidence, found
    return "", []
