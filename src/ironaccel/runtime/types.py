"""Plain records of the execution contract: descriptors, infos, bindings, artifacts, timeouts.

Numeric values follow virtio-accel protocol 1.0 so a record crosses the virtio wire unchanged.
Every record is a frozen dataclass: immutable, so safe to share between threads.
"""

from __future__ import annotations

import dataclasses
import enum

from ..core.errors import InvalidArgument

TOSA_FORMAT = 0x544F5341  # "TOSA" read as a little-endian u32: the artifact format id of TOSA flatbuffers
NVFP4_FORMAT = 0x3446564E  # "NVF4" read as a little-endian u32: an NVFP4 projection (ironaccel.nvfp4, ADR 0012)
# Upstream virtio-accel's NVFP4 artifacts (VKNVFP4 and VKNVMOE headers, ironaccel.nvfp4.upstream, ADR 0042),
# and the 12 target words they declare: "VKNF", "P4" and version 1.
VKNVFP4_FORMAT = 0x564E4634
VKNVFP4_TARGET = (0x564B4E46, 0x50340001) + (0,) * 10


class MemoryDomain(enum.IntEnum):
    HOST = 1  # host memory the device can reach (a copy may be needed to bind it)
    DEVICE = 2  # device-local memory; host access only through write_buffer / read_buffer
    SHARED = 3  # one allocation both host-visible and directly bindable


class BufferUsage(enum.IntFlag):
    NONE = 0
    TRANSFER_SOURCE = 1
    TRANSFER_DESTINATION = 2
    PROGRAM_INPUT = 4
    PROGRAM_OUTPUT = 8
    MUTABLE_STATE = 16


ALL_USAGE = (
    BufferUsage.TRANSFER_SOURCE
    | BufferUsage.TRANSFER_DESTINATION
    | BufferUsage.PROGRAM_INPUT
    | BufferUsage.PROGRAM_OUTPUT
    | BufferUsage.MUTABLE_STATE
)


class Access(enum.IntEnum):
    READ = 1
    WRITE = 2
    READ_WRITE = 3


_READABLE = int(BufferUsage.PROGRAM_INPUT | BufferUsage.MUTABLE_STATE)
_WRITABLE = int(BufferUsage.PROGRAM_OUTPUT | BufferUsage.MUTABLE_STATE)
_MUTABLE = int(BufferUsage.MUTABLE_STATE)


def usage_allows(usage: BufferUsage, access: Access) -> bool:
    """Read needs PROGRAM_INPUT or MUTABLE_STATE; Write needs PROGRAM_OUTPUT or MUTABLE_STATE; both need MUTABLE.
    (Plain ints: flag-enum arithmetic costs microseconds, and every submission checks every binding.)"""
    if access == Access.READ:
        return bool(int(usage) & _READABLE)
    if access == Access.WRITE:
        return bool(int(usage) & _WRITABLE)
    return bool(int(usage) & _MUTABLE)


@dataclasses.dataclass(frozen=True)
class BufferDesc:
    """What the caller asks for. ``size`` > 0; ``alignment`` a power of two; ``usage`` non-empty and known."""

    size: int
    domain: MemoryDomain = MemoryDomain.SHARED
    usage: BufferUsage = (
        BufferUsage.PROGRAM_INPUT
        | BufferUsage.PROGRAM_OUTPUT
        | BufferUsage.TRANSFER_SOURCE
        | (BufferUsage.TRANSFER_DESTINATION)
    )
    alignment: int = 64

    def check(self) -> None:
        if not isinstance(self.size, int) or self.size <= 0:
            raise InvalidArgument(f"buffer size must be a positive integer, got {self.size!r}")
        if not isinstance(self.alignment, int) or self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise InvalidArgument(f"buffer alignment must be a power of two, got {self.alignment!r}")
        try:
            MemoryDomain(self.domain)
        except ValueError:
            raise InvalidArgument(f"unknown memory domain {self.domain!r}") from None
        usage = int(self.usage)
        if usage == 0 or usage & ~int(ALL_USAGE):
            raise InvalidArgument(f"buffer usage {usage:#x} is empty or has reserved bits")


@dataclasses.dataclass(frozen=True)
class BufferInfo:
    """What the backend actually allocated (never less than asked)."""

    size: int  # usable bytes (= the requested size)
    allocation_bytes: int  # bytes the backing really takes (≥ size; counted against quotas)
    alignment: int
    domain: MemoryDomain
    host_visible: bool  # the backing can be mapped by the host (no staging on write/read)
    direct_binding: bool  # a program binds this exact allocation (no bounce copy at submit)


@dataclasses.dataclass(frozen=True)
class ArtifactRef:
    """A program as the caller hands it over: format id, 12 target words, payload, resident-bytes bound."""

    payload: bytes
    resident_bytes: int
    target: tuple[int, ...] = ()
    format: int = TOSA_FORMAT


@dataclasses.dataclass(frozen=True)
class Binding:
    """Buffer range bound to a program slot: inputs 0..N-1, outputs N..N+M-1, in TOSA order."""

    slot: int
    buffer: object  # a runtime.handles.Buffer
    offset: int = 0
    length: int | None = None  # None: the rest of the buffer from ``offset``
    access: Access | None = None  # None: READ for input slots, WRITE for output slots


@dataclasses.dataclass(frozen=True)
class Limits:
    """Hard limits of one accelerator instance (checked before any backend call)."""

    max_contexts: int = 64
    max_buffers_per_context: int = 4096
    max_programs_per_context: int = 256
    max_queues_per_context: int = 16
    max_events_per_context: int = 4096
    max_bindings_per_submission: int = 4096
    max_buffer_bytes: int = 1 << 40
    max_artifact_bytes: int = 1 << 31


@dataclasses.dataclass(frozen=True)
class Quota:
    """Per-context budget, enforced before allocation: total buffer bytes and resident program bytes."""

    buffer_bytes: int = 1 << 40
    program_bytes: int = 1 << 36


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """Stable identity, capabilities and limits of an accelerator instance."""

    name: str
    kind: str  # the execution backend's name: "cpu", "vulkan", ...
    vendor: str
    uuid: bytes = bytes(16)
    vendor_id: int = 0
    device_id: int = 0
    domains: frozenset[MemoryDomain] = frozenset(MemoryDomain)
    cancellation: bool = False
    software: str | None = None
    limits: Limits = Limits()


INFINITE = None  # a timeout of None waits forever


def timeout_ns(timeout: float | None) -> int:
    """Seconds (float, None = infinite) to wire nanoseconds (0 = infinite)."""
    if timeout is None:
        return 0
    if timeout <= 0:
        raise InvalidArgument(f"timeout must be positive or None, got {timeout!r}")
    return max(1, int(timeout * 1e9))
