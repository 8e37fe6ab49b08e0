"""The execution contract every backend implements, validated once here.

Public methods check their arguments, ownership and quotas, keep the book of live objects, and only
then call the backend's underscore hooks with trusted values (a hook may assume valid input; a hook
that finds an impossible case raises InternalError). Each method documents four things:
**Ownership** (what is created, consumed or retained), **Blocking** (what it may wait for),
**Failure** (what an error leaves behind) and **Copies** (which bytes move).

Thread safety: every public method may be called from any thread; bookkeeping is guarded by one
lock. The hooks that create or release objects (``_create_context``, ``_allocate``, ``_load``,
``_create_queue`` and the release hooks) run under that lock; ``_write``, ``_read`` and ``_submit`` run
outside it, so a backend must allow those three concurrently (``_submit`` also on the thread that
signals a host gate). Objects of one context never affect another's.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..core.errors import (
    Busy,
    DeadlineExpired,
    DeviceLost,
    Incompatible,
    InternalError,
    InvalidArgument,
    IronAccelError,
    OutOfBounds,
    PermissionDenied,
    ResourceLimit,
    Unsupported,
)
from .errors import ReleaseIndeterminate, ReleaseRejected, SubmitIndeterminate, SubmitRejected
from .event import EventCore, EventState
from .gate import HostGate
from .handles import Buffer, Context, Event, Handle, IdAllocator, Prepared, Program, Queue
from .prepared import Launcher, Resubmit
from .spec import TensorSpec
from .types import (
    NVFP4_FORMAT,
    TOSA_FORMAT,
    Access,
    ArtifactRef,
    Binding,
    BufferDesc,
    BufferInfo,
    BufferUsage,
    DeviceInfo,
    Quota,
    usage_allows,
)

# Plain ints for the transfer checks: flag-enum arithmetic costs microseconds, and a small call writes
# and reads a buffer each time.
_TRANSFER_SOURCE = int(BufferUsage.TRANSFER_SOURCE)
_TRANSFER_DESTINATION = int(BufferUsage.TRANSFER_DESTINATION)


@dataclasses.dataclass
class _Record:
    handle: Handle
    native: Any
    context: Context | None
    bytes: int = 0
    pins: int = 0  # in-flight submissions referencing this object
    holders: list[Any] = dataclasses.field(default_factory=list)  # launchers of prepared submissions binding it
    desc: Any = None
    extra: Any = None


class BoundRange(NamedTuple):
    """A binding after validation: what a backend's ``_submit`` receives per slot. (A named tuple: made
    per binding on every submission, at a third of a frozen dataclass's cost.)"""

    slot: int
    native: Any
    offset: int
    length: int
    access: Access
    spec: TensorSpec


