"""CPU kernels of the tensor group: convolutions, MATMUL, pooling, ARGMAX, FFT2D / RFFT2D.

Known answers come from small loop implementations written straight from the specification's pseudocode
(one output element at a time, Python integers or float64); then the same kind of programs, and the
conformance tests, are checked against tosa-tools' reference model (see test_cpu_interpreter's harness).
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from test_cpu_interpreter import (
    PROFILES,
    C,
    I,
    assert_outcomes,
    check_cts_tests,
    check_program,
    full_tests,
    op_program,
    run_op,
    smoke_tests,
)

from ironaccel.tosa import DType, Op
from ironaccel.tosa.attributes import NanPropagationMode

I4, I8, I16, I32, I48 = DType.INT4, DType.INT8, DType.INT16, DType.INT32, DType.INT48
F32, F16, BF16, E4M3, E5M2 = DType.FP32, DType.FP16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2
PROPAGATE, IGNORE = NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE
rng = np.random.default_rng(1234)


def _ints(dtype: DType, shape, lo=None, hi=None) -> np.ndarray:
    info = {I4: (-8, 7), I8: (-128, 127), I16: (-32768, 32767)}[dtype]
    return rng.integers(lo if lo is not None else info[0], (hi if hi is not None else info[1]) + 1, shape)


def _floats(dtype: DType, shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype.numpy)


def _ulp(values: np.ndarray, dtype: DType) -> np.ndarray:
    """The spacing of ``dtype`` numbers around each value (normal range)."""
    frac = {F32: 23, F16: 10, BF16: 7}[dtype]
    magnitude = np.maximum(np.abs(np.asarray(values, np.float64)), 2.0**-14)
    return 2.0 ** (np.floor(np.log2(magnitude)) - frac)


# -- loop references from the pseudocode -----------------------------------------------------------------
def ref_conv(x, w, bias, x_zp, w_zp, pad, stride, dilation, out_sp):
    """CONV2D / CONV3D: x [N,*S,IC], w [OC,*K,IC]; exact for integers (Python ints), float64 for floats."""
    x, w = (
        x.astype(object if x.dtype.kind == "i" else np.float64),
        w.astype(object if w.dtype.kind == "i" else np.float64),
    )
    n, *space, _ = x.shape
    oc, *taps, _ = w.shape
    out = np.zeros((n, *out_sp, oc), dtype=x.dtype)
    for b, *o in itertools.product(range(n), *(range(s) for s in out_sp)):
        acc = np.zeros(oc, dtype=x.dtype)
        for k in itertools.product(*(range(t) for t in taps)):
            pos = [o[i] * stride[i] - pad[2 * i] + k[i] * dilation[i] for i in range(len(taps))]
            if all(0 <= p < s for p, s in zip(pos, space, strict=True)):
                acc = acc + (w[(slice(None), *k)] - w_zp) @ (x[(b, *pos)] - x_zp)
        out[(b, *o)] = acc + bias
    return out


def ref_depthwise(x, w, bias, x_zp, w_zp, pad, stride, dilation, out_sp):
    kh, kw, c, m = w.shape
    kind = object if x.dtype.kind == "i" else np.float64
    x, w = x.astype(kind), w.astype(kind)
    n, h, wd, _ = x.shape
    out = np.zeros((n, *out_sp, c * m), dtype=kind)
    for b, oy, ox in itertools.product(range(n), range(out_sp[0]), range(out_sp[1])):
        acc = np.zeros((c, m), dtype=kind)
        for ky, kx in itertools.product(range(kh), range(kw)):
            y, xx = oy * stride[0] - pad[0] + ky * dilation[0], ox * stride[1] - pad[2] + kx * dilation[1]
            if 0 <= y < h and 0 <= xx < wd:
                acc = acc + (x[b, y, xx] - x_zp)[:, None] * (w[ky, kx] - w_zp)
        out[b, oy, ox] = acc.reshape(-1) + bias
    return out


def ref_transpose_conv(x, w, bias, x_zp, w_zp, out_pad, stride, out_sp):
    kind = object if x.dtype.kind == "i" else np.float64
    x, w = x.astype(kind), w.astype(kind)
    n, ih, iw, _ = x.shape
    oc, kh, kw, _ = w.shape
    out = np.zeros((n, *out_sp, oc), dtype=kind)
    for b, oy, ox in itertools.product(range(n), range(out_sp[0]), range(out_sp[1])):
        acc = np.zeros(oc, dtype=kind)
        for ky, kx in itertools.product(range(kh), range(kw)):
            y, xx = oy - out_pad[0] - ky, ox - out_pad[2] - kx
            if 0 <= y < ih * stride[0] and 0 <= xx < iw * stride[1] and y % stride[0] == 0 and xx % stride[1] == 0:
                acc = acc + (w[:, ky, kx] - w_zp) @ (x[b, y // stride[0], xx // stride[1]] - x_zp)
        out[b, oy, ox] = acc + bias
    return out


def wrap(values, bits: int) -> np.ndarray:
    v = np.asarray(values, dtype=object)
    return ((v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))).astype(np.int64)


def _out_size(size, k, pad_a, pad_b, stride, dilation=1):
    return (size - 1 + pad_a + pad_b - (k - 1) * dilation) // stride + 1


# -- convolutions ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("x_t", "w_t", "out_t", "x_zp", "w_zp"),
    [(I8, I8, I32, -7, 3), (I8, I4, I32, 11, 0), (I16, I8, I48, 0, -5)],
)
def test_conv2d_integer_is_exact(x_t, w_t, out_t, x_zp, w_zp):
    x, w = _ints(x_t, (2, 9, 8, 3)), _ints(w_t, (5, 3, 2, 3))
    bias = _ints(I16, (5,)) * (1 << 20 if out_t is I48 else 1)
    pad, stride, dilation = (1, 2, 0, 1), (2, 1), (1, 3)
    out_sp = (_out_size(9, 3, 1, 2, 2), _out_size(8, 2, 0, 1, 1, 3))
    expected = ref_conv(x, w, bias, x_zp, w_zp, pad, stride, dilation, out_sp)
    (got,) = run_op(
        Op.CONV2D,
        [I(x, x_t), C(w, w_t), C(bias, out_t), C([x_zp], x_t), C([w_zp], w_t)],
        [(out_t, (2, *out_sp, 5))],
        pad=pad,
        stride=stride,
        dilation=dilation,
        acc_type=I32 if out_t is I32 else I48,
    )
    np.testing.assert_array_equal(got, wrap(expected, 32 if out_t is I32 else 48))


def test_conv2d_int32_overflow_wraps():
    x = np.full((1, 1, 1, 64), 127, np.int8)
    w = np.full((1, 1, 1, 64), 127, np.int8)
    bias = np.array([2**31 - 1], np.int32)  # 64 * 127 * 127 + max int32 wraps
    (got,) = run_op(
        Op.CONV2D,
        [I(x, I8), C(w, I8), C(bias, I32), C([0], I8), C([0], I8)],
        [(I32, (1, 1, 1, 1))],
        pad=(0, 0, 0, 0),
        stride=(1, 1),
        dilation=(1, 1),
        acc_type=I32,
    )
    assert got.item() == wrap([64 * 127 * 127 + 2**31 - 1], 32)[0]


@pytest.mark.parametrize(
    ("dtype", "out_t", "acc"),
    [(F32, F32, F32), (F16, F16, F16), (F16, F16, F32), (BF16, BF16, F32), (E4M3, F16, F16), (E5M2, F16, F16)],
)
def test_conv2d_float_is_correctly_rounded_from_the_exact_dot_product(dtype, out_t, acc):
    x, w = _floats(dtype, (1, 6, 7, 4)), _floats(dtype, (3, 3, 3, 4))
    bias = _floats(out_t, (1,))  # BC == 1 broadcasts
    out_sp = (_out_size(6, 3, 1, 1, 1), _out_size(7, 3, 1, 1, 2))
    expected = ref_conv(x, w, bias.astype(np.float64), 0, 0, (1, 1, 1, 1), (1, 2), (1, 1), out_sp)
    (got,) = run_op(
        Op.CONV2D,
        [I(x, dtype), C(w, dtype), C(bias, out_t), C([0], dtype), C([0], dtype)],
        [(out_t, (1, *out_sp, 3))],
        pad=(1, 1, 1, 1),
        stride=(1, 2),
        dilation=(1, 1),
        acc_type=acc,
    )
    assert got.dtype == out_t.numpy
    # float32 accumulation of a few exact products, rounded once: within one output ulp (+ fp32 noise)
    assert np.all(
        np.abs(got.astype(np.float64) - expected) <= _ulp(expected, out_t) / 2 + 1e-6 * np.abs(expected).max()
    )


def test_conv3d_integer_and_float():
    x, w = _ints(I8, (1, 4, 5, 4, 2)), _ints(I8, (3, 2, 3, 2, 2))
    bias = _ints(I16, (3,))
    pad, stride, dilation = (1, 0, 0, 1, 1, 1), (1, 2, 1), (2, 1, 1)
    out_sp = (_out_size(4, 2, 1, 0, 1, 2), _out_size(5, 3, 0, 1, 2), _out_size(4, 2, 1, 1, 1))
    expected = ref_conv(x, w, bias, 4, -2, pad, stride, dilation, out_sp)
    (got,) = run_op(
        Op.CONV3D,
        [I(x, I8), C(w, I8), C(bias, I32), C([4], I8), C([-2], I8)],
        [(I32, (1, *out_sp, 3))],
        pad=pad,
        stride=stride,
        dilation=dilation,
        acc_type=I32,
    )
    np.testing.assert_array_equal(got, wrap(expected, 32))
    xf, wf = _floats(F32, x.shape), _floats(F32, w.shape)
    expected = ref_conv(xf, wf, np.zeros(3), 0, 0, pad, stride, dilation, out_sp)
    (got,) = run_op(
        Op.CONV3D,
        [I(xf, F32), C(wf, F32), C(np.zeros(3), F32), C([0], F32), C([0], F32)],
        [(F32, (1, *out_sp, 3))],
        pad=pad,
        stride=stride,
        dilation=dilation,
        acc_type=F32,
    )
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("dtype", "out_t"), [(I8, I32), (I16, I48), (F32, F32), (F16, F16)])
def test_depthwise_conv2d(dtype, out_t):
    integer = dtype.is_integer
    x = _ints(dtype, (2, 7, 6, 3)) if integer else _floats(dtype, (2, 7, 6, 3))
    w = _ints(I8, (3, 2, 3, 2)) if integer else _floats(dtype, (3, 2, 3, 2))
    bias = _ints(I8, (6,)) if integer else _floats(out_t, (6,))
    x_zp, w_zp = (5, -1) if dtype is I8 else (0, 0)
    pad, stride, dilation = (2, 0, 1, 1), (1, 2), (2, 1)
    out_sp = (_out_size(7, 3, 2, 0, 1, 2), _out_size(6, 2, 1, 1, 2))
    expected = ref_depthwise(x, w, bias, x_zp, w_zp, pad, stride, dilation, out_sp)
    w_t = I8 if integer else dtype
    (got,) = run_op(
        Op.DEPTHWISE_CONV2D,
        [I(x, dtype), C(w, w_t), C(bias, out_t), C([x_zp], dtype), C([w_zp], w_t)],
        [(out_t, (2, *out_sp, 6))],
        pad=pad,
        stride=stride,
        dilation=dilation,
        acc_type=I32 if out_t is I32 else I48 if out_t is I48 else out_t,
    )
    if integer:
        np.testing.assert_array_equal(got, wrap(expected, 32 if out_t is I32 else 48))
    else:
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize(
    ("out_pad", "stride"), [((0, 0, 0, 0), (1, 1)), ((1, -1, 2, 0), (2, 3)), ((-2, 1, 0, -1), (3, 2))]
)
@pytest.mark.parametrize("dtype", [I8, F32])
def test_transpose_conv2d(out_pad, stride, dtype):
    x = _ints(I8, (2, 3, 4, 3)) if dtype is I8 else _floats(F32, (2, 3, 4, 3))
    w = _ints(I8, (4, 3, 2, 3)) if dtype is I8 else _floats(F32, (4, 3, 2, 3))
    out_t = I32 if dtype is I8 else F32
    bias = _ints(I8, (4,)) if dtype is I8 else _floats(F32, (4,))
    x_zp, w_zp = (-3, 2) if dtype is I8 else (0, 0)
    out_sp = ((3 - 1) * stride[0] + out_pad[0] + out_pad[1] + 3, (4 - 1) * stride[1] + out_pad[2] + out_pad[3] + 2)
    expected = ref_transpose_conv(x, w, bias, x_zp, w_zp, out_pad, stride, out_sp)
    (got,) = run_op(
        Op.TRANSPOSE_CONV2D,
        [I(x, dtype), C(w, dtype), C(bias, out_t), C([x_zp], dtype), C([w_zp], dtype)],
        [(out_t, (2, *out_sp, 4))],
        out_pad=out_pad,
        stride=stride,
        acc_type=out_t,
    )
    if dtype is I8:
        np.testing.assert_array_equal(got, wrap(expected, 32))
    else:
        np.testing.assert_allclose(got, expected.astype(np.float64), rtol=1e-5, atol=1e-5)


# -- MATMUL ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dtype", "out_t", "zps"), [(I8, I32, (-128, 127)), (I16, I48, (0, 0))])
def test_matmul_integer(dtype, out_t, zps):
    a, b = _ints(dtype, (3, 5, 17)), _ints(dtype, (3, 17, 4))
    expected = np.einsum("nhc,ncw->nhw", a.astype(object) - zps[0], b.astype(object) - zps[1])
    (got,) = run_op(Op.MATMUL, [I(a, dtype), I(b, dtype), C([zps[0]], dtype), C([zps[1]], dtype)], [(out_t, (3, 5, 4))])
    np.testing.assert_array_equal(got, wrap(expected, 32 if out_t is I32 else 48))


@pytest.mark.parametrize(
    ("dtype", "out_t"), [(F32, F32), (F16, F16), (F16, F32), (BF16, F32), (E4M3, F16), (E5M2, F16)]
)
def test_matmul_float(dtype, out_t):
    a, b = _floats(dtype, (2, 4, 33)), _floats(dtype, (2, 33, 5))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    (got,) = run_op(Op.MATMUL, [I(a, dtype), I(b, dtype), C([0], dtype), C([0], dtype)], [(out_t, (2, 4, 5))])
    assert got.dtype == out_t.numpy
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(got.astype(np.float64) - exact) <= _ulp(exact, out_t) / 2 + 1e-6 * bound)


# -- pooling and ARGMAX ------------------------------------------------------------------------------------
def _pool_reference(x, kernel, stride, pad, fn):
    n, h, w, c = x.shape
    oh, ow = (h + pad[0] + pad[1] - kernel[0]) // stride[0] + 1, (w + pad[2] + pad[3] - kernel[1]) // stride[1] + 1
    out = np.empty((n, oh, ow, c), dtype=object)
    for b, oy, ox, ch in itertools.product(range(n), range(oh), range(ow), range(c)):
        ys = range(max(0, oy * stride[0] - pad[0]), min(h, oy * stride[0] - pad[0] + kernel[0]))
        xs = range(max(0, ox * stride[1] - pad[2]), min(w, ox * stride[1] - pad[2] + kernel[1]))
        out[b, oy, ox, ch] = fn([x[b, y, xx, ch] for y in ys for xx in xs])
    return out


def _int_average(values, in_zp, out_zp, lo, hi):
    """AVG_POOL2D's integer path: reciprocal_scale + apply_scale_32, in Python integers."""
    acc = sum(int(v) - in_zp for v in values)
    count = len(values)
    k = (count - 1).bit_length()
    multiplier, shift = (((1 << 30) + 1) << k) // count, 30 + k
    return min(hi, max(lo, ((acc * multiplier + (1 << (shift - 1))) >> shift) + out_zp))


