"""The fixed-layout records of protocol 1.0, declared once: field order and width make the layout.

Each record is a frozen dataclass whose fields are declared with :func:`u8` ... :func:`u64`,
:func:`raw` (reserved byte arrays, kept as bytes) and :func:`words` (arrays of u32). From that one
declaration come the packed little-endian layout (alignment 1, no padding), ``SIZE``, ``pack``,
``unpack`` and ``offsets`` (checked against virtio-accel's layout manifest by the tests).

These are layouts only: ``unpack`` accepts any bit pattern, so a frame can be re-encoded exactly as it
arrived. Which values a request may carry is decided in :mod:`.wire_frames`.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, ClassVar, TypeVar

from ..core.errors import InvalidArgument
from .wire_constants import (
    BASELINE_COMMAND_QUEUES,
    HARD_MAX_CHAIN_DESCRIPTORS,
    HARD_MAX_REQUEST_BYTES,
    HARD_MAX_RESPONSE_BYTES,
    MIN_CHAIN_DESCRIPTORS,
    MIN_MAX_REQUEST_BYTES,
    MIN_MAX_RESPONSE_BYTES,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
)
from .wire_errors import ConfigError, FrameTooShort

P = TypeVar("P", bound="Packed")


def _scalar(code: str) -> Any:
    return dataclasses.field(default=0, metadata={"wire": code})


def u8() -> Any:
    return _scalar("B")


def u16() -> Any:
    return _scalar("H")


def u32() -> Any:
    return _scalar("I")


def u64() -> Any:
    return _scalar("Q")


def raw(n: int, wire_name: str | None = None) -> Any:
    """``n`` bytes kept as they are (reserved areas, the device UUID)."""
    return dataclasses.field(default=bytes(n), metadata={"wire": f"{n}s", "name": wire_name})


def words(n: int) -> Any:
    """``n`` u32 values, as a tuple."""
    return dataclasses.field(default=(0,) * n, metadata={"wire": f"{n}I", "count": n})


class Packed:
    """Base of every record: ``SIZE``, ``pack``, ``unpack``, ``offsets``. Subclasses use :func:`packed`."""

    SIZE: ClassVar[int]
    _STRUCT: ClassVar[struct.Struct]
    _COUNTS: ClassVar[tuple[int, ...]]  # struct items per field: 1, or n for words(n)
    _NAMES: ClassVar[tuple[str, ...]]
    _FLAT: ClassVar[bool]  # one struct item per field (no words(n)): values go through as they are

    def pack(self) -> bytes:
        values: list[Any] = []
        if self._FLAT:
            values = [getattr(self, name) for name in self._NAMES]
        else:
            for name, count in zip(self._NAMES, self._COUNTS, strict=True):
                value = getattr(self, name)
                values.extend(value if count > 1 else (value,))
        try:
            return self._STRUCT.pack(*values)
        except struct.error as exc:
            raise InvalidArgument(f"{type(self).__name__}: a field does not fit its width: {exc}") from None

    @classmethod
    def unpack(cls: type[P], data: bytes | bytearray | memoryview, offset: int = 0) -> P:
        """Read the record at ``offset``; FrameTooShort when fewer than SIZE bytes remain."""
        if offset < 0 or len(data) - offset < cls.SIZE:
            raise FrameTooShort(f"{cls.__name__} needs {cls.SIZE} bytes, {max(0, len(data) - offset)} remain")
        items = cls._STRUCT.unpack_from(data, offset)
        if cls._FLAT:
            return cls(*items)
        values: list[Any] = []
        i = 0
        for count in cls._COUNTS:
            values.append(tuple(items[i : i + count]) if count > 1 else items[i])
            i += count
        return cls(*values)

    @classmethod
    def offsets(cls) -> dict[str, int]:
        """Byte offset of every field, under the names of the layout manifest."""
        out: dict[str, int] = {}
        at = 0
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            out[field.metadata.get("name") or field.name] = at
            at += struct.calcsize("<" + field.metadata["wire"])
        return out


def packed(cls: type[P]) -> type[P]:
    """Make ``cls`` a frozen dataclass and derive its wire layout from the field declarations."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    cls._STRUCT = struct.Struct("<" + "".join(f.metadata["wire"] for f in fields))
    cls.SIZE = cls._STRUCT.size
    cls._COUNTS = tuple(f.metadata.get("count", 1) for f in fields)
    cls._NAMES = tuple(f.name for f in fields)
    cls._FLAT = all(count == 1 for count in cls._COUNTS)
    return cls


