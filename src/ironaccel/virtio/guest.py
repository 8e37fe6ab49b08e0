"""The guest client: the execution contract over virtio-accel, so ``ironaccel.open("virtio:PATH")``
is an Accelerator like "cpu" or "vulkan", served by whatever backend the host daemon chose.

    dev = ironaccel.open("virtio:/run/ironaccel.sock")     # or IRONACCEL_VIRTIO_SOCKET and "virtio"
    exe = dev.compile("model.tosa"); y, = exe(x)

Every hook of :class:`~ironaccel.runtime.Accelerator` becomes one protocol 1.0 command (or a few:
transfers larger than a frame go in segments). The runtime's own checks run here first, so a guest
mistake is reported with the runtime's message before anything crosses the wire; the device checks
everything again, because the guest is not trusted there.

Design choices:
1. Native handles are the device's object ids. Statuses map back to the runtime's error classes
   (STALE_OBJECT is InvalidArgument: a stale handle; an unassigned status is an opaque failure);
   DEVICE_LOST or a broken transport poisons this accelerator, as any backend's device loss does.
2. Completion by observation (``observes_completion``): POLL_EVENT never blocks on the device, so
   ``wait`` polls with a backoff from 20 us to 2 ms. A remote event is destroyed as soon as its
   terminal state is seen, so the device releases what it retained at the same moment the runtime
   here does.
3. Programs are validated and admitted locally against all of TOSA 1.0 (the guest cannot see the
   host backend's capability descriptor); the device admits them against its backend and answers
   UNSUPPORTED for what that backend cannot run. The artifact's bytes are sent as the caller gave them;
   no target means all of TOSA 1.0. A caller that sets no resident bound declares an honest one
   (:mod:`~ironaccel.virtio.guest_bound`), since the device charges the bound to this guest's budget.
4. Cancellation goes to the device when the work was handed over; work still parked on a host gate
   here is cancelled here. Exactly one cancel can win either way.
5. Every command has a deadline (``timeout_s``, default IRONACCEL_VIRTIO_TIMEOUT, 30 s): a daemon that
   stops answering ends the call with DeadlineExpired naming the command and the daemon, and the
   accelerator keeps working if the daemon resumes. A SUBMIT whose answer never came is indeterminate
   (the device may have accepted it): its event fails here with that error.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import (
    Busy,
    DeadlineExpired,
    DeviceLost,
    InvalidArgument,
    ResourceLimit,
    Unsupported,
)
from ..runtime.accelerator import Accelerator, BoundRange
from ..runtime.errors import ReleaseRejected, SubmitIndeterminate
from ..runtime.event import EventCore
from ..runtime.handles import Context, Event
from ..runtime.types import ArtifactRef, BufferDesc, BufferInfo, DeviceInfo, Limits, MemoryDomain
from ..tosa.target import Target
from .guest_bound import UNBOUNDED, declared_bound
from .guest_errors import error_for, raise_failed
from .transport_guest import IN_PLACE_MIN_BYTES, GuestTransport
from .wire_constants import (
    HEADER_BYTES,
    AcceleratorClass,
    Capability,
    EventStateCode,
    Opcode,
    Status,
)
from .wire_decode_response import decode_response
from .wire_errors import RecoveryRequired, WireError
from .wire_frames import DecodeLimits, Response
from .wire_structs import (
    AllocateBufferRequest,
    CreateContextRequest,
    CreateQueueRequest,
    LoadProgramRequest,
    ObjectPayload,
    RequestHeader,
    SubmitRequest,
    TransferBufferRequest,
    WireBinding,
    WireConfig,
)

if TYPE_CHECKING:
    from .guest_direct import DirectRunner

_SUBMITTING = -1  # a remote event id not known yet: SUBMIT is on its way
_REQUEST_HEADER = RequestHeader._STRUCT  # packed per command without a record made for it
_POLL_FIRST, _POLL_MAX = 20e-6, 2e-3
# Bulk transfers: pieces small enough that the two copies (caller -> shared memory here, shared memory
# -> buffer in the device) overlap, large enough that a command's fixed cost stays small beside them.
SEGMENT_BYTES = 2 << 20
GROUP_BYTES = 16 << 20  # of the arena one transfer takes at a time


def _segments(total: int, chunk: int, budget: int, piece: int = SEGMENT_BYTES) -> Iterator[list[tuple[int, int]]]:
    """``(offset, bytes)`` pieces of a transfer, in groups posted as one batch. Pieces of ``piece`` bytes
    (``chunk``, one frame's room, at most) let the device copy one while the next is copied in; a group's
    pieces and their frames fit in ``budget`` bytes of the arena."""
    piece = min(chunk, piece)
    per_group = max(1, budget // (piece + 256))  # 256: a frame's header and answer, rounded up to blocks
    pieces = [(at, min(piece, total - at)) for at in range(0, total, piece)]
    for first in range(0, len(pieces), per_group):
        yield pieces[first : first + per_group]


class VirtioAccelerator(Accelerator):
    """An accelerator behind a virtio-accel device, reached through the daemon socket at ``path``.

    ``transport_options`` go to :class:`GuestTransport`; ``timeout_s`` there is how long one command may
    wait for the daemon's answer (default IRONACCEL_VIRTIO_TIMEOUT, else 30 s).

    Thread safety: as every Accelerator; commands from several threads travel in parallel."""

    observes_completion = True

    def __init__(self, path: str, **transport_options: Any) -> None:
        super().__init__()
        self.path = path
        self.transport = GuestTransport(path, **transport_options)
        self._finalizer = weakref.finalize(self, self.transport.close)
        try:
            self.config = WireConfig.decode(self.transport.config, self.transport.layout.size)
            self._request_ids = itertools.count(1)
            self.limits = DecodeLimits.negotiated(self.config)
            self.wire_info = self._command(Opcode.GET_DEVICE_INFO, b"").body
            self.limits = DecodeLimits.negotiated(self.config, self.wire_info)
        except BaseException:
            self.close()
            raise
        arena = self.transport.arena.size // 2 - 64
        self._write_chunk = min(self.config.max_request_bytes - HEADER_BYTES - TransferBufferRequest.SIZE, arena)
        self._read_chunk = min(self.config.max_response_bytes - HEADER_BYTES, arena)
        self._transfer_budget = min(GROUP_BYTES, arena)
        self.supports_cancellation = bool(self.wire_info.capabilities & Capability.EVENT_CANCELLATION)
        self._events = threading.Condition()
        self._remote: dict[EventCore, int] = {}  # submitted here -> the device's event id
        self._artifact = threading.local()
        self._parsed: dict[int, tuple[int, Any]] = {}  # loaded, until _direct takes it
        self._runners: dict[int, DirectRunner] = {}

    def close(self) -> None:
        """Disconnect: the device releases everything this guest still holds."""
        self._finalizer()

    # ---- one command --------------------------------------------------------------------------------
    def _command(self, opcode: Opcode, body: bytes, tail: Any = b"", read_into: memoryview | None = None) -> Response:
        """Send one request (``body`` then ``tail``, e.g. write data or an artifact, sent without a
        copy here) and decode its answer; READ_BUFFER data lands in ``read_into``."""
        return self._batch([(opcode, body, tail, read_into)])[0]

    def _batch(self, commands: Sequence[tuple[Opcode, bytes, Any, memoryview | None]]) -> list[Response]:
        """Several commands ``(opcode, body, tail, read_into)`` posted at once and served in this order
        (one kick, one wait); their answers, decoded, in the same order. A tail or ``read_into`` in guest
        memory (:meth:`host_array`) is read or written by the device where it lies."""
        frames, expected = [], []
        transport = self.transport
        for opcode, body, tail, read_into in commands:
            rid = next(self._request_ids)
            tail_view = tail if type(tail) is memoryview and tail.format == "B" else memoryview(tail).cast("B")
            head = _REQUEST_HEADER.pack(opcode, 0, len(body) + tail_view.nbytes, rid) + body
            parts = [head, tail_view] if tail_view.nbytes else [head]
            sink = read_into if read_into is not None and _in_place(transport, read_into) else None
            if sink is not None:
                frames.append((parts, HEADER_BYTES, sink))
            else:
                capacity = HEADER_BYTES + (read_into.nbytes if read_into is not None else 76)
                frames.append((parts, capacity, None))
            expected.append((opcode, rid, read_into, sink))
        responses = []
        waiting = expected[0][0]  # the command whose answer a deadline would be missing
        try:
            with transport.exchange_batch(frames) as answers:
                for index, (opcode, rid, read_into, sink) in enumerate(expected):
                    waiting = opcode
                    answer = answers[index]
                    if not len(answer):
                        raise DeviceLost(f"{opcode.name}: the device completed the request without an answer")
                    read = None if read_into is None else read_into.nbytes
                    if sink is not None:  # the data is where it belongs already
                        data = sink[: max(0, answers.used(index) - HEADER_BYTES)]
                        response = decode_response(answer, opcode, request_id=rid, read_bytes=read, tail=data)
                    else:
                        response = decode_response(answer, opcode, request_id=rid, read_bytes=read)
                        if read_into is not None and response.status == Status.OK:
                            read_into[:] = response.body
                    responses.append(response)
        except (RecoveryRequired, WireError) as exc:
            raise DeviceLost(f"the device broke the protocol: {exc}") from exc
        except DeadlineExpired as exc:
            batch = list(dict.fromkeys(opcode.name for opcode, *_ in expected))
            where = f" (in a batch of {', '.join(batch)})" if len(expected) > 1 else ""
            raise DeadlineExpired(f"{waiting.name}{where}: {exc}") from exc
        return responses

    def _ok(self, opcode: Opcode, body: bytes, tail: Any = b"", what: str = "") -> Response:
        response = self._command(opcode, body, tail)
        if response.status != Status.OK:
            raise error_for(response.status, what or opcode.name)
        return response

    def _object(self, opcode: Opcode, body: bytes) -> int:
        return self._ok(opcode, body).body.object_id

    def _release_command(self, opcode: Opcode, object_id: int) -> None:
        response = self._command(opcode, ObjectPayload(object_id).pack())
        if response.status == Status.BUSY:
            raise ReleaseRejected(Busy(f"{opcode.name}: the device still uses the object"), None)
        if response.status != Status.OK:
            raise error_for(response.status, opcode.name)

    # ---- identity -----------------------------------------------------------------------------------
    def _device_info(self) -> DeviceInfo:
        w = self.wire_info
        domains = {
            MemoryDomain.HOST: Capability.HOST_VISIBLE_MEMORY,
            MemoryDomain.DEVICE: Capability.DEVICE_LOCAL_MEMORY,
            MemoryDomain.SHARED: Capability.SHARED_MEMORY,
        }
        try:
            klass = AcceleratorClass(w.accelerator_class).name
        except ValueError:
            klass = f"class {w.accelerator_class}"
        return DeviceInfo(
            name=f"virtio-accel {klass} {w.vendor_id:04x}:{w.device_id:04x} at {self.path}",
            kind="virtio",
            vendor=f"{w.vendor_id:#06x}",
            uuid=bytes(w.uuid),
            vendor_id=w.vendor_id,
            device_id=w.device_id,
            domains=frozenset(d for d, cap in domains.items() if w.capabilities & cap),
            cancellation=bool(w.capabilities & Capability.EVENT_CANCELLATION),
            limits=Limits(
                max_contexts=w.max_contexts,
                max_buffers_per_context=w.max_buffers_per_context,
                max_programs_per_context=w.max_programs_per_context,
                max_queues_per_context=w.max_queues_per_context,
                max_events_per_context=w.max_events_per_context,
                max_bindings_per_submission=w.max_bindings_per_submission,
                max_buffer_bytes=w.max_buffer_bytes,
                max_artifact_bytes=w.max_artifact_bytes,
            ),
        )

    def _capabilities(self) -> Any:
        from ..tosa.capability import descriptor_for_all_of_tosa_1_0

        return descriptor_for_all_of_tosa_1_0("virtio")

    # ---- contexts, buffers, programs, queues ---------------------------------------------------------
    def _create_context(self) -> Any:
        return self._object(Opcode.CREATE_CONTEXT, CreateContextRequest().pack())

    def _destroy_context(self, native: Any) -> None:
        self._release_command(Opcode.DESTROY_CONTEXT, native)

    def _allocate(self, context: Any, desc: BufferDesc) -> tuple[Any, BufferInfo]:
        body = AllocateBufferRequest(context, desc.size, desc.alignment, int(desc.domain), usage=int(desc.usage))
        buffer_id = self._object(Opcode.ALLOCATE_BUFFER, body.pack())
        host_visible = desc.domain is not MemoryDomain.DEVICE
        return buffer_id, BufferInfo(desc.size, desc.size, desc.alignment, desc.domain, host_visible, True)

    def _free(self, native: Any) -> None:
        self._release_command(Opcode.FREE_BUFFER, native)

    # ---- guest memory ---------------------------------------------------------------------------------
    def host_array(self, shape: Sequence[int], dtype: Any) -> np.ndarray:
        """An array in this guest's memory heap, which the device reads and writes in place: transfers
        from and to it skip the copy through the command arena (``GuestTransport(heap_bytes=...)`` sizes
        the heap). Its room goes back to the heap when the array (and every view of it) is gone. Raises
        ResourceLimit when the heap is full."""
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        count = math.prod(shape)
        if count * dtype.itemsize == 0:
            return np.empty(shape, dtype)
        view = self.transport.guest_buffer(count * dtype.itemsize)
        array = np.frombuffer(view, dtype, count)
        weakref.finalize(array, self.transport.free_guest_buffer, view)
        return array.reshape(shape)

    def _write(self, native: Any, offset: int, data: memoryview) -> None:
        chunk, budget, piece = self._write_chunk, self._transfer_budget, SEGMENT_BYTES
        if _in_place(self.transport, data):  # one command per frame's worth: no arena room is taken
            chunk = piece = self.config.max_request_bytes - HEADER_BYTES - TransferBufferRequest.SIZE
            budget = 1 << 62
        for group in _segments(data.nbytes, chunk, budget, piece):
            commands = [
                (Opcode.WRITE_BUFFER, TransferBufferRequest(native, offset + at, n).pack(), data[at : at + n], None)
                for at, n in group
            ]
            raise_failed(self._batch(commands), "WRITE_BUFFER")

    def _read(self, native: Any, offset: int, out: memoryview) -> None:
        chunk, budget, piece = self._read_chunk, self._transfer_budget, SEGMENT_BYTES
        if _in_place(self.transport, out):  # one command per frame's worth: no arena room is taken
            chunk = piece = self.config.max_response_bytes - HEADER_BYTES
            budget = 1 << 62
        for group in _segments(out.nbytes, chunk, budget, piece):
            commands = [
                (Opcode.READ_BUFFER, TransferBufferRequest(native, offset + at, n).pack(), b"", out[at : at + n])
                for at, n in group
            ]
            raise_failed(self._batch(commands), "READ_BUFFER")

    def load_program(self, ctx: Context, artifact: ArtifactRef) -> Any:
        # The hook below receives the parsed program; the device needs the caller's bytes and bounds.
        self._artifact.value = artifact
        try:
            return super().load_program(ctx, artifact)
        finally:
            self._artifact.value = None

    def _load(self, context: Any, program: Any, limit: int) -> tuple[Any, int]:
        artifact: ArtifactRef = self._artifact.value
        if artifact.resident_bytes <= 0:
            raise ResourceLimit("a resident bound of 0 bytes leaves no room for any program")
        payload = memoryview(artifact.payload).cast("B")
        # On the wire a program always names its target: no target here means all of TOSA 1.0.
        words = tuple(artifact.target) or Target().encode()
        bound = artifact.resident_bytes
        if bound >= UNBOUNDED:
            # The device charges the declared bound against this guest's budget, so "no bound" cannot be
            # sent as is: declare what the program needs (a caller who knows better says so).
            bound = declared_bound(program, payload.nbytes)
        prefix = LoadProgramRequest(context, artifact.format, 0, words, payload.nbytes, bound)
        program_id = self._ok(Opcode.LOAD_PROGRAM, prefix.pack(), payload).body.object_id
        self._parsed[program_id] = (context, program)
        return program_id, 0  # what stays resident is the device's to count, against its own quota

    def _direct(self, program: Any) -> DirectRunner | None:
        # User-API calls in two round trips on device objects kept for the program (guest_direct).
        from .guest_direct import DirectRunner

        context, parsed = self._parsed.pop(program)
        runner = DirectRunner.offer(self, context, program, parsed)
        if runner is not None:
            self._runners[program] = runner
        return runner

    def _unload(self, native: Any) -> None:
        self._parsed.pop(native, None)
        runner = self._runners.pop(native, None)
        if runner is not None:
            runner.release()
        self._release_command(Opcode.UNLOAD_PROGRAM, native)

    def _create_queue(self, context: Any) -> Any:
        return self._object(Opcode.CREATE_QUEUE, CreateQueueRequest(context).pack())

    def _destroy_queue(self, native: Any) -> None:
        self._release_command(Opcode.DESTROY_QUEUE, native)

    # ---- submission and events ----------------------------------------------------------------------
    def _submit(self, queue: Any, program: Any, ranges: Sequence[BoundRange], event: EventCore) -> None:
        timeout_ns = 0
        if event.deadline is not None:
            left = event.deadline - time.monotonic()
            if left <= 0:
                event.fail(DeadlineExpired("deadline passed before the work was handed to the device"))
                return
            timeout_ns = max(1, int(left * 1e9))
        bindings = b"".join(WireBinding(r.native, r.offset, r.length, r.slot, int(r.access)).pack() for r in ranges)
        prefix = SubmitRequest(queue, program, len(ranges), 0, timeout_ns).pack()
        with self._events:
            if event.state.terminal:  # cancelled while it waited on a host gate
                return
            self._remote[event] = _SUBMITTING
        try:
            response = self._command(Opcode.SUBMIT, prefix + bindings)
        except DeadlineExpired as exc:
            # No answer: the device may have accepted the work, so this is not a rejection. The event
            # ends here with the deadline's error; a device that did accept it holds it until this
            # guest disconnects (its id never came back).
            self._settle(event, None)
            event.fail(exc)
            raise SubmitIndeterminate(exc, None) from exc
        except BaseException:
            self._settle(event, None)
            raise
        if response.body is None:  # rejected: nothing retained on the device
            self._settle(event, None)
            raise error_for(response.status, "SUBMIT")
        self._settle(event, response.body.event_id)
        if response.status != Status.OK:  # indeterminate: the device's event owns the resources
            raise SubmitIndeterminate(error_for(response.status, "SUBMIT"), None)

    def _settle(self, event: EventCore, remote: int | None) -> None:
        with self._events:
            if remote is None:
                self._remote.pop(event, None)
            else:
                self._remote[event] = remote
            self._events.notify_all()

    def _progress(self, event: EventCore | None, timeout: float | None) -> None:
        if event is None:
            with self._events:
                pending = [(core, rid) for core, rid in self._remote.items() if rid != _SUBMITTING]
            for core, rid in pending:
                self._poll(core, rid)
            return
        end = None if timeout is None else time.monotonic() + timeout
        delay = _POLL_FIRST
        while not event.state.terminal:
            with self._events:
                rid = self._remote.get(event)
            if rid is not None and rid != _SUBMITTING and self._poll(event, rid):
                return
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return
            if rid is None:  # parked on a host gate here: its signal changes the state, not the device
                event.wait(min(_POLL_MAX, left) if left is not None else _POLL_MAX)
                return
            time.sleep(delay if left is None else min(delay, left))
            delay = min(delay * 2, _POLL_MAX)

    def _poll(self, event: EventCore, rid: int) -> bool:
        """POLL_EVENT once; on a terminal state finish the local event and destroy the remote one."""
        try:
            response = self._ok(Opcode.POLL_EVENT, ObjectPayload(rid).pack())
        except InvalidArgument:
            return event.state.terminal  # destroyed by a racing poll that finished it
        state = response.body
        code = EventStateCode(state.state)
        if code is EventStateCode.PENDING:
            return False
        with self._events:
            if self._remote.pop(event, None) is None:
                return True  # another thread finished it
        if code is EventStateCode.COMPLETE:
            event.complete()
        elif code is EventStateCode.CANCELLED:
            event.cancel()
        else:
            event.fail(error_for(state.error, "execution"))
        self._release_command(Opcode.DESTROY_EVENT, rid)
        return True

    def cancel_event(self, event: Event) -> bool:
        """True when this call's cancellation won (the work never ran)."""
        with self._lock:
            core: EventCore = self._record(event, Event).native
        if not self.supports_cancellation:
            raise Unsupported("the device does not cancel submitted work")
        with self._events:
            while self._remote.get(core) == _SUBMITTING:
                self._events.wait()
            rid = self._remote.get(core)
            if rid is None:  # never handed over (parked on a gate), or already finished
                return core.cancel()
        response = self._command(Opcode.CANCEL_EVENT, ObjectPayload(rid).pack())
        if response.status == Status.OK:
            # The device's cancel won. A run it already started stays PENDING there until it has stopped
            # (ADR 0027), still using its buffers; so the event here ends when a poll sees CANCELLED.
            return True
        if response.status in (Status.BUSY, Status.STALE_OBJECT, Status.INVALID_ARGUMENT):
            return False
        raise error_for(response.status, "CANCEL_EVENT")


def _in_place(transport: GuestTransport, view: memoryview) -> bool:
    """Whether the device reads or writes ``view`` where it lies (large enough, all in guest memory)."""
    return view.nbytes >= IN_PLACE_MIN_BYTES and transport.guest_offset(view) is not None


def open_accelerator(selector: str | None = None) -> VirtioAccelerator:
    """The factory behind ``ironaccel.open("virtio:PATH")``; without a path, IRONACCEL_VIRTIO_SOCKET."""
    from ..core.settings import settings

    path = selector or settings.virtio_socket
    if not path:
        raise InvalidArgument("virtio needs a socket path: 'virtio:/path/to.sock' or IRONACCEL_VIRTIO_SOCKET")
    return VirtioAccelerator(path)


__all__ = ["VirtioAccelerator", "error_for", "open_accelerator"]
