"""The Python floor of one virtio-accel command: both ends of the ring in one thread, nothing between.

    .venv/bin/python benchmarks/virtio/floor_virtio.py [--device cpu] [-n 20000] [--repeats 5]

The guest's encode, the ring (post, pop, complete, reap), the device's decode, dispatch and handler and
the guest's decode run back to back on one thread over one in-memory region: no eventfd, no wake-up,
no lock taken by another thread, no second process. What it measures is what a round trip costs when
nothing waits: the part that only compiled code (ADR 0048) or fewer commands can remove. Each stage
is the median over ``-n`` commands of one kind, repeated; the table prints the median repeat.
Commands: GET_DEVICE_INFO; WRITE_BUFFER of 16 bytes; READ_BUFFER of 16 bytes; POLL_EVENT of a
completed event (the four that make up a direct call's two batches, with SUBMIT, measured apart as it
hands work to the backend). Prints only.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

from ironaccel.runtime.backends import factory
from ironaccel.virtio import DeviceEngine
from ironaccel.virtio.virtqueue import (
    F_EVENT_IDX,
    F_INDIRECT_DESC,
    GuestMemory,
    MemoryRegion,
    RingAddresses,
    RingLayout,
)
from ironaccel.virtio.virtqueue_device import DeviceQueue
from ironaccel.virtio.virtqueue_driver import DriverQueue, IndirectArea
from ironaccel.virtio.wire_constants import HEADER_BYTES, MemoryDomain, Opcode, Status
from ironaccel.virtio.wire_decode_response import decode_response
from ironaccel.virtio.wire_structs import (
    AllocateBufferRequest,
    CreateContextRequest,
    ObjectPayload,
    RequestHeader,
    TransferBufferRequest,
)

BASE = 0x1_0000_0000
MEM = 1 << 20
REQ, RESP = 0x40000, 0x80000  # where requests and answers go (one command at a time)
HEADER = RequestHeader._STRUCT
STAGES = ("guest encode + post", "ring read (pop)", "decode + dispatch + handler", "complete", "guest reap + decode")


class Floor:
    def __init__(self, device: str) -> None:
        self.buf = bytearray(MEM)
        view = memoryview(self.buf)
        memory = GuestMemory([MemoryRegion(BASE, MEM, view)])
        addrs = RingAddresses.contiguous(BASE, RingLayout.of(256))
        features = F_EVENT_IDX | F_INDIRECT_DESC
        self.driver = DriverQueue(memory, 256, addrs, features=features, indirect=IndirectArea(BASE + 0x10000, 4))
        self.device = DeviceQueue(memory, 256, addrs, features=features)
        self.view = view
        self.session = DeviceEngine(factory(device)()).connect()
        self.rid = 0

    def one(
        self, opcode: int, body: bytes, capacity: int, read: int | None, laps: list[list[int]], expect: int = Status.OK
    ) -> None:
        clock = time.perf_counter_ns
        t0 = clock()
        self.rid += 1
        frame = HEADER.pack(opcode, 0, len(body), self.rid) + body
        self.view[REQ : REQ + len(frame)] = frame
        self.driver.post([(BASE + REQ, len(frame))], [(BASE + RESP, capacity)])
        self.driver.kick_needed()
        t1 = clock()
        chain = self.device.pop()
        assert chain is not None
        t2 = clock()
        used = self.session.process_into(chain.gather(), chain.writable[0])
        t3 = clock()
        self.device.complete(chain.head, used)
        self.device.needs_call()
        t4 = clock()
        ((_, length),) = self.driver.reap()
        answer = decode_response(self.view[RESP : RESP + length], opcode, request_id=self.rid, read_bytes=read)
        t5 = clock()
        if answer.status != expect:
            raise SystemExit(f"{Opcode(opcode).name} answered {answer.status}")
        for lap, (a, b) in zip(laps, ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)), strict=True):
            lap.append(b - a)

    def setup(self) -> tuple[int, int]:
        """A context and a 16-byte buffer; the id of a completed event is not needed (see poll)."""
        laps: list[list[int]] = [[] for _ in STAGES]
        ctx = self._object(Opcode.CREATE_CONTEXT, CreateContextRequest(0).pack(), laps)
        usage = 0xF
        alloc = AllocateBufferRequest(ctx, 16, 64, int(MemoryDomain.SHARED), usage=usage).pack()
        return ctx, self._object(Opcode.ALLOCATE_BUFFER, alloc, laps)

    def _object(self, opcode: int, body: bytes, laps: list[list[int]]) -> int:
        self.rid += 1
        frame = HEADER.pack(opcode, 0, len(body), self.rid) + body
        reply = self.session.process(frame, 4096)
        answer = decode_response(reply, opcode, request_id=self.rid)
        if answer.status != Status.OK:
            raise SystemExit(f"{Opcode(opcode).name} answered {answer.status}")
        return answer.body.object_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("-n", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    floor = Floor(args.device)
    _, buffer = floor.setup()
    transfer = TransferBufferRequest(buffer, 0, 16).pack()
    data = bytes(range(16))
    unknown, no = ObjectPayload(1 << 40).pack(), Status.PERMISSION_DENIED
    commands: dict[str, Callable[[list[list[int]]], None]] = {
        "GET_DEVICE_INFO": lambda laps: floor.one(Opcode.GET_DEVICE_INFO, b"", HEADER_BYTES + 76, None, laps),
        "WRITE_BUFFER 16 B": lambda laps: floor.one(Opcode.WRITE_BUFFER, transfer + data, HEADER_BYTES, None, laps),
        "READ_BUFFER 16 B": lambda laps: floor.one(Opcode.READ_BUFFER, transfer, HEADER_BYTES + 16, 16, laps),
        # An id never issued: decoded, dispatched and refused by the id table (a POLL but the event's read).
        "POLL_EVENT (unknown id)": lambda laps: floor.one(Opcode.POLL_EVENT, unknown, HEADER_BYTES + 8, None, laps, no),
    }
    load = os.getloadavg()[0]
    print(f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, device {args.device}")
    print(f"\n| command | {' | '.join(STAGES)} | total |\n|---|{'---:|' * (len(STAGES) + 1)}")
    for name, run in commands.items():
        repeats = []
        for _ in range(args.repeats):
            laps: list[list[int]] = [[] for _ in STAGES]
            for _ in range(args.n):
                run(laps)
            medians = [statistics.median(lap) / 1e3 for lap in laps]
            repeats.append((sum(medians), medians))
        total, medians = sorted(repeats)[len(repeats) // 2]
        print(f"| {name} | {' | '.join(f'{m:.1f}' for m in medians)} | {total:.1f} |")
    after = os.getloadavg()[0]
    print(f"\nus, median of {args.n} commands, the median of {args.repeats} repeats; load {load:.2f} / {after:.2f}")


if __name__ == "__main__":
    main()
