"""Capability flags and device tiers.

Bit positions follow IronAccelerator 2.2's ``CapabilityFlags`` so descriptors from both projects compare
bit for bit; new bits append. A probe sets a flag only when the runtime states the capability outright:
a missing flag is recoverable, a false one sends work to hardware that cannot run it.
"""

from __future__ import annotations

import enum


class CapabilityFlags(enum.IntFlag):
    NONE = 0
    # numeric formats
    FP64 = 1 << 0
    FP32 = 1 << 1
    TF32 = 1 << 2
    FP16 = 1 << 3
    BF16 = 1 << 4
    FP8_E4M3 = 1 << 5
    FP8_E5M2 = 1 << 6
    FP4 = 1 << 7
    INT8 = 1 << 8
    INT4 = 1 << 9
    # matrix units
    TENSOR_CORES = 1 << 16
    WMMA = 1 << 17
    SPARSE_2_4 = 1 << 18
    TRANSFORMER_ENGINE = 1 << 19
    # memory
    UNIFIED_MEMORY = 1 << 24
    HOST_PINNED = 1 << 25
    PEER_ACCESS = 1 << 26
    ASYNC_ALLOC = 1 << 27
    HBM = 1 << 28
    NVLINK = 1 << 29
    INFINITY_FABRIC = 1 << 30
    # compute
    COOPERATIVE_LAUNCH = 1 << 32
    DYNAMIC_PARALLELISM = 1 << 33
    GRAPHS = 1 << 34
    MULTI_STREAM = 1 << 35
    FLASH_ATTN = 1 << 36
    RAYTRACING = 1 << 37
    # distribution
    NCCL = 1 << 40
    RCCL = 1 << 41
    MPI_AWARE = 1 << 42
    # NPU units
    HVX = 1 << 48
    HMX = 1 << 49
    ANE = 1 << 50

    def names(self) -> list[str]:
        """Set flags as lower-case names, lowest bit first (stable for tables and JSON)."""
        return [f.name.lower() for f in CapabilityFlags if f.value and f in self and f.name]


class Tier(enum.IntEnum):
    """Coarse class of a device, ordered: a larger tier is a larger machine."""

    BASELINE = 0
    MOBILE = 1
    CONSUMER = 2
    WORKSTATION = 3
    DATACENTER = 4

    def __str__(self) -> str:
        return self.name.lower()
