"""Recordings bound to the caller's buffers (backends/vulkan/direct.py): reused for the same buffers,
never used where they could change a result, and bounded.

Every test checks values against numpy, with the Khronos validation layer's messages checked by the
fixtures and nothing left live at the end.
"""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.backends import vulkan
from ironaccel.backends.vulkan import direct
from ironaccel.conformance import semantic
from ironaccel.core.errors import Unsupported
from ironaccel.core.settings import Settings
from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, EventState, MemoryDomain
from ironaccel.tosa import ProgramBuilder, write
from vulkan_fixtures import clean  # noqa: F401 - autouse: no layer messages, nothing left live

IO = semantic.IO
N = 256


@pytest.fixture
def acc():
    try:
        accelerator = vulkan.open_accelerator("llvmpipe", settings=Settings())
    except Unsupported as exc:
        pytest.skip(f"lavapipe unavailable: {exc}")
    yield accelerator
    leaks = {k: v for k, v in accelerator.live_resources().items() if v}
    accelerator.close()
    assert not leaks, leaks


class Session:
    """A context, a queue and a loaded program on ``acc``; buffers made here are freed at close."""

    def __init__(self, acc, artifact: bytes) -> None:
        self.acc = acc
        self.ctx = acc.create_context()
        self.queue = acc.create_queue(self.ctx)
        self.program = acc.load_program(self.ctx, ArtifactRef(artifact, 1 << 24))
        self.buffers = []

    @property
    def recordings(self) -> direct.DirectRecordings:
        return self.acc._record(self.program, type(self.program)).native.direct

    def buffer(self, size: int):
        buf = self.acc.allocate_buffer(self.ctx, BufferDesc(size, MemoryDomain.SHARED, IO))
        self.buffers.append(buf)
        return buf

    def run(self, bindings: list[Binding]) -> None:
        event = self.acc.submit(self.queue, self.program, bindings)
        assert self.acc.wait(event, 60) is EventState.COMPLETE
        self.acc.destroy_event(event)

    def read(self, buf, offset: int = 0, count: int = N) -> np.ndarray:
        return np.frombuffer(self.acc.read_buffer(buf, offset, 4 * count), np.float32)

    def close(self) -> None:
        for buf in self.buffers:
            self.acc.free_buffer(buf)
        self.acc.unload_program(self.program)
        self.acc.destroy_queue(self.queue)
        self.acc.destroy_context(self.ctx)


def test_the_same_buffers_replay_one_recording_with_new_values(acc):
    s = Session(acc, semantic.add_program(N))
    a, b, c = s.buffer(4 * N), s.buffer(4 * N), s.buffer(4 * N)
    for k in range(5):
        acc.write_buffer(a, 0, np.full(N, k, np.float32))
        acc.write_buffer(b, 0, np.arange(N, dtype=np.float32))
        s.run([Binding(0, a), Binding(1, b), Binding(2, c)])
        np.testing.assert_array_equal(s.read(c), np.arange(N) + k)
    assert len(s.recordings.entries) == 1
    s.close()


def test_ranges_the_kernels_cannot_address_exactly_use_the_copying_path(acc):
    s = Session(acc, semantic.add_program(N))
    big, other, out = s.buffer(4 * N + 4), s.buffer(4 * N), s.buffer(4 * N)
    x = np.arange(N, dtype=np.float32)
    acc.write_buffer(big, 4, x)  # input 0 at an offset below the descriptor alignment
    acc.write_buffer(other, 0, np.full(N, 0.5, np.float32))
    s.run([Binding(0, big, 4, 4 * N), Binding(1, other), Binding(2, out)])
    assert len(s.recordings.entries) == 0
    np.testing.assert_array_equal(s.read(out), x + np.float32(0.5))
    s.close()


