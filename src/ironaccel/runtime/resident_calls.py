"""Prepared launches for calls that bind DeviceArrays (ADR 0039): one per set of bound buffers, kept a while.

A call binding DeviceArrays binds the arrays' buffers in their slots and buffers of its own in the others
(numpy inputs are written there, numpy outputs read from there). Where the backend launches prepared
submissions natively (ADR 0016), such a call is a launch of a submission prepared on exactly those
buffers: a :class:`ResidentCall`, found by its *key*, the bound buffer of each slot (None for a slot that
the set fills with a buffer of its own). An executable keeps the idle ones in a small LRU cache
(:class:`ResidentLaunches`); a call takes its set out of the cache while its work may run and gives it
back after, so two calls never share one set's own buffers.

A set is prepared only for a key seen before: a call whose arrays change every time (a new output array
per call, say) would pay a preparation, and evict a set that was in use, for one launch; those calls are
submitted as they were before. Preparing on the second sighting costs a chain of calls on the same arrays
one submission.

A prepared submission pins the buffers it binds, so a set must not outlive an array it binds: each array's
holdings list the sets binding it (``ArrayHoldings.launches``), and the array's release drops them first
(:meth:`ResidentCall.drop`): at once when the set is idle, or, while a call uses it, when that call gives
it back (the array's release is retried meanwhile, as for any buffer bound to running work). Eviction and
the executable's close release sets as well.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import IronAccelError
from . import reclaim
from .accelerator import Accelerator
from .device_array import DeviceArray
from .errors import ReleaseRejected
from .handles import Buffer, Context, Prepared, Program, Queue
from .holdings import ArrayHoldings, CallSet
from .types import Binding, BufferDesc

log = logging.getLogger("ironaccel.runtime")

CACHED = 4  # idle binding sets an executable keeps
SEEN = 8  # keys of unprepared sets remembered, so that a second call with one prepares it

Key = tuple[Buffer | None, ...]


class ResidentCall(CallSet):
    """A buffer set whose slots are the bound arrays' buffers where ``key`` names one and buffers of its
    own (``own``) elsewhere, with the submission prepared on them. ``arrays``: the holdings of the bound
    arrays; ``dead``: to be released rather than kept when given back."""

    __slots__ = ("arrays", "cache", "dead", "gone", "key", "own")

    def __init__(self, cache: ResidentLaunches, key: Key, arrays: tuple[ArrayHoldings, ...]) -> None:
        super().__init__([])
        self.cache, self.key, self.arrays = cache, key, arrays
        self.own: list[Buffer] = []
        self.dead = False
        self.gone = False  # released (or being released)

    def drop(self) -> bool:
        """Release this set for an array it binds, which is being freed: True once it is released (or
        will be without using the array again), False while a call uses it (it is released when given
        back; ask again then)."""
        return self.cache.drop(self)


class ResidentLaunches:
    """The binding sets of one executable's calls with DeviceArrays, where the backend launches natively.
    Thread-safe. Holds the accelerator's handles only, never the Executable (whose collection closes it)."""

    def __init__(
        self,
        acc: Accelerator,
        context: Context,
        queue: Queue,
        program: Program,
        descs: Sequence[BufferDesc],
        sizes: Sequence[int],
    ) -> None:
        self.acc, self.context, self.queue, self.program = acc, context, queue, program
        self.descs, self.sizes = tuple(descs), tuple(sizes)  # per slot: an own buffer's desc, the bound bytes
        self.lock = threading.Lock()
        self.idle: OrderedDict[Key, ResidentCall] = OrderedDict()  # least recently used first
        self.seen: OrderedDict[Key, None] = OrderedDict()
        self.open = True

    def take(self, key: Key, arrays: tuple[ArrayHoldings, ...]) -> ResidentCall | None:
        """The set for ``key``, now the caller's until it gives it back: a kept one, or one prepared now
        when the key was seen before; None the first time a key comes (the caller submits instead)."""
        with self.lock:
            if not self.open:
                return None
            calls = self.idle.pop(key, None)
            if calls is not None:
                return calls
            if key not in self.seen:
                self.seen[key] = None
                if len(self.seen) > SEEN:
                    self.seen.popitem(last=False)
                return None
            del self.seen[key]
        return self._make(key, arrays)

    def _make(self, key: Key, arrays: tuple[ArrayHoldings, ...]) -> ResidentCall | None:
        acc = self.acc
        calls = ResidentCall(self, key, arrays)
        for held in arrays:  # listed before anything pins their buffers: a release meanwhile finds it
            held.launches.add(calls)
        try:
            buffers = []
            for slot, bound in enumerate(key):
                if bound is None:
                    bound = acc.allocate_buffer(self.context, self.descs[slot])
                    calls.own.append(bound)
                buffers.append(bound)
            calls.buffers = buffers
            bindings = [
                Binding(slot, buf, 0, size) for slot, (buf, size) in enumerate(zip(buffers, self.sizes, strict=True))
            ]
            calls.prepared = acc.prepare(self.queue, self.program, bindings)
        except IronAccelError as exc:
            # Out of prepared submissions or memory, say: the call is submitted instead, and a refusal
            # that concerns the call itself is reported by that submission.
            log.debug("preparing a launch on %r: %s", key, exc)
            self.discard(calls)
            return None
        except BaseException:
            self.discard(calls)
            raise
        return calls

    def give_back(self, calls: ResidentCall) -> None:
        """A set whose call's work ended: kept as the most recently used (the least recently used one goes
        when more than CACHED are kept), or released if it is dead, the cache closed, or its key kept
        already (by a call that ran meanwhile)."""
        with self.lock:
            if self.open and not calls.dead and calls.key not in self.idle:
                self.idle[calls.key] = calls
                if len(self.idle) <= CACHED:
                    return
                _, calls = self.idle.popitem(last=False)
        self.discard(calls)

    def drop(self, calls: ResidentCall) -> bool:
        with self.lock:
            if calls.gone:
                return True
            if self.idle.get(calls.key) is not calls:
                calls.dead = True  # in use: released when given back
                return False
            del self.idle[calls.key]
        self.discard(calls)
        return True

    def discard(self, calls: ResidentCall) -> None:
        """Release a set no call uses (its launches have ended): the prepared submission, then its own
        buffers; the arrays it bound stop listing it."""
        calls.dead = calls.gone = True
        for held in calls.arrays:
            held.launches.discard(calls)
        prepared, own = calls.prepared, calls.own
        calls.prepared, calls.own, calls.buffers = None, [], []
        reclaim.release(_Release(self.acc, prepared, own))

    def close(self) -> None:
        """Release every idle set; a set in use is released when given back."""
        with self.lock:
            self.open = False
            idle = list(self.idle.values())
            self.idle.clear()
            self.seen.clear()
        for calls in idle:
            self.discard(calls)


