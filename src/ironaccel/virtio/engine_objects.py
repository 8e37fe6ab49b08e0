"""What the engine keeps per guest object, and how a set of objects is torn down without waiting.

Every object a guest created is a :class:`GuestObject`: the runtime handle plus the book the protocol
needs above the runtime (its context, the live children of a context, the events that retain a buffer,
program or queue, what the object is charged against the guest's quota).

:func:`settle` is the one teardown pass used by reset, close and later reclamation. It goes child before
parent and never waits: an event that is terminal is destroyed; a pending one is cancelled when that is
allowed and wins; anything still pending, or retained by a pending event, or the context of such an
object, is *quarantined*. Quarantined objects keep their runtime handles and their quota charge, and a
later pass releases them once the runtime says the work is over. An event whose admission was
indeterminate is never cancelled: its ownership is unknown, so it stays until the runtime ends it.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from ..core.errors import DeviceLost, IronAccelError
from ..runtime import Accelerator, EventState
from ..runtime.errors import ReleaseIndeterminate, ReleaseRejected
from .ids import ObjectKind


@dataclasses.dataclass(eq=False)
class GuestObject:
    kind: ObjectKind
    handle: Any  # the runtime handle
    context: GuestObject | None = None  # the parent context (None for a context)
    charge: int = 0  # bytes against the guest's quota: buffer backing, or a program's declared resident bytes
    size: int = 0  # buffer: usable bytes
    usage: int = 0  # buffer: usage bits
    children: collections.Counter[ObjectKind] = dataclasses.field(default_factory=collections.Counter)  # context
    refs: int = 0  # buffer, program, queue: live events that retain it
    retains: tuple[GuestObject, ...] = ()  # event: its queue, program and bound buffers
    indeterminate: bool = False  # event: admission could not be established
    settle_by: float = 0.0  # event: until when (perf_counter) POLL_EVENT may wait for it to end

    @property
    def has_children(self) -> bool:
        return any(self.children.values())

    def attach(self) -> None:
        """Count this new object in its context and in the objects it retains."""
        if self.context is not None:
            self.context.children[self.kind] += 1
        for retained in self.retains:
            retained.refs += 1

    def detach(self) -> None:
        """Undo :meth:`attach` once the runtime released the object."""
        if self.context is not None:
            self.context.children[self.kind] -= 1
        for retained in self.retains:
            retained.refs -= 1


@dataclasses.dataclass(frozen=True)
class ObjectCounts:
    contexts: int = 0
    buffers: int = 0
    programs: int = 0
    queues: int = 0
    events: int = 0

    @classmethod
    def of(cls, objects: Iterable[GuestObject]) -> ObjectCounts:
        n = collections.Counter(o.kind for o in objects)
        return cls(
            n[ObjectKind.CONTEXT], n[ObjectKind.BUFFER], n[ObjectKind.PROGRAM], n[ObjectKind.QUEUE], n[ObjectKind.EVENT]
        )

    def __add__(self, other: ObjectCounts) -> ObjectCounts:
        pairs = zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)
        return ObjectCounts(*(a + b for a, b in pairs))

    @property
    def total(self) -> int:
        return sum(dataclasses.astuple(self))


@dataclasses.dataclass(frozen=True)
class ResetReport:
    """The outcome of one teardown pass. ``backend_reusable`` is False when something was quarantined
    (ownership not yet provable) or the device is lost; quarantined objects are reclaimed later if the
    runtime ends their work, and otherwise stay until the backend is discarded."""

    released: ObjectCounts = ObjectCounts()
    quarantined: ObjectCounts = ObjectCounts()
    backend_reusable: bool = True

    def __add__(self, other: ResetReport) -> ResetReport:
        return ResetReport(
            self.released + other.released,
            self.quarantined + other.quarantined,
            self.backend_reusable and other.backend_reusable,
        )


_RELEASE_ORDER = (ObjectKind.QUEUE, ObjectKind.PROGRAM, ObjectKind.BUFFER, ObjectKind.CONTEXT)


class Teardown:
    """One bounded pass over ``objects``: releases what can be released, returns what must wait.

    ``on_release`` runs for each released object, after it left its context (the session uncharges
    it). ``on_lost`` runs when the runtime reports the device lost; no backend call follows in this pass."""

    def __init__(
        self,
        accelerator: Accelerator,
        on_release: Callable[[GuestObject], None],
        on_lost: Callable[[IronAccelError], None],
        lost: bool,
    ) -> None:
        self.acc = accelerator
        self.on_release = on_release
        self.on_lost = on_lost
        self.lost = lost
        self.released: list[GuestObject] = []

    def run(self, objects: Iterable[GuestObject], cancel: bool) -> list[GuestObject]:
        objects = list(objects)
        kept: list[GuestObject] = []
        for obj in objects:
            if obj.kind is ObjectKind.EVENT and not self._settle_event(obj, cancel):
                kept.append(obj)
        for kind in _RELEASE_ORDER:
            for obj in objects:
                if obj.kind is kind and not self._release(obj):
                    kept.append(obj)
        return kept

    def _settle_event(self, event: GuestObject, cancel: bool) -> bool:
        if self.lost:
            return False
        try:
            state = self.acc.poll_event(event.handle)
            if state is EventState.PENDING and cancel and not event.indeterminate and self.acc.supports_cancellation:
                self.acc.cancel_event(event.handle)  # loses to work that already started: polled again below
                state = self.acc.poll_event(event.handle)
            if state is EventState.PENDING:
                return False
            self.acc.destroy_event(event.handle)
        except (DeviceLost, ReleaseIndeterminate) as exc:
            self._lose(exc)
            return False
        except IronAccelError:
            return False  # refused (a race with completion): kept for the next pass
        self._done(event)
        return True

    def _release(self, obj: GuestObject) -> bool:
        if self.lost or obj.refs or obj.has_children:
            return False
        release = {
            ObjectKind.QUEUE: self.acc.destroy_queue,
            ObjectKind.PROGRAM: self.acc.unload_program,
            ObjectKind.BUFFER: self.acc.free_buffer,
            ObjectKind.CONTEXT: self.acc.destroy_context,
        }[obj.kind]
        try:
            release(obj.handle)
        except ReleaseRejected:
            return False
        except (DeviceLost, ReleaseIndeterminate) as exc:
            self._lose(exc)
            return False
        except IronAccelError:
            return False
        self._done(obj)
        return True

    def _done(self, obj: GuestObject) -> None:
        obj.detach()
        self.released.append(obj)
        self.on_release(obj)

    def _lose(self, exc: IronAccelError) -> None:
        self.lost = True
        self.on_lost(exc)


__all__ = ["GuestObject", "ObjectCounts", "ResetReport", "Teardown"]
