"""Test support for the virtio device engine: a guest that speaks the wire codec to a session, a CPU
accelerator whose timing and faults a test controls, and the small TOSA programs they run."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.core.errors import DeadlineExpired, DeviceLost, OutOfMemory
from ironaccel.runtime import TOSA_FORMAT, BoundRange, EventCore, SubmitIndeterminate
from ironaccel.tosa import Block, DType, Op, Operator, Program, Region, Tensor, write
from ironaccel.tosa.target import Target
from ironaccel.virtio import DeviceEngine, GuestSession
from ironaccel.virtio import wire as w
from ironaccel.virtio.daemon import for_engine

FP_TARGET = Target.of(["pro-fp"]).encode()
ALL_USAGE = 0x1F


def add_program(n: int = 4) -> bytes:
    """c = a + b over fp32[n]: slots 0 and 1 read, slot 2 written."""
    tensors = [Tensor(x, (n,), DType.FP32) for x in "abc"]
    block = Block("main", [Operator(Op.ADD, ("a", "b"), ("c",))], tensors, ("a", "b"), ("c",))
    return write(Program((Region("main", (block,)),)))


def const_program(values: Sequence[float]) -> bytes:
    """No input; one fp32 output slot filled with ``values``."""
    data = np.asarray(values, dtype=np.float32)
    block = Block("main", [Operator(Op.CONST, (), ("c",))], [Tensor("c", data.shape, DType.FP32, data)], (), ("c",))
    return write(Program((Region("main", (block,)),)))


class Guest:
    """Commands over the wire to one session, with the bookkeeping a test needs."""

    def __init__(self, session: GuestSession, capacity: int = 1 << 20) -> None:
        self.session = session
        self.capacity = capacity
        self._rid = itertools.count(1)

    def raw(self, request: w.Request, capacity: int | None = None) -> bytes:
        return bytes(self.session.process(request.encode(), self.capacity if capacity is None else capacity))

    def call(self, opcode: w.Opcode, body: Any = None, capacity: int | None = None) -> w.Response:
        request = w.Request(opcode, next(self._rid), body)
        frame = self.raw(request, capacity)
        assert frame, f"{opcode.name}: no response"
        read = body.bytes if opcode == w.Opcode.READ_BUFFER else None
        response = w.decode_response(frame, opcode, request_id=request.request_id)
        if response.ok and read is not None:
            assert len(response.body) == read
        return response

    def status(self, opcode: w.Opcode, body: Any = None) -> str:
        return w.status_name(self.call(opcode, body).status)

    def ok(self, opcode: w.Opcode, body: Any = None) -> Any:
        response = self.call(opcode, body)
        assert response.ok, f"{opcode.name}: {w.status_name(response.status)}"
        return response.body

    # conveniences returning ids
    def context(self) -> int:
        return self.ok(w.Opcode.CREATE_CONTEXT, w.CreateContextRequest()).object_id

    def buffer(self, ctx: int, size: int = 16, usage: int = ALL_USAGE, domain: int = 3, alignment: int = 64) -> int:
        body = w.AllocateBufferRequest(ctx, size, alignment, domain, usage=usage)
        return self.ok(w.Opcode.ALLOCATE_BUFFER, body).object_id

    def program(self, ctx: int, artifact: bytes | None = None, resident: int = 1 << 20) -> int:
        body = w.LoadProgram.of(ctx, TOSA_FORMAT, FP_TARGET, artifact or add_program(), resident)
        return self.ok(w.Opcode.LOAD_PROGRAM, body).object_id

    def queue(self, ctx: int) -> int:
        return self.ok(w.Opcode.CREATE_QUEUE, w.CreateQueueRequest(ctx)).object_id

    def write(self, buf: int, data: bytes, offset: int = 0) -> str:
        return self.status(w.Opcode.WRITE_BUFFER, w.WriteBuffer.of(buf, offset, data))

    def read(self, buf: int, size: int, offset: int = 0) -> bytes:
        return bytes(self.ok(w.Opcode.READ_BUFFER, w.TransferBufferRequest(buf, offset, size)))

    def submit(self, queue: int, program: int, bufs: Sequence[int], size: int = 16, timeout_ns: int = 0) -> w.Response:
        n = len(bufs)
        bindings = [w.WireBinding(b, 0, size, slot, 1 if slot < n - 1 else 2) for slot, b in enumerate(bufs)]
        return self.call(w.Opcode.SUBMIT, w.Submit.of(queue, program, bindings, timeout_ns))

    def poll(self, event: int) -> w.WireEventState:
        return self.ok(w.Opcode.POLL_EVENT, w.ObjectPayload(event))

    def wait(self, event: int, tries: int = 2000) -> w.WireEventState:
        import time

        for _ in range(tries):
            state = self.poll(event)
            if state.state != w.EventStateCode.PENDING:
                return state
            time.sleep(0.005)
        raise AssertionError(f"event {event:#x} still pending")

    def add_setup(self) -> tuple[int, list[int], int, int]:
        """A context with three 16-byte buffers, the add program and a queue; inputs 1..4 and 10."""
        ctx = self.context()
        bufs = [self.buffer(ctx) for _ in range(3)]
        assert self.write(bufs[0], np.arange(1, 5, dtype=np.float32).tobytes()) == "OK"
        assert self.write(bufs[1], np.full(4, 10, np.float32).tobytes()) == "OK"
        return ctx, bufs, self.program(ctx), self.queue(ctx)


class ControlledCpu(CpuAccelerator):
    """The CPU backend with switches a test flips: hold submitted work, finish it during SUBMIT, reject
    finite timeouts, fail allocations, report submissions indeterminate (their work parked for good),
    lose the device on the next poll. Held or parked work can be let go later."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.finish_during_submit = False
        self.reject_finite_timeouts = False
        self.start_held = False  # held work counts as started (cancellation then loses)
        self.fail_allocations = 0
        self.indeterminate_submits = 0
        self.lose_on_poll = False
        self.held: list[tuple[Any, Any, Sequence[BoundRange], EventCore]] = []
        self.parked: list[tuple[Any, Any, Sequence[BoundRange], EventCore]] = []

    def _allocate(self, context: Any, desc: Any) -> Any:
        if self.fail_allocations:
            self.fail_allocations -= 1
            raise OutOfMemory("injected allocation failure")
        return super()._allocate(context, desc)

    def _submit(self, queue: Any, program: Any, ranges: Sequence[BoundRange], event: EventCore) -> None:
        if self.reject_finite_timeouts and event.deadline is not None:
            raise DeadlineExpired("finite timeouts are not supported")
        job = (queue, program, ranges, event)
        if self.indeterminate_submits:
            self.indeterminate_submits -= 1
            self.parked.append(job)
            raise SubmitIndeterminate(DeadlineExpired("admission deadline passed, acceptance unknown"), None)
        if self.hold:
            if self.start_held:
                event.try_start()
            self.held.append(job)
            return
        super()._submit(queue, program, ranges, event)
        if self.finish_during_submit:
            event.wait(30)

    def release(self, jobs: list) -> None:
        """Run held or parked work now (work marked started is just completed)."""
        while jobs:
            queue, program, ranges, event = jobs.pop(0)
            if event.started:
                event.complete()
            else:
                super()._submit(queue, program, ranges, event)

    def poll_event(self, event: Any) -> Any:
        if self.lose_on_poll:
            self._guard(self._lose, "the device stopped answering")
        return super().poll_event(event)

    @staticmethod
    def _lose(reason: str) -> None:
        raise DeviceLost(reason)


