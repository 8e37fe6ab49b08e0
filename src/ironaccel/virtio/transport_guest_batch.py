"""One exchange of commands before it is posted: each command's plan, the room it needs, its deadline.

A command is one chain: its request bytes copied into the arena (device-readable), a response block of
the caller's capacity (device-writable). A request part of at least ``in_place_min`` bytes that lies in
the heap of guest memory is not copied but posted as a descriptor of its own; a response may name such
memory as a second writable descriptor (its *sink*). :class:`Plan` records those choices, and
:func:`arena_room` the room each copied block takes, so a batch asks the arena for all of it at once.

Every command has a deadline (:class:`Deadline`): the caller's ``timeout``, else the transport's
``timeout_s`` (:func:`command_timeout`: default IRONACCEL_VIRTIO_TIMEOUT, 30 s).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence

from ..core.errors import InvalidArgument
from .transport_arena import ALIGN

# (request parts, response capacity, sink): one command of a batch
Command = tuple[Sequence[bytes | bytearray | memoryview], int, memoryview | None]


def command_timeout(timeout_s: float | None) -> float:
    """The per-command deadline a transport uses: ``timeout_s``, else IRONACCEL_VIRTIO_TIMEOUT's."""
    from ..core.settings import settings

    source = "timeout_s" if timeout_s is not None else "IRONACCEL_VIRTIO_TIMEOUT"
    seconds = settings.virtio_timeout_s if timeout_s is None else timeout_s
    if not isinstance(seconds, (int, float)) or not 0 < seconds < math.inf:
        raise InvalidArgument(f"{source} must be a positive, finite number of seconds, got {seconds!r}")
    return float(seconds)


@dataclasses.dataclass(frozen=True)
class Deadline:
    """When a wait ends (``time.monotonic``) and how many seconds it was given (for the message)."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def left(self) -> float:
        return self.at - time.monotonic()


def arena_room(n: int) -> int:
    """The arena room a block of ``n`` bytes takes (blocks are ALIGN-aligned)."""
    return (n + ALIGN - 1) & -ALIGN


@dataclasses.dataclass
class Plan:
    """One command of a batch: its request parts (with their heap offset where posted in place), its
    response block's size and its sink."""

    parts: list[tuple[memoryview, int | None]]
    size: int
    capacity: int
    sink: memoryview | None
    sink_at: int


__all__ = ["Command", "Deadline", "Plan", "arena_room", "command_timeout"]
