"""What the user API's objects hold on their accelerator, kept apart from those objects.

A :class:`~.device.Device` holds a context and a queue (:class:`DeviceHoldings`); each
:class:`~.executable.Executable` holds a loaded program and the buffer sets kept for its calls
(:class:`ExecutableHoldings`, each set a :class:`CallSet`); each :class:`~.device_array.DeviceArray` holds
one buffer (:class:`ArrayHoldings`), and which calls bind it: those whose work may still run (an array
in such work is not run on directly) and the prepared launches cached for it (dropped before the buffer
is freed, since they pin it). The release jobs of :mod:`.reclaim` refer to
these holdings and never to the Device, Executable or DeviceArray, so an object its user drops is collected first and
what it held is released after (ADR 0026).

Contract: ``close`` frees what is held and returns True, or returns False while work bound to it still
runs (a Run dropped unwaited), and is then tried again later; a device that is gone has nothing left to
release, so its errors end the release rather than raise. Every method is safe from several threads.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..core.errors import InvalidArgument, IronAccelError
from .accelerator import Accelerator
from .errors import ReleaseRejected
from .handles import Buffer, Prepared, Program

log = logging.getLogger("ironaccel.runtime")

SPARE_SETS = 2  # buffer sets an executable keeps between calls (one per call in flight is made as needed)


class CallSet:
    """The buffers of one call (one per input and output slot) and, where the backend launches prepared
    submissions natively, the submission prepared on them at their first use. ``busy``: the arrays that
    the call's work binds, from its start until it is seen finished (when the set is given back)."""

    __slots__ = ("buffers", "busy", "prepared")

    def __init__(self, buffers: list[Buffer]) -> None:
        self.buffers = buffers
        self.prepared: Prepared | None = None
        self.busy: tuple[ArrayHoldings, ...] = ()

    def started(self, arrays: tuple[ArrayHoldings, ...]) -> None:
        """The call's work, binding ``arrays``, was started."""
        self.busy = arrays
        for held in arrays:
            held.busy.add(self)

    def settled(self) -> None:
        """The call's work ended (or never started)."""
        busy, self.busy = self.busy, ()
        for held in busy:
            held.busy.discard(self)


class ExecutableHoldings:
    """What one Executable holds on its device: the loaded program and the buffer sets kept for calls."""

    __slots__ = ("acc", "device", "lock", "open", "program", "resident", "spare", "unloaded")

    def __init__(self, device: DeviceHoldings, program: Program) -> None:
        self.acc = device.acc
        self.device = device
        self.program = program
        self.spare: list[CallSet] = []
        # Reentrant: a Run of this program dropped (and released) while this thread holds the lock.
        self.lock = threading.RLock()
        self.open = True
        self.unloaded = False
        # The prepared launches kept for calls binding DeviceArrays (a resident_calls.ResidentLaunches),
        # where the backend launches natively; their sets are CallSets of a subclass, given back to it.
        self.resident: Any = None

    def take(self) -> CallSet | None:
        with self.lock:
            return self.spare.pop() if self.spare else None

    def give_back(self, calls: CallSet) -> None:
        """A finished call's buffer set: kept for the next call, or freed."""
        calls.settled()
        if type(calls) is not CallSet:
            self.resident.give_back(calls)
            return
        with self.lock:
            if len(self.spare) < SPARE_SETS and self.open:
                self.spare.append(calls)
                return
        self.discard(calls)

    def discard(self, calls: CallSet) -> None:
        calls.settled()
        if type(calls) is not CallSet:
            self.resident.discard(calls)
            return
        acc = self.acc
        if calls.prepared is not None:
            acc.release_prepared(calls.prepared)
            calls.prepared = None
        buffers, calls.buffers = calls.buffers, []
        for buf in buffers:
            acc.free_buffer(buf)

    def launch_over(self, calls: CallSet, ticket: int) -> bool:
        """Whether the launch of ``ticket`` no longer runs (finished, or failed)."""
        assert calls.prepared is not None
        try:
            return self.acc.poll_launch(calls.prepared, ticket)
        except IronAccelError:
            return True

    def close(self) -> bool:
        """Free the kept buffer sets and unload the program. False while work of this program still
        runs (a dropped Run's): the program stays loaded and ``close`` is tried again later."""
        with self.lock:
            self.open = False
            spare, self.spare = self.spare, []
        for calls in spare:
            self.discard(calls)
        if self.resident is not None:
            self.resident.close()
        if self.unloaded:
            return True
        try:
            self.acc.unload_program(self.program)
        except ReleaseRejected:
            return False
        except IronAccelError as exc:  # the device is gone: nothing of it is left to release
            log.debug("unloading %r: %s", self.program, exc)
        self.unloaded = True
        self.device.forget(self)
        return True


