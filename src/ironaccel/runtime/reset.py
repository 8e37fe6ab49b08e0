"""Context reset: end what a context runs and release everything it holds, in a bounded time.

``reset_context`` is the contract's counterpart of a virtio-accel device reset, for one context: admission
stops at once; work still parked on a host gate is cancelled on every backend (it never reached one);
running work is cancelled where the backend stops runs, and otherwise given a bounded wait to end; then
every object is released child before parent (events, prepared submissions, queues, programs, buffers,
host gates, the context), and every handle of the context is stale. Work that did not end in time keeps
what it pins *quarantined*: out of reach (its handles are stale) but still counted by ``live_resources``,
until a release job (:mod:`.reclaim`) sees the work end and releases it, in the same order. Nothing of
another context is touched, and the accelerator stays usable.

A backend takes no part beyond its ordinary hooks: the reset is cancellation, observation and the release
hooks, in an order that never releases an object before what depends on it.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..core.errors import Busy, DeviceLost, InvalidArgument, IronAccelError
from .errors import ReleaseIndeterminate, ReleaseRejected
from .handles import Buffer, Context, Event, Handle, Prepared, Program, Queue
from .records import Book, Record

KINDS = ("event", "prepared", "queue", "program", "buffer", "gate", "context")
_PAUSE_FIRST_S = 1e-3
_PAUSE_MAX_S = 0.02


@dataclasses.dataclass(frozen=True)
class ContextReset:
    """What a reset did, per kind of object (the keys of :data:`KINDS`).

    ``released``: objects released now. ``quarantined``: objects whose handles are stale but which stay
    counted until the work pinning them ends (then a release job frees them). ``cancelled``: submissions
    whose cancellation won. ``lost``: the device loss met during the reset (the accelerator is poisoned;
    what was not released stays quarantined until the accelerator is discarded), or None."""

    released: Mapping[str, int]
    quarantined: Mapping[str, int]
    cancelled: int = 0
    lost: IronAccelError | None = None

    @property
    def complete(self) -> bool:
        """Whether every object of the context was released now (nothing quarantined, the device alive)."""
        return self.lost is None and not any(self.quarantined.values())


class Resets(Book):
    """``reset_context`` (a base of Accelerator)."""

    def reset_context(self, ctx: Context, wait: float = 1.0) -> ContextReset:
        """End the work of ``ctx`` and release every object it holds; returns what was released and what
        was quarantined.

        Ownership: consumes ``ctx`` and everything in it: its events, prepared submissions, queues,
        programs, buffers and host gates. Every handle of the context is stale afterwards (InvalidArgument;
        a host gate's ``signal`` too). Objects pinned by work that did not end are quarantined: still
        counted by ``live_resources``, released by a release job of :mod:`.reclaim` once that work ends.
        Other contexts are untouched, and the accelerator stays usable.

        Blocking: from the call on, the context admits nothing (allocate, load, queues, submit, prepare,
        launch, host gates, direct runs raise Busy naming the reset; a second reset too). Work parked on a
        host gate is cancelled at once, on every backend; running work is cancelled where the backend
        stops runs (``supports_cancellation``), through ``cancel_event`` (so a backend that overrides it
        cancels its own way); whatever still runs, prepared launches and direct runs included, gets up to
        ``wait`` seconds in all to end (it completes or fails). The releases that follow call the backend's
        release hooks only.

        Failure: InvalidArgument for a stale context or a ``wait`` that is not a finite number >= 0, Busy
        while it is being reset already, DeviceLost on a poisoned accelerator: nothing is changed then. A
        device lost during the reset poisons the accelerator as everywhere else; the reset then calls the
        backend no more, and its report says so (``lost``), with the objects not released quarantined.

        Copies: none.
        """
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0 or math.isinf(wait):
            raise InvalidArgument(f"wait must be a finite number of seconds >= 0, got {wait!r}")
        with self._lock:
            self._check_alive()
            self._record(ctx, Context)
            if ctx in self._resetting:
                raise Busy(f"{ctx!r} is being reset already")
            self._resetting.add(ctx)
            self._refusing = True
        try:
            return self._reset(ctx, time.monotonic() + wait)
        finally:
            with self._lock:
                self._resetting.discard(ctx)
                self._refusing = bool(self._resetting) or self._poisoned is not None

    def _reset(self, ctx: Context, end: float) -> ContextReset:
        from .gate import HostGate
        from .prepared import Resubmit
        from .submission import PARKED

        why = f"{ctx!r} was reset"
        with self._lock:
            gates: list[HostGate] = list(self._gates.pop(ctx, ()))
            launchers = [r.native for r in self._children(ctx, Prepared)]
        for launcher in launchers:
            if isinstance(launcher, Resubmit):
                launcher.surrender()  # its events are the context's: ended and released below
        for gate in gates:
            gate.close(f"{why}: this host gate is stale")  # no signal starts parked work from now on
        cancelled, lost = 0, None
        with self._lock:
            events = self._children(ctx, Event)
        for rec in events:
            core = rec.native
            if core.state.terminal:
                continue
            try:
                if rec.extra is PARKED:
                    cancelled += core.cancel()  # never reached the backend: cancelled on every backend
                elif self.supports_cancellation:
                    cancelled += self.cancel_event(rec.handle)
            except DeviceLost as exc:
                with self._lock:
                    if self._poisoned is None:
                        self._poison(exc)
                lost = exc
                break
            except IronAccelError:
                continue  # released by its owner meanwhile, or refused: waited for below
        if lost is None:
            lost = self._reset_settle(ctx, end)
        with self._lock:
            released, quarantined, held = self._reset_teardown(ctx, lost, len(gates))
            lost = lost or self._poisoned
        if held and lost is None:
            from . import reclaim

            reclaim.release(self._reset_job(held))
        return ContextReset(released, quarantined, cancelled, lost)

    def _reset_settle(self, ctx: Context, end: float) -> IronAccelError | None:
        """Wait until ``end`` for the context's work to end: its events terminal, its prepared launches
        idle, nothing pinning its objects (direct runs). The device loss met meanwhile, or None."""
        pause = _PAUSE_FIRST_S
        try:
            while True:
                self._observe_all()
                with self._lock:
                    events = [r.native for r in self._children(ctx, Event) if not r.native.state.terminal]
                    busy = bool(events) or not all(self._reset_idle(r) for r in self._reset_children(ctx))
                left = end - time.monotonic()
                if not busy or left <= 0:
                    return None
                if events:
                    core = events[0]
                    if self.observes_completion:
                        self._guard(self._progress, core, min(left, 0.05))
                    else:
                        core.wait(min(left, 0.05))
                else:
                    time.sleep(min(pause, left))
                    pause = min(pause * 2, _PAUSE_MAX_S)
        except DeviceLost as exc:
            return exc

    def _reset_idle(self, rec: Record) -> bool:
        """Whether nothing runs that ``rec`` is part of (under the lock): a prepared submission's launches
        ended, and no pending work or direct run pins a queue, program or buffer."""
        if type(rec.handle) is Prepared:
            return self._poisoned is not None or bool(self._guard(rec.native.idle))
        return not rec.pins

    def _reset_children(self, ctx: Context) -> list[Record]:
        return [r for r in self._objects.values() if r.context is ctx]

    def _reset_teardown(self, ctx: Context, lost: IronAccelError | None, gates: int) -> tuple[dict, dict, list[Record]]:
        """Under the lock: every record of ``ctx`` leaves the book (its handle goes stale) for the
        quarantine, and one release pass frees what it can. Returns the counts and what stays held."""
        crec = self._objects.get(ctx.id)
        records = self._reset_children(ctx)
        if crec is not None and crec.handle is ctx:
            records.append(crec)
        for rec in records:
            del self._objects[rec.handle.id]
            self._quarantine[rec.handle.id] = rec
        held, released = self._reset_pass(records, lost)
        counts = collections.Counter(_kind(r) for r in released)
        counts["gate"] += gates
        kept = collections.Counter(_kind(r) for r in held)
        return {k: counts[k] for k in KINDS}, {k: kept[k] for k in KINDS}, held

    def _reset_pass(self, records: list[Record], lost: IronAccelError | None) -> tuple[list[Record], list[Record]]:
        """Under the lock, child before parent: release each quarantined record in ``records`` that nothing
        pins any more. Returns (still held, released). No backend call follows a device loss."""
        released: list[Record] = []
        held: list[Record] = []
        by_kind: dict[type, list[Record]] = collections.defaultdict(list)
        for rec in records:
            by_kind[type(rec.handle)].append(rec)
        for kind in (Event, Prepared, Queue, Program, Buffer, Context):
            for rec in by_kind[kind]:
                if lost is None and self._poisoned is not None:
                    lost = self._poisoned
                if lost is None and self._reset_releasable(rec, held):
                    try:
                        done = self._reset_free(rec)
                    except ReleaseIndeterminate as exc:
                        lost = exc
                        continue  # gone from the book, its state unknown (the accelerator is poisoned)
                    if done:
                        released.append(rec)
                        continue
                held.append(rec)
        return held, released

    def _reset_releasable(self, rec: Record, held: list[Record]) -> bool:
        kind = type(rec.handle)
        if kind is Event:
            return rec.native.state.terminal
        if kind is Prepared:
            return self._reset_idle(rec)
        if kind is Context:
            return not held
        return not rec.pins and not rec.holders

    def _reset_free(self, rec: Record) -> bool:
        """Release one quarantined record through its hook; False when the backend kept it (retried later)."""
        kind = type(rec.handle)
        hook: Callable[[Any], None] | None = {
            Prepared: self._release_launcher,
            Queue: self._destroy_queue,
            Program: self._unload,
            Buffer: self._free,
            Context: self._destroy_context,
        }.get(kind)
        try:
            if hook is not None:
                hook(rec.native)
        except ReleaseRejected:
            return False
        except IronAccelError as exc:
            self._reset_forget(rec)
            self._poison(exc)
            raise ReleaseIndeterminate(exc) from exc
        self._reset_forget(rec)
        return True

    def _reset_forget(self, rec: Record) -> None:
        if self._quarantine.pop(rec.handle.id, None) is None:
            return
        self._uncount(rec)
        if type(rec.handle) is Prepared:
            for r in rec.extra:
                r.holders.remove(rec.native)

    def _reset_job(self, held: list[Record]) -> Callable[[], bool]:
        """A release job for what a reset quarantined: True once all of it is released (or the device is
        lost: then it stays until the accelerator is discarded)."""
        left = list(held)

        def job() -> bool:
            nonlocal left
            if self._poisoned is not None:
                return True
            try:
                self._observe_all()
                with self._lock:
                    left, _ = self._reset_pass(left, self._poisoned)
            except (DeviceLost, ReleaseIndeterminate):
                return True
            return not left or self._poisoned is not None

        return job


def _kind(rec: Record) -> str:
    return rec.handle.kind if isinstance(rec.handle, Handle) else "gate"


__all__ = ["KINDS", "ContextReset", "Resets"]
