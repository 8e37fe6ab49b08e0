"""Native code for the data layout operators (and IDENTITY, GATHER): they only move elements, any dtype alike.

RESHAPE and IDENTITY are no code at all where the storage plan can give the result its operand's bytes
(an alias), else one memcpy. The others are one strided copy each: every index of the result is read
from its operand at an offset that is a fixed sum of strides (negative for REVERSE, zero for TILE's
repeats), so a copy is nested loops whose innermost one the compiler turns into a vector copy when the
operand is contiguous there. PAD first fills the result with its pad value. GATHER copies one row of
C elements per index, after checking the index: it is the one offset here read from data. A large
TRANSPOSE is cut into units along its outermost dimension, a large CONCAT into rows (the dimensions
before its axis), which threads share.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .....tosa.dtypes import DType
from .....tosa.operators import Op
from .. import polls
from ..lowering import Kernel, NotNative, OpView, c_float, c_int, c_type, lowering, size, strides
from .elementwise import SPLIT_ELEMENTS


def copy_loops(
    shape: Sequence[int],
    ct: str,
    source: str,
    source_strides: Sequence[int],
    source_offset: int | str,
    target: str,
    target_strides: Sequence[int],
    target_offset: int | str,
) -> str:
    """C statements copying ``shape`` elements: target[t_off + sum i*t_stride] = source[s_off + sum i*s_stride]."""
    dims: list[tuple[int, int, int]] = []
    for n, s, t in zip(shape, source_strides, target_strides, strict=True):
        if n == 1:
            continue
        if dims:
            outer_n, outer_s, outer_t = dims[-1]
            if outer_s == s * n and outer_t == t * n:
                dims[-1] = (outer_n * n, s, t)
                continue
        dims.append((n, s, t))
    if not dims:
        dims = [(1, 1, 1)]
    nest = polls.plan([n for n, _, _ in dims], polls.ELEMENT_WORK)
    src = " + ".join([str(source_offset), *(f"i{d} * {dims[d][1]}" for d in range(len(dims) - 1))])
    dst = " + ".join([str(target_offset), *(f"i{d} * {dims[d][2]}" for d in range(len(dims) - 1))])
    n, s, t = dims[-1]
    head, close = polls.innermost_loop("j", n, nest)
    block = [
        "{",
        f"    const {ct} *restrict p = {source} + {src};",
        f"    {ct} *restrict q = {target} + {dst};",
        *(f"    {line}" for line in head[:-1]),
        f"    {head[-1]} q[j * {t}] = p[j * {s}];",
        *([f"    {close}"] if close else []),
        "}",
    ]
    lines = polls.outer_loops([n for n, _, _ in dims[:-1]], nest, block)
    return "\n".join(["{", *(f"    {line}" for line in lines), "}"])


def copy_units(
    shape: Sequence[int],
    ct: str,
    source: str,
    source_strides: Sequence[int],
    target: str,
    target_strides: Sequence[int],
) -> tuple[str, int]:
    """:func:`copy_loops` (offsets 0) cut into units that threads may share: one index of the outermost
    dimension longer than 1 each, where the copy is large and that dimension has enough indices to
    share; else the plain loops and 0 units. The body covers units [lo, hi)."""
    total = size(tuple(shape))
    d = next((i for i, n in enumerate(shape) if n > 1), None)
    if d is None or total < SPLIT_ELEMENTS or not 8 <= shape[d] <= 1 << 20:
        return copy_loops(shape, ct, source, source_strides, 0, target, target_strides, 0), 0
    rest = list(shape[d + 1 :]) or [1]
    inner = copy_loops(
        rest,
        ct,
        source,
        list(source_strides[d + 1 :]) or [1],
        f"u * {source_strides[d]}",
        target,
        list(target_strides[d + 1 :]) or [1],
        f"u * {target_strides[d]}",
    )
    declare, poll = polls.countdown(shape[d], total // shape[d])
    body = [declare, "for (ptrdiff_t u = lo; u < hi; u++) {", f"    {poll}", inner, "}"]
    return "\n".join(line for line in body if line.strip()), shape[d]


def _ints(value: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _c_type_of(view: OpView) -> str:
    return c_type(view.dtype(0))


def _memcpy(view: OpView) -> str:
    nbytes = size(view.outputs[0].shape) * view.outputs[0].dtype.numpy.itemsize
    return polls.copy("Y0", "X0", nbytes)


@lowering(Op.RESHAPE, Op.IDENTITY)
def reshape(view: OpView) -> Kernel:
    _c_type_of(view)
    return Kernel(_memcpy(view), macs=size(view.outputs[0].shape), alias=True)


@lowering(Op.TRANSPOSE)
def transpose(view: OpView) -> Kernel:
    ct = _c_type_of(view)
    in_strides = strides(view.inputs[0].shape)
    perms = tuple(view.attribute.perms)
    out_shape = view.outputs[0].shape
    source = [in_strides[p] for p in perms]
    body, units = copy_units(out_shape, ct, "X0", source, "Y0", strides(out_shape))
    return Kernel(body, macs=size(out_shape), units=units)


@lowering(Op.SLICE)
def slice_(view: OpView) -> Kernel:
    ct = _c_type_of(view)
    start = _ints(view.constant(1, "the start"))
    in_strides = strides(view.inputs[0].shape)
    out_shape = view.outputs[0].shape
    offset = sum(s * st for s, st in zip(start, in_strides, strict=True))
    return Kernel(
        copy_loops(out_shape, ct, "X0", in_strides, offset, "Y0", strides(out_shape), 0), macs=size(out_shape)
    )


@lowering(Op.REVERSE)
def reverse(view: OpView) -> Kernel:
    ct = _c_type_of(view)
    shape = view.inputs[0].shape
    axis = view.attribute.axis
    source = list(strides(shape))
    offset = (shape[axis] - 1) * source[axis]
    source[axis] = -source[axis]
    return Kernel(copy_loops(shape, ct, "X0", source, offset, "Y0", strides(shape), 0), macs=size(shape))


@lowering(Op.TILE)
def tile(view: OpView) -> Kernel:
    """Result dimension d, of multiples[d] * n_d, read as [multiples[d], n_d]: stride 0, then the input's."""
    ct = _c_type_of(view)
    shape = view.inputs[0].shape
    multiples = _ints(view.constant(1, "the multiples"))
    in_strides = strides(shape)
    expanded, source = [], []
    for m, n, s in zip(multiples, shape, in_strides, strict=True):
        expanded += [m, n]
        source += [0, s]
    out = copy_loops(expanded, ct, "X0", source, 0, "Y0", strides(tuple(expanded)), 0)
    return Kernel(out, macs=size(view.outputs[0].shape))


