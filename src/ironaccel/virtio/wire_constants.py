"""Protocol 1.0 numbers: version, frame bounds, opcodes, statuses, flags and value namespaces.

Every value here is frozen by virtio-accel protocol 1.0 (wire-abi section 1 and its layout manifest).
Memory domains, buffer usage bits and binding access reuse the runtime's enums: the execution contract
was given the wire's numbers so a value crosses unchanged.
"""

from __future__ import annotations

import enum

from ..runtime.types import ALL_USAGE, Access, BufferUsage, MemoryDomain

PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 0

COMMAND_QUEUE = 0  # the only command virtqueue of the baseline
BASELINE_COMMAND_QUEUES = 1
MIN_CHAIN_DESCRIPTORS = 2  # one readable request region and one writable response region
HARD_MAX_CHAIN_DESCRIPTORS = 256
MIN_MAX_REQUEST_BYTES = 97  # header + LOAD_PROGRAM prefix + a one-byte artifact
MIN_MAX_RESPONSE_BYTES = 92  # header + device info
HARD_MAX_REQUEST_BYTES = 16 << 20
HARD_MAX_RESPONSE_BYTES = 16 << 20
HARD_MAX_BINDINGS = 4096

HEADER_BYTES = 16
U64_MAX = (1 << 64) - 1

# Every flag word of protocol 1.0 has no assigned bit: anything nonzero is UNSUPPORTED.
KNOWN_REQUEST_FLAGS = 0
KNOWN_CONTEXT_FLAGS = 0
KNOWN_PROGRAM_FLAGS = 0
KNOWN_QUEUE_FLAGS = 0
KNOWN_SUBMIT_FLAGS = 0
KNOWN_USAGE_BITS = int(ALL_USAGE)


class Opcode(enum.IntEnum):
    GET_DEVICE_INFO = 0x0001
    CREATE_CONTEXT = 0x0100
    DESTROY_CONTEXT = 0x0101
    ALLOCATE_BUFFER = 0x0200
    FREE_BUFFER = 0x0201
    WRITE_BUFFER = 0x0202
    READ_BUFFER = 0x0203
    LOAD_PROGRAM = 0x0300
    UNLOAD_PROGRAM = 0x0301
    CREATE_QUEUE = 0x0400
    DESTROY_QUEUE = 0x0401
    SUBMIT = 0x0500
    POLL_EVENT = 0x0501
    CANCEL_EVENT = 0x0502
    DESTROY_EVENT = 0x0503


class Status(enum.IntEnum):
    OK = 0
    UNSUPPORTED = 1
    INCOMPATIBLE = 2
    INVALID_ARGUMENT = 3
    OUT_OF_BOUNDS = 4
    BUSY = 5
    OUT_OF_MEMORY = 6
    RESOURCE_LIMIT = 7
    DEADLINE_EXPIRED = 8
    DEVICE_LOST = 9
    PERMISSION_DENIED = 10
    STALE_OBJECT = 11
    INTERNAL_ERROR = 0xFFFF


def status_name(raw: int) -> str:
    """A status for messages; an unassigned value stays a number (it is an opaque failure)."""
    try:
        return Status(raw).name
    except ValueError:
        return f"unknown status {raw:#06x}"


class EventStateCode(enum.IntEnum):
    PENDING = 0
    COMPLETE = 1
    FAILED = 2
    CANCELLED = 3


class AcceleratorClass(enum.IntEnum):
    """Device class in WireDeviceInfo; the field stays a raw integer so later classes decode."""

    OTHER = 0
    NPU = 1
    GPU = 2
    DSP = 3


class Capability(enum.IntFlag):
    """Semantic capability bits of WireDeviceInfo (not virtio feature bits)."""

    NONE = 0
    HOST_VISIBLE_MEMORY = 0x01
    DEVICE_LOCAL_MEMORY = 0x02
    EVENT_CANCELLATION = 0x04
    SHARED_MEMORY = 0x20


ASSIGNED_CAPABILITIES = int(
    Capability.HOST_VISIBLE_MEMORY
    | Capability.DEVICE_LOCAL_MEMORY
    | Capability.EVENT_CANCELLATION
    | Capability.SHARED_MEMORY
)
RESERVED_CAPABILITIES = 0x08 | 0x10  # external memory, secure contexts: never advertised in 1.0


class Feature(enum.IntFlag):
    """Device-specific virtio feature bits. All reserved: a 1.0 device offers none, a driver accepts none."""

    NONE = 0
    MULTI_QUEUE = 0x01
    EVENT_QUEUE = 0x02
    EXTERNAL_MEMORY = 0x04
    TIMELINE_FENCES = 0x08
    SECURE_CONTEXTS = 0x10


BASELINE_FEATURES = 0
RESERVED_FEATURES = int(
    Feature.MULTI_QUEUE
    | Feature.EVENT_QUEUE
    | Feature.EXTERNAL_MEMORY
    | Feature.TIMELINE_FENCES
    | Feature.SECURE_CONTEXTS
)

# Writable bytes a command's largest response needs (READ_BUFFER: the header plus the bytes read).
RESPONSE_CAPACITY: dict[Opcode, int] = {
    Opcode.GET_DEVICE_INFO: 92,
    Opcode.CREATE_CONTEXT: 24,
    Opcode.DESTROY_CONTEXT: 16,
    Opcode.ALLOCATE_BUFFER: 24,
    Opcode.FREE_BUFFER: 16,
    Opcode.WRITE_BUFFER: 16,
    Opcode.READ_BUFFER: 16,  # + bytes
    Opcode.LOAD_PROGRAM: 24,
    Opcode.UNLOAD_PROGRAM: 16,
    Opcode.CREATE_QUEUE: 24,
    Opcode.DESTROY_QUEUE: 16,
    Opcode.SUBMIT: 24,
    Opcode.POLL_EVENT: 24,
    Opcode.CANCEL_EVENT: 16,
    Opcode.DESTROY_EVENT: 16,
}

__all__ = [
    "ASSIGNED_CAPABILITIES",
    "BASELINE_COMMAND_QUEUES",
    "BASELINE_FEATURES",
    "COMMAND_QUEUE",
    "HARD_MAX_BINDINGS",
    "HARD_MAX_CHAIN_DESCRIPTORS",
    "HARD_MAX_REQUEST_BYTES",
    "HARD_MAX_RESPONSE_BYTES",
    "HEADER_BYTES",
    "KNOWN_CONTEXT_FLAGS",
    "KNOWN_PROGRAM_FLAGS",
    "KNOWN_QUEUE_FLAGS",
    "KNOWN_REQUEST_FLAGS",
    "KNOWN_SUBMIT_FLAGS",
    "KNOWN_USAGE_BITS",
    "MIN_CHAIN_DESCRIPTORS",
    "MIN_MAX_REQUEST_BYTES",
    "MIN_MAX_RESPONSE_BYTES",
    "PROTOCOL_MAJOR",
    "PROTOCOL_MINOR",
    "RESERVED_CAPABILITIES",
    "RESERVED_FEATURES",
    "RESPONSE_CAPACITY",
    "U64_MAX",
    "Access",
    "AcceleratorClass",
    "BufferUsage",
    "Capability",
    "EventStateCode",
    "Feature",
    "MemoryDomain",
    "Opcode",
    "Status",
    "status_name",
]
