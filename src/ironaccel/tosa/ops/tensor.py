"""Rules of the tensor operators (spec chapter "Tensor Operators").

The shape variables the argument tables share (N, IC...) are unified by the validator before a rule
runs; rules here compute what the tables leave to the pseudocode: output sizes of windows
(``idiv_check`` divisibility), bounds on pad / stride / dilation / kernel, bias width and zero points.
Dimensions may be -1 (unknown); every formula then yields -1 instead of a guess.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..attributes import NanPropagationMode
from ..dtypes import DType
from ..operators import Op
from .rule import Context, TensorType, rule


def ints(ctx: Context, name: str, count: int) -> tuple[int, ...]:
    """An attribute list such as ``stride``, with the length the operator needs."""
    value = tuple(int(v) for v in getattr(ctx.attribute, name))
    ctx.error_if(len(value) != count, f"{name} must have {count} values, got {len(value)}")
    return value


def check_zero_point(ctx: Context, index: int, dtype: DType, name: str) -> None:
    """ERROR_IF a zero point is not 0 for a type other than int8 (the value is a CTC input)."""
    zp = ctx.const(index)
    if zp is None or dtype is DType.INT8:
        return
    nonzero = bool(np.any(np.asarray(zp).astype(np.float64) != 0))
    ctx.error_if(nonzero, f"{name} must be 0 for {dtype} (zero points are for int8 only)", ctx.inputs[index].name)


def check_nan_mode(ctx: Context) -> None:
    mode = ctx.attribute.nan_mode
    ok = mode in (NanPropagationMode.PROPAGATE, NanPropagationMode.IGNORE)
    ctx.error_if(not ok, f"nan_mode {int(mode)} is neither PROPAGATE nor IGNORE")


def window(ctx: Context, name: str, span: int | None, stride: int) -> int:
    """``idiv_check(span, stride) + 1``: the output size of a sliding window, -1 when unknown."""
    if span is None:
        return -1
    ctx.error_if(span % stride != 0, f"{name}: {span} is not a multiple of the stride {stride}")
    out = span // stride + 1
    ctx.error_if(out < 1, f"{name} would be {out} (the window does not fit the padded input)")
    return out


def conv_span(size: int, pad_a: int, pad_b: int, kernel: int, dilation: int) -> int | None:
    if size == -1 or kernel == -1:
        return None
    return size - 1 + pad_a + pad_b - (kernel - 1) * dilation


def check_bias(ctx: Context, bias: TensorType, channels: int) -> None:
    bc = bias.shape[0]
    bad = bc not in (channels, 1, -1) and channels != -1
    ctx.error_if(bad, f"bias has {bc} channels; must be {channels} (output channels) or 1", bias.name)


def _positive(ctx: Context, name: str, values: Sequence[int], least: int) -> None:
    ctx.error_if(min(values, default=least) < least, f"{name} values must be >= {least}, got {list(values)}")


def _pool(ctx: Context) -> list[tuple[int, ...]]:
    kernel, stride, pad = ints(ctx, "kernel", 2), ints(ctx, "stride", 2), ints(ctx, "pad", 4)
    _positive(ctx, "kernel", kernel, 1)
    _positive(ctx, "stride", stride, 1)
    _positive(ctx, "pad", pad, 0)
    (ky, kx), (top, bottom, left, right) = kernel, pad
    ctx.error_if(left >= kx or right >= kx, f"pad_left / pad_right must be < kernel_x = {kx}")
    ctx.error_if(top >= ky or bottom >= ky, f"pad_top / pad_bottom must be < kernel_y = {ky}")
    n, ih, iw, c = ctx.inputs[0].shape
    oh = window(ctx, "OH", None if ih == -1 else ih + top + bottom - ky, stride[0])
    ow = window(ctx, "OW", None if iw == -1 else iw + left + right - kx, stride[1])
    return [(n, oh, ow, c)]


@rule(Op.AVG_POOL2D)
def avg_pool2d(ctx: Context) -> list[tuple[int, ...]]:
    dtype = ctx.inputs[0].dtype
    check_zero_point(ctx, 1, dtype, "input_zp")
    check_zero_point(ctx, 2, dtype, "output_zp")
    return _pool(ctx)


@rule(Op.MAX_POOL2D)
def max_pool2d(ctx: Context) -> list[tuple[int, ...]]:
    check_nan_mode(ctx)
    return _pool(ctx)


def _conv_common(ctx: Context, spatial: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    x, w = ctx.inputs[0], ctx.inputs[1]
    check_zero_point(ctx, 3, x.dtype, "input_zp")
    check_zero_point(ctx, 4, w.dtype, "weight_zp")
    pad, stride = ints(ctx, "pad", 2 * spatial), ints(ctx, "stride", spatial)
    dilation = ints(ctx, "dilation", spatial)
    _positive(ctx, "pad", pad, 0)
    _positive(ctx, "stride", stride, 1)
    _positive(ctx, "dilation", dilation, 1)
    return pad, stride, dilation


def _conv_out(
    ctx: Context,
    sizes: Sequence[int],
    kernels: Sequence[int],
    pad: Sequence[int],
    stride: Sequence[int],
    dil: Sequence[int],
) -> list[int]:
    names = ("OD", "OH", "OW")[3 - len(sizes) :]
    return [
        window(ctx, names[i], conv_span(sizes[i], pad[2 * i], pad[2 * i + 1], kernels[i], dil[i]), stride[i])
        for i in range(len(sizes))
    ]


@rule(Op.CONV2D)
def conv2d(ctx: Context) -> list[tuple[int, ...]]:
    pad, stride, dilation = _conv_common(ctx, 2)
    (n, ih, iw, _), (oc, kh, kw, _) = ctx.inputs[0].shape, ctx.inputs[1].shape
    check_bias(ctx, ctx.inputs[2], oc)
    return [(n, *_conv_out(ctx, (ih, iw), (kh, kw), pad, stride, dilation), oc)]


@rule(Op.CONV3D)
def conv3d(ctx: Context) -> list[tuple[int, ...]]:
    pad, stride, dilation = _conv_common(ctx, 3)
    (n, id_, ih, iw, _), (oc, kd, kh, kw, _) = ctx.inputs[0].shape, ctx.inputs[1].shape
    check_bias(ctx, ctx.inputs[2], oc)
    return [(n, *_conv_out(ctx, (id_, ih, iw), (kd, kh, kw), pad, stride, dilation), oc)]


@rule(Op.DEPTHWISE_CONV2D)
def depthwise_conv2d(ctx: Context) -> list[tuple[int, ...]]:
    pad, stride, dilation = _conv_common(ctx, 2)
    (n, ih, iw, c), (kh, kw, _, m) = ctx.inputs[0].shape, ctx.inputs[1].shape
    channels = -1 if -1 in (c, m) else c * m
    check_bias(ctx, ctx.inputs[2], channels)
    return [(n, *_conv_out(ctx, (ih, iw), (kh, kw), pad, stride, dilation), channels)]


@rule(Op.TRANSPOSE_CONV2D)
def transpose_conv2d(ctx: Context) -> list[tuple[int, ...]]:
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    check_zero_point(ctx, 3, x.dtype, "input_zp")
    check_zero_point(ctx, 4, w.dtype, "weight_zp")
    (top, bottom, left, right), stride = ints(ctx, "out_pad", 4), ints(ctx, "stride", 2)
    (n, ih, iw, _), (oc, kh, kw, _) = x.shape, w.shape
    if kh != -1:
        ctx.error_if(top <= -kh or bottom <= -kh, f"out_pad_top / out_pad_bottom must be > -KH = {-kh}")
    if kw != -1:
        ctx.error_if(left <= -kw or right <= -kw, f"out_pad_left / out_pad_right must be > -KW = {-kw}")
    _positive(ctx, "stride", stride, 1)
    check_bias(ctx, bias, oc)
    oh = -1 if -1 in (ih, kh) else (ih - 1) * stride[0] + top + bottom + kh
    ow = -1 if -1 in (iw, kw) else (iw - 1) * stride[1] + left + right + kw
    ctx.error_if(oh == 0 or ow == 0 or oh < -1 or ow < -1, f"output would be {oh}x{ow}")
    return [(n, oh, ow, oc)]


def _power_of_two(ctx: Context, name: str, value: int) -> None:
    ok = value == -1 or (value > 0 and value & (value - 1) == 0)
    ctx.error_if(not ok, f"{name} = {value} must be a power of two")


@rule(Op.FFT2D)
def fft2d(ctx: Context) -> list[tuple[int, ...]]:
    n, h, w = ctx.inputs[0].shape
    _power_of_two(ctx, "H", h)
    _power_of_two(ctx, "W", w)
    return [(n, h, w), (n, h, w)]


@rule(Op.RFFT2D)
def rfft2d(ctx: Context) -> list[tuple[int, ...]]:
    n, h, w = ctx.inputs[0].shape
    _power_of_two(ctx, "H", h)
    _power_of_two(ctx, "W", w)
    half = -1 if w == -1 else w // 2 + 1
    return [(n, h, half), (n, h, half)]


@rule(Op.MATMUL)
def matmul(ctx: Context) -> list[tuple[int, ...]]:
    # The 1.0.2 pseudocode reads "is_same<in_t,i8_t> && zp != 0"; the argument descriptions ("must be
    # zero for non-int8 types") and the reference model mean the negation, which is what is checked.
    a, b = ctx.inputs[0], ctx.inputs[1]
    check_zero_point(ctx, 2, a.dtype, "A_zp")
    check_zero_point(ctx, 3, a.dtype, "B_zp")
    return [(a.shape[0] if a.shape[0] != -1 else b.shape[0], a.shape[1], b.shape[2])]


@rule(Op.ARGMAX)
def argmax(ctx: Context) -> list[tuple[int, ...]]:
    shape = ctx.inputs[0].shape
    axis = int(ctx.attribute.axis)
    ctx.error_if(not 0 <= axis < len(shape), f"axis {axis} is outside [0, {len(shape)})")
    check_nan_mode(ctx)
    return [shape[:axis] + shape[axis + 1 :]]