class ArrayHoldings:
    """What one DeviceArray holds: its buffer (None once freed); the calls whose work binds it and may
    still run (``busy``, CallSets); the prepared launches kept for calls that bind it (``launches``, each
    with a ``drop() -> bool`` that releases it unless a call is using it); and its bytes as a host array,
    where the process can address them (``view``: None until asked, False where it cannot)."""

    __slots__ = ("acc", "buffer", "busy", "device", "launches", "view")

    def __init__(self, device: DeviceHoldings, buffer: Buffer) -> None:
        self.acc = device.acc
        self.device = device
        self.buffer: Buffer | None = buffer
        # Sets, changed without a lock: a set's add and discard are atomic.
        self.busy: set[CallSet] = set()
        self.launches: set[Any] = set()
        self.view: Any = None

    def close(self) -> bool:
        """Free the buffer; False while work bound to it still runs (the free is tried again later). The
        prepared launches that bind it go first: they pin the buffer, and a closed array must not wait for
        an executable to forget it."""
        with self.device.lock:  # one free of the buffer, whichever of close, collection or the device's close comes
            buffer = self.buffer
            if buffer is None:
                return True
            if not all([launch.drop() for launch in list(self.launches)]):
                return False
            try:
                self.acc.free_buffer(buffer)
            except ReleaseRejected:
                return False
            except IronAccelError as exc:  # the device is gone: nothing of it is left to release
                log.debug("freeing %r: %s", buffer, exc)
            self.buffer = None
            self.view = None
            self.device.arrays.discard(self)
        return True


class DeviceHoldings:
    """What a Device holds on its accelerator: a context, a queue, and its executables' and arrays'
    holdings."""

    __slots__ = ("acc", "arrays", "closed", "context", "executables", "lock", "queue")

    def __init__(self, acc: Accelerator) -> None:
        self.acc = acc
        self.context = acc.create_context()
        try:
            self.queue = acc.create_queue(self.context)
        except BaseException:
            acc.destroy_context(self.context)
            raise
        self.executables: set[ExecutableHoldings] = set()
        self.arrays: set[ArrayHoldings] = set()
        # Reentrant: an array's close takes it, and the device's close calls that close while holding it.
        self.lock = threading.RLock()
        self.closed = False

    def add(self, held: ExecutableHoldings) -> None:
        with self.lock:
            if self.closed:
                raise InvalidArgument("the device was closed")
            self.executables.add(held)

    def forget(self, held: ExecutableHoldings) -> None:
        with self.lock:
            self.executables.discard(held)

    def hold(self, buffer: Buffer) -> ArrayHoldings:
        """The holdings of a new array on ``buffer``, closed with the device; the buffer is freed here
        when the device was closed meanwhile."""
        held = ArrayHoldings(self, buffer)
        with self.lock:
            if not self.closed:
                self.arrays.add(held)
                return held
        held.close()
        raise InvalidArgument("the device was closed")

    def close(self) -> bool:
        """Close every executable and free every array, then the queue and the context; False while work
        still runs."""
        with self.lock:
            self.closed = True
            executables = list(self.executables)
        if not all([held.close() for held in executables]):
            return False
        with self.lock:
            arrays = list(self.arrays)
        if not all([held.close() for held in arrays]):
            return False
        acc = self.acc
        try:
            if self.queue is not None:
                acc.destroy_queue(self.queue)
                self.queue = None
            if self.context is not None:
                acc.destroy_context(self.context)
                self.context = None
        except ReleaseRejected:
            return False
        except IronAccelError as exc:  # the device is gone: nothing of it is left to release
            log.debug("closing a device: %s", exc)
        return True
