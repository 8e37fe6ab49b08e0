"""What discovery says about one device: a frozen, JSON-serialisable record."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from .flags import CapabilityFlags, Tier
from .kinds import BackendKind


class Vendor(enum.Enum):
    NVIDIA = "nvidia"
    AMD = "amd"
    APPLE = "apple"
    QUALCOMM = "qualcomm"
    INTEL = "intel"
    GOOGLE = "google"
    AWS = "aws"
    ARM = "arm"
    MICROSOFT = "microsoft"
    MESA = "mesa"
    OTHER = "other"

    @classmethod
    def from_pci(cls, vendor_id: int | None) -> Vendor:
        return _PCI_VENDORS.get(vendor_id or -1, cls.OTHER)

    @classmethod
    def from_text(cls, text: str) -> Vendor:
        low = text.lower()
        for needle, vendor in _NAME_HINTS:
            if needle in low:
                return vendor
        return cls.OTHER


# PCI-SIG vendor ids (public registry); Mesa's software rasterisers report 0x10005 (VK_VENDOR_ID_MESA).
_PCI_VENDORS = {
    0x10DE: Vendor.NVIDIA,
    0x1002: Vendor.AMD,
    0x1022: Vendor.AMD,
    0x8086: Vendor.INTEL,
    0x106B: Vendor.APPLE,
    0x5143: Vendor.QUALCOMM,
    0x13B5: Vendor.ARM,
    0x1414: Vendor.MICROSOFT,
    0x1D0F: Vendor.AWS,
    0x1AE0: Vendor.GOOGLE,
    0x10005: Vendor.MESA,
}
_NAME_HINTS = (
    ("nvidia", Vendor.NVIDIA),
    ("amd", Vendor.AMD),
    ("advanced micro", Vendor.AMD),
    ("radeon", Vendor.AMD),
    ("intel", Vendor.INTEL),
    ("apple", Vendor.APPLE),
    ("qualcomm", Vendor.QUALCOMM),
    ("adreno", Vendor.QUALCOMM),
    ("arm", Vendor.ARM),
    ("mali", Vendor.ARM),
    ("google", Vendor.GOOGLE),
    ("mesa", Vendor.MESA),
    ("llvmpipe", Vendor.MESA),
    ("microsoft", Vendor.MICROSOFT),
)

# Implementations that run on the CPU while presenting a GPU API; never chosen by default.
SOFTWARE_NAMES = ("lavapipe", "llvmpipe", "softpipe", "swiftshader", "warp", "basic render driver")


def software_name(*texts: str) -> str | None:
    """The software implementation a device name or driver string reveals, if any."""
    for text in texts:
        low = (text or "").lower()
        for name in SOFTWARE_NAMES:
            if name in low:
                return name
    return None


@dataclasses.dataclass(frozen=True)
class DeviceId:
    kind: BackendKind
    ordinal: int

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.ordinal}"


@dataclasses.dataclass(frozen=True)
class Capability:
    flags: CapabilityFlags = CapabilityFlags.NONE
    tier: Tier = Tier.BASELINE
    fp16_tflops: float | None = None
    fp8_tflops: float | None = None
    mem_bandwidth_gbs: float | None = None


@dataclasses.dataclass(frozen=True)
class PciAddress:
    vendor_id: int | None = None
    device_id: int | None = None
    bus_id: str | None = None  # "domain:bus:device.function" where the API gives it


@dataclasses.dataclass(frozen=True)
class DeviceDescriptor:
    """One device as its family's runtime describes it.

    Fields the runtime does not report stay ``None``; a probe never guesses them. ``extra`` holds
    family-specific facts (API version, limits, feature names) as plain JSON values.
    """

    id: DeviceId
    vendor: Vendor
    name: str
    arch: str = ""
    memory_bytes: int | None = None
    multiprocessors: int | None = None
    clock_khz: int | None = None
    driver_version: str | None = None
    uuid: str | None = None
    pci: PciAddress | None = None
    software: str | None = None
    capability: Capability = Capability()
    extra: tuple[tuple[str, Any], ...] = ()

    @property
    def kind(self) -> BackendKind:
        return self.id.kind

    @property
    def ordinal(self) -> int:
        return self.id.ordinal

    def to_json(self) -> dict[str, Any]:
        """A plain dict (json.dumps-able); enums as names, flags as a list plus the raw bits."""
        cap = self.capability
        return {
            "id": str(self.id),
            "kind": self.id.kind.value,
            "ordinal": self.id.ordinal,
            "vendor": self.vendor.value,
            "name": self.name,
            "arch": self.arch,
            "memory_bytes": self.memory_bytes,
            "multiprocessors": self.multiprocessors,
            "clock_khz": self.clock_khz,
            "driver_version": self.driver_version,
            "uuid": self.uuid,
            "pci": dataclasses.asdict(self.pci) if self.pci else None,
            "software": self.software,
            "capability": {
                "flags": cap.flags.names(),
                "flag_bits": int(cap.flags),
                "tier": str(cap.tier),
                "fp16_tflops": cap.fp16_tflops,
                "fp8_tflops": cap.fp8_tflops,
                "mem_bandwidth_gbs": cap.mem_bandwidth_gbs,
            },
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeviceDescriptor:
        cap = data["capability"]
        pci = data.get("pci")
        return cls(
            id=DeviceId(BackendKind.parse(data["kind"]), int(data["ordinal"])),
            vendor=Vendor(data["vendor"]),
            name=data["name"],
            arch=data.get("arch", ""),
            memory_bytes=data.get("memory_bytes"),
            multiprocessors=data.get("multiprocessors"),
            clock_khz=data.get("clock_khz"),
            driver_version=data.get("driver_version"),
            uuid=data.get("uuid"),
            pci=PciAddress(**pci) if pci else None,
            software=data.get("software"),
            capability=Capability(
                flags=CapabilityFlags(cap["flag_bits"]),
                tier=Tier[cap["tier"].upper()],
                fp16_tflops=cap.get("fp16_tflops"),
                fp8_tflops=cap.get("fp8_tflops"),
                mem_bandwidth_gbs=cap.get("mem_bandwidth_gbs"),
            ),
            extra=tuple(sorted((data.get("extra") or {}).items())),
        )
