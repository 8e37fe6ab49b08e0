"""WebGPU adapters through the ``wgpu`` package (wgpu-py 0.31, wgpu-native): one descriptor per adapter.

wgpu-native lists an adapter per native backend that can drive a device, so one GPU may appear twice
(via Vulkan and via OpenGL, say); each is its own descriptor, with ``backend_type`` in ``extra``. The
package is imported inside :func:`probe`; without it the family is Unavailable. WebGPU reports no
memory size, so ``memory_bytes`` stays None.
"""

from __future__ import annotations

from typing import Any

from ..core import (
    BackendKind,
    Capability,
    CapabilityFlags,
    DeviceDescriptor,
    DeviceId,
    PciAddress,
    Settings,
    Unavailable,
    Vendor,
    software_name,
)
from .vulkan import device_tier

# GPUAdapterInfo.adapter_type (wgpu-native) -> the device types device_tier knows.
_ADAPTER_TYPES = {"DiscreteGPU": "discrete", "IntegratedGPU": "integrated", "CPU": "cpu"}
# Limits worth keeping (WebGPU names), with the features that matter for compute.
LIMITS = (
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-storage-size",
    "max-compute-workgroups-per-dimension",
    "max-storage-buffers-per-shader-stage",
)


def webgpu_software(info: dict[str, Any]) -> str | None:
    """The software implementation behind an adapter: by name, else "cpu" for a CPU adapter."""
    device, description = str(info.get("device", "")), str(info.get("description", ""))
    found = software_name(device, description, str(info.get("vendor", "")))
    if found == "llvmpipe" and info.get("backend_type") == "Vulkan":
        return "lavapipe"  # Mesa's Vulkan driver; the same renderer string as its GL sibling
    if found or info.get("adapter_type") != "CPU":
        return found
    return "cpu"


def probe(settings: Settings) -> list[DeviceDescriptor]:
    """Every adapter wgpu-native enumerates; Unavailable without the package or any adapter."""
    del settings  # the package bundles wgpu-native; nothing to point elsewhere
    try:
        import wgpu
    except ImportError:
        raise Unavailable("the `wgpu` Python package is not installed (pip install 'ironaccel[webgpu]')") from None
    except (OSError, RuntimeError) as exc:  # the bundled wgpu-native failed to load
        raise Unavailable(f"wgpu-native failed to load: {exc}") from None
    enumerate_adapters = getattr(wgpu.gpu, "enumerate_adapters_sync", None)
    if enumerate_adapters is None:
        raise Unavailable(f"wgpu {getattr(wgpu, '__version__', '?')} lacks gpu.enumerate_adapters_sync (need 0.31)")
    try:
        adapters = list(enumerate_adapters())
    except (RuntimeError, OSError) as exc:
        raise Unavailable(f"wgpu adapter enumeration failed: {exc}") from None
    if not adapters:
        raise Unavailable("wgpu found no adapter (no Vulkan, Metal, D3D12 or GL driver usable)")
    return [describe(index, dict(a.info), set(a.features), dict(a.limits)) for index, a in enumerate(adapters)]


def describe(ordinal: int, info: dict[str, Any], features: set[str], limits: dict[str, Any]) -> DeviceDescriptor:
    """One descriptor from an adapter's info, features and limits (plain values, so tests can feed them)."""
    vendor_id = int(info.get("vendor_id") or 0)
    device_id = int(info.get("device_id") or 0)
    name = str(info.get("device") or info.get("description") or "unknown adapter")
    vendor = Vendor.from_pci(vendor_id) if vendor_id else Vendor.OTHER
    if vendor is Vendor.OTHER:
        vendor = Vendor.from_text(f"{info.get('vendor', '')} {name}")
    software = webgpu_software(info)
    device_type = _ADAPTER_TYPES.get(str(info.get("adapter_type", "")))

    flags = CapabilityFlags.FP32
    if "shader-f16" in features:
        flags |= CapabilityFlags.FP16
    extra: dict[str, Any] = {
        "backend_type": str(info.get("backend_type", "")),
        "adapter_type": str(info.get("adapter_type", "")),
        "description": str(info.get("description", "")),
        "features": sorted(str(f) for f in features),
        "limits": {k: int(limits[k]) for k in LIMITS if k in limits},
    }
    # info's "stackgroup_min/max_size" are wgpu-py's spec defaults (4/128), not the adapter's: left out.
    pci = None
    if vendor_id and vendor_id <= 0xFFFF:  # above 0xFFFF: a Khronos vendor id (Mesa's 0x10005), not PCI
        pci = PciAddress(vendor_id=vendor_id, device_id=device_id)
    return DeviceDescriptor(
        id=DeviceId(BackendKind.WEBGPU, ordinal),
        vendor=vendor,
        name=name,
        arch=str(info.get("architecture", "")),
        pci=pci,
        software=software,
        capability=Capability(flags=flags, tier=device_tier(name, vendor, device_type, software)),
        extra=tuple(sorted(extra.items())),
    )