def test_an_output_over_an_input_runs_as_if_inputs_were_read_first(acc):
    s = Session(acc, semantic.add_program(N))
    buf = s.buffer(8 * N)
    acc.write_buffer(buf, 0, np.arange(2 * N, dtype=np.float32))
    s.run([Binding(0, buf, 0, 4 * N), Binding(1, buf, 4 * N, 4 * N), Binding(2, buf, 0, 4 * N)])
    assert len(s.recordings.entries) == 0
    np.testing.assert_array_equal(s.read(buf), np.arange(N) + np.arange(N, 2 * N))
    s.close()


def test_a_graph_that_copies_an_input_to_an_output_copies_between_the_callers_buffers(acc):
    b = ProgramBuilder()
    x = b.input("x", (4, N // 4), "fp32")
    b.output(b.reshape(x, (N,)))  # a RESHAPE of a graph input to a graph output: one copy step
    s = Session(acc, write(b.build()))
    src, dst = s.buffer(4 * N), s.buffer(4 * N)
    for k in range(2):
        acc.write_buffer(src, 0, np.arange(N, dtype=np.float32) * k)
        s.run([Binding(0, src), Binding(1, dst)])
        np.testing.assert_array_equal(s.read(dst), np.arange(N) * k)
    assert len(s.recordings.entries) == 1
    s.close()


def test_recordings_are_bounded_and_the_oldest_idle_one_goes(acc):
    s = Session(acc, semantic.add_program(N))
    sets = [(s.buffer(4 * N), s.buffer(4 * N), s.buffer(4 * N)) for _ in range(direct.ENTRIES + 3)]
    for k, (a, b, c) in enumerate(sets):
        acc.write_buffer(a, 0, np.full(N, k, np.float32))
        acc.write_buffer(b, 0, np.ones(N, np.float32))
        s.run([Binding(0, a), Binding(1, b), Binding(2, c)])
        np.testing.assert_array_equal(s.read(c), np.full(N, k + 1))
    entries = s.recordings.entries
    assert len(entries) == direct.ENTRIES
    first = acc._record(sets[0][0], type(sets[0][0])).native
    assert first not in {key[0][1] for key in entries}  # the first set's recording was evicted
    s.close()


def test_many_submissions_in_flight_with_one_recording_each_see_their_own_inputs(acc):
    s = Session(acc, semantic.add_program(N))
    a, b, c = s.buffer(4 * N), s.buffer(4 * N), s.buffer(4 * N)
    acc.write_buffer(a, 0, np.ones(N, np.float32))
    acc.write_buffer(b, 0, np.ones(N, np.float32))
    # c = a + b three times in flight, then c = c + b (the output of one feeds the next submission).
    events = [acc.submit(s.queue, s.program, [Binding(0, a), Binding(1, b), Binding(2, c)]) for _ in range(3)]
    events += [acc.submit(s.queue, s.program, [Binding(0, c), Binding(1, b), Binding(2, a)]) for _ in range(1)]
    for event in events:
        assert acc.wait(event, 60) is EventState.COMPLETE
        acc.destroy_event(event)
    np.testing.assert_array_equal(s.read(a), np.full(N, 3))
    assert len(s.recordings.entries) == 2
    s.close()


def test_user_api_calls_reuse_buffers_and_one_recording():
    import ironaccel

    try:
        dev = ironaccel.open("vulkan:llvmpipe")
    except Unsupported as exc:
        pytest.skip(f"lavapipe unavailable: {exc}")
    with dev:
        exe = dev.compile(semantic.add_program(N))
        x = np.arange(N, dtype=np.float32)
        for k in range(4):
            np.testing.assert_array_equal(exe(x, np.full(N, k, np.float32))[0], x + k)
        # One buffer set and one submission prepared on it (its recording is the launcher's own, not cached).
        live = dev.accelerator.live_resources()
        assert (live["buffer"], live["prepared"]) == (3, 1), live
        native = dev.accelerator._record(exe.program, type(exe.program)).native
        assert len(native.direct.entries) == 0