@packed
class WireConfig(Packed):
    """Device-specific configuration: the version and the negotiated frame bounds."""

    protocol_major: int = u16()
    protocol_minor: int = u16()
    command_queue_count: int = u16()
    max_chain_descriptors: int = u16()
    max_request_bytes: int = u32()
    max_response_bytes: int = u32()

    @classmethod
    def baseline(
        cls,
        max_chain_descriptors: int = HARD_MAX_CHAIN_DESCRIPTORS,
        max_request_bytes: int = HARD_MAX_REQUEST_BYTES,
        max_response_bytes: int = HARD_MAX_RESPONSE_BYTES,
    ) -> WireConfig:
        """What a 1.0 device reports; checked, so a device never advertises an invalid block."""
        config = cls(
            protocol_major=PROTOCOL_MAJOR,
            protocol_minor=PROTOCOL_MINOR,
            command_queue_count=BASELINE_COMMAND_QUEUES,
            max_chain_descriptors=max_chain_descriptors,
            max_request_bytes=max_request_bytes,
            max_response_bytes=max_response_bytes,
        )
        config.check()
        return config

    def check(self, queue_size: int | None = None) -> None:
        """The driver's acceptance rules. A higher minor version is accepted (the driver then uses 1.0
        behaviour only); another major version is not. ``queue_size`` also bounds the chain length."""
        if self.protocol_major != PROTOCOL_MAJOR:
            raise ConfigError("Version", f"protocol major {self.protocol_major} is not {PROTOCOL_MAJOR}")
        if self.command_queue_count != BASELINE_COMMAND_QUEUES:
            raise ConfigError("CommandQueueCount", f"{self.command_queue_count} command queues, 1.0 has exactly 1")
        chain_max = HARD_MAX_CHAIN_DESCRIPTORS if queue_size is None else min(queue_size, HARD_MAX_CHAIN_DESCRIPTORS)
        if not MIN_CHAIN_DESCRIPTORS <= self.max_chain_descriptors <= chain_max:
            raise ConfigError(
                "ChainDescriptorLimit",
                f"max_chain_descriptors {self.max_chain_descriptors} outside {MIN_CHAIN_DESCRIPTORS}..{chain_max}",
            )
        if not MIN_MAX_REQUEST_BYTES <= self.max_request_bytes <= HARD_MAX_REQUEST_BYTES:
            raise ConfigError("RequestLimit", f"max_request_bytes {self.max_request_bytes} outside 97..16 MiB")
        if not MIN_MAX_RESPONSE_BYTES <= self.max_response_bytes <= HARD_MAX_RESPONSE_BYTES:
            raise ConfigError("ResponseLimit", f"max_response_bytes {self.max_response_bytes} outside 92..16 MiB")

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, queue_size: int | None = None) -> WireConfig:
        """Read and check the 16-byte 1.0 prefix; a longer region (a later minor's appendix) is allowed."""
        if len(data) < cls.SIZE:
            raise ConfigError("Size", f"configuration of {len(data)} bytes, the 1.0 prefix is {cls.SIZE}")
        config = cls.unpack(data)
        config.check(queue_size)
        return config


@packed
class RequestHeader(Packed):
    opcode: int = u16()
    flags: int = u16()
    payload_bytes: int = u32()
    request_id: int = u64()


