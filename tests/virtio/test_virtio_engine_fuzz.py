"""Whole hostile sessions against the device engine: the engine never raises, never answers more than the
response area holds, echoes the request id, never lets one guest change another's objects, and leaves
nothing behind once the guests disconnect.

An attacker session sends random commands: every opcode, with ids drawn from its own objects, the
victim's objects, zero, random values and its own ids with a bit flipped; bodies near and past every
bound; a tenth of the frames mutated at the byte level; response areas from 0 bytes up; an occasional
device reset. Meanwhile the victim's program result must survive untouched.

The default run is bounded (a few thousand commands). ``make fuzz-virtio`` runs IRONACCEL_FUZZ_EXAMPLES
(default 10^6) commands.
"""

from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest
from test_virtio_wire_fuzz import mutate

from ironaccel.runtime import TOSA_FORMAT
from ironaccel.runtime.backends import factory
from ironaccel.virtio import DeviceEngine, GuestQuota
from ironaccel.virtio import wire as w
from virtio_guest import FP_TARGET, Guest, add_program

LONG_COMMANDS = int(os.environ.get("IRONACCEL_FUZZ_EXAMPLES", "0") or 0) or 1_000_000
SHORT_COMMANDS = 3_000
COMMANDS_PER_SESSION = 400
QUOTA = GuestQuota(max_contexts=4, max_queues=4, max_buffers=64, max_programs=4, max_events=32)
ZERO = {"context": 0, "buffer": 0, "program": 0, "queue": 0, "event": 0, "prepared": 0, "gate": 0, "buffer_bytes": 0}
ADD = add_program()
U64 = (1 << 64) - 1


CREATES = {
    w.Opcode.CREATE_CONTEXT: "context",
    w.Opcode.ALLOCATE_BUFFER: "buffer",
    w.Opcode.LOAD_PROGRAM: "program",
    w.Opcode.CREATE_QUEUE: "queue",
    w.Opcode.SUBMIT: "event",
}
CAPACITIES = [0, 15, 16, 23, 24, 92] + [4096] * 10 + [1 << 20] * 4
# Creation and submission more often than destruction, so that sessions grow deep enough to run work.
OPCODES = [
    *w.Opcode,
    w.Opcode.CREATE_CONTEXT,
    w.Opcode.ALLOCATE_BUFFER,
    w.Opcode.ALLOCATE_BUFFER,
    w.Opcode.LOAD_PROGRAM,
    w.Opcode.CREATE_QUEUE,
    w.Opcode.SUBMIT,
    w.Opcode.SUBMIT,
    w.Opcode.SUBMIT,
    w.Opcode.POLL_EVENT,
    w.Opcode.WRITE_BUFFER,
    w.Opcode.READ_BUFFER,
]


