"""The backend kit (backends/_template, registered as ``null``): the whole execution contract over host memory
with no operator.

Opened by name it passes the contract's semantic suite, every case that needs a program skipping with "no
program admitted"; buffers of every domain keep exactly what was written (a model checks hostile offsets and
lengths); every program is refused at load, naming the template. Given a first operator (ADD lowered in this
file, as docs/adding-a-backend.md's last step does), the same queues, events, gates and prepared launches
run the whole suite, and a running program stops at its next step when cancelled.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ironaccel
from ironaccel.backends import _template
from ironaccel.backends._template.accelerator import TemplateAccelerator
from ironaccel.backends._template.device import open_device
from ironaccel.backends._template.program import Step
from ironaccel.conformance import semantic
from ironaccel.core.errors import DeviceLost, InvalidArgument, OutOfBounds
from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, EventState, MemoryDomain
from ironaccel.runtime.backends import AUTO_ORDER, factory
from ironaccel.tosa.capability import CapabilityDescriptor, OperatorSupport
from ironaccel.tosa.dtypes import DType
from ironaccel.tosa.errors import LoweringError
from ironaccel.tosa.ir import Block, Operator, Program, Region, Tensor
from ironaccel.tosa.operators import Op
from ironaccel.tosa.target import Target

KIT = Path(_template.__file__).parent
ROLES = ("registration.py", "device.py", "accelerator.py", "memory.py", "program.py", "submit.py", "capability.py")
# The cases that need a program that never ends (a WHILE_LOOP), which the ADD backend below does not admit.
NEEDS_WHILE_LOOP = {
    "event.deadline-stops-running-work",
    "event.cancel-stops-running-work",
    "reset.ends-running-work",
    "reset.admission-stops",
}


# ---- the null device -----------------------------------------------------------------------------------


def test_null_opens_by_name_and_refuses_every_program_naming_the_template():
    with ironaccel.open("null") as dev:
        assert dev.info.kind == "null" and dev.info.software
        assert set(dev.info.domains) == set(MemoryDomain)
        with pytest.raises(LoweringError) as caught:
            dev.compile(semantic.add_program(4))
    message = str(caught.value)
    assert "the template backend runs no operator" in message and "ADD" in message, message
    assert "null" not in AUTO_ORDER  # a device for tests: never what "auto" opens


def test_null_has_one_device():
    with ironaccel.open("null:0") as dev:
        assert dev.info.kind == "null"
    with pytest.raises(InvalidArgument, match="one device, null:0"):
        ironaccel.open("null:1")
    with pytest.raises(InvalidArgument, match="one device"):
        open_device("1")


def test_the_semantic_suite_passes_on_null_skipping_what_needs_a_program():
    results = semantic.run(factory("null"))
    assert len(results) == len(semantic.CASES)
    failed = [r for r in results if r.status == "fail"]
    assert not failed, failed
    skipped = {r.id: r.detail for r in results if r.status == "skip"}
    assert all(why.startswith("no program admitted: ") for why in skipped.values()), skipped
    passed = {r.id for r in results if r.status == "pass"}
    assert {"device.info-stable", "buffer.segmented-transfer-bounds", "buffer.transfer-permissions"} <= passed
    assert {"buffer.descriptor-validation", "context.destroy-nonempty", "quota.buffer-bytes"} <= passed
    assert {"execute.add", "prepared.launch", "gate.ordering", "artifact.bounds"} <= skipped.keys()


_WRITES = st.lists(st.tuples(st.integers(-8, 300), st.binary(max_size=80)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    domain=st.sampled_from(list(MemoryDomain)),
    size=st.integers(1, 256),
    alignment=st.sampled_from([1, 2, 16, 64, 4096]),
    writes=_WRITES,
    reads=st.lists(st.tuples(st.integers(-8, 300), st.integers(0, 300)), max_size=8),
)
def test_buffers_of_every_domain_keep_what_was_written(domain, size, alignment, writes, reads):
    """Against a bytearray model: a write inside the buffer lands, one reaching outside is refused whole
    (OutOfBounds, nothing written); a read returns the model's bytes or is refused."""
    acc = _template.open_accelerator()
    ctx = acc.create_context()
    buf = acc.allocate_buffer(ctx, BufferDesc(size, domain, semantic.IO, alignment))
    info = buf.info
    assert info.size == size and info.allocation_bytes >= size and info.domain is domain
    assert acc.read_buffer(buf, 0, size) == bytes(size), "a new buffer holds something"
    model = bytearray(size)
    for offset, data in writes:
        if 0 <= offset and offset + len(data) <= size:
            acc.write_buffer(buf, offset, data)
            model[offset : offset + len(data)] = data
        else:
            with pytest.raises(OutOfBounds):
                acc.write_buffer(buf, offset, data)
    for offset, length in reads:
        if 0 <= offset and offset + length <= size:
            assert acc.read_buffer(buf, offset, length) == model[offset : offset + length]
        else:
            with pytest.raises(OutOfBounds):
                acc.read_buffer(buf, offset, length)
    out = np.empty(size, np.uint8)
    acc.read_buffer(buf, 0, size, out=out)
    assert out.tobytes() == bytes(model)
    acc.free_buffer(buf)
    acc.destroy_context(ctx)
    assert not any(acc.live_resources().values())


