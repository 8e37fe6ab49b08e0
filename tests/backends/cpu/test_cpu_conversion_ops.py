"""CPU kernels of CAST and RESCALE: known answers, RESCALE against a Python-int restatement of the spec's
pseudocode, and conformance tests against the reference model (see ``test_cpu_elementwise_ops``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cpu_elementwise_ops import FakeContext, check_cts

from ironaccel.backends.cpu.kernel import kernel_for
from ironaccel.tosa import DType, Op, Operator, Tensor
from ironaccel.tosa.attributes import RescaleAttribute, RoundingMode
from tosa_fixtures import cts_dir, cts_tests

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in cast:RuntimeWarning")

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48
F32, F16, BF16, E4M3, E5M2, B = DType.FP32, DType.FP16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2, DType.BOOL


def run_kernel(op: Op, inputs: Sequence[np.ndarray], in_dtypes: Sequence[DType], out_dtype: DType, attribute=None):
    arrays = [np.asarray(a).astype(d.numpy) for a, d in zip(inputs, in_dtypes, strict=True)]
    names = tuple(f"in{i}" for i in range(len(arrays)))
    ctx = FakeContext(
        Operator(op, names, ("out",), attribute),
        [Tensor(n, a.shape, d) for n, a, d in zip(names, arrays, in_dtypes, strict=True)],
        [Tensor("out", arrays[0].shape, out_dtype)],
    )
    (out,) = kernel_for(op)(ctx, arrays)
    assert isinstance(out, np.ndarray) and out.dtype == out_dtype.numpy and out.shape == arrays[0].shape
    return out


def cast(values, src: DType, dst: DType) -> np.ndarray:
    return run_kernel(Op.CAST, [np.asarray(values)], [src], dst)


# -- CAST ---------------------------------------------------------------------------------------------
def test_cast_bool_and_integers():
    assert cast([True, False], B, I16).tolist() == [1, 0]
    assert cast([0, -3, 7], I8, B).tolist() == [False, True, True]
    assert cast([-128, 127], I8, I32).tolist() == [-128, 127]  # sign extension
    assert cast([-129, 128, 65535, 70000], I32, I16).tolist() == [-129, 128, -1, 4464]  # low 16 bits
    assert cast([-129, 128, 255, 256], I16, I8).tolist() == [127, -128, -1, 0]  # low 8 bits


def test_cast_integer_to_float_rounds_once():
    assert cast([2**24 + 1, 2**24 + 3, -(2**31)], I32, F32).astype(np.float64).tolist() == [2**24, 2**24 + 4, -(2**31)]
    assert np.isposinf(cast([65520, 70000], I32, F16).astype(np.float64)).all()
    assert cast([65519, 2049, 2051], I32, F16).astype(np.float64).tolist() == [65504, 2048, 2052]
    # bf16 keeps 8 significant bits: 257 ties to 256, 259 rounds to 260; a direct, single rounding
    assert cast([257, 259, 16777217 + 65536], I32, BF16).astype(np.float64).tolist() == [256, 260, 16777216 + 131072]
    assert cast([True, False], B, F32).tolist() == [1.0, 0.0]


def test_cast_float_to_integer_rounds_half_to_even_and_saturates():
    values = np.array([0.5, 1.5, 2.5, -2.5, -0.49, 1e9, -1e9, np.inf, -np.inf])
    assert cast(values, F32, I8).tolist() == [0, 2, 2, -2, 0, 127, -128, 127, -128]
    assert cast(values, F32, I32).tolist()[5:] == [1000000000, -1000000000, 2**31 - 1, -(2**31)]
    assert cast(np.array([65504.0, -65504.0, 32767.5]), F16, I16).tolist() == [32767, -32768, 32767]
    assert cast(np.array([1.5, 3e38]), BF16, I32).tolist() == [2, 2**31 - 1]


@pytest.mark.parametrize(
    ("src", "dst", "values", "expected"),
    [
        (
            F32,
            F16,
            [1 + 2**-11, 65520.0, -1e6, 2**-25, 3 * 2**-25, np.nan],
            [1.0, math.inf, -math.inf, 0.0, 2**-23, math.nan],
        ),
        (F32, BF16, [1 + 2**-8, 3.4e38, np.inf], [1.0, math.inf, math.inf]),  # 3.4e38 rounds past bf16's max
        (F32, E4M3, [464.0, 465.0, -np.inf, 2**-10, 0.1], [448.0, math.nan, math.nan, 0.0, 0.1015625]),
        (F32, E5M2, [61439.0, 61440.0, -np.inf, 2**-17, 2**-17 * 3], [57344.0, math.inf, -math.inf, 0.0, 2**-15]),
        (F16, E4M3, [65504.0, 0.0625 * 1.0625], [math.nan, 0.0625]),
        (BF16, E5M2, [1e38, 1.125], [math.inf, 1.0]),
        (E4M3, F16, [448.0, -(2**-9), np.nan], [448.0, -(2**-9), math.nan]),
        (E5M2, BF16, [57344.0, np.inf], [57344.0, math.inf]),
        (BF16, F32, [1.0078125, -np.inf], [1.0078125, -math.inf]),
        (F16, F32, [2**-24, 65504.0], [2**-24, 65504.0]),
    ],
)
def test_cast_float_to_float(src, dst, values, expected):
    got = cast(np.array(values, np.float64).astype(src.numpy), src, dst).astype(np.float64)
    np.testing.assert_array_equal(got, np.array(expected))


def test_cast_keeps_zero_signs():
    got = cast(np.array([-0.0, 0.0], np.float32), F32, E4M3).astype(np.float64)
    assert np.signbit(got).tolist() == [True, False]
    assert cast(np.array([-0.0]), F16, I8).tolist() == [0]


# -- RESCALE ------------------------------------------------------------------------------------------
def ref_rescale(values, multipliers, shifts, in_zp, out_zp, in_dtype, out_dtype, attr: RescaleAttribute) -> list[int]:
    """The RESCALE pseudocode with Python ints, element by element (values flattened, channels last)."""
    in_bits, out_bits = in_dtype.bits, out_dtype.bits
    channels = len(multipliers)
    out = []
    for index, raw in enumerate(values):
        if attr.input_unsigned:
            value, zp = raw % (1 << in_bits), in_zp % (1 << in_bits)
        else:
            value, zp = raw, in_zp
        value -= zp
        c = index % channels if attr.per_channel else 0
        m, s = multipliers[c], shifts[c]
        rnd = 1 << (s - 1)
        if attr.scale32 and attr.rounding_mode == RoundingMode.DOUBLE_ROUND and s > 31:
            rnd += (1 << 30) if value >= 0 else -(1 << 30)
        result = (value * m + rnd) >> s
        result = (result + 2**31) % 2**32 - 2**31  # static_cast<int32_t>
        if attr.output_unsigned:
            result += out_zp % (1 << out_bits)
            result = min(max(result, 0), (1 << out_bits) - 1)
            result = result - (1 << out_bits) if result >= 1 << (out_bits - 1) else result  # stored signed
        else:
            result += out_zp
            result = min(max(result, -(1 << (out_bits - 1))), (1 << (out_bits - 1)) - 1)
        out.append(result)
    return out


LEGAL = [(a, b) for a in (I8, I16, I32) for b in (I8, I16, I32)] + [(I48, I8), (I48, I16), (I48, I32)]


@st.composite
def rescale_cases(draw):
    in_dtype, out_dtype = draw(st.sampled_from(LEGAL))
    scale32 = in_dtype is not I48 and draw(st.booleans())
    mode = draw(
        st.sampled_from([RoundingMode.SINGLE_ROUND, RoundingMode.INEXACT_ROUND] + [RoundingMode.DOUBLE_ROUND] * scale32)
    )
    input_unsigned = in_dtype in (I8, I16) and out_dtype is not I32 and draw(st.booleans())
    output_unsigned = (
        out_dtype in (I8, I16) and in_dtype not in (I32, I48) and not input_unsigned and draw(st.booleans())
    )
    per_channel = draw(st.booleans())
    channels = draw(st.integers(1, 4)) if per_channel else 1
    lo, hi = -(1 << (in_dtype.bits - 1)), (1 << (in_dtype.bits - 1)) - 1
    rows = draw(st.integers(1, 4))
    values = draw(st.lists(st.integers(lo, hi), min_size=rows * channels, max_size=rows * channels))

    def zero_point(dtype: DType, unsigned: bool) -> int:
        if dtype is I8:
            return draw(st.integers(-128, 127))
        if dtype is I16 and unsigned:
            return draw(st.sampled_from([0, -32768]))  # 32768 as stored in int16
        return 0

    in_zp, out_zp = zero_point(in_dtype, input_unsigned), zero_point(out_dtype, output_unsigned)
    span = (1 << in_dtype.bits) + 256  # |value - zp| bound, to keep apply_scale_32's REQUIRE
    if scale32:
        shifts = draw(st.lists(st.integers(max(2, span.bit_length() + 1), 62), min_size=channels, max_size=channels))
        multipliers = draw(st.lists(st.integers(0, 2**31 - 1), min_size=channels, max_size=channels))
    else:
        shifts = draw(st.lists(st.integers(2, 62), min_size=channels, max_size=channels))
        multipliers = draw(st.lists(st.integers(0, 2**15 - 1), min_size=channels, max_size=channels))
        # apply_scale_16 REQUIREs an int32 result: bound the shift from below
        shifts = [max(s, (span * max(m, 1)).bit_length() - 30) for s, m in zip(shifts, multipliers, strict=True)]
        shifts = [min(s, 62) for s in shifts]
    attr = RescaleAttribute(scale32, mode, per_channel, input_unsigned, output_unsigned)
    return values, (rows, channels), multipliers, shifts, in_zp, out_zp, in_dtype, out_dtype, attr


def rescale(values, shape, multipliers, shifts, in_zp, out_zp, in_dtype, out_dtype, attr) -> np.ndarray:
    mul_dtype = I32 if attr.scale32 else I16
    inputs = [np.array(values).reshape(shape), multipliers, shifts, [in_zp], [out_zp]]
    dtypes = [in_dtype, mul_dtype, I8, in_dtype, out_dtype]
    return run_kernel(Op.RESCALE, inputs, dtypes, out_dtype, attr)


@given(rescale_cases())
@settings(max_examples=300, deadline=None)
def test_rescale_matches_the_pseudocode(case):
    values, _shape, multipliers, shifts, in_zp, out_zp, in_dtype, out_dtype, attr = case
    got = rescale(*case)
    assert got.ravel().tolist() == ref_rescale(values, multipliers, shifts, in_zp, out_zp, in_dtype, out_dtype, attr)


def test_rescale_known_answers():
    single = RescaleAttribute(True, RoundingMode.SINGLE_ROUND, False, False, False)
    # unity scale with zero points: out = x - in_zp + out_zp, saturated
    out = rescale([-128, 0, 127], (3,), [1 << 30], [30], -10, 5, I8, I8, single)
    assert out.tolist() == [-113, 15, 127]
    # uint8 input (int8 storage -1 is 255) with its zero point 128 to int8
    unsigned_in = RescaleAttribute(True, RoundingMode.SINGLE_ROUND, False, True, False)
    assert rescale([-1, 0, -128], (3,), [1 << 30], [30], -128, 0, I8, I8, unsigned_in).tolist() == [127, -128, 0]
    # int16 to uint16 with zero point 32768
    unsigned_out = RescaleAttribute(True, RoundingMode.SINGLE_ROUND, False, False, True)
    out = rescale([-32768, 0, 32767], (3,), [1 << 30], [30], 0, -32768, I16, I16, unsigned_out)
    assert out.view(np.uint16).tolist() == [0, 32768, 65535]
    # per channel halves the first channel and doubles the second
    per_channel = RescaleAttribute(True, RoundingMode.SINGLE_ROUND, True, False, False)
    out = rescale([3, 3, -3, -3], (2, 2), [1 << 30, 1 << 30], [31, 29], 0, 0, I32, I32, per_channel)
    assert out.tolist() == [[2, 6], [-1, -6]]  # 1.5 rounds up, -1.5 rounds up to -1
    # 48-bit input through the 16-bit scale: 2**46 * (1 << 14) >> 30 = 2**30
    scale16 = RescaleAttribute(False, RoundingMode.SINGLE_ROUND, False, False, False)
    assert rescale([2**46, -(2**46)], (2,), [1 << 14], [30], 0, 0, I48, I32, scale16).tolist() == [2**30, -(2**30)]


def test_rescale_double_round_differs_from_single_round():
    value, multiplier, shift = 3, 1 << 30, 33  # 3 / 8 = 0.375: single rounds to 0, double to 1 (0.375 + 0.25)
    attrs = [
        RescaleAttribute(True, mode, False, False, False)
        for mode in (RoundingMode.SINGLE_ROUND, RoundingMode.DOUBLE_ROUND)
    ]
    got = [int(rescale([value], (1,), [multiplier], [shift], 0, 0, I32, I32, a)[0]) for a in attrs]
    assert got == [0, 1]


# -- conformance tests --------------------------------------------------------------------------------
INT_EXTS = ("tosa-ext-int16", "tosa-ext-doubleround", "tosa-ext-inexactround")
FP_EXTS = ("tosa-ext-bf16", "tosa-ext-fp8e4m3", "tosa-ext-fp8e5m2")
DEFAULT_SETS = [("tosa-pro-int", ("cast", "rescale"), INT_EXTS), ("tosa-pro-fp", ("cast",), FP_EXTS)]
SAMPLE = 60  # tests per default set checked in the default run (the slow sweep checks them all)


def _report(outcomes) -> str:
    bad = [o for o in outcomes if not (o.compliant and o.tight)]
    return "\n".join(f"{o.test.name}: {o.detail}" for o in bad[:20])


@pytest.mark.tosa_tools
@pytest.mark.parametrize(("profile", "operators", "extensions"), DEFAULT_SETS, ids=["int", "fp"])
def test_cts_sample(profile, operators, extensions):
    tests = cts_tests(cts_dir(profile, operators, extensions))
    picked = tests[:: max(1, len(tests) // SAMPLE)]
    outcomes = check_cts(picked)
    assert outcomes and all(o.compliant and o.tight for o in outcomes), _report(outcomes)


@pytest.mark.slow
@pytest.mark.tosa_tools
@pytest.mark.parametrize(("profile", "operators", "extensions"), DEFAULT_SETS, ids=["int", "fp"])
def test_cts_full(profile, operators, extensions):
    outcomes = check_cts(cts_tests(cts_dir(profile, operators, extensions)))
    assert outcomes and all(o.compliant and o.tight for o in outcomes), _report(outcomes)


def test_bf16_storage_is_ml_dtypes():
    assert cast(np.array([1.0]), F32, BF16).dtype == np.dtype(ml_dtypes.bfloat16)