@pytest.mark.parametrize(("dtype", "zps"), [(I8, (-9, 17)), (I8, (0, 0)), (I16, (0, 0))])
def test_avg_pool2d_integer_rounding(dtype, zps):
    x = _ints(dtype, (2, 9, 7, 3))
    kernel, stride, pad = (3, 4), (2, 1), (1, 2, 3, 0)
    info = np.iinfo(dtype.numpy)
    expected = _pool_reference(x, kernel, stride, pad, lambda v: _int_average(v, *zps, info.min, info.max))
    (got,) = run_op(
        Op.AVG_POOL2D,
        [I(x, dtype), C([zps[0]], dtype), C([zps[1]], dtype)],
        [(dtype, expected.shape)],
        kernel=kernel,
        stride=stride,
        pad=pad,
        acc_type=I32,
    )
    np.testing.assert_array_equal(got, expected.astype(np.int64))


@pytest.mark.parametrize(("dtype", "acc"), [(F32, F32), (F16, F16), (F16, F32), (BF16, F32), (E4M3, F16)])
def test_avg_pool2d_float(dtype, acc):
    x = _floats(dtype, (1, 6, 5, 2))
    kernel, stride, pad = (2, 3), (1, 2), (1, 0, 2, 1)
    mean = _pool_reference(x.astype(np.float64), kernel, stride, pad, lambda v: sum(v) / len(v)).astype(np.float64)
    (got,) = run_op(
        Op.AVG_POOL2D,
        [I(x, dtype), C([0], dtype), C([0], dtype)],
        [(dtype, mean.shape)],
        kernel=kernel,
        stride=stride,
        pad=pad,
        acc_type=acc,
    )
    np.testing.assert_array_equal(got, mean.astype(dtype.numpy))  # one rounding of the exact mean


