"""The CPU probe: cpuinfo/sysctl parsing from sample texts, and the real host CPU."""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from collections.abc import Callable

import pytest

from ironaccel.core import (
    BackendKind,
    CapabilityFlags,
    DeviceDescriptor,
    InvalidArgument,
    Settings,
    Tier,
    Unavailable,
    Vendor,
)
from ironaccel.probe import probe_backend
from ironaccel.probe.cpu import flags_for, parse_cpuinfo, parse_sysctl, probe, tier_for

F = CapabilityFlags

X86_BLOCK = """processor\t: {n}
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
cpu MHz\t\t: 2000.000
physical id\t: 0
siblings\t: 4
core id\t\t: {core}
cpu cores\t: 2
flags\t\t: fpu vme sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd avx512bw \
avx512vl avx_vnni avx512_bf16 avx512_vnni avx512_fp16 amx_bf16 amx_tile amx_int8
"""
# Four logical CPUs on two cores (hyper-threading): processors 0/2 and 1/3 share a core.
X86_CPUINFO = "\n".join(X86_BLOCK.format(n=n, core=n % 2) for n in range(4))

AMD_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD Ryzen 7 5800X 8-Core Processor
cpu MHz\t\t: 3800.000
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse sse2 fma sse4_1 sse4_2 avx f16c avx2
"""

# arm64 cpuinfo has no model name and no core ids; Neoverse-V2 is NVIDIA Grace's core.
ARM_BLOCK = """processor\t: {n}
BogoMIPS\t: 2000.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc \
dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes \
svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd4f
CPU revision\t: 0
"""
ARM_CPUINFO = "\n".join(ARM_BLOCK.format(n=n) for n in range(3))

A53_CPUINFO = """processor\t: 0
BogoMIPS\t: 38.40
Features\t: fp asimd evtstrm crc32 cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU part\t: 0xd03
"""

APPLE_SYSCTL = """machdep.cpu.brand_string: Apple M2 Pro
hw.logicalcpu: 12
hw.physicalcpu: 12
hw.memsize: 34359738368
hw.optional.neon: 1
hw.optional.arm.FEAT_FP16: 1
hw.optional.arm.FEAT_DotProd: 1
hw.optional.arm.FEAT_BF16: 1
hw.optional.arm.FEAT_I8MM: 1
hw.optional.arm.FEAT_SME: 0
"""


def test_parse_x86_with_avx512_and_amx() -> None:
    info = parse_cpuinfo(X86_CPUINFO)
    assert info.name == "Intel(R) Xeon(R) Platinum 8480+"
    assert info.vendor is Vendor.INTEL
    assert info.logical_cores == 4
    assert info.physical_cores == 2
    assert info.mhz == 2000.0
    for feature in ("sse4_2", "avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_int8"):
        assert feature in info.isa
    assert "fpu" not in info.isa  # only the features that matter for compute are kept
    flags = flags_for(info.isa)
    assert flags & (F.FP64 | F.FP32 | F.FP16 | F.BF16 | F.INT8) == F.FP64 | F.FP32 | F.FP16 | F.BF16 | F.INT8
    assert tier_for(info.name) is Tier.WORKSTATION


def test_parse_x86_without_native_half_precision() -> None:
    info = parse_cpuinfo(AMD_CPUINFO)
    assert info.vendor is Vendor.AMD
    assert "f16c" in info.isa  # conversion only: no FP16 flag
    flags = flags_for(info.isa)
    assert not flags & (F.FP16 | F.BF16 | F.INT8)
    assert flags & F.FP32 and flags & F.FP64
    assert tier_for(info.name) is Tier.BASELINE


def test_parse_aarch64_with_sve() -> None:
    info = parse_cpuinfo(ARM_CPUINFO)
    assert info.name == "Arm Neoverse-V2"
    assert info.vendor is Vendor.ARM
    assert info.logical_cores == 3
    assert info.physical_cores is None  # arm64 cpuinfo has no core ids; the probe asks sysfs
    for feature in ("neon", "asimd", "fphp", "asimddp", "sve", "sve2", "bf16", "i8mm"):
        assert feature in info.isa
    flags = flags_for(info.isa)
    assert flags & F.FP16 and flags & F.BF16 and flags & F.INT8
    assert tier_for(info.name) is Tier.WORKSTATION


def test_parse_small_aarch64_core() -> None:
    info = parse_cpuinfo(A53_CPUINFO)
    assert info.name == "Arm Cortex-A53"
    assert info.isa == ("neon", "asimd")
    assert not flags_for(info.isa) & (F.FP16 | F.BF16 | F.INT8)
    assert tier_for(info.name) is Tier.BASELINE


def test_parse_empty_text() -> None:
    info = parse_cpuinfo("")
    assert info.name == "" and info.isa == () and info.logical_cores is None


def test_parse_macos_sysctl() -> None:
    info = parse_sysctl(APPLE_SYSCTL)
    assert info.name == "Apple M2 Pro"
    assert info.vendor is Vendor.APPLE
    assert (info.logical_cores, info.physical_cores, info.memory_bytes) == (12, 12, 32 * 2**30)
    assert set(info.isa) == {"neon", "fphp", "asimddp", "bf16", "i8mm"}
    assert flags_for(info.isa) & (F.FP16 | F.BF16 | F.INT8) == F.FP16 | F.BF16 | F.INT8


def test_real_cpu() -> None:
    (device,) = probe(Settings())
    assert device.id.kind is BackendKind.CPU and device.ordinal == 0
    assert device.name
    assert device.software is None
    assert device.memory_bytes and device.memory_bytes > 0
    assert device.capability.flags & (F.FP32 | F.FP64) == F.FP32 | F.FP64
    extra = dict(device.extra)
    assert extra["logical_cores"] == os.cpu_count()
    assert 1 <= extra["physical_cores"] <= extra["logical_cores"]
    if sys.platform.startswith("linux"):
        with open("/proc/cpuinfo") as f:
            text = f.read()
        assert extra["isa"] == list(parse_cpuinfo(text).isa)


def test_cpu_probe_is_fast() -> None:
    probe(Settings())  # warm the file cache
    best = min(_timed(lambda: probe(Settings())) for _ in range(5))
    assert best < 0.5, f"CPU probe took {best * 1e3:.1f} ms (budget 50 ms; bound generous for loaded CI)"


def test_backend_contract_and_json() -> None:
    backend = probe_backend(BackendKind.CPU, Settings())
    devices = backend.enumerate()
    assert backend.is_available() and len(devices) == 1
    for n, device in enumerate(devices):
        assert backend.capabilities(n) == device.capability.flags
        assert DeviceDescriptor.from_json(json.loads(json.dumps(device.to_json()))) == device
    for bad in (1, -1, "0", None):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)  # type: ignore[arg-type]


def test_disabled_by_setting() -> None:
    backend = probe_backend(BackendKind.CPU, Settings.from_env({"IRONACCEL_CPU": "0"}))
    assert not backend.is_available()
    assert "IRONACCEL_CPU=0" in (backend.reason or "")


def test_total_time_of_the_four_probes(capsys: pytest.CaptureFixture[str]) -> None:
    """All four discovery probes together, each fresh; a loose bound, printed for the record."""
    times = {}
    for name in ("cpu", "vulkan", "opengl", "webgpu"):
        module = importlib.import_module(f"ironaccel.probe.{name}")
        start = time.perf_counter()
        try:
            module.probe(Settings())
        except Unavailable:
            pass
        times[name] = time.perf_counter() - start
    with capsys.disabled():
        print("\nprobe times: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in times.items()))
    assert sum(times.values()) < 5.0, times


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
