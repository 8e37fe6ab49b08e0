"""Convolutions: CONV2D, CONV3D, DEPTHWISE_CONV2D and TRANSPOSE_CONV2D, on the arithmetic of :mod:`.products`.

CONV2D and CONV3D are im2col: a strided window view of the zero-padded input is copied into a
``[rows, K*C + 1]`` matrix (the last column is ones, for the bias) in chunks of a few output rows, each
multiplied with the weights by one GEMM. A float bias joins the product as one more term (the error
bound counts it as one); an integer bias is added exactly after it. Chunks of a large convolution run on
several threads (:mod:`..parallel`); the weight matrix of a constant weight is built once per program. A
float32 result is written straight into the program's output buffer when the interpreter offers one.
TRANSPOSE_CONV2D multiplies the input by each kernel tap and adds the products into the strided output
positions (no multiplies by inserted zeros). DEPTHWISE_CONV2D, with one tiny product per channel,
accumulates kernel taps elementwise instead.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ....tosa.operators import Op
from ..kernel import KernelContext, constants, kernel, prepared
from ..parallel import parallel_for, split_threads
from .products import (
    SPLIT_MACS,
    constant_or,
    is_int,
    matmul_into,
    operand,
    output_buffer,
    to_output,
    work_type,
    zero_point,
)

_CHUNK_BYTES = 512 << 10  # im2col rows per GEMM: a chunk and its output stay in a core's L2 cache


def _padded(value: np.ndarray, pads: Sequence[int], zp: np.ndarray | None, work: np.dtype) -> np.ndarray:
    """The operand in its work type with zeros around the spatial axes (``pads`` = before/after pairs)."""
    if not any(pads):
        return operand(value, zp, work)
    before, after = pads[0::2], pads[1::2]
    shape = (
        value.shape[0],
        *(d + b + a for d, b, a in zip(value.shape[1:-1], before, after, strict=True)),
        value.shape[-1],
    )
    out = np.zeros(shape, work if is_int(value) else np.float32)
    inner = out[(slice(None), *(slice(b, b + d) for b, d in zip(before, value.shape[1:-1], strict=True)), slice(None))]
    inner[...] = value  # converted on the way in (exact: the work type holds every value), no separate copy
    if is_int(value):
        point = zero_point(zp)
        if point:
            inner -= point
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
    wmat = operand(w, w_zp, work).reshape(oc, -1).T
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
    threads = split_threads() if macs >= SPLIT_MACS else 1
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
    if rows * c * wmat.shape[1] >= SPLIT_MACS:
        matmul_into(x.reshape(1, rows, c), wmat[None, :c], out.reshape(1, rows, -1))
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
    integer = is_int(x)
    work = work_type(x, x_zp, w, w_zp, k) if integer else np.dtype(np.float32)
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
    dest = None if integer else output_buffer(ctx, work)
    out = dest if dest is not None else np.empty(shape, work)
    if pointwise:
        acc = _pointwise(operand(x, x_zp, work), wmat, wmat[-1] if fold_bias else None, out)
    else:
        windows = _windows(_padded(x, attribute.pad, x_zp, work), out_sp, taps, attribute.stride, attribute.dilation)
        acc = _im2col_gemm(windows, wmat, fold_bias, out)
    if integer:
        return [to_output(acc, bias_vec, out_dtype)]
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
    integer = is_int(x)
    # Elementwise int64 is exact and as fast as float64 here.
    work = np.dtype(np.int64) if integer else np.dtype(np.float32)
    padded = _padded(x, attribute.pad, x_zp, work)
    windows = _windows(padded, (out_h, out_w), (kh, kw), attribute.stride, attribute.dilation)
    if m == 1:
        # Each tap's weights repeated along a row of the output: with a contiguous input row (stride 1),
        # the product of a tap then runs as one long loop per row instead of one short loop per pixel.
        rows = constant_or(ctx, 1, lambda: _tap_rows(operand(w, w_zp, work), out_w), (4,), ("dw", work))
        acc = np.zeros((n, out_h, out_w, c), padded.dtype)
        product = np.empty_like(acc)  # one buffer for every tap's products (same operations, no allocations)
        for ky in range(kh):
            for kx in range(kw):
                np.multiply(windows[:, :, :, ky, kx, :], rows[ky, kx], out=product)
                acc += product
    else:
        weights = operand(w, w_zp, work)
        acc = np.zeros((n, out_h, out_w, c, m), padded.dtype)
        product = np.empty_like(acc)
        for ky in range(kh):
            for kx in range(kw):
                np.multiply(windows[:, :, :, ky, kx, :, None], weights[ky, kx], out=product)
                acc += product
        acc = acc.reshape(n, out_h, out_w, out_c)
    if integer:
        return [to_output(acc, _bias(bias, out_c), out_decl.dtype.numpy)]
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
    integer = is_int(x)
    # Each output sums up to kh * kw * ic products.
    work = work_type(x, x_zp, w, w_zp, kh * kw * ic) if integer else np.dtype(np.float32)
    xs = operand(x, x_zp, work).reshape(-1, ic)
    ws = operand(w, w_zp, work)
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
        return [to_output(acc, _bias(bias, oc), out_decl.dtype.numpy)]
    acc += _bias(bias, oc).astype(np.float32)
    return [acc.astype(out_decl.dtype.numpy, copy=False)]