@pytest.mark.parametrize("nan_mode", [PROPAGATE, IGNORE])
@pytest.mark.parametrize("dtype", [F32, BF16, E4M3])
def test_max_pool2d_float_nan_modes(nan_mode, dtype):
    x = _floats(dtype, (1, 5, 6, 2)).astype(np.float64)
    x[0, 0, 0, 0] = np.nan  # one NaN among numbers
    x[0, 3:5, 4:6, 1] = np.nan  # a window of NaNs only (bottom right)
    x = x.astype(dtype.numpy)
    kernel, stride, pad = (2, 2), (2, 2), (0, 1, 0, 0)

    def pick(values):
        vals = np.array(values, np.float64)
        if np.isnan(vals).any() and (nan_mode is PROPAGATE or np.isnan(vals).all()):
            return np.nan
        return np.nanmax(vals)

    expected = _pool_reference(x.astype(np.float64), kernel, stride, pad, pick).astype(np.float64)
    (got,) = run_op(
        Op.MAX_POOL2D,
        [I(x, dtype)],
        [(dtype, expected.shape)],
        kernel=kernel,
        stride=stride,
        pad=pad,
        nan_mode=nan_mode,
    )
    np.testing.assert_array_equal(got.astype(np.float64), expected)


def test_max_pool2d_integer_with_padding():
    x = _ints(I8, (2, 5, 5, 3))
    kernel, stride, pad = (3, 2), (1, 2), (2, 1, 1, 1)
    expected = _pool_reference(x, kernel, stride, pad, max).astype(np.int64)
    (got,) = run_op(
        Op.MAX_POOL2D, [I(x, I8)], [(I8, expected.shape)], kernel=kernel, stride=stride, pad=pad, nan_mode=PROPAGATE
    )
    np.testing.assert_array_equal(got, expected)


