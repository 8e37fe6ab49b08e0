"""The CUDA lowerings of the elementwise, comparison, selection, activation and reduction groups where the
operator suite's one case per signature says too little: what a reduction's and TABLE's launches carry,
and, run on the host (``host_kernels``) against the CPU reference bit for bit, reductions along every axis
with NaNs in both NaN modes, every shift amount of every integer type with and without rounding, CLZ,
INTDIV and BITWISE_NOT at the ends of their ranges, TABLE over every input, NEGATE's saturation, and
SELECT moving NaNs and signed zeros untouched.
"""

from __future__ import annotations

import ctypes

import host_kernels
import numpy as np
import pytest

from ironaccel.backends import cpu
from ironaccel.backends.cuda import plan
from ironaccel.backends.cuda.ops.common import Launch, pack
from ironaccel.tosa import DType, Op, Program, ProgramBuilder
from ironaccel.tosa.attributes import NanPropagationMode

INTS = (DType.INT8, DType.INT16, DType.INT32)
FLOATS = (DType.FP32, DType.FP16, DType.BF16)


def _program(inputs: list[tuple[tuple[int, ...], DType]], build) -> Program:
    b = ProgramBuilder()
    values = [b.input(f"x{k}", shape, dtype) for k, (shape, dtype) in enumerate(inputs)]
    b.output(build(b, *values))
    return b.build()


def _run_on_host(program: Program, arrays: list[np.ndarray]) -> np.ndarray:
    """The program's one result, its plan's launches run by the host runner over host memory."""
    p = plan.build(program)
    memory = {"arena": np.zeros(p.arena_bytes + 8, np.uint8), "const": np.zeros(p.const_bytes + 8, np.uint8)}

    def put(buffer: str, offset: int, array: np.ndarray) -> None:
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        memory[buffer][offset : offset + raw.size] = raw

    for offset, array in p.constants:
        put("const", offset, array)
    for place, array in zip(p.inputs, arrays, strict=True):
        put(place.buffer, place.offset, array)
    for step in p.steps:
        assert isinstance(step, Launch)
        block = pack(step, lambda place: memory[place.buffer].ctypes.data + place.offset)
        argument = ctypes.create_string_buffer(block, len(block))
        host_kernels.load(step.kernel.source).function(step.kernel.name)(ctypes.addressof(argument))
    (tensor,) = program.main.output_tensors
    (place,) = p.outputs
    dtype = tensor.dtype.numpy
    size = int(np.prod(tensor.shape)) * np.dtype(dtype).itemsize
    raw = memory[place.buffer][place.offset : place.offset + size].tobytes()
    return np.frombuffer(raw, dtype).reshape(tensor.shape)


def _check(program: Program, arrays: list[np.ndarray]) -> None:
    got = _run_on_host(program, arrays)
    (want,) = cpu.load(program).run(list(arrays))
    want = np.asarray(want)
    if want.dtype.kind in "fV":  # floats (bf16 is an ml_dtypes type): equal values, NaNs where the reference's
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module", autouse=True)
def host_compiler() -> None:
    if host_kernels.compiler() is None:
        pytest.skip(host_kernels.NO_COMPILER)


# ---- launches -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("axis", "length", "inner"), [(0, 2, 60), (1, 3, 20), (2, 4, 5), (3, 5, 1)])
def test_a_reduction_walks_its_axis_with_its_length_and_inner_stride(axis, length, inner):
    reduce = lambda b, x: b.op(Op.REDUCE_MAX, [x], axis=axis, nan_mode="ignore")  # noqa: E731
    program = _program([((2, 3, 4, 5), DType.FP32)], reduce)
    (launch,) = plan.build(program).launches
    assert launch.count == 120 // length and launch.scalars == (length, inner, 2)


def test_table_reads_its_table_whole_beside_the_walked_input():
    table = np.arange(256, dtype=np.int16).astype(np.int8)
    program = _program([((4, 6), DType.INT8)], lambda b, x: b.table(x, b.const(table, DType.INT8)))
    (launch,) = plan.build(program).launches
    assert len(launch.reads) == 2 and launch.reads[1].buffer == "const" and len(launch.strides) == 1


def test_select_moves_fp32_and_int32_with_one_kernel():
    kernels = {
        plan.build(_program([((3,), DType.BOOL), ((3,), t), ((3,), t)], lambda b, c, x, y: b.select(c, x, y))).kernels
        for t in (DType.FP32, DType.INT32)
    }
    assert len(kernels) == 1


