"""The object ids one guest sees: generational, kind-tagged, and scoped to its connection.

An id is an opaque nonzero u64 on the wire; its encoding is ours alone:

    bits 63..48  session tag   which guest connection issued it (never 0)
    bits 47..44  kind          context 1, buffer 2, program 3, queue 4, event 5
    bits 43..24  generation    bumped each time the slot is freed; never reused
    bits 23..0   slot          index into the session's table

Isolation does not depend on the encoding: every session resolves ids in its own table only, so no
value a guest writes can name another guest's object. The tag only lets the device answer
PERMISSION_DENIED for another connection's id instead of STALE_OBJECT. Generations count up for the
life of the session, across device resets, so an id never resolves again once its object is gone: a
slot whose generation would wrap is retired instead of reused.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

from ..core.errors import IronAccelError
from .wire_constants import Status

TAG_BITS, KIND_BITS, GENERATION_BITS, SLOT_BITS = 16, 4, 20, 24
MAX_TAG = (1 << TAG_BITS) - 1
MAX_GENERATION = (1 << GENERATION_BITS) - 1
SLOT_LIMIT = 1 << SLOT_BITS
_SLOT_SHIFT, _GEN_SHIFT, _KIND_SHIFT, _TAG_SHIFT = 0, 24, 44, 48


class ObjectKind(enum.IntEnum):
    CONTEXT = 1
    BUFFER = 2
    PROGRAM = 3
    QUEUE = 4
    EVENT = 5


class ObjectError(IronAccelError):
    """An id that does not name a live object of the expected kind in this session."""

    def __init__(self, status: Status, message: str) -> None:
        self.status = status
        super().__init__(message)


def encode_id(tag: int, kind: ObjectKind, generation: int, slot: int) -> int:
    return (tag << _TAG_SHIFT) | (int(kind) << _KIND_SHIFT) | (generation << _GEN_SHIFT) | slot


def split_id(object_id: int) -> tuple[int, int, int, int]:
    """(tag, kind, generation, slot) of any u64."""
    return (
        object_id >> _TAG_SHIFT,
        (object_id >> _KIND_SHIFT) & ((1 << KIND_BITS) - 1),
        (object_id >> _GEN_SHIFT) & MAX_GENERATION,
        object_id & (SLOT_LIMIT - 1),
    )


class ObjectTable:
    """One session's namespace: slot -> (kind, value), each slot with its current generation.

    Not thread-safe on its own; the owning session serialises access."""

    def __init__(self, tag: int, max_slots: int = SLOT_LIMIT) -> None:
        if not 0 < tag <= MAX_TAG:
            raise ValueError(f"session tag {tag} outside 1..{MAX_TAG}")
        self.tag = tag
        self._max_slots = min(max_slots, SLOT_LIMIT)
        self._generation: list[int] = []
        self._entries: list[tuple[ObjectKind, Any] | None] = []
        self._free: list[int] = []
        self._live = 0

    def __len__(self) -> int:
        return self._live

    def reserve(self) -> None:
        """Raise RESOURCE_LIMIT now if an insert would find no slot (checked before the backend runs)."""
        if not self._free and len(self._entries) >= self._max_slots:
            raise ObjectError(Status.RESOURCE_LIMIT, "this connection has used every object slot")

    def insert(self, kind: ObjectKind, value: Any) -> int:
        self.reserve()
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self._entries)
            self._entries.append(None)
            self._generation.append(1)
        self._entries[slot] = (kind, value)
        self._live += 1
        return encode_id(self.tag, kind, self._generation[slot], slot)

    def get(self, object_id: int, kind: ObjectKind) -> Any:
        """The value behind ``object_id``. Zero: INVALID_ARGUMENT; another connection's id:
        PERMISSION_DENIED; wrong kind, freed, never issued or invalidated by reset: STALE_OBJECT."""
        return self._entries[self._slot(object_id, kind)][1]  # type: ignore[index]

    def remove(self, object_id: int, kind: ObjectKind) -> Any:
        slot = self._slot(object_id, kind)
        value = self._entries[slot][1]  # type: ignore[index]
        self._retire(slot)
        return value

    def clear(self) -> list[tuple[ObjectKind, Any]]:
        """Invalidate every live id (a device reset); returns what they named."""
        out: list[tuple[ObjectKind, Any]] = []
        for slot, entry in enumerate(self._entries):
            if entry is not None:
                out.append(entry)
                self._retire(slot)
        return out

    def items(self) -> Iterator[tuple[int, ObjectKind, Any]]:
        for slot, entry in enumerate(self._entries):
            if entry is not None:
                yield encode_id(self.tag, entry[0], self._generation[slot], slot), entry[0], entry[1]

    def _slot(self, object_id: int, kind: ObjectKind) -> int:
        if object_id == 0:
            raise ObjectError(Status.INVALID_ARGUMENT, "object id is zero")
        tag, got_kind, generation, slot = split_id(object_id)
        if tag != self.tag:
            raise ObjectError(Status.PERMISSION_DENIED, f"object {object_id:#x} was not issued to this connection")
        if got_kind != kind:
            raise ObjectError(Status.STALE_OBJECT, f"object {object_id:#x} is not a {kind.name.lower()}")
        entry = self._entries[slot] if slot < len(self._entries) else None
        if entry is None or self._generation[slot] != generation:
            raise ObjectError(Status.STALE_OBJECT, f"{kind.name.lower()} {object_id:#x} is stale or was never issued")
        return slot

    def _retire(self, slot: int) -> None:
        self._entries[slot] = None
        self._live -= 1
        if self._generation[slot] < MAX_GENERATION:
            self._generation[slot] += 1
            self._free.append(slot)
        # else: the slot stays empty for good, so no id of it can ever come back to life


__all__ = ["ObjectError", "ObjectKind", "ObjectTable", "encode_id", "split_id"]