# Threads the process starts on first need and keeps for its life: the runtime's reaper (started when the cyclic
# collector finds a dropped user-API object, an earlier test's garbage included) and the CPU kernels' helpers. One
# started during a test is no thread a daemon or a guest left behind.
PROCESS_THREADS = ("ironaccel-reaper", "ironaccel-cpu-helper-")


def thread_count() -> int:
    """Threads alive now, less the process's own (:data:`PROCESS_THREADS`)."""
    return sum(1 for t in threading.enumerate() if not t.name.startswith(PROCESS_THREADS))


ZERO = {"context": 0, "buffer": 0, "program": 0, "queue": 0, "event": 0, "prepared": 0, "gate": 0, "buffer_bytes": 0}


class Host:
    """A daemon on a thread of this process serving a CPU accelerator whose books the test can read.
    ``engine_options`` go to the DeviceEngine (quota, max_bytes, close_wait...)."""

    def __init__(self, path: str, **engine_options: Any) -> None:
        self.accelerator = CpuAccelerator()
        self.engine = DeviceEngine(self.accelerator, **engine_options)
        self.daemon = for_engine(path, self.engine)
        self.daemon.listen()
        self.thread = threading.Thread(target=self.daemon.serve, daemon=True)
        self.thread.start()
        self.path = path

    def idle(self) -> bool:
        """No guest connected and nothing of theirs left on the accelerator."""
        self.engine.reclaim()
        return self.daemon.guests == 0 and self.accelerator.live_resources() == ZERO

    def settled(self, timeout: float = 10.0) -> float | None:
        """Seconds until :meth:`idle`, or None when ``timeout`` passed first."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.idle():
                return time.monotonic() - start
            time.sleep(0.005)
        return None

    def stop(self) -> None:
        self.daemon.stop()
        self.thread.join(30)
