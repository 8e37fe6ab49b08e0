"""How a device's operator results are judged against the CPU reference: which (operator, signature) pairs a
capability descriptor advertises, and the comparison with its tolerances per kind of case
(``operator_cases.Case.kind``). Shared by the operator suite (tests/backends/test_operator_suite.py) and the
CUDA kernels run on the host (tests/backends/cuda/test_cuda_host_operators.py), so both hold results to the
same rules.
"""

from __future__ import annotations

import numpy as np

import operator_cases
from ironaccel.tosa import DType, Op, Signature

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


def signature_id(signature: Signature) -> str:
    """A signature as test ids spell it: ``input=fp32,output=fp32`` (``any`` when it binds no type)."""
    return ",".join(f"{var}={dt}" for var, dt in signature.types) or "any"


def advertised(descriptor) -> list[tuple[Op, Signature]]:
    """Every (operator, signature) ``descriptor`` admits. A signature naming an element type outside the
    descriptor's ``dtypes`` is left out: admission refuses every tensor of such a type (a CONST row of
    the specification's table, say, where the descriptor lists its operators' types as "any")."""
    return [
        (op, sig)
        for op in descriptor.operators
        for sig in descriptor.signatures(op)
        if all(dt in descriptor.dtypes for _, dt in sig.types)
    ]


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


__all__ = ["TOLERANCE", "advertised", "assert_matches", "signature_id"]


def check_against_reference(device, op: Op, signature: Signature, case, advertiser: str, label: str) -> None:
    """Compile ``case``'s program on ``device`` and check every call against the CPU reference: a refusal
    at load fails (``advertiser`` advertised the pair), every output must match (``label`` in messages)."""
    import pytest

    from ironaccel.backends import cpu
    from ironaccel.core.errors import Unsupported

    try:
        exe = device.compile(case.program)
    except Unsupported as exc:
        pytest.fail(f"{advertiser} advertises {op.name} ({signature}) but refused it at load: {exc}")
    try:
        reference = cpu.load(case.program)
        outputs = case.program.main.output_tensors
        for number, call in enumerate(case.calls):
            got, want = exe(*call), reference.run(list(call))
            assert len(got) == len(want) == len(outputs)
            for tensor, g, w in zip(outputs, got, want, strict=True):
                what = f"{label} {op.name} ({signature}) call {number} output {tensor.name!r}"
                assert_matches(np.asarray(g), np.asarray(w), tensor.dtype, case.kind, what)
    finally:
        exe.close()
