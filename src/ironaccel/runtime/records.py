"""The book of live objects: one record per handle, counts per context and kind, and the poisoned state.

Every object the contract hands out (context, buffer, program, queue, event, prepared submission) has a
:class:`Record` here, keyed by its handle's id, until it is released; a handle whose record is gone (or
belongs to another accelerator) is refused by :meth:`Book._record`. Pins and holders keep an object
alive while work binds it: ``pins`` counts pending submissions and direct runs, ``holders`` lists the
launchers of prepared submissions. A hook that raises DeviceLost poisons the accelerator: every pending
event fails and every later call raises DeviceLost. The device's description (``device_info``), where
every limit comes from, is read once and kept here too.

All of it is guarded by the accelerator's one lock (an RLock: public methods call each other's checks),
except the read of ``_objects`` on the launch path (one dict read, atomic).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import Any

from ..core.errors import Busy, DeviceLost, InvalidArgument, IronAccelError, PermissionDenied, ResourceLimit
from .errors import ReleaseIndeterminate, ReleaseRejected
from .handles import Buffer, Context, Event, Handle, IdAllocator
from .hooks import BackendHooks
from .types import DeviceInfo


@dataclasses.dataclass
class Record:
    """One live object: its handle, the backend's native object, and what the contract counts for it."""

    handle: Handle
    native: Any
    context: Context | None
    bytes: int = 0
    pins: int = 0  # pending submissions and direct runs referencing this object
    holders: list[Any] = dataclasses.field(default_factory=list)  # launchers of prepared submissions binding it
    desc: Any = None  # a buffer's BufferDesc
    extra: Any = None  # a context's Quota, a program's DirectOffer, the records a prepared submission holds


class Book(BackendHooks):
    """The state every part of the contract shares (a base of Accelerator and of each part): the lock, the
    records, the poisoned state and the device's description."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._ids = IdAllocator()
        self._objects: dict[int, Record] = {}
        self._counts: dict[tuple[int, type], int] = {}  # live objects per (context id, kind): limits in O(1)
        self._poisoned: IronAccelError | None = None
        self._info: DeviceInfo | None = None
        # Context reset (reset.py): the contexts being reset refuse new work; ``_refusing`` is set while any
        # is, or once poisoned, so the launch path tests one attribute. Quarantined records are out of
        # ``_objects`` (their handles are stale) but still counted, until the work that pins them ends.
        self._resetting: set[Context] = set()
        self._refusing = False
        self._quarantine: dict[int, Record] = {}
        self._gates: dict[Context, Any] = {}  # the host gates handed out per context (weak sets)

    def device_info(self) -> DeviceInfo:
        """Ownership: none. Blocking: bounded. Failure: nothing created. Copies: none. Stable per instance."""
        if self._info is None:
            self._info = self._device_info()
        return self._info

    def capabilities(self) -> Any:
        return self._capabilities()

    def _check_alive(self) -> None:
        if self._poisoned is not None:
            raise DeviceLost(f"backend unusable: {self._poisoned}")

    def _refuse(self, ctx: Context | None) -> None:
        """Busy when ``ctx`` is being reset (called only while some context is)."""
        if ctx in self._resetting:
            raise Busy(f"{ctx!r} is being reset: it admits no new work or objects")

    def _record(self, handle: Any, kind: type[Handle]) -> Record:
        if not isinstance(handle, kind):
            raise InvalidArgument(f"expected a {kind.kind} handle, got {type(handle).__name__}")
        if handle.owner is not self:
            raise PermissionDenied(f"{handle!r} belongs to another accelerator")
        rec = self._objects.get(handle.id)
        if rec is None or rec.handle is not handle:
            raise InvalidArgument(f"{handle!r} is stale (already released)")
        return rec

    def _children(self, ctx: Context, kind: type[Handle]) -> list[Record]:
        return [r for r in self._objects.values() if r.context is ctx and type(r.handle) is kind]

    def _add(self, rec: Record) -> None:
        self._objects[rec.handle.id] = rec
        key = (0 if rec.context is None else rec.context.id, type(rec.handle))
        self._counts[key] = self._counts.get(key, 0) + 1

    def _drop(self, handle_id: int) -> None:
        """Forget a record (the one way out of ``_objects`` but quarantine, so the counts stay right)."""
        rec = self._objects.pop(handle_id, None)
        if rec is not None:
            self._uncount(rec)

    def _uncount(self, rec: Record) -> None:
        key = (0 if rec.context is None else rec.context.id, type(rec.handle))
        left = self._counts[key] - 1
        if left:
            self._counts[key] = left
        else:
            del self._counts[key]

    def live_resources(self) -> dict[str, int]:
        """Counts of live objects by kind, plus buffer bytes: tests prove nothing leaks. Objects a context
        reset quarantined count until they are released."""
        with self._lock:
            counts = {k: 0 for k in ("context", "buffer", "program", "queue", "event", "prepared", "gate")}
            total = 0
            for r in itertools.chain(self._objects.values(), self._quarantine.values()):
                counts[r.handle.kind if isinstance(r.handle, Handle) else "gate"] += 1
                if isinstance(r.handle, Buffer):
                    total += r.bytes
            counts["buffer_bytes"] = total
            return counts

    def _quota_use(self, ctx: Context, kind: type[Handle]) -> int:
        return sum(r.bytes for r in self._children(ctx, kind))

    def _limit(self, ctx: Context, kind: type[Handle], limit: int) -> None:
        if self._counts.get((ctx.id, kind), 0) >= limit:
            raise ResourceLimit(f"context already holds {limit} {kind.kind}s (the limit)")

    def _release(self, rec: Record, hook: Any) -> None:
        try:
            hook(rec.native)
        except ReleaseRejected as exc:
            # The backend kept the object: hand the caller's handle back for a retry.
            raise ReleaseRejected(exc.error, rec.handle) from exc
        except IronAccelError as exc:
            self._drop(rec.handle.id)
            self._poison(exc)
            raise ReleaseIndeterminate(exc) from exc
        self._drop(rec.handle.id)

    def _observe_all(self) -> None:
        """Before a release that refuses pinned or pending objects: let a backend that observes completion
        retire whatever has finished."""
        if self.observes_completion:
            self._guard(self._progress, None, 0.0)

    def _guard(self, hook: Any, *args: Any) -> Any:
        """Call a hook; DeviceLost from it poisons the instance before propagating."""
        try:
            return hook(*args)
        except DeviceLost as exc:
            with self._lock:
                self._poison(exc)
            raise

    def _poison(self, error: IronAccelError) -> None:
        """Make the instance unusable and fail every pending event with DeviceLost."""
        self._poisoned = error
        self._refusing = True
        for r in [*self._objects.values(), *self._quarantine.values()]:
            if isinstance(r.handle, Event):
                r.native.fail(DeviceLost(f"device lost: {error}"))


__all__ = ["Book", "Record"]