def _argmax_reference(values, nan_mode):
    """ARGMAX's loop: a NaN wins (PROPAGATE) or loses (IGNORE); ties keep the first index."""
    best, index = (np.nan if nan_mode is IGNORE else -np.inf), 0
    for i, v in enumerate(values):
        if np.isnan(v) or np.isnan(best):
            result = np.nan if nan_mode is PROPAGATE else (best if np.isnan(v) else v)
        else:
            result = v if v >= best else best
        if not (np.isnan(result) and np.isnan(best)) and (np.isnan(result) != np.isnan(best) or result != best):
            best, index = result, i
    return index


@pytest.mark.parametrize("nan_mode", [PROPAGATE, IGNORE])
def test_argmax_nan_modes_and_ties(nan_mode):
    nan, inf = np.nan, np.inf
    rows = [
        [1.0, 3.0, 3.0, 2.0],
        [nan, 1.0, nan, 5.0],
        [nan, nan, nan, nan],
        [-inf, -inf, nan, -inf],
        [nan, -inf, -inf, -1e30],
        [-0.0, 0.0, -0.0, 0.0],
    ]
    for dtype in (F32, F16, BF16):
        with np.errstate(over="ignore"):
            x = np.array(rows, np.float64).astype(dtype.numpy)  # -1e30 is -inf in fp16
        expected = [_argmax_reference(r, nan_mode) for r in x.astype(np.float64)]
        (got,) = run_op(Op.ARGMAX, [I(x, dtype)], [(I32, (len(rows),))], axis=1, nan_mode=nan_mode)
        assert got.tolist() == expected, dtype