# ---- values, on the host --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", [Op.REDUCE_MAX, Op.REDUCE_MIN])
@pytest.mark.parametrize("mode", [NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE])
def test_float_extremes_along_every_axis_follow_the_nan_mode(dtype, op, mode):
    x = np.random.default_rng(3).uniform(-4, 4, (2, 3, 4, 5)).astype(np.float32)
    x[0, 1, 2, :] = np.nan  # a whole slice along the last axis
    x[1, :, 0, 0] = np.nan
    x = x.astype(dtype.numpy)
    for axis in range(4):
        _check(_program([(x.shape, dtype)], lambda b, v, a=axis: b.op(op, [v], axis=a, nan_mode=mode)), [x])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", [Op.REDUCE_SUM, Op.REDUCE_PRODUCT])
def test_float_sums_and_products_along_every_axis_are_the_reference_s(dtype, op):
    x = np.random.default_rng(4).uniform(-2, 2, (2, 3, 4, 5)).astype(dtype.numpy)
    for axis in range(4):
        _check(_program([(x.shape, dtype)], lambda b, v, a=axis: b.op(op, [v], axis=a)), [x])


@pytest.mark.parametrize("dtype", INTS)
def test_integer_reductions_along_every_axis_are_exact(dtype):
    info = np.iinfo(dtype.numpy)
    x = np.random.default_rng(5).integers(info.min, info.max, (3, 4, 5), endpoint=True).astype(dtype.numpy)
    ops = (Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_SUM) if dtype is DType.INT32 else (Op.REDUCE_MAX, Op.REDUCE_MIN)
    for op in ops:
        for axis in range(3):
            _check(_program([(x.shape, dtype)], lambda b, v, o=op, a=axis: b.op(o, [v], axis=a)), [x])


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize(
    ("op", "rounding"),
    [
        (Op.LOGICAL_LEFT_SHIFT, False),
        (Op.LOGICAL_RIGHT_SHIFT, False),
        (Op.ARITHMETIC_RIGHT_SHIFT, False),
        (Op.ARITHMETIC_RIGHT_SHIFT, True),
    ],
)
def test_every_shift_amount_of_every_width(dtype, op, rounding):
    info, bits = np.iinfo(dtype.numpy), np.dtype(dtype.numpy).itemsize * 8
    a = np.array([info.min, -1, -7, -8, 0, 1, 5, 6, 7, info.max], dtype.numpy).reshape(10, 1)
    s = np.arange(bits, dtype=dtype.numpy).reshape(1, bits)
    attrs = {"round": True} if rounding else {}
    _check(_program([(a.shape, dtype), (s.shape, dtype)], lambda b, x, y: b.op(op, [x, y], **attrs)), [a, s])


def test_integer_unary_and_division_at_the_ends_of_their_ranges():
    x = np.array([0, -1, 1, -(2**31), 2**31 - 1, 100], np.int32)
    d = np.array([0, -1, 3, -3, 7, 1], np.int32)  # a zero divisor gives 0, as in the CPU backend
    for op in (Op.CLZ, Op.ABS, Op.BITWISE_NOT):
        _check(_program([(x.shape, DType.INT32)], lambda b, v, o=op: b.op(o, [v])), [x])
    _check(_program([(x.shape, DType.INT32)] * 2, lambda b, v, w: b.op(Op.INTDIV, [v, w])), [x, d])
    small = np.array([-128, -1, 0, 1, 127], np.int8)
    _check(_program([(small.shape, DType.INT8)], lambda b, v: b.op(Op.BITWISE_NOT, [v])), [small])


def test_int8_negate_saturates_around_its_zero_points():
    x = np.arange(-128, 128, dtype=np.int16).astype(np.int8)
    _check(_program([(x.shape, DType.INT8)], lambda b, v: b.negate(v, 100, -100)), [x])


@pytest.mark.parametrize(("dtype", "size"), [(DType.INT8, 256), (DType.INT16, 513)])
def test_table_over_every_input(dtype, size):
    info = np.iinfo(dtype.numpy)
    table = np.random.default_rng(6).integers(info.min, info.max, size, endpoint=True).astype(dtype.numpy)
    x = np.arange(info.min, info.max + 1).astype(dtype.numpy)
    _check(_program([(x.shape, dtype)], lambda b, v: b.table(v, b.const(table, dtype))), [x])


@pytest.mark.parametrize("dtype", FLOATS)
def test_select_moves_nans_and_signed_zeros_untouched(dtype):
    on_true = np.array([np.nan, -0.0, 1.5, -np.inf], np.float32).astype(dtype.numpy)
    on_false = np.array([0.0, 2.0, -np.nan, 3.0], np.float32).astype(dtype.numpy)
    condition = np.array([True, True, False, True])
    program = _program([((4,), DType.BOOL), ((4,), dtype), ((4,), dtype)], lambda b, c, x, y: b.select(c, x, y))
    got = _run_on_host(program, [condition, on_true, on_false])
    width = np.uint32 if dtype is DType.FP32 else np.uint16
    want = np.where(condition, on_true, on_false)
    np.testing.assert_array_equal(got.view(width), want.view(width))
