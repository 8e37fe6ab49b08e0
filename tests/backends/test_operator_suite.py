"""One operator suite for every device: what a device's capability descriptor advertises runs, and agrees
with the CPU reference.

For each device of :data:`DEVICES` that opens, every (operator, type signature) its descriptor advertises
is one test: the case of tests/support/operator_cases.py for that pair (a one-operator program and its inputs) is
compiled through the user API (``ironaccel.open(name).compile(program)``), called, and compared with the
numpy interpreter (``ironaccel.backends.cpu``) under the tolerances of tests/support/operator_check.py. A
refusal at load fails the test with the device's message: advertising a pair is the promise that it runs.
An advertised operator with neither a case nor an entry in ``operator_cases.EXEMPT`` fails too, so the
suite keeps up with the descriptors. A device advertising no operator (``null``, the backend kit) is
checked to refuse each one at load, clearly.

A new backend is covered by adding its name to :data:`DEVICES`. The Vulkan device is lavapipe here; where
no Vulkan device opens, its tests are one skip that says why. Every test ends with no message from the
Vulkan layers (``vulkan_fixtures.clean``) and with nothing left loaded on the device.
"""

from __future__ import annotations

import pytest

import ironaccel
import operator_cases
from ironaccel.core.errors import IronAccelError, Unsupported
from ironaccel.runtime import BufferDesc
from ironaccel.tosa import TOSA_1_0_OPS, descriptor_for_all_of_tosa_1_0
from operator_check import advertised, check_against_reference, signature_id

try:  # the Vulkan layers' messages: a test that leaves any fails
    from vulkan_fixtures import clean
except (ImportError, OSError):  # no Vulkan binding in this installation: nothing can report
    clean = None

__all__ = ["clean"]  # a fixture, used by name

DEVICES = ("cpu", "vulkan", "cuda", "null")

# Advertised pairs that do not run as the reference does: (device, operator, signature id) -> what is
# wrong. Each is a strict xfail, so it stays visible and the entry goes once the device is fixed.
KNOWN_FAULTS: dict[tuple[str, str, str], str] = {}


def _open(name: str) -> ironaccel.runtime.session.Device | str:
    """The device ``name`` opens, or why it does not."""
    try:
        return ironaccel.open(name)
    except (IronAccelError, ImportError, OSError) as exc:
        return f"{name} does not open here: {type(exc).__name__}: {exc}"


def _close(device) -> None:
    device.close()
    close = getattr(device.accelerator, "close", None)
    if close is not None:  # a Vulkan device is released now, not when collected
        close()


def _collect() -> tuple[list, list[str]]:
    """The parameters of the suite, and the devices that advertise no operator. Each device is opened
    to read its descriptor and closed again, so that no device stays open for the rest of the session's
    modules; the tests share one per module (:func:`devices`). The slow part of opening Vulkan, the
    process's instance, is made once: a second open takes milliseconds."""
    params, silent = [], []
    for name in DEVICES:
        device = _open(name)
        if isinstance(device, str):
            params.append(pytest.param(name, None, None, id=f"{name}-unavailable", marks=pytest.mark.skip(device)))
            continue
        try:
            descriptor = device.accelerator.capabilities()
        finally:
            _close(device)
        pairs = advertised(descriptor)
        if not pairs:
            silent.append(name)
        for op, sig in pairs:
            key = (name, op.name, signature_id(sig))
            fault = KNOWN_FAULTS.get(key)
            marks = [pytest.mark.xfail(reason=fault, strict=True)] if fault else []
            params.append(pytest.param(name, op, sig, id="-".join(key), marks=marks))
    return params, silent


PARAMS, ADVERTISING_NOTHING = _collect()


@pytest.fixture(scope="module")
def devices():
    """Each device of the suite, opened on first use and shared by the module's tests."""
    opened: dict[str, object] = {}

    def get(name: str):
        if name not in opened:
            device = _open(name)
            if isinstance(device, str):
                pytest.skip(device)
            opened[name] = device
        return opened[name]

    yield get
    leaks = {}
    for name, device in opened.items():
        device.close()
        left = {k: v for k, v in device.accelerator.live_resources().items() if v}
        if left:
            leaks[name] = left
        _close(device)
    assert not leaks, leaks


def _live(device) -> dict[str, int]:
    return {k: v for k, v in device.accelerator.live_resources().items() if k in ("program", "prepared", "event")}


@pytest.mark.parametrize(("name", "op", "signature"), PARAMS)
def test_what_the_device_advertises_runs_as_the_reference(devices, name, op, signature):
    if op in operator_cases.EXEMPT:
        pytest.skip(f"{op.name}: {operator_cases.EXEMPT[op]}")
    if op not in operator_cases.CASES:
        pytest.fail(f"{name} advertises {op.name} but operator_cases has no case for it and no exemption")
    if not operator_cases.in_specification(op, signature):
        pytest.fail(f"{name} advertises {op.name} ({signature}), a type combination TOSA 1.0 does not define")
    case = operator_cases.case(op, signature)
    device = devices(name)
    before = _live(device)
    check_against_reference(device, op, signature, case, name, name)
    assert _live(device) == before


@pytest.mark.parametrize("name", ADVERTISING_NOTHING)
def test_a_device_advertising_no_operator_refuses_each_at_load_and_keeps_working(devices, name):
    device = devices(name)
    everything = descriptor_for_all_of_tosa_1_0()
    for op in TOSA_1_0_OPS:
        sig = everything.signatures(op)[0]
        with pytest.raises(Unsupported) as caught:
            device.compile(operator_cases.case(op, sig).program)
        message = str(caught.value)
        assert "the template backend runs no operator" in message, (op.name, message)
    assert _live(device) == {"program": 0, "prepared": 0, "event": 0}
    # buffers still work: a round trip through the device's memory
    acc, payload = device.accelerator, bytes(range(64))
    buf = acc.allocate_buffer(device.context, BufferDesc(len(payload)))
    try:
        acc.write_buffer(buf, 0, payload)
        assert bytes(acc.read_buffer(buf, 0, len(payload))) == payload
    finally:
        acc.free_buffer(buf)


def test_every_operator_has_a_case_or_an_exemption():
    assert set(TOSA_1_0_OPS) <= set(operator_cases.CASES) | set(operator_cases.EXEMPT)
    assert len(operator_cases.EXEMPT) <= 3  # a short list: everything else gets a case
