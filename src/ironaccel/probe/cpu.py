"""The host CPU, as the operating system describes it: always one device, ordinal 0.

Linux: /proc/cpuinfo (model, vendor, ISA flags, clock) and /sys/devices/system/cpu (topology, max clock).
macOS: ``sysctl`` (one subprocess, only on darwin). Elsewhere: ``platform`` and ``os`` alone.
Parsing is a pure function of the text (:func:`parse_cpuinfo`, :func:`parse_sysctl`) so tests can feed
samples from machines they do not run on.

Flags are set from ISA features that do the arithmetic natively; a format the CPU only converts
(F16C, for instance) earns no flag. Tier: Baseline, or Workstation for an evident server part (Xeon,
EPYC, Neoverse, Ampere, Grace): a big machine, but a CPU should not outrank a datacenter accelerator.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import sys

from ..core import (
    BackendKind,
    Capability,
    CapabilityFlags,
    DeviceDescriptor,
    DeviceId,
    Settings,
    Tier,
    Vendor,
)

# x86 features reported (the kernel's /proc/cpuinfo spelling), in this order.
X86_ISA = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "avx_vnni",
    "avx_vnni_int8",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
)
# arm64 features (kernel hwcap names); "asimd" is Advanced SIMD, reported as "neon" too.
ARM_ISA = ("neon", "asimd", "asimdhp", "asimddp", "fphp", "sve", "sve2", "bf16", "i8mm", "sme", "sme2")

# MIDR implementer codes (Arm ARM, Linux arch/arm64/include/asm/cputype.h).
_ARM_IMPLEMENTERS = {
    0x41: ("Arm", Vendor.ARM),
    0x42: ("Broadcom", Vendor.OTHER),
    0x48: ("HiSilicon", Vendor.OTHER),
    0x4E: ("NVIDIA", Vendor.NVIDIA),
    0x51: ("Qualcomm", Vendor.QUALCOMM),
    0x61: ("Apple", Vendor.APPLE),
    0xC0: ("Ampere", Vendor.OTHER),
}
# A few common Arm Ltd. part numbers (same header), for a readable name where cpuinfo has none.
_ARM_PARTS = {
    0xD03: "Cortex-A53",
    0xD05: "Cortex-A55",
    0xD07: "Cortex-A57",
    0xD08: "Cortex-A72",
    0xD0B: "Cortex-A76",
    0xD0C: "Neoverse-N1",
    0xD40: "Neoverse-V1",
    0xD41: "Cortex-A78",
    0xD49: "Neoverse-N2",
    0xD4F: "Neoverse-V2",
    0xD84: "Neoverse-V3",
    0xD8E: "Neoverse-N3",
}
_X86_VENDORS = {"GenuineIntel": Vendor.INTEL, "AuthenticAMD": Vendor.AMD}
_SERVER_HINTS = ("xeon", "epyc", "opteron", "neoverse", "ampere", "graviton", "grace", "kunpeng")


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    """What one cpuinfo/sysctl text says; ``None`` where it says nothing."""

    name: str = ""
    vendor: Vendor = Vendor.OTHER
    isa: tuple[str, ...] = ()
    logical_cores: int | None = None
    physical_cores: int | None = None
    mhz: float | None = None
    memory_bytes: int | None = None


def parse_cpuinfo(text: str) -> CpuInfo:
    """Parse Linux /proc/cpuinfo text (x86 or arm64) into a :class:`CpuInfo`."""
    blocks = [b for b in text.split("\n\n") if b.strip()]
    fields: list[dict[str, str]] = []
    for block in blocks:
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry.setdefault(key.strip().lower(), value.strip())
        fields.append(entry)
    processors = [f for f in fields if "processor" in f]
    first = processors[0] if processors else (fields[0] if fields else {})

    # x86 says "flags", arm64 says "Features"; both are space-separated names.
    raw = set((first.get("flags") or first.get("features") or "").split())
    if "asimd" in raw:
        raw.add("neon")
    isa = tuple(f for f in (*X86_ISA, *ARM_ISA) if f in raw)

    name = first.get("model name", "")
    vendor_id = first.get("vendor_id", "")
    vendor = _X86_VENDORS.get(vendor_id) or (Vendor.from_text(name) if name else Vendor.OTHER)
    implementer = _hex(first.get("cpu implementer"))
    if implementer is not None:
        maker, vendor = _ARM_IMPLEMENTERS.get(implementer, (f"implementer 0x{implementer:02x}", Vendor.OTHER))
        if not name:
            part = _hex(first.get("cpu part"))
            part_name = _ARM_PARTS.get(part or -1) if implementer == 0x41 else None
            name = f"{maker} {part_name}" if part_name else f"{maker} CPU part 0x{part or 0:03x}"
    if not name:
        name = first.get("hardware", "") or first.get("cpu", "")

    # Distinct (package, core) pairs count physical cores where the kernel reports them (x86).
    cores = {(f.get("physical id"), f.get("core id")) for f in processors if "core id" in f}
    mhz = _float(first.get("cpu mhz"))
    return CpuInfo(
        name=name,
        vendor=vendor,
        isa=isa,
        logical_cores=len(processors) or None,
        physical_cores=len(cores) or None,
        mhz=mhz,
    )


def parse_sysctl(text: str) -> CpuInfo:
    """Parse ``sysctl`` output (``key: value`` lines) from macOS into a :class:`CpuInfo`."""
    kv: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            kv[key.strip()] = value.strip()
    name = kv.get("machdep.cpu.brand_string", "")
    isa: list[str] = []
    arm = any(k.startswith("hw.optional.arm") for k in kv) or kv.get("hw.optional.neon") == "1"
    if arm:
        # Apple silicon names its features FEAT_*; map them onto the Linux hwcap names.
        for key, feature in (
            ("hw.optional.neon", "neon"),
            ("hw.optional.arm.FEAT_FP16", "fphp"),
            ("hw.optional.arm.FEAT_DotProd", "asimddp"),
            ("hw.optional.arm.FEAT_BF16", "bf16"),
            ("hw.optional.arm.FEAT_I8MM", "i8mm"),
            ("hw.optional.arm.FEAT_SME", "sme"),
            ("hw.optional.arm.FEAT_SME2", "sme2"),
        ):
            if kv.get(key) == "1":
                isa.append(feature)
    else:
        words = {
            w.lower().replace(".", "_")
            for k in ("machdep.cpu.features", "machdep.cpu.leaf7_features")
            for w in kv.get(k, "").split()
        }
        aliases = {
            "sse4_2": "sse4_2",
            "avx1_0": "avx",
            "avx2": "avx2",
            "fma": "fma",
            "f16c": "f16c",
            "avx512f": "avx512f",
            "avx512bw": "avx512bw",
            "avx512vl": "avx512vl",
            "avx512vnni": "avx512_vnni",
        }
        isa = [feature for word, feature in aliases.items() if word in words]
    vendor = Vendor.APPLE if arm else Vendor.from_text(kv.get("machdep.cpu.vendor", "") or name)
    hz = _int(kv.get("hw.cpufrequency_max") or kv.get("hw.cpufrequency"))
    return CpuInfo(
        name=name,
        vendor=vendor,
        isa=tuple(f for f in (*X86_ISA, *ARM_ISA) if f in isa),
        logical_cores=_int(kv.get("hw.logicalcpu")),
        physical_cores=_int(kv.get("hw.physicalcpu")),
        mhz=hz / 1e6 if hz else None,
        memory_bytes=_int(kv.get("hw.memsize")),
    )


def flags_for(isa: tuple[str, ...] | list[str]) -> CapabilityFlags:
    """Capability flags from ISA feature names: only formats the CPU computes in natively."""
    have = set(isa)
    flags = CapabilityFlags.FP64 | CapabilityFlags.FP32 | CapabilityFlags.UNIFIED_MEMORY
    if have & {"avx512_fp16", "amx_fp16", "fphp"}:
        flags |= CapabilityFlags.FP16
    if have & {"avx512_bf16", "amx_bf16", "bf16"}:
        flags |= CapabilityFlags.BF16
    if have & {"avx512_vnni", "avx_vnni", "avx_vnni_int8", "amx_int8", "i8mm", "asimddp"}:
        flags |= CapabilityFlags.INT8
    return flags


def tier_for(name: str) -> Tier:
    low = name.lower()
    return Tier.WORKSTATION if any(h in low for h in _SERVER_HINTS) else Tier.BASELINE


def probe(settings: Settings) -> list[DeviceDescriptor]:
    """The host CPU as one device; never Unavailable (a Python process always has a CPU)."""
    del settings  # nothing to configure: no runtime library is loaded
    machine = platform.machine() or sys.platform
    info = CpuInfo()
    clock_khz: int | None = None
    if sys.platform.startswith("linux"):
        info = parse_cpuinfo(_read("/proc/cpuinfo"))
        # cpufreq's maximum is stable; cpuinfo's "cpu MHz" is whatever the core ran at just now.
        clock_khz = _int(_read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").strip())
        if info.physical_cores is None:
            info = dataclasses.replace(info, physical_cores=_sysfs_physical_cores())
    elif sys.platform == "darwin":
        info = parse_sysctl(_sysctl())
    name = info.name or platform.processor() or machine
    vendor = info.vendor if info.vendor is not Vendor.OTHER else Vendor.from_text(name)
    if clock_khz is None and info.mhz:
        clock_khz = round(info.mhz * 1000)
    logical = os.cpu_count() or info.logical_cores or 1
    physical = info.physical_cores or logical
    memory = info.memory_bytes or _physical_memory()
    extra = {"isa": list(info.isa), "logical_cores": logical, "physical_cores": physical, "machine": machine}
    return [
        DeviceDescriptor(
            id=DeviceId(BackendKind.CPU, 0),
            vendor=vendor,
            name=name,
            arch=machine,
            memory_bytes=memory,
            multiprocessors=physical,
            clock_khz=clock_khz,
            capability=Capability(flags=flags_for(info.isa), tier=tier_for(name)),
            extra=tuple(sorted(extra.items())),
        )
    ]


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _sysfs_physical_cores() -> int | None:
    """Distinct (package, core) pairs under /sys/devices/system/cpu (arm64 cpuinfo has no core ids)."""
    base = "/sys/devices/system/cpu"
    try:
        cpus = [n for n in os.listdir(base) if n.startswith("cpu") and n[3:].isdigit()]
    except OSError:
        return None
    seen = set()
    for cpu in cpus:
        core = _read(f"{base}/{cpu}/topology/core_id").strip()
        package = _read(f"{base}/{cpu}/topology/physical_package_id").strip()
        if core:
            seen.add((package, core))
    return len(seen) or None


def _sysctl() -> str:
    keys = [
        "machdep.cpu.brand_string",
        "machdep.cpu.vendor",
        "machdep.cpu.features",
        "machdep.cpu.leaf7_features",
        "hw.logicalcpu",
        "hw.physicalcpu",
        "hw.memsize",
        "hw.cpufrequency_max",
        "hw.optional.neon",
        "hw.optional.arm.FEAT_FP16",
        "hw.optional.arm.FEAT_DotProd",
        "hw.optional.arm.FEAT_BF16",
        "hw.optional.arm.FEAT_I8MM",
        "hw.optional.arm.FEAT_SME",
        "hw.optional.arm.FEAT_SME2",
    ]
    try:
        # Unknown keys (x86 keys on arm and back) only add to stderr; the known ones still print.
        done = subprocess.run(["sysctl", *keys], capture_output=True, text=True, timeout=2, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _hex(text: str | None) -> int | None:
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
