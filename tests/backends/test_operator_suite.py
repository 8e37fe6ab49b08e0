"""One operator suite for every device: what a device's capability descriptor advertises runs, and agrees
with the CPU reference.

For each device of :data:`DEVICES` that opens, every (operator, type signature) its descriptor advertises
is one test: the case of tests/support/operator_cases.py for that pair (a one-operator program and its inputs) is
compiled through the user API (``ironaccel.open(name).compile(program)``), called, and compared with the
numpy interpreter (``ironaccel.backends.cpu``). A refusal at load fails the test with the device's
message: advertising a pair is the promise that it runs. An advertised operator with neither a case nor an
entry in ``operator_cases.EXEMPT`` fails too, so the suite keeps up with the descriptors. A device
advertising no operator (``null``, the backend kit) is checked to refuse each one at load, clearly.

A new backend is covered by adding its name to :data:`DEVICES`. The Vulkan device is lavapipe here; where
no Vulkan device opens, its tests are one skip that says why. Every test ends with no message from the
Vulkan layers (``vulkan_fixtures.clean``) and with nothing left loaded on the device.
"""

from __future__ import annotations

import numpy as np
import pytest

import ironaccel
import operator_cases
from ironaccel.backends import cpu
from ironaccel.core.errors import IronAccelError, Unsupported
from ironaccel.runtime import BufferDesc
from ironaccel.tosa import TOSA_1_0_OPS, DType, Op, Signature, descriptor_for_all_of_tosa_1_0

try:  # the Vulkan layers' messages: a test that leaves any fails
    from vulkan_fixtures import clean
except (ImportError, OSError):  # no Vulkan binding in this installation: nothing can report
    clean = None

__all__ = ["clean"]  # a fixture, used by name

DEVICES = ("cpu", "vulkan", "cuda", "null")

# Advertised pairs that do not run as the reference does: (device, operator, signature id) -> what is
# wrong. Each is a strict xfail, so it stays visible and the entry goes once the device is fixed.
KNOWN_FAULTS: dict[tuple[str, str, str], str] = {}

# Float comparison, per kind of case and result type: (rtol, atol) for numpy's isclose. Integers and bool
# are always compared exactly, and NaN positions must match for every kind.
TOLERANCE: dict[str, dict[DType, tuple[float, float]]] = {
    # Operators that copy, select or order values, and conversions (rounding to nearest even is exact).
    "exact": {dt: (0.0, 0.0) for dt in operator_cases.FLOATS},
    # One operation per element, rounded once. fp32: the device's transcendental kernels are within a
    # few units in the last place of the reference (1e-5 is ~80 of them), and sin, cos and erf near their zeros
    # within an absolute 1e-6. Narrower results are fp32 results rounded once more, so they may land
    # one unit in their own last place apart: 2 units of fp16 (2^-10), bf16 (2^-7).
    "rounded": {
        DType.FP32: (1e-5, 1e-6),
        DType.FP16: (2e-3, 1e-6),
        DType.BF16: (1.6e-2, 1e-6),
    },
    # Sums of several terms (reductions, matrix products, convolutions, pooling, FFT, RESIZE's weighted
    # neighbours), which a device may add in any order: the error bound grows with the terms' magnitude,
    # not the result's, hence an absolute part. fp32: 32 x 2^-24 x sum |terms| (~100 at most here). fp16
    # and bf16: accumulators of the type itself (acc_t fp16, RESIZE's resize_t) round every partial sum,
    # a unit at the terms' magnitude (2 here) apart; fp8: a sum rounded once, two units in its last place.
    "accumulated": {
        DType.FP32: (1e-5, 2e-4),
        DType.FP16: (1e-2, 1e-2),
        DType.BF16: (1.6e-2, 1e-2),
        DType.FP8E4M3: (0.25, 2**-6),
        DType.FP8E5M2: (0.5, 2**-14),
    },
}


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


def signature_id(signature: Signature) -> str:
    return ",".join(f"{var}={dt}" for var, dt in signature.types) or "any"


def _advertised(descriptor) -> list[tuple[Op, Signature]]:
    """Every (operator, signature) ``descriptor`` admits. A signature naming an element type outside the
    descriptor's ``dtypes`` is left out: admission refuses every tensor of such a type (a CONST row of
    the specification's table, say, where the descriptor lists its operators' types as "any")."""
    return [
        (op, sig)
        for op in descriptor.operators
        for sig in descriptor.signatures(op)
        if all(dt in descriptor.dtypes for _, dt in sig.types)
    ]


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
        pairs = _advertised(descriptor)
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


def assert_matches(got: np.ndarray, want: np.ndarray, dtype: DType, kind: str, what: str) -> None:
    """``got`` agrees with the reference's ``want`` for a result of ``dtype`` (see :data:`TOLERANCE`)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    if not dtype.is_float:
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float32), want.astype(np.float32)
    nans = np.isnan(g) != np.isnan(w)
    assert not nans.any(), f"{what}: NaN at {np.argwhere(nans)[:4].tolist()}: got {g[nans][:4]}, want {w[nans][:4]}"
    rtol, atol = TOLERANCE[kind][dtype]
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        bad = np.argwhere(~close)
        worst = np.unravel_index(np.argmax(np.where(close, -1, np.abs(g - w))), g.shape)
        raise AssertionError(
            f"{what}: {len(bad)} of {g.size} {dtype} values beyond rtol {rtol}, atol {atol} ({kind}); worst at "
            f"{[int(i) for i in worst]}: got {g[worst]!r}, want {w[worst]!r}"
        )


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
    try:
        exe = device.compile(case.program)
    except Unsupported as exc:
        pytest.fail(f"{name} advertises {op.name} ({signature}) but refused it at load: {exc}")
    try:
        reference = cpu.load(case.program)
        outputs = case.program.main.output_tensors
        for number, call in enumerate(case.calls):
            got, want = exe(*call), reference.run(list(call))
            assert len(got) == len(want) == len(outputs)
            for tensor, g, w in zip(outputs, got, want, strict=True):
                what = f"{name} {op.name} ({signature}) call {number} output {tensor.name!r}"
                assert_matches(np.asarray(g), np.asarray(w), tensor.dtype, case.kind, what)
    finally:
        exe.close()
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