@packed
class ResponseHeader(Packed):
    status: int = u16()
    flags: int = u16()
    payload_bytes: int = u32()
    request_id: int = u64()


@packed
class WireDeviceInfo(Packed):
    """GET_DEVICE_INFO's payload: identity, semantic capabilities and the limits a guest may rely on."""

    uuid: bytes = raw(16)
    accelerator_class: int = dataclasses.field(default=0, metadata={"wire": "H", "name": "class"})
    reserved: int = u16()
    vendor_id: int = u32()
    device_id: int = u32()
    capabilities: int = u64()
    max_contexts: int = u32()
    max_buffers_per_context: int = u32()
    max_programs_per_context: int = u32()
    max_queues_per_context: int = u32()
    max_events_per_context: int = u32()
    max_bindings_per_submission: int = u32()
    max_buffer_bytes: int = u64()
    max_artifact_bytes: int = u64()


@packed
class CreateContextRequest(Packed):
    flags: int = u32()
    reserved: int = u32()


@packed
class ObjectPayload(Packed):
    """One object id: the request payload of every destroy / event command and of creation responses."""

    object_id: int = u64()


@packed
class AllocateBufferRequest(Packed):
    context_id: int = u64()
    bytes: int = u64()
    alignment: int = u64()
    memory_domain: int = u8()
    reserved0: bytes = raw(7)
    usage: int = u32()
    reserved1: int = u32()


@packed
class TransferBufferRequest(Packed):
    """WRITE_BUFFER's prefix (the data follows) and READ_BUFFER's whole payload."""

    buffer_id: int = u64()
    offset: int = u64()
    bytes: int = u64()


@packed
class LoadProgramRequest(Packed):
    """LOAD_PROGRAM's prefix; ``payload_bytes`` artifact bytes follow."""

    context_id: int = u64()
    format: int = u32()
    flags: int = u32()
    target: tuple[int, ...] = words(12)
    payload_bytes: int = u64()
    resident_bytes: int = u64()


@packed
class CreateQueueRequest(Packed):
    context_id: int = u64()
    flags: int = u32()
    reserved: int = u32()


@packed
class SubmitRequest(Packed):
    """SUBMIT's prefix; ``binding_count`` WireBinding records follow. ``timeout_ns`` 0 is infinite."""

    queue_id: int = u64()
    program_id: int = u64()
    binding_count: int = u32()
    flags: int = u32()
    timeout_ns: int = u64()


@packed
class WireBinding(Packed):
    buffer_id: int = u64()
    offset: int = u64()
    bytes: int = u64()
    slot: int = u32()
    access: int = u8()
    reserved: bytes = raw(3)


@packed
class SubmitResponse(Packed):
    event_id: int = u64()


@packed
class WireEventState(Packed):
    """POLL_EVENT's payload. ``error`` is OK except in the FAILED state."""

    state: int = u16()
    error: int = u16()
    reserved: int = u32()


ALL_STRUCTURES: tuple[type[Packed], ...] = (
    WireConfig,
    RequestHeader,
    ResponseHeader,
    WireDeviceInfo,
    CreateContextRequest,
    ObjectPayload,
    AllocateBufferRequest,
    TransferBufferRequest,
    LoadProgramRequest,
    CreateQueueRequest,
    SubmitRequest,
    WireBinding,
    SubmitResponse,
    WireEventState,
)

__all__ = [
    "ALL_STRUCTURES",
    "AllocateBufferRequest",
    "CreateContextRequest",
    "CreateQueueRequest",
    "LoadProgramRequest",
    "ObjectPayload",
    "Packed",
    "RequestHeader",
    "ResponseHeader",
    "SubmitRequest",
    "SubmitResponse",
    "TransferBufferRequest",
    "WireBinding",
    "WireConfig",
    "WireDeviceInfo",
    "WireEventState",
]
