"""Tensor operators: convolutions, MATMUL, pooling, ARGMAX, FFT2D / RFFT2D.

How the arithmetic stays within the specification while BLAS does the work:

* Integer results must be exact. Operands (minus their zero points) are converted to a float type and
  multiplied by BLAS when ``max|a| * max|b| * terms`` stays below the largest integer that type holds
  exactly (2**24 for float32, 2**53 for float64): every product and partial sum is then an integer the
  type represents exactly, in any summation order, so the float result is the exact sum. float32 covers
  the int8 products of most real layers and runs sgemm at twice dgemm's speed; beyond 2**53, int64
  arithmetic is used. The exact sum is then wrapped to the output type: overflow of the int32 / int48
  accumulator is a REQUIRE in the specification (unpredictable), so wrapping is allowed and deterministic.
* Floating-point dot products are judged against an fp64 reference with an error bound scaled to the
  accumulator and output types. Every float type is widened to float32 (exact for fp16, bf16 and fp8),
  multiplied and summed by sgemm, and rounded once to the output type. That is at least as accurate
  as accumulating in fp16 (the fp16 / fp8 ``acc_type``), so it meets those bounds as well; the bias
  joins the product as one more term (the bound counts it as one).
* Convolutions are im2col: a strided window view of the zero-padded input is copied into a
  ``[rows, K*C + 1]`` matrix (the last column is ones, for the bias) in chunks of a few output rows,
  each multiplied with the weights by one GEMM. Chunks of a large convolution run on several threads
  (:mod:`..parallel`); the weight matrix of a constant weight is built once per program. A float32
  result is written straight into the program's output buffer when the interpreter offers one.
  TRANSPOSE_CONV2D multiplies the input by each kernel tap and adds the products into the strided output
  positions (no multiplies by inserted zeros). DEPTHWISE_CONV2D, with one tiny product per channel,
  accumulates kernel taps elementwise instead.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ....tosa.attributes import NanPropagationMode
from ....tosa.operators import Op
from ..kernel import KernelContext, constants, kernel, prepared
from ..parallel import parallel_for, split_threads

# The largest integer below which every integer is exact, per BLAS work type.
_EXACT = {np.dtype(np.float32): 2**24, np.dtype(np.float64): 2**53}
_CHUNK_BYTES = 512 << 10  # im2col rows per GEMM: a chunk and its output stay in a core's L2 cache
_SPLIT_MACS = 4 << 20  # below this many multiply-adds a kernel runs on one thread (a hand-off costs more)


def _is_int(value: np.ndarray) -> bool:
    return value.dtype.kind == "i"


def _zp(value: np.ndarray | None) -> int:
    return int(np.asarray(value).reshape(-1)[0]) if value is not None else 0


_RANGES: dict[np.dtype, tuple[int, int]] = {}  # integer dtype -> (min, max); np.iinfo costs more than a conv2d


def _magnitude(value: np.ndarray, zero_point: np.ndarray | None) -> int:
    """A bound on ``|value - zero_point|`` from the dtype and the zero point alone (no pass over the data)."""
    limits = _RANGES.get(value.dtype)
    if limits is None:
        info = np.iinfo(value.dtype)
        limits = _RANGES[value.dtype] = (int(info.min), int(info.max))
    zp = _zp(zero_point)
    return max(limits[1] - zp, zp - limits[0])


def _work_type(a: np.ndarray, a_zp: np.ndarray | None, b: np.ndarray, b_zp: np.ndarray | None, terms: int) -> np.dtype:
    """The cheapest type in which ``sum(a * b)`` over ``terms`` products is exact (see the module doc)."""
    bound = _magnitude(a, a_zp) * _magnitude(b, b_zp) * max(terms, 1)
    for dtype, exact in _EXACT.items():
        if bound < exact:
            return dtype
    return np.dtype(np.int64)


def _operand(value: np.ndarray, zero_point: np.ndarray | None, work: np.dtype | None = None) -> np.ndarray:
    """``value - zero_point`` in the work type: ``work`` for integers (exact), float32 for floats."""
    if not _is_int(value):
        return value.astype(np.float32, copy=False)
    out = value.astype(work if work is not None else np.float64)
    zp = _zp(zero_point)
    if zp:
        out -= zp
    return out


def _to_output(acc: np.ndarray, bias: np.ndarray | None, out_dtype: np.dtype) -> np.ndarray:
    """Exact integer sum (+ bias) wrapped to int32, or to 48 bits for int48 (int64 storage)."""
    if out_dtype == np.int32 and acc.dtype == np.float32:
        # |sum| < 2**24 (the float32 bound): the cast is exact, and int32 addition wraps like the accumulator.
        total32 = acc.astype(np.int32)
        if bias is not None:
            total32 += bias.astype(np.int32)
        return total32
    total = acc if acc.dtype == np.int64 else acc.astype(np.int64)  # exact integers: no rounding needed
    if bias is not None:
        total = total + bias.astype(np.int64)
    if out_dtype == np.int64:
        return ((total + (1 << 47)) & ((1 << 48) - 1)) - (1 << 47)
    return total.astype(out_dtype)


def _destination(ctx: KernelContext, dtype: np.dtype) -> np.ndarray | None:
    """The program's output buffer for this operator's result, when there is one of the right type."""
    out = ctx.destination(0)
    if out is None or out.dtype != dtype or out.shape != tuple(ctx.outputs[0].shape):
        return None
    return out


# -- convolutions ----------------------------------------------------------------------------------
def _padded(value: np.ndarray, pads: Sequence[int], zero_point: np.ndarray | None, work: np.dtype) -> np.ndarray:
    """The operand in its work type with zeros around the spatial axes (``pads`` = before/after pairs)."""
    if not any(pads):
        return _operand(value, zero_point, work)
    before, after = pads[0::2], pads[1::2]
    shape = (
        value.shape[0],
        *(d + b + a for d, b, a in zip(value.shape[1:-1], before, after, strict=True)),
        value.shape[-1],
    )
    out = np.zeros(shape, work if _is_int(value) else np.float32)
    inner = out[(slice(None), *(slice(b, b + d) for b, d in zip(before, value.shape[1:-1], strict=True)), slice(None))]
    inner[...] = value  # converted on the way in (exact: the work type holds every value), no separate copy
    if _is_int(value):
        zp = _zp(zero_point)
        if zp:
            inner -= zp
    return out


def _view(base: np.ndarray, shape: Sequence[int], strides: Sequence[int], writeable: bool) -> np.ndarray:
    """``as_strided`` for a C-contiguous ``base``, without its Python overhead (it costs more than small
    convolutions); the extent is checked against the buffer."""
    if not base.flags.c_contiguous:
        return as_strided(base, tuple(shape), tuple(strides), writeable=writeable)
    view = np.ndarray(tuple(shape), base.dtype, base, 0, tuple(strides))
    if not writeable:
        view.flags.writeable = False
    return view


def _windows(
    x: np.ndarray, out_sp: Sequence[int], kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int]
) -> np.ndarray:
    """Read-only view [N, *out_sp, *kernel, C] of the padded input: element (n, o, k, c) is the input at
    ``o * stride + k * dilation``."""
    st = x.strides
    rank = len(kernel)
    strides = (
        st[0],
        *(st[1 + i] * stride[i] for i in range(rank)),
        *(st[1 + i] * dilation[i] for i in range(rank)),
        st[-1],
    )
    return _view(x, (x.shape[0], *out_sp, *kernel, x.shape[-1]), strides, writeable=False)


def _c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


class _Scratch(threading.local):
    """One reusable im2col buffer per thread (callers and pool helpers), kept between calls: a fresh buffer
    every call pays its page faults again each time. About ``_CHUNK_BYTES`` (one output row at the least)."""

    buffer: np.ndarray | None = None

    def get(self, size: int, dtype: np.dtype) -> np.ndarray:
        nbytes = size * dtype.itemsize
        if self.buffer is None or self.buffer.nbytes < nbytes:
            self.buffer = np.empty(max(nbytes, 1 << 20), np.uint8)
        return self.buffer[:nbytes].view(dtype)


_scratch = _Scratch()


def _weight_matrix(w: np.ndarray, w_zp: np.ndarray | None, bias: np.ndarray | None, work: np.dtype) -> np.ndarray:
    """[K*C (+1), OC] in the work type: the weights as one GEMM operand, with the bias as the last row."""
    oc = w.shape[0]
    wmat = _operand(w, w_zp, work).reshape(oc, -1).T
    if bias is not None:
        wmat = np.concatenate([wmat, bias.astype(work).reshape(1, oc)])
    return np.ascontiguousarray(wmat)


def _im2col_gemm(windows: np.ndarray, wmat: np.ndarray, with_bias: bool, out: np.ndarray) -> np.ndarray:
    """out [N, *out_sp, OC] = im2col(windows) @ wmat; with ``with_bias`` a column of ones meets the bias row.

    The work is cut into chunks of about ``_CHUNK_BYTES`` of im2col rows: a block of output rows of one
    image, or several whole images when one image is smaller than that (a linear layer over a batch)."""
    n, *rest = windows.shape
    rank = (len(rest) - 1) // 2
    out_sp, taps = rest[:rank], rest[rank:]  # taps: the kernel dims and C
    k = math.prod(taps)
    if len(taps) >= 2 and windows.strides[-2] == taps[-1] * windows.strides[-1]:
        # (kx, c) of a window lie next to each other in the input (x dilation 1): copy them as one run,
        # which fills the same im2col matrix with a few times fewer, longer inner loops
        taps = [*taps[:-2], taps[-2] * taps[-1]]
        windows = windows.reshape(n, *out_sp, *taps)
    width, oc = wmat.shape
    inner = math.prod(out_sp[1:])
    row_bytes = max(1, inner * width * wmat.itemsize)  # one row of the first output axis
    macs = n * out_sp[0] * inner * width * oc
    threads = split_threads() if macs >= _SPLIT_MACS else 1
    rows_per_chunk = max(1, _CHUNK_BYTES // row_bytes)
    if rows_per_chunk >= out_sp[0]:  # whole images per chunk
        images = max(1, min(n, rows_per_chunk // max(out_sp[0], 1), -(-n // (2 * threads)) if threads > 1 else n))
        units = [(b, min(n, b + images), 0, out_sp[0]) for b in range(0, n, images)]
        if len(units) < 2 * threads and threads > 1:  # too few chunks to share: cut the images into row blocks
            size = max(1, -(-out_sp[0] * n // (2 * threads)))
            units = [(b, b + 1, r, min(out_sp[0], r + size)) for b in range(n) for r in range(0, out_sp[0], size)]
    else:
        size = rows_per_chunk
        units = [(b, b + 1, r, min(out_sp[0], r + size)) for b in range(n) for r in range(0, out_sp[0], size)]
    col_strides = _c_strides(taps, wmat.itemsize)

    def one(index: int) -> None:
        b0, b1, start, stop = units[index]
        block = (b1 - b0, stop - start, *out_sp[1:])
        rows = math.prod(block)
        cols = _scratch.get(rows * width, wmat.dtype).reshape(rows, width)
        dst = _view(cols, (*block, *taps), _c_strides(block, width * cols.itemsize) + col_strides, True)
        np.copyto(dst, windows[b0:b1, start:stop])
        if with_bias:
            cols[:, k] = 1
        np.matmul(cols, wmat, out=out[b0:b1, start:stop].reshape(rows, oc))

    if threads > 1 and len(units) > 1:
        parallel_for(len(units), one, threads)
    else:
        for index in range(len(units)):
            one(index)
    return out


def _pointwise(x: np.ndarray, wmat: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> np.ndarray:
    """A 1x1 convolution with stride 1 and no padding (a linear layer): the input already is the im2col
    matrix, so no copy; the bias is added after the product."""
    c = x.shape[-1]
    rows = x.size // c
    if rows * c * wmat.shape[1] >= _SPLIT_MACS:
        _matmul_into(x.reshape(1, rows, c), wmat[None, :c], out.reshape(1, rows, -1))
    else:
        np.matmul(x.reshape(rows, c), wmat[:c], out=out.reshape(rows, -1))
    if bias is not None:
        out += bias
    return out


def _bias(bias: np.ndarray, channels: int) -> np.ndarray:
    flat = bias.reshape(-1)
    return flat if flat.shape[0] == channels else np.broadcast_to(flat, (channels,))


def _conv_plan(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> tuple:
    """Everything about a convolution that does not depend on the input's values."""
    x, w, bias, x_zp, w_zp = inputs
    attribute = ctx.operator.attribute
    out_decl = ctx.outputs[0]
    out_sp, oc = tuple(out_decl.shape[1:-1]), out_decl.shape[-1]
    taps = w.shape[1:-1]
    k = math.prod(taps) * x.shape[-1]
    integer = _is_int(x)
    work = _work_type(x, x_zp, w, w_zp, k) if integer else np.dtype(np.float32)
    # Integer biases are added exactly after the product; a float bias joins the GEMM as one more term.
    fold_bias = not integer
    bias_vec = _bias(bias, oc)
    if ctx.is_constant(1) and (not fold_bias or ctx.is_constant(2)) and (not integer or ctx.is_constant(4)):
        wmat = ctx.cached(("conv", work), lambda: _weight_matrix(w, w_zp, bias_vec if fold_bias else None, work))
    else:
        wmat = _weight_matrix(w, w_zp, bias_vec if fold_bias else None, work)
    pointwise = all(t == 1 for t in taps) and all(s == 1 for s in attribute.stride) and not any(attribute.pad)
    return integer, work, fold_bias, bias_vec, wmat, out_sp, oc, taps, pointwise, out_decl.dtype.numpy


