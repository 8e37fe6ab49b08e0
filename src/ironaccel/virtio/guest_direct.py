"""Calls of the user API in two round trips: the guest client's direct runs (``Accelerator._direct``).

A call ``exe(x)`` through the contract's queue path is a dozen commands, each a round trip to the
device: three buffers allocated, two written, SUBMIT, POLL_EVENT until terminal, DESTROY_EVENT, the
output read, three buffers freed. A direct run keeps what does not change between calls on the device
(one buffer per slot, a *staging set*, made at the first call and reused until the program is
unloaded, and one queue for all of the program's runs) and posts the rest as two batches, each served
back to back by the device after one kick:

    1. DESTROY_EVENT of the previous call's (terminal) event, WRITE_BUFFER per input, then SUBMIT (the
       device serves the ring in order, so the work sees the data);
    2. POLL_EVENT, then READ_BUFFER per output. When the poll answers PENDING the reads are discarded and
       the batch is posted again after a short back-off; once the poll is terminal (terminal is final),
       the reads behind it saw the result.

The event is destroyed by the next call, not in batch 2: a destroy behind a PENDING poll could succeed
once the work ended between the two, and the outcome would be lost. Outputs above ``SMALL_BYTES`` are
read only after a terminal poll, so a slow program is not read again on every poll. Only programs
without variables run directly (their runs cannot observe each other); calls from several threads each
take a staging set of their own, so their transfers may overlap.

``start`` posts batch 1 and returns; the run's ``finish`` posts batch 2 later (``exe.submit``): with
several runs started before the first is finished, each costs the device two round trips, and the
guest's copies and waits overlap the device's work on the others.

A call whose batch got no answer within the transport's deadline (DeadlineExpired) leaves its staging
set in an unknown state: the device may still write its inputs or run its SUBMIT. That set is never
used again (later calls make a new one); it is freed with the others when the program is unloaded, or
with everything else when the guest disconnects.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import DeadlineExpired, DeviceLost, IronAccelError
from ..runtime.spec import TensorSpec
from ..runtime.types import Access, BufferUsage, MemoryDomain
from ..tosa import Op
from .guest_errors import error_for
from .wire_constants import EventStateCode, Opcode, Status
from .wire_structs import (
    AllocateBufferRequest,
    CreateQueueRequest,
    ObjectPayload,
    SubmitRequest,
    TransferBufferRequest,
    WireBinding,
)

if TYPE_CHECKING:
    from .guest import VirtioAccelerator

SMALL_BYTES = 64 << 10  # outputs up to this are read speculatively, behind each poll
_POLL_FIRST, _POLL_MAX = 20e-6, 2e-3
_USAGE = int(BufferUsage.PROGRAM_INPUT | BufferUsage.PROGRAM_OUTPUT | BufferUsage.TRANSFER_SOURCE)
_USAGE |= int(BufferUsage.TRANSFER_DESTINATION)
_STATEFUL = {Op.VARIABLE, Op.VARIABLE_READ, Op.VARIABLE_WRITE}
_OBJECT = ObjectPayload._STRUCT


class _Staging:
    """Device buffers (one per slot) that one direct call at a time uses, and the request payloads that
    name them: the same bytes every call, packed once (``frame``)."""

    __slots__ = ("buffers", "finished", "frames")

    def __init__(self, buffers: list[int]) -> None:
        self.buffers = buffers
        self.finished: int | None = None  # the last call's terminal event, destroyed by the next call
        self.frames: dict[tuple[int, int, int], bytes] = {}

    def transfer(self, opcode: Opcode, buffer_id: int, nbytes: int) -> bytes:
        """The payload of a WRITE_BUFFER or READ_BUFFER of ``nbytes`` at offset 0 of ``buffer_id``."""
        key = (int(opcode), buffer_id, nbytes)
        frame = self.frames.get(key)
        if frame is None:
            frame = self.frames[key] = TransferBufferRequest(buffer_id, 0, nbytes).pack()
        return frame


def _object(object_id: int) -> bytes:
    """An ObjectPayload's bytes (the event commands'), without a record made for it."""
    return _OBJECT.pack(object_id)


class _Started:
    """A direct run begun by :meth:`DirectRunner.start`: its staging set is held until ``finish``."""

    def __init__(self, runner: DirectRunner, staging: _Staging, event: int) -> None:
        self.runner, self.staging, self.event = runner, staging, event

    def done(self) -> bool:
        answer = self.runner.acc._command(Opcode.POLL_EVENT, _object(self.event))
        if answer.status != Status.OK:
            return True  # finish() reports the failure
        return EventStateCode(answer.body.state) is not EventStateCode.PENDING

    def finish(self, outputs: Sequence[np.ndarray], timeout: float | None) -> None:
        runner = self.runner
        failure = runner._collect(self.staging, self.event, outputs, timeout)
        runner._give_back(self.staging)
        if failure is not None:
            raise failure


class DirectRunner:
    """Runs one loaded program directly for :class:`VirtioAccelerator` (see the module's description)."""

    def __init__(
        self,
        acc: VirtioAccelerator,
        context: int,
        program: int,
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
    ) -> None:
        self.acc, self.context, self.program = acc, context, program
        self.inputs, self.outputs = tuple(inputs), tuple(outputs)
        self._lock = threading.Lock()
        self._queue: int | None = None  # made with the first staging set
        self._making = threading.Lock()
        self._free: list[_Staging] = []
        self._all: list[_Staging] = []
        # (slot, bytes, access) per binding: inputs first, then outputs, as the program numbers its slots
        self._bindings = [(i, spec.nbytes, int(Access.READ)) for i, spec in enumerate(self.inputs)]
        self._bindings += [(len(self.inputs) + i, s.nbytes, int(Access.WRITE)) for i, s in enumerate(self.outputs)]

    @classmethod
    def offer(cls, acc: VirtioAccelerator, context: int, program_id: int, parsed: Any) -> DirectRunner | None:
        """A runner for ``parsed`` (a tosa Program), or None where its runs must stay in queue order
        (variables) or a slot is empty (nothing to bind)."""
        if any(op.op in _STATEFUL for block in parsed.blocks() for op in block.operators):
            return None
        inputs = [TensorSpec.of(t) for t in parsed.main.input_tensors]
        outputs = [TensorSpec.of(t) for t in parsed.main.output_tensors]
        if not outputs or any(spec.nbytes == 0 for spec in (*inputs, *outputs)):
            return None
        return cls(acc, context, program_id, inputs, outputs)

    # ---- the call -------------------------------------------------------------------------------------
    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        staging = self._take()
        try:
            event = self._begin(staging, inputs)
            failure = self._collect(staging, event, outputs, None)
        except DeadlineExpired:
            self._drop(staging)
            raise
        except BaseException:
            self._give_back(staging)
            raise
        self._give_back(staging)
        if failure is not None:
            raise failure

    def start(self, inputs: Sequence[np.ndarray]) -> _Started:
        """Post batch 1 and return: the inputs are on the device and the work is submitted."""
        staging = self._take()
        try:
            return _Started(self, staging, self._begin(staging, inputs))
        except DeadlineExpired:
            self._drop(staging)
            raise
        except BaseException:
            self._give_back(staging)
            raise

    def _give_back(self, staging: _Staging) -> None:
        with self._lock:
            self._free.append(staging)

    @staticmethod
    def _drop(staging: _Staging) -> None:
        """Never reuse ``staging`` (a batch on it went unanswered); ``release`` still frees its buffers."""
        staging.finished = None  # whether the batch destroyed it is unknown: not destroyed twice

    def _begin(self, staging: _Staging, inputs: Sequence[np.ndarray]) -> int:
        """Batch 1: the previous call's event destroyed, the inputs written, SUBMIT; returns the event."""
        acc = self.acc
        commands: list[tuple[Opcode, bytes, Any, memoryview | None]] = []
        data = [memoryview(value.reshape(-1).view(np.uint8)) for value in inputs]
        if any(view.nbytes > acc._write_chunk for view in data):
            self._release_finished(staging)  # segmented writes go ahead of the batch
        if staging.finished is not None:  # the previous call's event, terminal: released first
            commands.append((Opcode.DESTROY_EVENT, _object(staging.finished), b"", None))
        for buffer_id, view in zip(staging.buffers, data, strict=False):
            if view.nbytes > acc._write_chunk:
                acc._write(buffer_id, 0, view)
            else:
                prefix = staging.transfer(Opcode.WRITE_BUFFER, buffer_id, view.nbytes)
                commands.append((Opcode.WRITE_BUFFER, prefix, view, None))
        commands.append((Opcode.SUBMIT, self._submit_payload(staging), b"", None))
        answers = acc._batch(commands)
        if commands[0][0] is Opcode.DESTROY_EVENT:
            staging.finished = None
        submitted = answers[-1]
        if submitted.body is None:  # rejected: nothing retained
            _raise_first(answers, "direct run")
        event = submitted.body.event_id
        try:
            _raise_first(answers, "direct run")  # a failed write, or an indeterminate SUBMIT
        except BaseException:
            self._abandon(event)  # the event owns the staging set until the work ends
            raise
        return event

    def _submit_payload(self, staging: _Staging) -> bytes:
        """SUBMIT's payload for ``staging``: the same every call (no deadline), packed once."""
        key = (int(Opcode.SUBMIT), 0, 0)
        payload = staging.frames.get(key)
        if payload is None:
            assert self._queue is not None
            bindings = b"".join(
                WireBinding(buffer_id, 0, nbytes, slot, access).pack()
                for buffer_id, (slot, nbytes, access) in zip(staging.buffers, self._bindings, strict=True)
            )
            submit = SubmitRequest(self._queue, self.program, len(self._bindings), 0, 0).pack()
            payload = staging.frames[key] = submit + bindings
        return payload

    def _collect(
        self, staging: _Staging, event: int, outputs: Sequence[np.ndarray], timeout: float | None
    ) -> IronAccelError | None:
        """Poll until terminal and read the outputs (speculatively in the same batch while they are small).
        The terminal event is kept for the next call's first batch to destroy. Returns the call's error;
        raises DeadlineExpired when ``timeout`` seconds pass first (the run stays collectable)."""
        acc = self.acc
        end = None if timeout is None else time.monotonic() + timeout
        out_ids = staging.buffers[len(self.inputs) :]
        views = [memoryview(out.reshape(-1).view(np.uint8)) for out in outputs]
        small = sum(v.nbytes for v in views) <= SMALL_BYTES
        poll = (Opcode.POLL_EVENT, _object(event), b"", None)
        reads = [
            (Opcode.READ_BUFFER, staging.transfer(Opcode.READ_BUFFER, buffer_id, view.nbytes), b"", view)
            for buffer_id, view in zip(out_ids, views, strict=True)
        ]
        # Reads posted behind the poll count once the poll is terminal (terminal is final).
        batch = [poll, *reads] if small else [poll]
        delay = _POLL_FIRST
        while True:
            answers = acc._batch(batch)
            if answers[0].status != Status.OK:
                self._abandon(event)
                return error_for(answers[0].status, "POLL_EVENT")
            state = answers[0].body
            code = EventStateCode(state.state)
            if code is not EventStateCode.PENDING:
                break
            if end is not None and time.monotonic() + delay > end:
                raise DeadlineExpired(f"direct run still pending after {timeout} s")
            time.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)
        staging.finished = event
        if code is EventStateCode.FAILED:
            return error_for(state.error, "execution")
        if code is not EventStateCode.COMPLETE:
            return error_for(Status.DEADLINE_EXPIRED, "execution")
        if small:
            failed = [a for a in answers[1:] if a.status != Status.OK]
            return error_for(failed[0].status, "READ_BUFFER") if failed else None
        try:
            for buffer_id, view in zip(out_ids, views, strict=True):
                acc._read(buffer_id, 0, view)
        except IronAccelError as exc:
            return exc
        return None

    def _release_finished(self, staging: _Staging) -> None:
        if staging.finished is not None:
            event, staging.finished = staging.finished, None
            answer = self.acc._command(Opcode.DESTROY_EVENT, _object(event))
            if answer.status != Status.OK:
                raise error_for(answer.status, "DESTROY_EVENT")

    def _abandon(self, event: int) -> None:
        """A call that failed after its SUBMIT: let the work end and release its event (so the staging
        set can be reused); a device that cannot say so is lost."""
        delay = _POLL_FIRST
        while True:
            poll, destroy = self.acc._batch(
                [
                    (Opcode.POLL_EVENT, ObjectPayload(event).pack(), b"", None),
                    (Opcode.DESTROY_EVENT, ObjectPayload(event).pack(), b"", None),
                ]
            )
            if destroy.status == Status.OK:
                return
            if poll.status != Status.OK:
                raise DeviceLost(f"a direct run's event cannot be released: the device answered {poll.status}")
            time.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)

    # ---- staging sets -----------------------------------------------------------------------------------
    def _take(self) -> _Staging:
        with self._lock:
            if self._free:
                return self._free.pop()
        with self._making:  # one thread at a time makes a set (and, first, the queue)
            make_queue = self._queue is None
            commands: list[tuple[Opcode, bytes, Any, memoryview | None]] = []
            if make_queue:
                commands.append((Opcode.CREATE_QUEUE, CreateQueueRequest(self.context).pack(), b"", None))
            for spec in (*self.inputs, *self.outputs):
                body = AllocateBufferRequest(self.context, spec.nbytes, 64, int(MemoryDomain.SHARED), usage=_USAGE)
                commands.append((Opcode.ALLOCATE_BUFFER, body.pack(), b"", None))
            answers = self.acc._batch(commands)
            made = [(opcode, a.body.object_id) for (opcode, *_), a in zip(commands, answers, strict=True) if a.ok]
            if len(made) != len(answers):
                self._destroy(made)
                failed = next(a for a in answers if not a.ok)
                raise error_for(failed.status, "staging a direct run")
            if make_queue:
                self._queue = made.pop(0)[1]
            staging = _Staging([object_id for _, object_id in made])
            with self._lock:
                self._all.append(staging)
            return staging

    def release(self) -> None:
        """Give every staging set and the queue back to the device (before the program is unloaded; no
        call runs)."""
        with self._lock:
            sets, self._all, self._free = self._all, [], []
            queue, self._queue = self._queue, None
        for staging in sets:
            self._release_finished(staging)
            self._destroy([(Opcode.ALLOCATE_BUFFER, b) for b in staging.buffers])
        if queue:
            self._destroy([(Opcode.CREATE_QUEUE, queue)])

    def _destroy(self, made: Sequence[tuple[Opcode, int]]) -> None:
        release: dict[Opcode, Opcode] = {
            Opcode.ALLOCATE_BUFFER: Opcode.FREE_BUFFER,
            Opcode.CREATE_QUEUE: Opcode.DESTROY_QUEUE,
        }
        if made:
            self.acc._batch([(release[opcode], ObjectPayload(oid).pack(), b"", None) for opcode, oid in made])


def _raise_first(answers: Sequence[Any], what: str) -> None:
    for answer in answers:
        if answer.status != Status.OK:
            raise error_for(answer.status, what)


__all__ = ["SMALL_BYTES", "DirectRunner"]