class Attacker:
    """Sends mostly well-typed commands (ids of the right kind from its own objects) so that deep paths
    run, mixed with ids it must not use and malformed values."""

    def __init__(self, rng: random.Random, guest: Guest, victim_ids: list[int]) -> None:
        self.rng = rng
        self.guest = guest
        self.own: dict[str, list[int]] = {kind: [] for kind in CREATES.values()}
        self.context_of: dict[int, int] = {}  # object -> the context id it was created in
        self.victim = victim_ids
        self.rid = 0

    def pick(self, kind: str) -> int:
        rng, own = self.rng, self.own[kind]
        r = rng.random()
        if own and r < 0.7:
            return rng.choice(own)
        anything = [i for ids in self.own.values() for i in ids]
        if anything and r < 0.78:
            return rng.choice(anything)
        if r < 0.86:
            return rng.choice(self.victim)
        if r < 0.9:
            return 0
        if anything and r < 0.95:
            return rng.choice(anything) ^ (1 << rng.randrange(64))
        return rng.randrange(1, U64)

    def body(self, op: w.Opcode) -> object:
        rng, pick = self.rng, self.pick
        if op == w.Opcode.GET_DEVICE_INFO:
            return None
        if op == w.Opcode.CREATE_CONTEXT:
            return w.CreateContextRequest(rng.choice([0] * 9 + [1]))
        if op == w.Opcode.ALLOCATE_BUFFER:
            size = rng.choice([16] * 6 + [1, 64, 4096, rng.randrange(1, 1 << 20), 1 << 40, U64])
            alignment = rng.choice([64] * 6 + [1, 4, 4096, 1 << 20, 3])
            domain = rng.choice([3] * 6 + [1, 2, 0, 4])
            usage = 0x1F if rng.random() < 0.7 else rng.randrange(64)
            return w.AllocateBufferRequest(pick("context"), size, alignment, domain, usage=usage)
        if op == w.Opcode.WRITE_BUFFER:
            data = rng.randbytes(rng.choice([1, 4, 16, 16, 64]))
            return w.WriteBuffer.of(pick("buffer"), rng.choice([0, 0, 0, 4, 12, 60, U64 - 64]), data)
        if op == w.Opcode.READ_BUFFER:
            offset, size = rng.choice([0, 0, 8, 15, 4090]), rng.choice([1, 8, 16, 16, 64, 5000])
            return w.TransferBufferRequest(pick("buffer"), offset, size)
        if op == w.Opcode.LOAD_PROGRAM:
            artifact = ADD if rng.random() < 0.7 else mutate(rng, [ADD])[:4096] or b"x"
            fmt = rng.choice([TOSA_FORMAT] * 6 + [0x4B4D4156, 1])
            target = FP_TARGET if rng.random() < 0.8 else tuple(rng.randrange(4) for _ in range(12))
            resident = rng.choice([1 << 20] * 6 + [1 << 16, 64, 1 << 40])
            return w.LoadProgram.of(pick("context"), fmt, target, artifact, resident)
        if op == w.Opcode.CREATE_QUEUE:
            return w.CreateQueueRequest(pick("context"), rng.choice([0] * 9 + [2]))
        if op == w.Opcode.SUBMIT:
            coherent = self.coherent()
            if coherent is not None and rng.random() < 0.7:  # shaped for the add program in one context
                queue, program, buffers = coherent
                bindings = [w.WireBinding(rng.choice(buffers), 0, 16, slot, 1 if slot < 2 else 2) for slot in range(3)]
                return w.Submit.of(queue, program, bindings, rng.choice([0, 0, 0, 1, 10**9]))
            if rng.random() < 0.5:
                bindings = [w.WireBinding(pick("buffer"), 0, 16, slot, 1 if slot < 2 else 2) for slot in range(3)]
            else:
                bindings = [
                    w.WireBinding(
                        pick("buffer"), rng.choice([0, 4]), rng.choice([16, 8, 32]), slot, rng.randrange(1, 4)
                    )
                    for slot in rng.sample(range(4), rng.randint(1, 4))
                ]
            return w.Submit.of(pick("queue"), pick("program"), bindings, rng.choice([0, 0, 0, 1, 10**9]))
        if op in (w.Opcode.DESTROY_CONTEXT,):
            return w.ObjectPayload(pick("context"))
        if op == w.Opcode.FREE_BUFFER:
            return w.ObjectPayload(pick("buffer"))
        if op == w.Opcode.UNLOAD_PROGRAM:
            return w.ObjectPayload(pick("program"))
        if op == w.Opcode.DESTROY_QUEUE:
            return w.ObjectPayload(pick("queue"))
        return w.ObjectPayload(pick("event"))

    def coherent(self) -> tuple[int, int, list[int]] | None:
        """A queue, a program and buffers of one of the attacker's contexts, if it has them."""
        by_context: dict[int, dict[str, list[int]]] = {}
        for kind in ("queue", "program", "buffer"):
            for oid in self.own[kind]:
                by_context.setdefault(self.context_of.get(oid, 0), {}).setdefault(kind, []).append(oid)
        usable = [k for k in by_context.values() if len(k) == 3]
        if not usable:
            return None
        kinds = self.rng.choice(usable)
        return self.rng.choice(kinds["queue"]), self.rng.choice(kinds["program"]), kinds["buffer"]

    def command(self) -> None:
        rng = self.rng
        op = rng.choice(OPCODES)
        self.rid += 1
        frame = w.Request(op, self.rid, self.body(op)).encode()
        if rng.random() < 0.1:
            frame = mutate(rng, [frame])
        capacity = rng.choice(CAPACITIES)
        out = self.guest.session.process(frame, capacity)
        assert len(out) <= capacity
        if not out:
            return
        header = w.ResponseHeader.unpack(out)
        assert w.Status(header.status) is not None and header.flags == 0
        assert len(out) == 16 + header.payload_bytes
        assert header.request_id == int.from_bytes(frame[8:16], "little")
        if header.status == w.Status.OK or len(out) > 16:
            opcode = int.from_bytes(frame[:2], "little")
            response = w.decode_response(out, opcode)
            object_id = getattr(response.body, "object_id", None) or getattr(response.body, "event_id", None)
            if object_id:
                assert object_id not in self.victim
                self.own[CREATES[w.Opcode(opcode)]].append(object_id)
                body = w.decode_request(frame).body
                parent = getattr(body, "context_id", None) or getattr(getattr(body, "prefix", None), "context_id", None)
                if parent is not None:
                    self.context_of[object_id] = parent

    def forget(self) -> None:
        for ids in self.own.values():
            ids.clear()
        self.context_of.clear()


def _victim(guest: Guest) -> tuple[list[int], int]:
    ctx, bufs, prog, queue = guest.add_setup()
    event = guest.submit(queue, prog, bufs).body.event_id
    guest.wait(event)
    return [ctx, *bufs, prog, queue, event], bufs[2]


def run_sessions(commands: int, seed: int) -> int:
    rng = random.Random(seed)
    engine = DeviceEngine(factory("cpu")(), quota=QUOTA, close_wait=10)
    victim = Guest(engine.connect())
    victim_ids, result = _victim(victim)
    expected = np.arange(11, 15, dtype=np.float32).tobytes()
    done = 0
    while done < commands:
        attacker = Attacker(rng, Guest(engine.connect()), victim_ids)
        for _ in range(min(COMMANDS_PER_SESSION, commands - done)):
            attacker.command()
            done += 1
            if rng.random() < 0.005:
                attacker.guest.session.reset()
                attacker.forget()
        attacker.guest.session.close()
        assert victim.read(result, 16) == expected  # the victim's objects are untouched
    victim.session.close()
    engine.reclaim()
    assert engine.accelerator.live_resources() == ZERO
    assert engine.orphaned().total == 0 and engine.lost is None
    return done


def test_hostile_sessions_bounded():
    assert run_sessions(SHORT_COMMANDS, seed=7) == SHORT_COMMANDS


@pytest.mark.slow
def test_hostile_sessions_long():
    start = time.perf_counter()
    done = run_sessions(LONG_COMMANDS, seed=2026)
    seconds = time.perf_counter() - start
    print(f"\nfuzz-virtio engine sessions: {done} commands, {seconds:.1f} s ({done / seconds:,.0f}/s)")
    assert done >= LONG_COMMANDS