def test_a_closed_null_device_refuses_calls():
    acc = _template.open_accelerator()
    ctx = acc.create_context()
    acc.close()
    acc.close()  # idempotent
    with pytest.raises(DeviceLost, match="closed"):
        acc.create_context()
    acc.destroy_context(ctx)  # releasing still works


# ---- the kit's shape -----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_each_role_is_a_module_with_its_todo_markers(role):
    text = (KIT / role).read_text()
    assert text.startswith('"""'), f"{role} has no docstring"
    assert "# TODO(backend):" in text, f"{role} marks no place a real backend fills in"


def test_reading_the_kit_registration_imports_nothing_but_its_package():
    """The runtime reads the registration to list or open backends: that must not import the device code."""
    code = (
        "import sys; import ironaccel.runtime.backends; before = set(sys.modules); "
        "from ironaccel.backends._template.registration import REGISTRATION; "
        "print(REGISTRATION.name, sorted(set(sys.modules) - before))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    kit = "ironaccel.backends._template"
    assert out.strip() == f"null ['ironaccel.backends', '{kit}', '{kit}.registration']"


# ---- with a first operator -----------------------------------------------------------------------------


class AddAccelerator(TemplateAccelerator):
    """The kit with ADD over fp32 admitted and lowered to a host step: what a backend's first operator adds.
    ``gate`` (when set) holds every step until it is set, so a test can act while a run is inside a step."""

    gate: threading.Event | None = None
    entered: threading.Event | None = None

    def _capabilities(self) -> CapabilityDescriptor:
        return CapabilityDescriptor(Target(), frozenset({DType.FP32}), {Op.ADD: OperatorSupport()}, name="add")

    def _lower(self, block: Block, index: int, operator: Operator) -> Step:
        if operator.op is not Op.ADD:
            return super()._lower(block, index, operator)
        (a, b), (c,) = operator.inputs, operator.outputs
        gate, entered = self.gate, self.entered

        def add(values: dict[str, np.ndarray]) -> None:
            if entered is not None:
                entered.set()
            if gate is not None:
                gate.wait(30)
            values[c] = values[a] + values[b]

        return add


def test_with_a_first_operator_the_kit_runs_the_whole_semantic_suite():
    results = semantic.run(lambda: AddAccelerator(open_device(None)))
    outcome = {r.id: (r.status, r.detail) for r in results}
    failed = {k: v for k, v in outcome.items() if v[0] == "fail"}
    assert not failed, failed
    skipped = {k for k, v in outcome.items() if v[0] == "skip"}
    assert skipped == NEEDS_WHILE_LOOP, outcome
    assert all("WHILE_LOOP" in outcome[k][1] for k in skipped), outcome


def test_with_a_first_operator_the_user_api_computes():
    acc = AddAccelerator(open_device(None))
    from ironaccel.runtime.session import Device

    with Device(acc, "null+add") as dev:
        exe = dev.compile(semantic.add_program(8))
        a = np.arange(8, dtype=np.float32)
        (c,) = exe(a, np.full(8, 0.25, np.float32))
        np.testing.assert_array_equal(c, a + 0.25)


def _two_adds() -> bytes:
    """d = (a + b) + b: two steps, so a run can be stopped between them."""
    from ironaccel.tosa.codec import write

    tensors = [Tensor(x, (4,), DType.FP32) for x in "abcd"]
    ops = [Operator(Op.ADD, ("a", "b"), ("c",)), Operator(Op.ADD, ("c", "b"), ("d",))]
    return write(Program((Region("main", (Block("main", ops, tensors, ("a", "b"), ("d",)),)),)))


@pytest.mark.parametrize("stop", ["cancel", "deadline"])
def test_a_running_program_stops_at_its_next_step(stop):
    acc = AddAccelerator(open_device(None))
    acc.gate, acc.entered = threading.Event(), threading.Event()
    ctx = acc.create_context()
    program = acc.load_program(ctx, ArtifactRef(_two_adds(), 1 << 20))
    bufs = [acc.allocate_buffer(ctx, BufferDesc(16, usage=semantic.IO)) for _ in range(3)]
    queue = acc.create_queue(ctx)
    bindings = [Binding(i, b) for i, b in enumerate(bufs)]
    ev = acc.submit(queue, program, bindings, timeout=0.2 if stop == "deadline" else 30)
    assert acc.entered.wait(30), "the first step never ran"
    if stop == "cancel":
        assert acc.cancel_event(ev) is True
        assert acc.poll_event(ev) is EventState.PENDING, "cancelled while its step still runs"
    else:
        threading.Event().wait(0.3)  # past the deadline, inside the first step
    acc.gate.set()
    state = acc.wait(ev, 30)
    if stop == "cancel":
        assert state is EventState.CANCELLED
    else:
        assert state is EventState.FAILED and "deadline" in str(acc.event_error(ev))
    assert acc.read_buffer(bufs[2], 0, 16) == bytes(16), "the output was written by a stopped run"
    acc.destroy_event(ev)
    for b in bufs:
        acc.free_buffer(b)
    acc.unload_program(program)
    acc.destroy_queue(queue)
    acc.destroy_context(ctx)
    assert not any(acc.live_resources().values())
