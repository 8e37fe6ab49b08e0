"""The CUDA backend against a stand-in driver (cuda_driver_fake.py) that runs its kernels' CUDA C on the
host, so that it runs without a GPU: the contract's semantic suite, buffers zeroed, aligned and kept,
devices chosen by selector, everything released on close or collection, and a device fault failing the run
with DeviceLost and making the accelerator unusable. The stand-in refuses any driver call made without the
context current and any copy or launch outside a live allocation. Every advertised operator against the CPU
reference, on the same stand-in, is test_cuda_host_operators.py.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is installed with the [cuda] extra")

from cuda_driver_fake import FakeDriver, install

import ironaccel
from ironaccel.backends.cuda import accelerator
from ironaccel.conformance import semantic
from ironaccel.core.errors import DeviceLost, ResourceLimit
from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, EventState, MemoryDomain
from ironaccel.tosa import DType, ProgramBuilder
from ironaccel.tosa.codec import write

UUIDS = (bytes(range(16)), bytes(range(16, 32)))
# The cases that need a program that never ends (a WHILE_LOOP), which this first step does not run.
NEEDS_WHILE_LOOP = {
    "event.deadline-stops-running-work",
    "event.cancel-stops-running-work",
    "reset.ends-running-work",
    "reset.admission-stops",
}


@pytest.fixture
def fake(monkeypatch) -> FakeDriver:
    driver = FakeDriver([("Stand-in Device", UUIDS[0]), ("Second Stand-in", UUIDS[1])])
    install(monkeypatch, driver)
    yield driver
    gc.collect()  # accelerators a case left to the collector release the device now
    assert not driver.memory and not driver.streams and not driver.events and not driver.modules
    assert not any(driver.contexts.values()), driver.contexts


@pytest.mark.parametrize("case_id", list(semantic.CASES))
def test_the_semantic_suite_passes(fake, case_id):
    (result,) = semantic.run(accelerator.open_accelerator, only=[case_id])
    if case_id in NEEDS_WHILE_LOOP:
        assert result.status == "skip" and "WHILE_LOOP" in result.detail, result
    else:
        assert result.status == "pass", result


@pytest.mark.parametrize("domain", list(MemoryDomain))
def test_buffers_start_zeroed_aligned_and_keep_what_is_written(fake, domain):
    acc = accelerator.open_accelerator()
    try:
        ctx = acc.create_context()
        buf = acc.allocate_buffer(ctx, BufferDesc(100, domain, alignment=8192))
        assert bytes(acc.read_buffer(buf, 0, 100)) == bytes(100)
        acc.write_buffer(buf, 7, b"\x01\x02\x03")
        assert bytes(acc.read_buffer(buf, 5, 6)) == b"\0\0\x01\x02\x03\0"
        native = acc._record(buf, type(buf)).native
        assert native.device % 8192 == 0 and (native.host % 8192 == 0 if native.host else True)
        assert (native.host != 0) == (domain is not MemoryDomain.DEVICE)
        acc.free_buffer(buf)
        acc.destroy_context(ctx)
    finally:
        acc.close()


def test_selectors_open_the_device_they_name(fake):
    with ironaccel.open("cuda:1") as dev:
        assert dev.info.name == "Second Stand-in" and dev.info.uuid == UUIDS[1]
    with ironaccel.open(f"cuda:{UUIDS[1].hex()}") as dev:
        assert dev.info.name == "Second Stand-in"
    with ironaccel.open("cuda:stand-in device") as dev:
        assert dev.info.name == "Stand-in Device" and dev.info.kind == "cuda" and dev.info.software is None
    with ironaccel.open("cuda") as dev:
        assert dev.info.uuid == UUIDS[0] and dev.info.vendor == "NVIDIA"


def test_close_releases_everything_and_the_accelerator_refuses_work(fake):
    acc = accelerator.open_accelerator()
    ctx = acc.create_context()
    program = acc.load_program(ctx, ArtifactRef(semantic.add_program(4), 1 << 20))
    bufs = [acc.allocate_buffer(ctx, BufferDesc(16, MemoryDomain.DEVICE)) for _ in range(3)]
    acc.create_queue(ctx)
    assert fake.memory and fake.streams and fake.modules
    acc.close()
    assert not fake.memory and not fake.streams and not fake.events and not fake.modules
    with pytest.raises(DeviceLost):
        acc.allocate_buffer(ctx, BufferDesc(16))
    for b in bufs:  # releasing handles still works after close
        acc.free_buffer(b)
    acc.unload_program(program)
    acc.close()  # idempotent


def test_a_plan_over_the_resident_bound_is_refused_before_allocating(fake):
    acc = accelerator.open_accelerator()
    try:
        ctx = acc.create_context()
        before = dict(fake.memory)
        with pytest.raises(ResourceLimit, match="the program's plan keeps"):
            # Within the runtime's estimate (the intermediates), past the plan (the inputs and outputs too).
            acc.load_program(ctx, ArtifactRef(semantic.add_program(1024), 8192))
        assert fake.memory == before
    finally:
        acc.close()


def _negate_program() -> bytes:
    b = ProgramBuilder()
    x = b.input("x", (4,), DType.FP32)
    b.output(b.negate(x, 0, 0))
    return write(b.build())


def test_a_device_fault_fails_the_run_and_makes_the_accelerator_unusable(fake):
    acc = accelerator.open_accelerator()
    try:
        ctx = acc.create_context()
        program = acc.load_program(ctx, ArtifactRef(_negate_program(), 1 << 20))
        bufs = [acc.allocate_buffer(ctx, BufferDesc(16, MemoryDomain.SHARED)) for _ in range(2)]
        queue = acc.create_queue(ctx)
        acc.write_buffer(bufs[0], 0, np.arange(4, dtype=np.float32).tobytes())
        event = acc.submit(queue, program, [Binding(0, bufs[0]), Binding(1, bufs[1])])
        assert acc.wait(event, 10) is EventState.COMPLETE
        assert np.frombuffer(acc.read_buffer(bufs[1], 0, 16), np.float32).tolist() == [-0.0, -1.0, -2.0, -3.0]
        fake.fault = fake.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
        event = acc.submit(queue, program, [Binding(0, bufs[0]), Binding(1, bufs[1])])
        assert acc.wait(event, 10) is EventState.FAILED
        assert isinstance(acc.event_error(event), DeviceLost), acc.event_error(event)
        with pytest.raises(DeviceLost):
            acc.create_queue(ctx)
    finally:
        acc.close()