def run_in_place(acc: Accelerator, program: Program, values: list[Any], targets: list[Any]) -> list[Any] | None:
    """A direct run of ``program`` (one ``acc.runs_direct``) on checked inputs and outputs: DeviceArrays on
    the host arrays of their buffers' memory, numpy arrays as they are; returns ``targets``. None, having run
    nothing, where an array's memory is not the host's, queued work still binds one (a direct run is ordered
    against no queue), or a numpy output may share memory with an input or an earlier output (the queue
    path copies the inputs first).

    DeviceArrays of one call never overlap one another (each is a buffer of its own; one given as an input
    and an output was refused), nor a numpy array (their memory is the buffer's alone)."""
    ins: list[Any] = []
    outs: list[Any] = []
    for given, views in ((values, ins), (targets, outs)):
        for value in given:
            if type(value) is DeviceArray:
                view = value._host_array()
                if view is None or value._held.busy:
                    return None
                views.append(view)
            else:
                views.append(value)
    for i, (target, out) in enumerate(zip(targets, outs, strict=True)):
        if type(target) is not DeviceArray and any(np.may_share_memory(out, o) for o in (*ins, *outs[:i])):
            return None
    acc.run_direct(program, ins, outs)
    return targets


class _Release:
    """The release job of a set: its prepared submission, then its own buffers (retried while a launch
    still runs, which a set given back never has; a device that is gone has nothing left to release)."""

    __slots__ = ("acc", "own", "prepared")

    def __init__(self, acc: Accelerator, prepared: Prepared | None, own: list[Buffer]) -> None:
        self.acc, self.prepared, self.own = acc, prepared, own

    def __call__(self) -> bool:
        acc = self.acc
        try:
            if self.prepared is not None:
                acc.release_prepared(self.prepared)
                self.prepared = None
            while self.own:
                acc.free_buffer(self.own[-1])
                self.own.pop()
        except ReleaseRejected:
            return False
        except IronAccelError as exc:  # the device is gone: nothing of it is left to release
            log.debug("releasing a prepared launch: %s", exc)
        return True


__all__ = ["CACHED", "SEEN", "Key", "ResidentCall", "ResidentLaunches", "run_in_place"]