def test_argmax_integer_along_each_axis():
    x = _ints(I8, (3, 4, 5), -3, 3)
    for axis in range(3):
        shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
        (got,) = run_op(Op.ARGMAX, [I(x, I8)], [(I32, shape)], axis=axis, nan_mode=PROPAGATE)
        np.testing.assert_array_equal(got, np.argmax(x, axis=axis))  # numpy: first maximum


# -- FFT -------------------------------------------------------------------------------------------------
def _dft_reference(real, imag, inverse):
    _, h, w = real.shape
    sign = -1.0 if inverse else 1.0
    oy, iy = np.meshgrid(np.arange(h), np.arange(h), indexing="ij")
    ox, ix = np.meshgrid(np.arange(w), np.arange(w), indexing="ij")
    ay, ax = (oy * iy) % h, (ox * ix) % w
    a = sign * 2 * np.pi * (ay[:, None, :, None] / h + ax[None, :, None, :] / w)  # [oy, ox, iy, ix]
    re, im = real.astype(np.float64), imag.astype(np.float64)
    out_re = np.einsum("yxij,nij->nyx", np.cos(a), re) + np.einsum("yxij,nij->nyx", np.sin(a), im)
    out_im = -np.einsum("yxij,nij->nyx", np.sin(a), re) + np.einsum("yxij,nij->nyx", np.cos(a), im)
    return out_re, out_im


