"""The repeated paths of an execution device leave nothing for Python's cyclic collector.

In a process that also holds a framework's objects, one full collection costs tens of milliseconds (up to
139 ms with torch loaded, on the machine that runs the Vulkan benchmark), and it starts once
enough container objects have survived. So a submission, a prepared launch or a user-API call that left a
reference cycle, or kept a growing record, would bring those pauses to whoever runs it in a loop. With
the collector off, each path runs many times; a full collection must then find nothing unreachable, and
the tracked objects must not grow with the count. (They may differ by a few: a collection stops tracking
tuples and dicts that hold only atomic values, and the next mutation or replacement tracks them again.)
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from ironaccel.runtime import Binding, BufferDesc, BufferUsage, MemoryDomain
from ironaccel.tosa import ProgramBuilder
from vulkan_fixtures import DEVICE as VULKAN
from vulkan_fixtures import clean, close_without_leaks, open_test_device  # noqa: F401 - clean: autouse, no layer message

REPEATS = 200
DRIFT = 8  # tracked objects that may come and go regardless of the count (see the docstring)
USAGE = BufferUsage.PROGRAM_INPUT | BufferUsage.PROGRAM_OUTPUT


def two_operator_program():
    b = ProgramBuilder()
    x = b.input("x", (64,), "fp32")
    b.output(b.mul(b.add(x, x), x))
    return b.build()


@pytest.fixture(params=["cpu", VULKAN])
def device(request) -> Iterator[object]:
    dev = open_test_device(request.param)
    yield dev
    close_without_leaks(dev)


def garbage_after(step: Callable[[], object]) -> tuple[int, int]:
    """Run ``step`` REPEATS times with the collector off, after as many to warm up (lazy caches, and every
    slot of a submission ring used once): (unreachable objects a full collection then finds, growth in
    tracked objects)."""
    for _ in range(REPEATS):
        step()
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        for _ in range(REPEATS):
            step()
        grown = len(gc.get_objects()) - before
        return gc.collect(), grown
    finally:
        if enabled:
            gc.enable()


def test_the_user_api_leaves_no_cycles(device):
    exe = device.compile(two_operator_program())
    x = np.arange(64, dtype=np.float32)
    try:
        (out,) = exe(x)
        np.testing.assert_array_equal(out, (x + x) * x)
        unreachable, grown = garbage_after(lambda: exe(x))
        assert unreachable == 0
        assert grown <= DRIFT
    finally:
        exe.close()


class Bound:
    """The program loaded through the contract, with its input and output in Device-domain buffers."""

    def __init__(self, device) -> None:
        self.acc, self.queue = device.accelerator, device.queue
        self.exe = device.compile(two_operator_program())
        specs = (*self.exe.inputs, *self.exe.outputs)
        self.buffers = [
            self.acc.allocate_buffer(device.context, BufferDesc(s.nbytes, MemoryDomain.DEVICE, USAGE)) for s in specs
        ]
        self.bindings = [Binding(i, b, 0, s.nbytes) for i, (b, s) in enumerate(zip(self.buffers, specs, strict=True))]

    def close(self) -> None:
        for b in self.buffers:
            self.acc.free_buffer(b)
        self.exe.close()


def test_submissions_and_prepared_launches_leave_no_cycles(device):
    bound = Bound(device)
    acc = bound.acc
    try:

        def submit_and_wait() -> None:
            event = acc.submit(bound.queue, bound.exe.program, bound.bindings)
            acc.wait(event, None)
            acc.destroy_event(event)

        unreachable, grown = garbage_after(submit_and_wait)
        assert unreachable == 0
        assert grown <= DRIFT
        prepared = acc.prepare(bound.queue, bound.exe.program, bound.bindings)
        try:
            unreachable, grown = garbage_after(lambda: acc.wait_launch(prepared, acc.launch(prepared)))
            assert unreachable == 0
            assert grown <= DRIFT
        finally:
            acc.release_prepared(prepared)
    finally:
        bound.close()