def _conv(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    x, x_zp = inputs[0], inputs[3]
    attribute = ctx.operator.attribute
    # With constant weights, bias and zero points the plan is made once per operator.
    plan = prepared(ctx, "conv", lambda: _conv_plan(ctx, inputs) if constants(ctx, 1, 2, 3, 4) else None)
    integer, work, fold_bias, bias_vec, wmat, out_sp, oc, taps, pointwise, out_dtype = plan or _conv_plan(ctx, inputs)
    shape = (x.shape[0], *out_sp, oc)
    dest = None if integer else _destination(ctx, work)
    out = dest if dest is not None else np.empty(shape, work)
    if pointwise:
        acc = _pointwise(_operand(x, x_zp, work), wmat, wmat[-1] if fold_bias else None, out)
    else:
        windows = _windows(_padded(x, attribute.pad, x_zp, work), out_sp, taps, attribute.stride, attribute.dilation)
        acc = _im2col_gemm(windows, wmat, fold_bias, out)
    if integer:
        return [_to_output(acc, bias_vec, out_dtype)]
    return [acc.astype(out_dtype, copy=False)]


kernel(Op.CONV2D)(_conv)
kernel(Op.CONV3D)(_conv)


def _tap_rows(weights: np.ndarray, width: int) -> np.ndarray:
    """[KH, KW, width, C] from depthwise weights [KH, KW, C, 1]: each tap's channel weights, ``width`` times."""
    kh, kw, c, _ = weights.shape
    return np.ascontiguousarray(np.broadcast_to(weights[:, :, None, :, 0], (kh, kw, width, c)))


@kernel(Op.DEPTHWISE_CONV2D)
def depthwise_conv2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    x, w, bias, x_zp, w_zp = inputs
    attribute = ctx.operator.attribute
    out_decl = ctx.outputs[0]
    n, out_h, out_w, out_c = out_decl.shape
    kh, kw, c, m = w.shape
    integer = _is_int(x)
    # Elementwise int64 is exact and as fast as float64 here.
    work = np.dtype(np.int64) if integer else np.dtype(np.float32)
    padded = _padded(x, attribute.pad, x_zp, work)
    windows = _windows(padded, (out_h, out_w), (kh, kw), attribute.stride, attribute.dilation)
    if m == 1:
        # Each tap's weights repeated along a row of the output: with a contiguous input row (stride 1),
        # the product of a tap then runs as one long loop per row instead of one short loop per pixel.
        rows = _constant_or(ctx, 1, lambda: _tap_rows(_operand(w, w_zp, work), out_w), (4,), ("dw", work))
        acc = np.zeros((n, out_h, out_w, c), padded.dtype)
        product = np.empty_like(acc)  # one buffer for every tap's products (same operations, no allocations)
        for ky in range(kh):
            for kx in range(kw):
                np.multiply(windows[:, :, :, ky, kx, :], rows[ky, kx], out=product)
                acc += product
    else:
        weights = _operand(w, w_zp, work)
        acc = np.zeros((n, out_h, out_w, c, m), padded.dtype)
        product = np.empty_like(acc)
        for ky in range(kh):
            for kx in range(kw):
                np.multiply(windows[:, :, :, ky, kx, :, None], weights[ky, kx], out=product)
                acc += product
        acc = acc.reshape(n, out_h, out_w, out_c)
    if integer:
        return [_to_output(acc, _bias(bias, out_c), out_decl.dtype.numpy)]
    acc += _bias(bias, out_c).astype(np.float32)
    return [acc.astype(out_decl.dtype.numpy, copy=False)]


@kernel(Op.TRANSPOSE_CONV2D)
def transpose_conv2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    x, w, bias, x_zp, w_zp = inputs
    attribute = ctx.operator.attribute
    out_decl = ctx.outputs[0]
    n, out_h, out_w, oc = out_decl.shape
    _, in_h, in_w, ic = x.shape
    _, kh, kw, _ = w.shape
    sy, sx = attribute.stride
    top, _, left, _ = attribute.out_pad
    integer = _is_int(x)
    # Each output sums up to kh * kw * ic products.
    work = _work_type(x, x_zp, w, w_zp, kh * kw * ic) if integer else np.dtype(np.float32)
    xs = _operand(x, x_zp, work).reshape(-1, ic)
    ws = _operand(w, w_zp, work)
    # Output row oy receives input row iy through tap ky when oy = iy * sy + ky + top.
    full_h, full_w = (in_h - 1) * sy + kh, (in_w - 1) * sx + kw
    full = np.zeros((n, full_h, full_w, oc), xs.dtype)
    for ky in range(kh):
        for kx in range(kw):
            product = (xs @ ws[:, ky, kx, :].T).reshape(n, in_h, in_w, oc)
            full[:, ky : ky + (in_h - 1) * sy + 1 : sy, kx : kx + (in_w - 1) * sx + 1 : sx] += product
    acc = np.zeros((n, out_h, out_w, oc), xs.dtype)
    y0, y1 = max(0, top), min(out_h, top + full_h)
    x0, x1 = max(0, left), min(out_w, left + full_w)
    if y0 < y1 and x0 < x1:
        acc[:, y0:y1, x0:x1] = full[:, y0 - top : y1 - top, x0 - left : x1 - left]
    if integer:
        return [_to_output(acc, _bias(bias, oc), out_decl.dtype.numpy)]
    acc += _bias(bias, oc).astype(np.float32)
    return [acc.astype(out_decl.dtype.numpy, copy=False)]


def _matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = a @ b for [N, H, C] x [N, C, W]; a large product is split by rows of ``a`` across threads."""
    n, h, c = a.shape
    w = b.shape[2]
    threads = split_threads() if n * h * c * w >= _SPLIT_MACS and h >= 32 else 1
    if threads == 1:
        return np.matmul(a, b, out=out)
    # Row blocks of at least 16 rows (BLAS's panels), about two per thread.
    per_batch = max(1, min(h // 16, -(-2 * threads // n)))
    size = -(-h // per_batch)
    tasks = [(i, r, min(h, r + size)) for i in range(n) for r in range(0, h, size)]

    def one(index: int) -> None:
        i, start, stop = tasks[index]
        np.matmul(a[i, start:stop], b[i], out=out[i, start:stop])

    parallel_for(len(tasks), one, threads)
    return out


@kernel(Op.MATMUL)
def matmul(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    a, b, a_zp, b_zp = inputs
    out_decl = ctx.outputs[0]
    out_dtype = out_decl.dtype.numpy
    shape = (a.shape[0], a.shape[1], b.shape[2])
    if not _is_int(a):
        wa, wb = _operand(a, None), _constant_or(ctx, 1, lambda: _operand(b, None))
        dest = _destination(ctx, np.dtype(np.float32))
        acc = _matmul_into(wa, wb, dest if dest is not None else np.empty(shape, np.float32))
        return [acc.astype(out_dtype, copy=False)]
    work = _work_type(a, a_zp, b, b_zp, a.shape[-1])
    wa = _operand(a, a_zp, work)
    wb = _constant_or(ctx, 1, lambda: _operand(b, b_zp, work), (3,), work)
    if work == np.int64:  # no BLAS for integers: numpy's own loop
        return [_to_output(np.matmul(wa, wb), None, out_dtype)]
    return [_to_output(_matmul_into(wa, wb, np.empty(shape, work)), None, out_dtype)]


def _constant_or(
    ctx: KernelContext, index: int, make: Callable[[], np.ndarray], also: tuple[int, ...] = (), tag: Any = None
) -> np.ndarray:
    """``make()``, computed once per program when operand ``index`` (and those in ``also``) are constants."""
    if constants(ctx, index, *also):
        return prepared(ctx, ("operand", index, tag), make)
    return make()


# -- pooling ---------------------------------------------------------------------------------------
def _pool_windows(value: np.ndarray, attribute: Any, fill: float, reduce: np.ufunc) -> np.ndarray:
    """Reduce every [kernel] window of the input (padded with ``fill``) with the binary ufunc ``reduce``;
    separable: first along x, then along y."""
    ky, kx = attribute.kernel
    sy, sx = attribute.stride
    top, bottom, left, right = attribute.pad
    n, h, w, c = value.shape
    out_h, out_w = (h + top + bottom - ky) // sy + 1, (w + left + right - kx) // sx + 1
    padded = np.full((n, h + top + bottom, w + left + right, c), fill, value.dtype)
    padded[:, top : top + h, left : left + w] = value
    rows = padded[:, :, 0 : (out_w - 1) * sx + 1 : sx].copy()
    for i in range(1, kx):
        reduce(rows, padded[:, :, i : i + (out_w - 1) * sx + 1 : sx], out=rows)
    acc = rows[:, 0 : (out_h - 1) * sy + 1 : sy].copy()
    for i in range(1, ky):
        reduce(acc, rows[:, i : i + (out_h - 1) * sy + 1 : sy], out=acc)
    return acc


def _valid_counts(size: int, kernel: int, stride: int, pad: int, out_size: int) -> np.ndarray:
    start = np.arange(out_size, dtype=np.int64) * stride - pad
    return np.minimum(start + kernel, size) - np.maximum(start, 0)


@kernel(Op.AVG_POOL2D)
def avg_pool2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    value, in_zp, out_zp = inputs
    attribute = ctx.operator.attribute
    integer = _is_int(value)
    work = value.astype(np.int64) - _zp(in_zp) if integer else value.astype(np.float64)
    total = _pool_windows(work, attribute, 0, np.add)
    _, out_h, out_w, _ = total.shape
    (ky, kx), (sy, sx), (top, _, left, _) = attribute.kernel, attribute.stride, attribute.pad
    count = (
        _valid_counts(value.shape[1], ky, sy, top, out_h)[:, None]
        * _valid_counts(value.shape[2], kx, sx, left, out_w)[None, :]
    )[None, :, :, None]
    if not integer:
        return [(total / count).astype(value.dtype)]
    # reciprocal_scale(count) then apply_scale_32 (single rounding), per distinct count.
    shift_k = np.zeros_like(count)
    for c in np.unique(count):
        shift_k[count == c] = (int(c) - 1).bit_length()
    multiplier = (((1 << 30) + 1) << shift_k) // count
    shift = 30 + shift_k
    scaled = (total * multiplier + (np.int64(1) << (shift - 1))) >> shift
    info = np.iinfo(value.dtype)
    return [np.clip(scaled + _zp(out_zp), info.min, info.max).astype(value.dtype)]


def _ignores_nan(ctx: KernelContext) -> bool:
    return ctx.operator.attribute.nan_mode == NanPropagationMode.IGNORE


@kernel(Op.MAX_POOL2D)
def max_pool2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    (value,) = inputs
    attribute = ctx.operator.attribute
    if _is_int(value):
        return [_pool_windows(value, attribute, np.iinfo(value.dtype).min, np.maximum)]
    # float32 holds every fp16 / bf16 / fp8 value exactly, and the result is one of the inputs.
    wide = value.astype(np.float32)
    if _ignores_nan(ctx):  # padding is NaN, which fmax skips; an all-NaN window stays NaN
        result = _pool_windows(wide, attribute, np.nan, np.fmax)
    else:
        result = _pool_windows(wide, attribute, -np.inf, np.maximum)
    return [result.astype(value.dtype)]


@kernel(Op.ARGMAX)
def argmax(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    (value,) = inputs
    axis = ctx.operator.attribute.axis
    out_dtype = ctx.outputs[0].dtype.numpy
    if _is_int(value) or not _ignores_nan(ctx):
        # np.argmax returns the first maximum, and the first NaN if there is one (PROPAGATE).
        wide = value if _is_int(value) else value.astype(np.float32)
        return [np.asarray(np.argmax(wide, axis=axis), dtype=out_dtype)]  # rank 1 -> rank 0 array
    # IGNORE: the first element equal to the largest non-NaN value; index 0 when all are NaN.
    wide = value.astype(np.float32)
    best = np.fmax.reduce(wide, axis=axis, keepdims=True)
    return [np.asarray(np.argmax(wide == best, axis=axis), dtype=out_dtype)]


# -- FFT -------------------------------------------------------------------------------------------
@kernel(Op.FFT2D)
def fft2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    real, imag = inputs
    signal = np.empty(real.shape, np.complex128)
    signal.real, signal.imag = real, imag  # not real + 1j * imag: 1j * inf would put a NaN in the real part
    if ctx.operator.attribute.inverse:
        result = np.fft.ifft2(signal, norm="forward")  # TOSA's inverse is not scaled by 1/(H*W)
    else:
        result = np.fft.fft2(signal)
    return [result.real.astype(np.float32), result.imag.astype(np.float32)]


@kernel(Op.RFFT2D)
def rfft2d(ctx: KernelContext, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    (real,) = inputs
    _, h, w = real.shape
    result = np.fft.rfft2(real.astype(np.float64))
    imag = result.imag.astype(np.float32)
    # Where every angle is a multiple of pi the specification adds no sine terms: exactly zero.
    rows = [0, h // 2] if h > 1 else [0]
    cols = [0, w // 2] if w > 1 else [0]
    imag[:, np.array(rows)[:, None], np.array(cols)[None, :]] = 0.0
    return [result.real.astype(np.float32), imag]
