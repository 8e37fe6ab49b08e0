"""The execution contract every backend implements, validated once here.

Public methods check their arguments, ownership and quotas, keep the book of live objects, and only
then call the backend's underscore hooks (:mod:`.hooks`) with trusted values (a hook may assume valid
input; a hook that finds an impossible case raises InternalError). Each method documents four things:
**Ownership** (what is created, consumed or retained), **Blocking** (what it may wait for),
**Failure** (what an error leaves behind) and **Copies** (which bytes move).

Thread safety: every public method may be called from any thread; bookkeeping is guarded by one
lock. The hooks that create or release objects (``_create_context``, ``_allocate``, ``_load``,
``_create_queue`` and the release hooks) run under that lock; ``_write``, ``_read`` and ``_submit`` run
outside it, so a backend must allow those three concurrently (``_submit`` also on the thread that
signals a host gate). Objects of one context never affect another's.

:class:`Accelerator` holds contexts, buffers and queues itself; the rest of the contract is one base
class per concept, each in its own module (ADR 0029):

- :mod:`.hooks`: what a backend implements (``BackendHooks``);
- :mod:`.records`: the book of live objects, counts, limits, poisoning (``Book``);
- :mod:`.bindings`: binding checks and ``BoundRange``;
- :mod:`.programs`: ``load_program``, ``unload_program``;
- :mod:`.submission`: ``submit``, host gates and the event methods;
- :mod:`.prepared`: prepared submissions (``prepare``, ``launch``, ``poll_launch``, ...);
- :mod:`.direct`: direct runs on the caller's arrays, outside every queue (``run_direct``, ``start_direct``);
- :mod:`.reset`: ``reset_context``, which ends a context's work and releases everything it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import (
    Busy,
    InternalError,
    InvalidArgument,
    OutOfBounds,
    PermissionDenied,
    ResourceLimit,
    Unsupported,
)
from .bindings import BoundRange
from .direct import DirectRun, DirectRuns
from .errors import ReleaseRejected
from .handles import Buffer, Context, Queue
from .prepared import PreparedSubmissions
from .programs import Programs
from .records import Record
from .reset import ContextReset, Resets
from .submission import Submission
from .types import BufferDesc, BufferUsage, Quota

# Plain ints for the transfer checks: flag-enum arithmetic costs microseconds, and a small call writes
# and reads a buffer each time.
_TRANSFER_SOURCE = int(BufferUsage.TRANSFER_SOURCE)
_TRANSFER_DESTINATION = int(BufferUsage.TRANSFER_DESTINATION)


class Accelerator(Programs, Submission, PreparedSubmissions, DirectRuns, Resets):
    """Base of every execution backend. Subclasses implement the hooks of :class:`~.hooks.BackendHooks`.

    Thread safety: every public operation is safe from any thread, on any objects. Checks and
    bookkeeping are atomic: quotas and limits are never exceeded by concurrent callers, and a handle
    released on one thread is stale on all. The caller orders only a transfer against a free of the
    same buffer, or a write against a submission binding it (those checks are made as the call begins).
    """

    def __init__(self, quota: Quota | None = None) -> None:
        super().__init__()
        self.default_quota = quota or Quota()

    # ---- contexts -----------------------------------------------------------------------------
    def create_context(self, quota: Quota | None = None) -> Context:
        """Ownership: returns a new empty context. Failure: nothing retained. Copies: none."""
        with self._lock:
            self._check_alive()
            contexts = self._counts.get((0, Context), 0)
            if contexts >= self.device_info().limits.max_contexts:
                raise ResourceLimit(f"{contexts} contexts live (the limit)")
            native = self._create_context()
            ctx = Context(self, self._ids.new(), None)
            self._add(Record(ctx, native, None, extra=quota or self.default_quota))
            return ctx

    def destroy_context(self, ctx: Context) -> None:
        """Ownership: consumes an EMPTY context. Failure: ReleaseRejected(Busy) hands it back while
        children live."""
        with self._lock:
            rec = self._record(ctx, Context)
            if ctx in self._resetting:
                raise ReleaseRejected(Busy(f"{ctx!r} is being reset"), ctx)
            children = [r for r in self._objects.values() if r.context is ctx]
            if children:
                raise ReleaseRejected(Busy(f"context still holds {len(children)} object(s)"), ctx)
            self._release(rec, self._destroy_context)
            self._gates.pop(ctx, None)

    # ---- buffers ------------------------------------------------------------------------------
    def allocate_buffer(self, ctx: Context, desc: BufferDesc) -> Buffer:
        """Ownership: a new buffer in ``ctx``. Blocking: may block on the allocator. Failure: nothing
        retained. Copies: none (program-visible buffers are directly bindable or refused)."""
        desc.check()
        with self._lock:
            self._check_alive()
            crec = self._record(ctx, Context)
            if self._resetting:
                self._refuse(ctx)
            info = self.device_info()
            if desc.domain not in info.domains:
                raise Unsupported(f"memory domain {desc.domain.name} is not offered by {info.name}")
            if desc.size > info.limits.max_buffer_bytes:
                limit = info.limits.max_buffer_bytes
                raise ResourceLimit(f"buffer of {desc.size} bytes exceeds the device limit {limit}")
            self._limit(ctx, Buffer, info.limits.max_buffers_per_context)
            quota: Quota = crec.extra
            used = self._quota_use(ctx, Buffer)
            if used + desc.size > quota.buffer_bytes:
                raise ResourceLimit(f"context buffer quota: {used} + {desc.size} > {quota.buffer_bytes} bytes")
            native, binfo = self._guard(self._allocate, crec.native, desc)
            buf = Buffer(self, self._ids.new(), ctx, binfo)
            self._add(Record(buf, native, ctx, bytes=max(binfo.allocation_bytes, desc.size), desc=desc))
            return buf

    def _transfer_range(self, buf: Buffer, offset: int, length: int, need: int) -> Record:
        """``buf``'s record, once ``offset`` and ``length`` lie inside it and its usage has ``need`` (the
        int of TRANSFER_SOURCE or TRANSFER_DESTINATION); a destination must not be bound to running work."""
        rec = self._record(buf, Buffer)
        desc: BufferDesc = rec.desc
        if not int(desc.usage) & need:
            raise PermissionDenied(f"{buf!r} was not allocated with {BufferUsage(need).name}")
        if not isinstance(offset, int) or offset < 0 or length < 0 or offset + length > desc.size:
            raise OutOfBounds(f"range [{offset}, {offset}+{length}) outside {buf!r} of {desc.size} bytes")
        if need == _TRANSFER_DESTINATION and (rec.pins or any(not h.idle() for h in rec.holders)):
            raise Busy(f"{buf!r} is bound to pending work")
        return rec

    def host_array(self, shape: Sequence[int], dtype: Any) -> np.ndarray:
        """An uninitialised C-contiguous numpy array in the host memory this accelerator transfers from
        and to with the fewest copies (a virtio guest's own shared memory, which the device reads and
        writes in place). The default is ordinary memory: ``np.empty``."""
        return np.empty(tuple(shape), dtype)

    def write_buffer(self, buf: Buffer, offset: int, data: Any) -> None:
        """Copies: the one host-to-buffer copy point. Failure: the range may be partly written.
        Blocking: the copy runs outside the lock, in parallel with other calls."""
        view = memoryview(data).cast("B")
        with self._lock:
            self._check_alive()
            rec = self._transfer_range(buf, offset, view.nbytes, _TRANSFER_DESTINATION)
        self._guard(self._write, rec.native, offset, view)

    def read_buffer(self, buf: Buffer, offset: int, length: int, out: Any = None) -> Any:
        """Copies: the one buffer-to-host copy point. Returns a new bytearray of ``length`` bytes, or
        fills ``out`` (any writable buffer of exactly ``length`` bytes, e.g. a numpy array the caller
        keeps) and returns it. The range is checked before anything is allocated."""
        with self._lock:
            self._check_alive()
            rec = self._transfer_range(buf, offset, length, _TRANSFER_SOURCE)
        if out is None:
            out = bytearray(length)
            view = memoryview(out)
        else:
            view = memoryview(out).cast("B")
            if view.readonly or view.nbytes != length:
                raise InvalidArgument(f"read_buffer: out must be a writable buffer of {length} bytes")
        self._guard(self._read, rec.native, offset, view)
        return out

    def host_view(self, buf: Buffer) -> memoryview | None:
        """Copies: none. The buffer's own bytes, writable, where they are memory of this process for as
        long as the buffer lives (the CPU backend's buffers); None elsewhere. Nothing orders the view
        against queued work: read it once the work that writes the buffer has ended."""
        with self._lock:
            self._check_alive()
            rec = self._record(buf, Buffer)
        return self._host_view(rec.native)

    def free_buffer(self, buf: Buffer) -> None:
        """Ownership: consumes ``buf``. Failure: ReleaseRejected(Busy) while pending work binds it."""
        self._observe_all()
        with self._lock:
            rec = self._record(buf, Buffer)
            if rec.pins:
                raise ReleaseRejected(Busy(f"{buf!r} is bound to {rec.pins} pending submission(s)"), buf)
            if rec.holders:
                raise ReleaseRejected(Busy(f"{buf!r} is bound by {len(rec.holders)} prepared submission(s)"), buf)
            self._release(rec, self._free)

    # ---- queues -------------------------------------------------------------------------------
    def create_queue(self, ctx: Context) -> Queue:
        with self._lock:
            self._check_alive()
            crec = self._record(ctx, Context)
            if self._resetting:
                self._refuse(ctx)
            self._limit(ctx, Queue, self.device_info().limits.max_queues_per_context)
            native = self._create_queue(crec.native)
            q = Queue(self, self._ids.new(), ctx)
            self._add(Record(q, native, ctx))
            return q

    def destroy_queue(self, queue: Queue) -> None:
        self._observe_all()
        with self._lock:
            rec = self._record(queue, Queue)
            if rec.pins or rec.holders:
                raise ReleaseRejected(Busy(f"{queue!r} has pending work or prepared submissions"), queue)
            self._release(rec, self._destroy_queue)


__all__ = ["Accelerator", "BoundRange", "ContextReset", "DirectRun", "InternalError"]