@pytest.mark.parametrize("inverse", [False, True])
def test_fft2d_matches_the_definition(inverse):
    real, imag = _floats(F32, (2, 4, 8)), _floats(F32, (2, 4, 8))
    exp_re, exp_im = _dft_reference(real, imag, inverse)
    got_re, got_im = run_op(Op.FFT2D, [I(real, F32), I(imag, F32)], [(F32, (2, 4, 8))] * 2, inverse=inverse)
    np.testing.assert_allclose(got_re, exp_re, atol=1e-5)
    np.testing.assert_allclose(got_im, exp_im, atol=1e-5)


@pytest.mark.parametrize(("h", "w"), [(4, 8), (1, 4), (2, 1), (8, 2)])
def test_rfft2d_matches_the_definition_with_exact_zeros(h, w):
    real = _floats(F32, (2, h, w))
    exp_re, exp_im = _dft_reference(real, np.zeros_like(real), False)
    got_re, got_im = run_op(Op.RFFT2D, [I(real, F32)], [(F32, (2, h, w // 2 + 1))] * 2)
    np.testing.assert_allclose(got_re, exp_re[:, :, : w // 2 + 1], atol=1e-5)
    np.testing.assert_allclose(got_im, exp_im[:, :, : w // 2 + 1], atol=1e-5)
    rows = [0, h // 2] if h > 1 else [0]
    cols = [0, w // 2] if w > 1 else [0]
    assert np.all(got_im[:, rows][:, :, cols] == 0)


# -- against the reference model ---------------------------------------------------------------------------
def _reference_cases():
    x8, w8 = _ints(I8, (1, 7, 5, 4)), _ints(I8, (3, 2, 3, 4))  # exact output sizes: 6 / 2 + 1, 3 / 1 + 1
    conv_attrs = {"pad": (1, 0, 2, 1), "stride": (2, 1), "dilation": (1, 2)}
    yield (
        "conv2d-int8",
        op_program(
            Op.CONV2D,
            [I(x8, I8), C(w8, I8), C(_ints(I16, (3,)), I32), C([3], I8), C([-2], I8)],
            [(I32, (1, 4, 4, 3))],
            acc_type=I32,
            **conv_attrs,
        ),
    )
    xf, wf = _floats(F16, (1, 7, 5, 4)), _floats(F16, (3, 2, 3, 4))
    yield (
        "conv2d-fp16",
        op_program(
            Op.CONV2D,
            [I(xf, F16), C(wf, F16), C(_floats(F16, (3,)), F16), C([0], F16), C([0], F16)],
            [(F16, (1, 4, 4, 3))],
            acc_type=F16,
            **conv_attrs,
        ),
    )
    yield (
        "transpose_conv2d-int16",
        op_program(
            Op.TRANSPOSE_CONV2D,
            [I(_ints(I16, (1, 3, 3, 2)), I16), C(_ints(I8, (2, 3, 2, 2)), I8), C([7], I48), C([0], I16), C([0], I8)],
            [(I48, (1, 6, 9, 2))],
            out_pad=(-1, 0, 1, 0),
            stride=(2, 3),
            acc_type=I48,
        ),
    )
    yield (
        "avg_pool2d-int8",
        op_program(
            Op.AVG_POOL2D,
            [I(_ints(I8, (1, 8, 6, 2)), I8), C([-5], I8), C([9], I8)],
            [(I8, (1, 4, 6, 2))],
            kernel=(3, 2),
            stride=(2, 1),
            pad=(0, 1, 1, 0),
            acc_type=I32,
        ),
    )
    yield (
        "matmul-bf16",
        op_program(
            Op.MATMUL,
            [I(_floats(BF16, (2, 3, 9)), BF16), I(_floats(BF16, (2, 9, 4)), BF16), C([0], BF16), C([0], BF16)],
            [(F32, (2, 3, 4))],
        ),
    )


@pytest.mark.parametrize(("name", "case"), list(_reference_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_hand_built_programs_match_the_reference_model(name, case):
    program, inputs = case
    outcome = check_program(program, inputs)
    assert outcome.compliant and outcome.tight, outcome.detail


TENSOR_OPS = [
    "argmax", "avg_pool2d", "conv2d", "conv3d", "depthwise_conv2d", "fft2d", "matmul", "max_pool2d", "rfft2d",
    "transpose_conv2d",
]  # fmt: skip
CASES = [(p, op) for p in sorted(PROFILES) for op in TENSOR_OPS if not (p == "tosa-pro-int" and "fft" in op)]


@pytest.mark.parametrize(("profile", "op"), CASES)
def test_tensor_cts_smoke(profile, op):
    assert_outcomes(check_cts_tests(smoke_tests(profile, op)))


@pytest.mark.slow
@pytest.mark.parametrize(("profile", "op"), CASES)
def test_tensor_cts_full(profile, op):
    assert_outcomes(check_cts_tests(full_tests(profile, op)))


def test_ml_dtypes_storage_types_are_what_the_kernels_assume():
    assert BF16.numpy == np.dtype(ml_dtypes.bfloat16) and E4M3.numpy == np.dtype(ml_dtypes.float8_e4m3fn)