class Accelerator:
    """Base of every execution backend. Subclasses implement the ``_hooks`` below.

    Thread safety: every public operation is safe from any thread, on any objects. Checks and
    bookkeeping are atomic: quotas and limits are never exceeded by concurrent callers, and a handle
    released on one thread is stale on all. The caller orders only a transfer against a free of the
    same buffer, or a write against a submission binding it (those checks are made as the call begins).
    """

    # ---- backend hooks (override) ----------------------------------------------------------
    def _device_info(self) -> DeviceInfo:
        raise NotImplementedError("device_info")

    def _capabilities(self) -> Any:
        """The backend's ``tosa.capability.CapabilityDescriptor``."""
        raise NotImplementedError("capabilities")

    def _create_context(self) -> Any:
        return object()

    def _destroy_context(self, native: Any) -> None:
        pass

    def _allocate(self, context: Any, desc: BufferDesc) -> tuple[Any, BufferInfo]:
        raise NotImplementedError("allocate_buffer")

    def _write(self, native: Any, offset: int, data: memoryview) -> None:
        raise NotImplementedError("write_buffer")

    def _read(self, native: Any, offset: int, out: memoryview) -> None:
        raise NotImplementedError("read_buffer")

    def _free(self, native: Any) -> None:
        pass

    def _load(self, context: Any, program: Any, limit: int) -> tuple[Any, int]:
        """Make ``program`` (a validated, admitted tosa.ir.Program, or a checked description of another
        format in ``artifact_formats``) resident; returns (native, resident bytes). ``limit``: the most it
        may keep (the artifact's bound and what the context's quota has left). A backend that knows its
        figure before it allocates (a planned arena) raises ResourceLimit then, with nothing allocated;
        the runtime checks the figure returned in any case."""
        raise NotImplementedError("load_program")

    # Artifact formats the backend loads besides TOSA programs, which every backend loads. The only other
    # format is NVFP4_FORMAT (an ironaccel.nvfp4 projection, ADR 0012): a backend that lists it receives the
    # projection in ``_load``; load_program refuses it with LoweringError on every other backend.
    artifact_formats: frozenset[int] = frozenset({TOSA_FORMAT})

    def _unload(self, native: Any) -> None:
        pass

    def _create_queue(self, context: Any) -> Any:
        raise NotImplementedError("create_queue")

    def _destroy_queue(self, native: Any) -> None:
        pass

    def _submit(self, queue: Any, program: Any, ranges: Sequence[BoundRange], event: EventCore) -> None:
        """Start the work (never wait for it). Call ``event.try_start()`` when execution begins and
        ``event.complete()`` / ``event.fail(err)`` when it ends. Raising an IronAccelError means the
        work was not accepted; raising SubmitIndeterminate means acceptance is unknown."""
        raise NotImplementedError("submit")

    supports_cancellation = False

    # Completion by observation. A backend with no thread of its own to complete events (Vulkan: work
    # finishes on the device and a fence says so) sets ``observes_completion`` and implements
    # ``_progress``; ``poll_event`` and ``wait`` then ask it, and the releases that refuse pinned or
    # pending objects (free_buffer, unload_program, destroy_queue, destroy_event) let it retire finished
    # work first. Backends that complete events themselves leave both alone and see no change.
    observes_completion = False

    def _progress(self, event: EventCore | None, timeout: float | None) -> None:
        """Observe finished work and complete (or fail) its events. ``event`` None: retire whatever has
        finished, never blocking. Otherwise bring ``event`` up to date, blocking until it is terminal,
        something changed, or ``timeout`` seconds passed (0: never block; None: no limit). Called
        outside the accelerator's lock; may raise DeviceLost (which poisons the instance)."""

    def _observe_all(self) -> None:
        if self.observes_completion:
            self._guard(self._progress, None, 0.0)

    # Inline runs (optional). A backend that can run a program to completion on the caller's thread, with
    # host arrays in place of bound buffers, returns a function doing so from ``_inline``; the user API
    # then calls it instead of submitting (no queue hand-off, no event, no buffers or copies). Offer it
    # only for programs whose runs cannot observe each other (no state carried from run to run): an
    # inline run is ordered against nothing on any queue. The default offers none, and ``submit``
    # remains the contract's way to run anything.
    def _inline(self, program: Any) -> Callable[[Sequence[Any], Sequence[Any]], None] | None:
        """A function ``run(inputs, outputs)`` for ``program`` (a ``_load`` result), or None. It gets numpy
        arrays of the declared dtypes and shapes, C-contiguous, the outputs writable and overlapping neither
        each other nor an input; it fills the outputs or raises an IronAccelError. Called once, at load,
        under the accelerator's lock.

        Where inline runs complete somewhere other than this thread (a virtio device), the function may
        also have ``start(inputs) -> pending``: the run begins and the call returns; ``pending.done()``
        says without blocking whether it ended; ``pending.finish(outputs, timeout)`` waits (DeadlineExpired
        when ``timeout`` seconds pass first; it may be called again) and fills the outputs or raises the
        run's error. Every started run is finished exactly once."""
        return None

    # ---- construction -------------------------------------------------------------------------
    def __init__(self, quota: Quota | None = None) -> None:
        self._lock = threading.RLock()
        self._ids = IdAllocator()
        self._objects: dict[int, _Record] = {}
        self._counts: dict[tuple[int, type], int] = {}  # live objects per (context id, kind): limits in O(1)
        self._poisoned: IronAccelError | None = None
        self.default_quota = quota or Quota()
        self._info: DeviceInfo | None = None

    # ---- identity -----------------------------------------------------------------------------
    def device_info(self) -> DeviceInfo:
        """Ownership: none. Blocking: bounded. Failure: nothing created. Copies: none. Stable per instance."""
        if self._info is None:
            self._info = self._device_info()
        return self._info

    def capabilities(self) -> Any:
        return self._capabilities()

    # ---- bookkeeping helpers ------------------------------------------------------------------
    def _check_alive(self) -> None:
        if self._poisoned is not None:
            raise DeviceLost(f"backend unusable: {self._poisoned}")

    def _record(self, handle: Any, kind: type[Handle]) -> _Record:
        if not isinstance(handle, kind):
            raise InvalidArgument(f"expected a {kind.kind} handle, got {type(handle).__name__}")
        if handle.owner is not self:
            raise PermissionDenied(f"{handle!r} belongs to another accelerator")
        rec = self._objects.get(handle.id)
        if rec is None or rec.handle is not handle:
            raise InvalidArgument(f"{handle!r} is stale (already released)")
        return rec

    def _children(self, ctx: Context, kind: type[Handle]) -> list[_Record]:
        return [r for r in self._objects.values() if r.context is ctx and type(r.handle) is kind]

    def _add(self, rec: _Record) -> None:
        self._objects[rec.handle.id] = rec
        key = (0 if rec.context is None else rec.context.id, type(rec.handle))
        self._counts[key] = self._counts.get(key, 0) + 1

    def _drop(self, handle_id: int) -> None:
        """Forget a record (the one way out of ``_objects``, so the counts stay right)."""
        rec = self._objects.pop(handle_id, None)
        if rec is not None:
            key = (0 if rec.context is None else rec.context.id, type(rec.handle))
            left = self._counts[key] - 1
            if left:
                self._counts[key] = left
            else:
                del self._counts[key]

    def live_resources(self) -> dict[str, int]:
        """Counts of live objects by kind, plus buffer bytes: tests prove nothing leaks."""
        with self._lock:
            counts = {k: 0 for k in ("context", "buffer", "program", "queue", "event", "prepared", "gate")}
            total = 0
            for r in self._objects.values():
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
            self._add(_Record(ctx, native, None, extra=quota or self.default_quota))
            return ctx

    def destroy_context(self, ctx: Context) -> None:
        """Ownership: consumes an EMPTY context. Failure: ReleaseRejected(Busy) hands it back while
        children live."""
        with self._lock:
            rec = self._record(ctx, Context)
            children = [r for r in self._objects.values() if r.context is ctx]
            if children:
                raise ReleaseRejected(Busy(f"context still holds {len(children)} object(s)"), ctx)
            self._release(rec, self._destroy_context)

    def _release(self, rec: _Record, hook: Any) -> None:
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
        for r in list(self._objects.values()):
            if isinstance(r.handle, Event):
                r.native.fail(DeviceLost(f"device lost: {error}"))

    # ---- buffers ------------------------------------------------------------------------------
    def allocate_buffer(self, ctx: Context, desc: BufferDesc) -> Buffer:
        """Ownership: a new buffer in ``ctx``. Blocking: may block on the allocator. Failure: nothing
        retained. Copies: none (program-visible buffers are directly bindable or refused)."""
        desc.check()
        with self._lock:
            self._check_alive()
            crec = self._record(ctx, Context)
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
            self._add(_Record(buf, native, ctx, bytes=max(binfo.allocation_bytes, desc.size), desc=desc))
            return buf

    def _transfer_range(self, buf: Buffer, offset: int, length: int, need: int) -> _Record:
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

    # ---- programs -----------------------------------------------------------------------------
    def load_program(self, ctx: Context, artifact: ArtifactRef) -> Program:
        """Ownership: a resident program in ``ctx`` (the payload is not retained). Failure: FormatError,
        ValidationError or LoweringError, nothing retained; ResourceLimit, before the backend builds
        anything, when the program's working set (constants, variables and its peak of intermediates:
        :func:`~ironaccel.tosa.working_set.estimate`) exceeds the artifact's resident bound or what the
        context's quota has left, or has no bound while the artifact sets one; and after the backend
        built it, when what the backend reports as resident does. Blocking: parses and plans synchronously."""
        from ..tosa.capability import admit
        from ..tosa.codec import read
        from ..tosa.validate import validate
        from ..tosa.working_set import NO_BOUND, WorkingSet, estimate

        with self._lock:
            self._check_alive()
            crec = self._record(ctx, Context)
            limits = self.device_info().limits
            self._limit(ctx, Program, limits.max_programs_per_context)
        if artifact.format not in (TOSA_FORMAT, NVFP4_FORMAT):
            raise Incompatible(f"artifact format {artifact.format:#x} is not TOSA ({TOSA_FORMAT:#x})")
        if len(artifact.payload) > limits.max_artifact_bytes:
            raise ResourceLimit(f"artifact of {len(artifact.payload)} bytes exceeds {limits.max_artifact_bytes}")
        needs: WorkingSet | None = None  # an NVFP4 projection has its own resident figure
        if artifact.format == NVFP4_FORMAT:
            program, inputs, outputs = self._read_nvfp4(artifact)
        else:
            target = _decode_target(artifact.target)
            program = read(bytes(artifact.payload))
            validate(program, target)
            admit(program, self._capabilities())
            needs = estimate(program)
            if not needs.bounded and artifact.resident_bytes < NO_BOUND:
                raise ResourceLimit(
                    f"the program's working set has no bound ({needs.unbounded_reason}); the artifact's resident"
                    f" bound is {artifact.resident_bytes} bytes"
                )
            block = program.main
            inputs = tuple(TensorSpec.of(t) for t in block.input_tensors)
            outputs = tuple(TensorSpec.of(t) for t in block.output_tensors)
        with self._lock:
            self._check_alive()
            # The lock was let go while the artifact was parsed: the context may be gone by now, and other
            # loads may have filled it, so both are checked again before anything is made resident.
            crec = self._record(ctx, Context)
            self._limit(ctx, Program, limits.max_programs_per_context)
            quota: Quota = crec.extra
            used = self._quota_use(ctx, Program)
            # Refused on the shapes alone, before the backend allocates anything (constant folding included).
            if needs is not None and (
                needs.total_bytes > artifact.resident_bytes or used + needs.total_bytes > quota.program_bytes
            ):
                raise ResourceLimit(
                    f"the program needs {needs.total_bytes} bytes ({needs.describe()}); the artifact's resident"
                    f" bound is {artifact.resident_bytes} bytes and the context quota has {quota.program_bytes - used}"
                    " left"
                )
            allowed = min(artifact.resident_bytes, quota.program_bytes - used)
            native, resident = self._guard(self._load, crec.native, program, allowed)
            if resident > artifact.resident_bytes or used + resident > quota.program_bytes:
                self._unload(native)
                raise ResourceLimit(
                    f"program keeps {resident} bytes resident; allowed {artifact.resident_bytes} by the artifact"
                    f" and {quota.program_bytes - used} by the context quota"
                )
            handle = Program(self, self._ids.new(), ctx, inputs, outputs)
            run = self._inline(native)
            inline = None if run is None else _Inline(run, handle)
            self._add(_Record(handle, native, ctx, bytes=resident, extra=inline))
            return handle

    def _read_nvfp4(self, artifact: ArtifactRef) -> tuple[Any, tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
        """An NVFP4 projection's header read as hostile input, then refused unless the backend runs it."""
        from ..nvfp4.format import read as read_projection
        from ..tosa.errors import LoweringError

        if artifact.target:
            raise InvalidArgument("a TOSA target applies to TOSA programs, not to an NVFP4 projection")
        projection = read_projection(artifact.payload)
        if NVFP4_FORMAT not in self.artifact_formats:
            raise LoweringError(f"{self.device_info().name} does not run NVFP4 projections: cannot load {projection}")
        inputs = tuple(TensorSpec(o.name, o.shape, o.dtype) for o in projection.inputs)
        outputs = tuple(TensorSpec(o.name, o.shape, o.dtype) for o in projection.outputs)
        return projection, inputs, outputs

    def unload_program(self, program: Program) -> None:
        self._observe_all()
        with self._lock:
            rec = self._record(program, Program)
            if rec.pins or rec.holders:
                raise ReleaseRejected(Busy(f"{program!r} is referenced by pending work or prepared"), program)
            self._release(rec, self._unload)

    def runs_inline(self, program: Program) -> bool:
        """Whether :meth:`run_inline` can run ``program`` (fixed when it was loaded)."""
        with self._lock:
            return self._record(program, Program).extra is not None

    def starts_inline(self, program: Program) -> bool:
        """Whether :meth:`start_inline` can start ``program`` (fixed when it was loaded)."""
        with self._lock:
            inline: _Inline | None = self._record(program, Program).extra
            return inline is not None and inline.start is not None

    def start_inline(self, program: Program, inputs: Sequence[Any]) -> InlineRun:
        """Begin an inline run of ``program`` on ``inputs`` and return without waiting for it: the inputs
        are consumed before this returns (the caller may reuse them); :meth:`InlineRun.finish` waits and
        fills the outputs. Unsupported where :meth:`starts_inline` is False.

        Ownership: the program is pinned until the run is finished. Not ordered against work submitted to
        any queue; started runs of one program complete in the order started."""
        with self._lock:
            self._check_alive()
            rec = self._record(program, Program)
            inline: _Inline | None = rec.extra
            if inline is None or inline.start is None:
                raise Unsupported(f"{program!r} cannot start inline on this backend; submit it")
            rec.pins += 1
        try:
            inline.check_inputs(inputs)
            pending = self._guard(inline.start, inputs)
        except BaseException:
            with self._lock:
                rec.pins -= 1
            raise
        return InlineRun(self, rec, inline, pending)

    def run_inline(self, program: Program, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """Run ``program`` to completion on the calling thread, reading ``inputs`` and writing ``outputs``
        (numpy arrays: the declared dtypes and shapes, C-contiguous; outputs writable, overlapping neither
        each other nor an input). Unsupported where :meth:`runs_inline` is False.

        Ownership: nothing is created or retained; the program is pinned for the call (an unload meanwhile
        is refused as Busy). Blocking: the whole run. Failure: the program's error is raised; outputs may be
        partly written. Copies: none; the program works on the arrays in place. Not ordered against work
        submitted to any queue."""
        with self._lock:
            self._check_alive()
            rec = self._record(program, Program)
            inline: _Inline | None = rec.extra
            if inline is None:
                raise Unsupported(f"{program!r} cannot run inline on this backend; submit it")
            rec.pins += 1
        try:
            inline.check(inputs, outputs)
            inline.run(inputs, outputs)
        finally:
            with self._lock:
                rec.pins -= 1

    # ---- queues -------------------------------------------------------------------------------
    def create_queue(self, ctx: Context) -> Queue:
        with self._lock:
            self._check_alive()
            crec = self._record(ctx, Context)
            self._limit(ctx, Queue, self.device_info().limits.max_queues_per_context)
            native = self._create_queue(crec.native)
            q = Queue(self, self._ids.new(), ctx)
            self._add(_Record(q, native, ctx))
            return q

    def destroy_queue(self, queue: Queue) -> None:
        self._observe_all()
        with self._lock:
            rec = self._record(queue, Queue)
            if rec.pins or rec.holders:
                raise ReleaseRejected(Busy(f"{queue!r} has pending work or prepared submissions"), queue)
            self._release(rec, self._destroy_queue)

    # ---- gates --------------------------------------------------------------------------------
    def host_gate(self, ctx: Context) -> HostGate:
        """A host-signalled gate usable as ``submit(..., after=(gate, value))`` within ``ctx``."""
        with self._lock:
            self._record(ctx, Context)
            return HostGate(self, ctx)

    # ---- submission ---------------------------------------------------------------------------
    def submit(
        self,
        queue: Queue,
        program: Program,
        bindings: Sequence[Binding],
        timeout: float | None = None,
        after: tuple[HostGate, int] | None = None,
    ) -> Event:
        """Admit work and return its event; never waits for it.

        Ownership: on success the event pins the queue, program and bound buffers until it is terminal.
        Failure: SubmitRejected (nothing retained) or SubmitIndeterminate (the carried event owns them).
        Copies: none; buffers are bound directly. ``timeout`` (seconds) counts from admission.
        """
        try:
            with self._lock:
                qrec, prec, ranges, brecs = self._work(queue, program, bindings)
                if after is not None:
                    gate, value = after
                    if not isinstance(gate, HostGate) or gate.owner is not self or gate.context is not queue.context:
                        raise PermissionDenied("gate belongs to another accelerator or context")
                    if not isinstance(value, int) or value < 0:
                        raise InvalidArgument(f"gate value must be a non-negative integer, got {value!r}")
                limits = self.device_info().limits
                self._limit(queue.context, Event, limits.max_events_per_context)
                deadline = None if timeout is None else time.monotonic() + _positive(timeout)
                core = EventCore(deadline)
                event = Event(self, self._ids.new(), queue.context)
                pinned = [qrec, prec, *brecs]
                for r in pinned:
                    r.pins += 1
                self._add(_Record(event, core, queue.context))
        except IronAccelError as exc:
            raise SubmitRejected(exc) from exc

        def unpin() -> None:
            with self._lock:
                for r in pinned:
                    r.pins -= 1

        core.on_terminal(unpin)

        def start() -> None:
            # Runs on the thread that signals the gate: a failure to start fails the event, never that thread.
            # Work cancelled (or failed by device loss) while parked never reaches the backend: its queue and
            # buffers may be released by now. Otherwise the hold keeps the event from turning terminal (and
            # so from dropping its pins) until _submit has returned, even if the work ends or a cancel wins
            # meanwhile: a waiter that sees the terminal state finds everything released.
            if not core.hold():
                return
            try:
                self._submit(qrec.native, prec.native, ranges, core)
            except SubmitIndeterminate as exc:
                core.fail(exc.error)
            except IronAccelError as exc:
                core.fail(exc)
            finally:
                core.release()

        if after is None:
            try:
                self._guard(self._submit, qrec.native, prec.native, ranges, core)
            except SubmitIndeterminate as exc:
                raise SubmitIndeterminate(exc.error, event) from exc
            except IronAccelError as exc:
                # Not accepted: undo the bookkeeping so nothing is retained.
                with self._lock:
                    core.fail(exc)
                    self._drop(event.id)
                raise SubmitRejected(exc) from exc
        else:
            gate, value = after
            gate.when(value, start)
        return event

    def _work(
        self, queue: Queue, program: Program, bindings: Sequence[Binding]
    ) -> tuple[_Record, _Record, list[BoundRange], list[_Record]]:
        """The checks of ``submit`` and ``prepare`` (under the lock): the queue's and program's records, the
        bound ranges and the buffers' records."""
        self._check_alive()
        qrec = self._record(queue, Queue)
        prec = self._record(program, Program)
        if queue.context is not program.context:
            raise PermissionDenied("queue and program belong to different contexts")
        ranges, brecs = self._bind(program, bindings)
        return qrec, prec, ranges, brecs

    def _bind(self, program: Program, bindings: Sequence[Binding]) -> tuple[list[BoundRange], list[_Record]]:
        specs = (*program.inputs, *program.outputs)
        n_in = len(program.inputs)
        limit = self.device_info().limits.max_bindings_per_submission
        if len(bindings) > limit:
            raise ResourceLimit(f"{len(bindings)} bindings exceed the limit {limit}")
        if len(bindings) != len(specs):
            raise InvalidArgument(f"program has {len(specs)} slots ({n_in} inputs), got {len(bindings)} bindings")
        seen: set[int] = set()
        ranges: list[BoundRange] = []
        recs: list[_Record] = []
        ordered = all(type(b.slot) is int and b.slot == i for i, b in enumerate(bindings))
        for b in bindings if ordered else sorted(bindings, key=lambda b: b.slot if isinstance(b.slot, int) else -1):
            if not isinstance(b.slot, int) or not 0 <= b.slot < len(specs) or b.slot in seen:
                raise InvalidArgument(f"binding slot {b.slot!r} is out of range or repeated")
            seen.add(b.slot)
            spec = specs[b.slot]
            rec = self._record(b.buffer, Buffer)
            if b.buffer.context is not program.context:
                raise PermissionDenied(f"{b.buffer!r} belongs to another context")
            access = b.access or (Access.READ if b.slot < n_in else Access.WRITE)
            need = Access.READ if b.slot < n_in else Access.WRITE
            if not access & need:
                raise InvalidArgument(f"slot {b.slot} ({spec}) needs {need.name} access, binding grants {access.name}")
            if not usage_allows(rec.desc.usage, access):
                raise PermissionDenied(f"{b.buffer!r} usage {rec.desc.usage!r} does not allow {access.name}")
            length = rec.desc.size - b.offset if b.length is None else b.length
            if not isinstance(b.offset, int) or b.offset < 0 or length < 0 or b.offset + length > rec.desc.size:
                raise OutOfBounds(f"slot {b.slot}: range [{b.offset}, +{length}) outside a {rec.desc.size}-byte buffer")
            if length != spec.nbytes:
                raise InvalidArgument(f"slot {b.slot} ({spec}) needs {spec.nbytes} bytes, binding covers {length}")
            if b.offset % spec.numpy_dtype.itemsize:
                raise InvalidArgument(f"slot {b.slot}: offset {b.offset} not aligned to {spec.numpy_dtype.itemsize}")
            ranges.append(BoundRange(b.slot, rec.native, b.offset, length, access, spec))
            recs.append(rec)
        return ranges, recs

    # ---- events -------------------------------------------------------------------------------
    def poll_event(self, event: Event) -> EventState:
        """Never blocks. A terminal state never changes."""
        with self._lock:
            core: EventCore = self._record(event, Event).native
        if self.observes_completion and not core.state.terminal:
            self._guard(self._progress, core, 0.0)
        return core.state

    def event_error(self, event: Event) -> IronAccelError | None:
        with self._lock:
            return self._record(event, Event).native.error

    def wait(self, event: Event, timeout: float | None = None) -> EventState:
        """Block up to ``timeout`` seconds (None: forever); raises DeadlineExpired if still pending.
        Any number of threads may wait on one event; all wake when it becomes terminal."""
        with self._lock:
            core: EventCore = self._record(event, Event).native
        if self.observes_completion:
            end = None if timeout is None else time.monotonic() + timeout
            while not core.state.terminal:
                remaining = None if end is None else end - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._guard(self._progress, core, remaining)
            state = core.state
        else:
            state = core.wait(timeout)
        if not state.terminal:
            raise DeadlineExpired(f"{event!r} still pending after {timeout} s")
        return state

    def cancel_event(self, event: Event) -> bool:
        """True when cancellation won: the work never started, or it was running on a backend that stops
        runs at checkpoints (the event stays PENDING until the run has stopped, then is CANCELLED).
        False when the event finished first, or its work started where it cannot be stopped."""
        with self._lock:
            core: EventCore = self._record(event, Event).native
        if not self.supports_cancellation:
            raise Unsupported("this backend does not cancel submitted work")
        return core.cancel()

    def destroy_event(self, event: Event) -> None:
        """Ownership: consumes a TERMINAL event. Failure: ReleaseRejected(Busy) while it is pending."""
        self._observe_all()
        with self._lock:
            rec = self._record(event, Event)
            if not rec.native.state.terminal:
                raise ReleaseRejected(Busy(f"{event!r} is pending"), event)
            self._drop(event.id)

    # ---- prepared submissions -----------------------------------------------------------------
    def _prepare(self, queue: Any, program: Any, ranges: Sequence[BoundRange]) -> Launcher | None:
        """A native launcher (:class:`~.prepared.Launcher`) of ``program`` bound to ``ranges`` on ``queue``,
        or None for the generic one, which launches through ``submit``. Runs under the lock."""
        return None

    @property
    def launches_natively(self) -> bool:
        """Whether ``launch`` is the backend's own (cheaper than ``submit``), not a ``submit`` each time."""
        return type(self)._prepare is not Accelerator._prepare

    def _release_launcher(self, native: Launcher) -> None:
        native.destroy()

    def prepare(self, queue: Queue, program: Program, bindings: Sequence[Binding]) -> Prepared:
        """Check ``bindings`` once, for launching ``program`` on ``queue`` any number of times (``launch``).

        Ownership: a new Prepared in the queue's context; until ``release_prepared`` the queue, the program
        and the bound buffers cannot be released, and a bound buffer cannot be written while a launch runs
        (Busy, as for pending submissions: write inputs once the last ticket is reached). Failure: nothing
        retained. Copies: none (buffers are bound directly, as by ``submit``)."""
        with self._lock:
            qrec, prec, ranges, brecs = self._work(queue, program, bindings)
            self._limit(queue.context, Prepared, self.device_info().limits.max_events_per_context)
            native = self._guard(self._prepare, qrec.native, prec.native, ranges)
            launcher = native if native is not None else Resubmit(self, queue, program, bindings)
            handle = Prepared(self, self._ids.new(), queue.context)
            held = [qrec, prec, *brecs]
            for r in held:
                r.holders.append(launcher)
            self._add(_Record(handle, launcher, queue.context, extra=held))
            return handle

    def launch(self, prepared: Prepared) -> int:
        """Start one run of ``prepared``; returns its ticket (1 for the first launch, then one more each
        time). Runs of one prepared submission finish in ticket order. Blocking: never. Failure: Busy when
        the backend's runs in flight are at its limit, nothing started (observe some finish, then retry)."""
        if self._poisoned is not None:
            self._check_alive()
        launcher = self._launcher(prepared)
        try:  # _guard's body, inlined: this is the hot path
            return launcher.launch()
        except DeviceLost as exc:
            with self._lock:
                self._poison(exc)
            raise

    def poll_launch(self, prepared: Prepared, ticket: int) -> bool:
        """Whether the run of ``ticket`` (and every earlier one) has finished. Never blocks. Raises the error
        a finished run failed with (reported once), DeviceLost where the device was lost."""
        launcher = self._launcher(prepared)
        try:  # _guard's body, inlined: this runs on every poll
            return bool(launcher.reached(ticket))
        except DeviceLost as exc:
            with self._lock:
                self._poison(exc)
            raise

    def wait_launch(self, prepared: Prepared, ticket: int, timeout: float | None = None) -> None:
        """Block until the run of ``ticket`` finished; DeadlineExpired after ``timeout`` seconds (None: no
        limit), when it may be waited for again. Raises as ``poll_launch`` does."""
        launcher = self._launcher(prepared)
        if not self._guard(launcher.wait, ticket, None if timeout is None else _positive(timeout)):
            raise DeadlineExpired(f"launch {ticket} of {prepared!r} still running after {timeout} s")

    def _launcher(self, prepared: Prepared) -> Launcher:
        """``prepared``'s launcher, looked up without the lock (launches are the hot path): one dict read,
        atomic; a launcher released meanwhile refuses the call itself."""
        rec = self._objects.get(prepared.id) if type(prepared) is Prepared and prepared.owner is self else None
        if rec is None or rec.handle is not prepared:
            return self._record(prepared, Prepared).native  # raises the reason
        return rec.native

    def release_prepared(self, prepared: Prepared) -> None:
        """Ownership: consumes ``prepared`` and unpins what it bound. Failure: ReleaseRejected(Busy) while a
        launched run is still running."""
        with self._lock:
            rec = self._record(prepared, Prepared)
            if self._poisoned is None and not self._guard(rec.native.idle):
                raise ReleaseRejected(Busy(f"{prepared!r} has launched runs still running"), prepared)
            try:
                self._release(rec, self._release_launcher)
            finally:
                if prepared.id not in self._objects:
                    for r in rec.extra:
                        r.holders.remove(rec.native)


class InlineRun:
    """A run begun by :meth:`Accelerator.start_inline`. ``finish(outputs, timeout)`` waits for it and
    fills ``outputs`` (arrays as ``run_inline`` takes them); the first call that ends the run (with its
    outputs or its error) releases the program's pin. Not thread-safe: one thread finishes a run."""

    __slots__ = ("_acc", "_inline", "_pending", "_rec")

    def __init__(self, acc: Accelerator, rec: _Record, inline: _Inline, pending: Any) -> None:
        self._acc, self._rec, self._inline, self._pending = acc, rec, inline, pending

    @property
    def done(self) -> bool:
        """Whether the run has ended (never blocks; a backend may ask its device)."""
        return self._pending is None or bool(self._acc._guard(self._pending.done))

    def finish(self, outputs: Sequence[Any], timeout: float | None = None) -> None:
        if self._pending is None:
            raise InvalidArgument("this inline run was finished already")
        self._inline.check_outputs(outputs)
        try:
            self._acc._guard(self._pending.finish, outputs, timeout)
        except DeadlineExpired:
            raise  # still running: may be finished later
        except BaseException:
            self._release()
            raise
        self._release()

    def _release(self) -> None:
        self._pending = None
        with self._acc._lock:
            self._rec.pins -= 1


class _Inline:
    """A program's inline runner and what its arrays must look like (checked on every run_inline)."""

    __slots__ = ("inputs", "outputs", "program", "run", "start")

    def __init__(self, run: Callable[[Sequence[Any], Sequence[Any]], None], program: Program) -> None:
        self.run = run
        self.start: Callable[[Sequence[Any]], Any] | None = getattr(run, "start", None)
        self.program = program
        # dtype, shape and C-contiguous strides per slot: the common case is checked by comparing them.
        self.inputs = [(s.numpy_dtype, s.shape, _c_strides(s)) for s in program.inputs]
        self.outputs = [(s.numpy_dtype, s.shape, _c_strides(s)) for s in program.outputs]

    def check(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """As many arrays as slots, of their dtypes and shapes, C-contiguous, outputs writable and sharing
        no memory with another array of the run."""
        self.check_inputs(inputs)
        self.check_outputs(outputs, inputs)

    def check_inputs(self, inputs: Sequence[Any]) -> None:
        if len(inputs) != len(self.inputs):
            raise InvalidArgument(f"program takes {len(self.inputs)} inputs, got {len(inputs)}")
        for index, (array, (dtype, shape, strides)) in enumerate(zip(inputs, self.inputs, strict=True)):
            if type(array) is not np.ndarray or array.dtype != dtype or array.shape != shape or (
                array.strides != strides and not array.flags.c_contiguous
            ):
                self._refuse("input", index, array)

    def check_outputs(self, outputs: Sequence[Any], inputs: Sequence[Any] = ()) -> None:
        if len(outputs) != len(self.outputs):
            raise InvalidArgument(f"program has {len(self.outputs)} outputs, got {len(outputs)}")
        for index, (array, (dtype, shape, strides)) in enumerate(zip(outputs, self.outputs, strict=True)):
            if (
                type(array) is not np.ndarray
                or array.dtype != dtype
                or array.shape != shape
                or (array.strides != strides and not array.flags.c_contiguous)
                or not array.flags.writeable
            ):
                self._refuse("output", index, array)
            # Arrays that own their memory (base None) are separate allocations; others are compared by bounds.
            owner = array.base is None
            for other in inputs:
                if not (owner and other.base is None and other is not array) and np.may_share_memory(array, other):
                    raise InvalidArgument(f"output {index} shares memory with an input of the run")
            for other in outputs[:index]:
                if not (owner and other.base is None and other is not array) and np.may_share_memory(array, other):
                    raise InvalidArgument(f"output {index} shares memory with another output of the run")

    def _refuse(self, role: str, index: int, array: Any) -> None:
        spec = (self.program.inputs if role == "input" else self.program.outputs)[index]
        got = f"{array.dtype}{list(array.shape)}" if isinstance(array, np.ndarray) else type(array).__name__
        raise InvalidArgument(
            f"{role} {index} ({spec}) must be a C-contiguous{' writable' if role == 'output' else ''}"
            f" {spec.numpy_dtype} array of shape {spec.shape}, got {got}"
        )


def _c_strides(spec: Any) -> tuple[int, ...]:
    strides, step = [], spec.numpy_dtype.itemsize
    for d in reversed(spec.shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _positive(timeout: float) -> float:
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidArgument(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    return float(timeout)


def _decode_target(words: Sequence[int]) -> Any:
    if not words:
        return None
    from ..tosa.target import Target

    try:
        return Target.decode(tuple(words))
    except (ValueError, InvalidArgument) as exc:
        raise Incompatible(f"artifact target: {exc}") from exc


__all__ = ["Accelerator", "BoundRange", "InternalError"]
