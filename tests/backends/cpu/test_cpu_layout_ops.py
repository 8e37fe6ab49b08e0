"""CPU kernels of the reduction, data layout, scatter/gather, image, data node and shape groups.

Known answers are written from the specification's pseudocode (RESIZE as a per-element loop), then the
conformance tests are checked against tosa-tools' reference model (see test_cpu_interpreter's harness).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_cpu_interpreter import PROFILES, C, I, assert_outcomes, check_cts_tests, full_tests, run_op, smoke_tests

from ironaccel.tosa import DType, Op
from ironaccel.tosa.attributes import NanPropagationMode, ResizeMode
from ironaccel.tosa.errors import ValidationError

B, I8, I16, I32, I48 = DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.INT48
F32, F16, BF16, E4M3, E5M2, SH = DType.FP32, DType.FP16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2, DType.SHAPE
PROPAGATE, IGNORE = NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE
ALL_TYPES = [B, I8, I16, I32, F32, F16, BF16, E4M3, E5M2]
rng = np.random.default_rng(99)


def _values(dtype: DType, shape) -> np.ndarray:
    if dtype is B:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.is_integer:
        info = np.iinfo(dtype.numpy)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype.numpy)
    return rng.standard_normal(shape).astype(dtype.numpy)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# -- reductions ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_reduce_all_any(axis):
    x = _values(B, (3, 4, 5))
    for op, fn in ((Op.REDUCE_ALL, np.all), (Op.REDUCE_ANY, np.any)):
        shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
        (got,) = run_op(op, [I(x, B)], [(B, shape)], axis=axis)
        np.testing.assert_array_equal(got, fn(x, axis=axis, keepdims=True))


@pytest.mark.parametrize("nan_mode", [PROPAGATE, IGNORE])
@pytest.mark.parametrize("dtype", [F32, F16, BF16, E4M3])
def test_reduce_max_min_nan_modes(nan_mode, dtype):
    x = np.array([[1.0, np.nan, -2.0], [np.nan, np.nan, np.nan], [-0.0, 3.0, 0.5]]).astype(dtype.numpy)
    wide = x.astype(np.float64)
    for op, keep in ((Op.REDUCE_MAX, np.fmax), (Op.REDUCE_MIN, np.fmin)):
        (got,) = run_op(op, [I(x, dtype)], [(dtype, (3, 1))], axis=1, nan_mode=nan_mode)
        if nan_mode is PROPAGATE:
            expected = [np.nan, np.nan, keep.reduce(wide[2])]
        else:
            expected = [keep.reduce(wide[0]), np.nan, keep.reduce(wide[2])]
        np.testing.assert_array_equal(got.astype(np.float64).ravel(), expected)


def test_reduce_max_min_integer():
    x = _values(I16, (4, 6))
    (hi,) = run_op(Op.REDUCE_MAX, [I(x, I16)], [(I16, (1, 6))], axis=0, nan_mode=PROPAGATE)
    (lo,) = run_op(Op.REDUCE_MIN, [I(x, I16)], [(I16, (4, 1))], axis=1, nan_mode=PROPAGATE)
    assert _same(hi, x.max(axis=0, keepdims=True)) and _same(lo, x.min(axis=1, keepdims=True))


def test_reduce_sum_int32_is_exact_and_wraps():
    x = np.array([[2**31 - 1, 1, 5], [-(2**31), -1, 7]], np.int32)
    (got,) = run_op(Op.REDUCE_SUM, [I(x, I32)], [(I32, (2, 1))], axis=1)
    assert got.ravel().tolist() == [-(2**31) + 5, -(2**31) + 6]  # 2**31 + 5 wraps
    (got,) = run_op(Op.REDUCE_SUM, [I(x, I32)], [(I32, (1, 3))], axis=0)
    assert got.ravel().tolist() == [-1, 0, 12]


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_reduce_sum_and_product_float_round_once(dtype):
    x = (rng.standard_normal((5, 40)) * 3).astype(dtype.numpy)
    wide = x.astype(np.float64)
    (total,) = run_op(Op.REDUCE_SUM, [I(x, dtype)], [(dtype, (5, 1))], axis=1)
    np.testing.assert_array_equal(total, wide.sum(axis=1, keepdims=True).astype(dtype.numpy))
    small = (1 + rng.random((3, 6)) / 4).astype(dtype.numpy)
    (product,) = run_op(Op.REDUCE_PRODUCT, [I(small, dtype)], [(dtype, (1, 6))], axis=0)
    np.testing.assert_array_equal(product, small.astype(np.float64).prod(axis=0, keepdims=True).astype(dtype.numpy))


# -- data layout -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_TYPES)
def test_layout_ops_move_every_type_exactly(dtype):
    x = _values(dtype, (2, 3, 4))
    y = _values(dtype, (2, 1, 4))
    (got,) = run_op(Op.CONCAT, [I(x, dtype), I(y, dtype), I(x, dtype)], [(dtype, (2, 7, 4))], axis=1)
    assert _same(got, np.concatenate([x, y, x], axis=1))
    (got,) = run_op(Op.REVERSE, [I(x, dtype)], [(dtype, x.shape)], axis=2)
    assert _same(got, x[:, :, ::-1].copy())
    (got,) = run_op(Op.TRANSPOSE, [I(x, dtype)], [(dtype, (4, 2, 3))], perms=(2, 0, 1))
    assert _same(got, x.transpose(2, 0, 1).copy())
    (got,) = run_op(Op.RESHAPE, [I(x, dtype), C([4, 6], SH)], [(dtype, (4, 6))])
    assert _same(got, x.reshape(4, 6))
    (got,) = run_op(Op.SLICE, [I(x, dtype), C([1, 0, 1], SH), C([1, 2, 3], SH)], [(dtype, (1, 2, 3))])
    assert _same(got, x[1:2, 0:2, 1:4].copy())
    (got,) = run_op(Op.TILE, [I(x, dtype), C([2, 1, 3], SH)], [(dtype, (4, 3, 12))])
    assert _same(got, np.tile(x, (2, 1, 3)))
    fill = _values(dtype, (1,))
    (got,) = run_op(Op.PAD, [I(x, dtype), C([0, 1, 2, 0, 1, 1], SH), C(fill, dtype)], [(dtype, (3, 5, 6))])
    expected = np.full((3, 5, 6), fill[0], dtype.numpy)
    expected[0:2, 2:5, 1:5] = x
    assert _same(got, expected)
    (got,) = run_op(Op.IDENTITY, [I(x, dtype)], [(dtype, x.shape)])
    assert _same(got, x)


def test_rank0_and_constant_nodes():
    scalar = np.array(5, np.int32)
    (got,) = run_op(Op.RESHAPE, [I(scalar, I32), C(np.zeros((0,), np.int64), SH)], [(I32, ())])
    assert got.shape == () and got == 5
    (got,) = run_op(Op.TILE, [I(scalar, I32), C(np.zeros((0,), np.int64), SH)], [(I32, ())])
    assert got.shape == () and got == 5
    int48 = np.array([-(2**47), 2**47 - 1], np.int64)
    (got,) = run_op(Op.IDENTITY, [C(int48, I48)], [(I48, (2,))])
    assert _same(got, int48)


# -- scatter / gather --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [I8, I16, I32, F32, F16, BF16, E4M3, E5M2])
def test_gather_and_scatter(dtype):
    values = _values(dtype, (2, 5, 3))
    indices = np.array([[4, 0, 4, 2], [1, 1, 3, 0]], np.int32)
    (got,) = run_op(Op.GATHER, [I(values, dtype), I(indices, I32)], [(dtype, (2, 4, 3))])
    assert _same(got, np.stack([values[0][indices[0]], values[1][indices[1]]]))
    updates = _values(dtype, (2, 2, 3))
    where = np.array([[3, 0], [4, 1]], np.int32)
    (got,) = run_op(Op.SCATTER, [I(values, dtype), I(where, I32), I(updates, dtype)], [(dtype, (2, 5, 3))])
    expected = values.copy()
    for n, w in itertools.product(range(2), range(2)):
        expected[n, where[n, w]] = updates[n, w]
    assert _same(got, expected)


def test_out_of_range_or_repeated_indices_are_unpredictable():
    values = _values(I8, (1, 4, 2))
    with pytest.raises(ValidationError, match="unpredictable"):
        run_op(Op.GATHER, [I(values, I8), I([[4]], I32)], [(I8, (1, 1, 2))])
    with pytest.raises(ValidationError, match="unpredictable"):
        run_op(Op.GATHER, [I(values, I8), I([[-1]], I32)], [(I8, (1, 1, 2))])
    with pytest.raises(ValidationError, match="twice"):
        run_op(Op.SCATTER, [I(values, I8), I([[1, 1]], I32), I(_values(I8, (1, 2, 2)), I8)], [(I8, (1, 4, 2))])


# -- RESIZE ------------------------------------------------------------------------------------------------
def _resize_reference(x, scale, offset, border, mode, out_hw, resize_t):
    """The RESIZE pseudocode, one element at a time; ``resize_t`` is a numpy float type or None (integers)."""
    sy_n, sy_d, sx_n, sx_d = scale
    n, ih, iw, c = x.shape
    oh, ow = out_hw
    is_float = resize_t is not None
    out = np.zeros((n, oh, ow, c), dtype=np.float64 if is_float else object)

    def rt(v):  # one resize_t operation
        return float(np.float32(v).astype(resize_t)) if is_float else v

    for b, oy, ox, ch in itertools.product(range(n), range(oh), range(ow), range(c)):
        y, xx = oy * sy_d + offset[0], ox * sx_d + offset[1]
        iy, ix = y // sy_n, xx // sx_n
        ry, rx = y - iy * sy_n, xx - ix * sx_n
        if is_float:
            dy, dx = rt(np.float32(rt(ry)) / np.float32(rt(sy_n))), rt(np.float32(rt(rx)) / np.float32(rt(sx_n)))
            unit_y = unit_x = 1.0
        else:
            dy, dx, unit_y, unit_x = ry, rx, sy_n, sx_n
        iy0, iy1, ix0, ix1 = max(iy, 0), min(iy + 1, ih - 1), max(ix, 0), min(ix + 1, iw - 1)
        if mode is ResizeMode.BILINEAR:
            v = [x[b, r, q, ch].item() for r, q in ((iy0, ix0), (iy0, ix1), (iy1, ix0), (iy1, ix1))]
            wy0, wx0 = rt(unit_y - dy), rt(unit_x - dx)
            out[b, oy, ox, ch] = v[0] * wy0 * wx0 + v[1] * wy0 * dx + v[2] * dy * wx0 + v[3] * dy * dx
        else:
            near_y = dy >= 0.5 if is_float else 2 * dy >= sy_n
            near_x = dx >= 0.5 if is_float else 2 * dx >= sx_n
            out[b, oy, ox, ch] = x[b, iy1 if near_y else iy0, ix1 if near_x else ix0, ch].item()
    return out


RESIZE_PARAMS = [
    ((4, 2, 4, 2), (0, 0), (0, 0), (6, 5)),  # x2 upscale
    ((2, 4, 3, 5), (-1, 2), (1, -1), (9, 10)),  # downscale with offsets and borders
    ((7, 3, 5, 5), (3, -4), (-2, 4), (5, 4)),
    ((2047, 1023, 1, 1), (0, 0), (0, 0), (3, 2)),  # fractions close to 1/2: fp16/bf16 rounding decides
]


@pytest.mark.parametrize(("scale", "offset", "border", "in_hw"), RESIZE_PARAMS)
@pytest.mark.parametrize("mode", [ResizeMode.NEAREST, ResizeMode.BILINEAR])
@pytest.mark.parametrize("dtype", [I8, I16, F32, F16, BF16])
def test_resize(scale, offset, border, in_hw, mode, dtype):
    out_hw = (
        ((in_hw[0] - 1) * scale[0] - offset[0] + border[0]) // scale[1] + 1,
        ((in_hw[1] - 1) * scale[2] - offset[1] + border[1]) // scale[3] + 1,
    )
    x = _values(dtype, (2, *in_hw, 3))
    resize_t = None if dtype.is_integer else dtype.numpy
    expected = _resize_reference(x, scale, offset, border, mode, out_hw, resize_t)
    out_t = dtype
    if mode is ResizeMode.BILINEAR and dtype.is_integer:
        out_t = I32 if dtype is I8 else I48
    (got,) = run_op(
        Op.RESIZE,
        [I(x, dtype), C(scale, SH), C(offset, SH), C(border, SH)],
        [(out_t, (2, *out_hw, 3))],
        mode=mode,
    )
    assert got.dtype == out_t.numpy
    if dtype.is_integer or mode is ResizeMode.NEAREST:
        np.testing.assert_array_equal(got.astype(np.float64), expected.astype(np.float64))
    else:  # the weighted sum is taken in float64 and rounded once: within half an ulp of the loop's value
        tolerance = np.abs(expected).max() * 2.0 ** -{F32: 23, F16: 10, BF16: 7}[dtype]
        np.testing.assert_allclose(got.astype(np.float64), expected, atol=tolerance)


def test_bf16_nearest_uses_the_rounded_fraction():
    # 1023/2047 < 0.5 but rounds to 0.5 in bf16 (not in fp16): the choice follows resize_t.
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4, 1)
    params = [C((2047, 1023, 1, 1), SH), C((0, 0), SH), C((0, 0), SH)]
    picks = {}
    for dtype in (BF16, F16):
        (got,) = run_op(
            Op.RESIZE, [I(x.astype(dtype.numpy), dtype), *params], [(dtype, (1, 5, 4, 1))], mode=ResizeMode.NEAREST
        )
        picks[dtype] = got[0, :, 0, 0].astype(np.float64).tolist()
    assert picks[BF16] != picks[F16]


# -- conformance tests -------------------------------------------------------------------------------------
LAYOUT_OPS = [
    "reduce_all", "reduce_any", "reduce_max", "reduce_min", "reduce_product", "reduce_sum", "concat", "pad",
    "reshape", "reverse", "slice", "tile", "transpose", "gather", "scatter", "resize", "const", "identity",
]  # fmt: skip
CASES = [(p, op) for p in sorted(PROFILES) for op in LAYOUT_OPS if not (p == "tosa-pro-int" and op == "reduce_product")]


@pytest.mark.parametrize(("profile", "op"), CASES)
def test_layout_cts_smoke(profile, op):
    assert_outcomes(check_cts_tests(smoke_tests(profile, op, per_op=2)))


@pytest.mark.slow
@pytest.mark.parametrize(("profile", "op"), CASES)
def test_layout_cts_full(profile, op):
    assert_outcomes(check_cts_tests(full_tests(profile, op)))