def _concat_rows(view: OpView, outer: int) -> Kernel:
    """CONCAT as rows that threads may share: the result is [outer, row], and each row the operands' rows
    (contiguous runs, one memcpy each) side by side."""
    axis = view.attribute.axis
    row = size(tuple(view.outputs[0].shape[axis:]))
    lines, start = [], 0
    for i, tensor in enumerate(view.inputs):
        length = size(tuple(tensor.shape[axis:]))
        nbytes = length * np.dtype(tensor.dtype.numpy).itemsize
        lines.append(polls.copy(f"Y0 + u * {row} + {start}", f"X{i} + u * {length}", nbytes))
        start += length
    declare, poll = polls.countdown(outer, row)
    body = [declare, "for (ptrdiff_t u = lo; u < hi; u++) {", f"    {poll}", *(f"    {line}" for line in lines), "}"]
    return Kernel("\n".join(line for line in body if line.strip()), macs=size(view.outputs[0].shape), units=outer)


@lowering(Op.CONCAT)
def concat(view: OpView) -> Kernel:
    ct = c_type(view.out_dtype())
    out_shape = view.outputs[0].shape
    if not out_shape:
        raise NotNative("CONCAT of rank 0")
    axis = view.attribute.axis
    outer = size(tuple(out_shape[:axis]))
    for tensor in view.inputs:
        if tensor.dtype is not view.out_dtype():
            raise NotNative(f"CONCAT of {tensor.dtype}")
    if outer >= 2 and size(out_shape) >= SPLIT_ELEMENTS:
        return _concat_rows(view, outer)
    out_strides = strides(out_shape)
    parts, start = [], 0
    for i, tensor in enumerate(view.inputs):
        parts.append(
            copy_loops(
                tensor.shape, ct, f"X{i}", strides(tensor.shape), 0, "Y0", out_strides, start * out_strides[axis]
            )
        )
        start += tensor.shape[axis]
    return Kernel("\n".join(parts), macs=size(out_shape))


def _literal(value: np.ndarray, dtype: DType) -> str:
    scalar = np.asarray(value).reshape(-1)[0]
    if dtype is DType.FP32:
        return c_float(float(scalar))
    return c_int(int(scalar))


@lowering(Op.PAD)
def pad(view: OpView) -> Kernel:
    ct = _c_type_of(view)
    amounts = _ints(view.constant(1, "the padding"))
    fill = _literal(view.constant(2, "the pad value"), view.dtype(0))
    out_shape = view.outputs[0].shape
    out_strides = strides(out_shape)
    offset = sum(b * s for b, s in zip(amounts[0::2], out_strides, strict=True))
    head, close = polls.innermost_loop("i", size(out_shape), polls.plan([size(out_shape)], polls.ELEMENT_WORK))
    body = [
        *head[:-1],
        f"{head[-1]} Y0[i] = ({ct})({fill});",
        *([close] if close else []),
        copy_loops(view.inputs[0].shape, ct, "X0", strides(view.inputs[0].shape), 0, "Y0", out_strides, offset),
    ]
    return Kernel("\n".join(body), macs=size(out_shape))


@lowering(Op.GATHER)
def gather(view: OpView) -> Kernel:
    """values [N, K, C], int32 indices [N, W] -> [N, W, C]. An index outside [0, K) breaks a REQUIRE: the
    run stops there and raises, as the interpreter does, without reading outside the values."""
    ct = _c_type_of(view)
    n, k, c = view.inputs[0].shape
    w = view.inputs[1].shape[1]
    if view.dtype(1) is not DType.INT32:
        raise NotNative(f"GATHER with {view.dtype(1)} indices")
    declare, poll = polls.countdown(n * w, c)
    body = f"""{declare}
for (ptrdiff_t r = 0; r < {n * w}; r++) {{
    {poll}
    const int32_t index = X1[r];
    if (index < 0 || index >= {k}) {{ *failed = 1; return; }}
    memcpy(Y0 + r * {c}, X0 + ((r / {w}) * {k} + index) * {c}, {c} * sizeof({ct}));
}}"""
    return Kernel(body, macs=n * w * c, failure=f"GATHER index outside [0, {k})")
