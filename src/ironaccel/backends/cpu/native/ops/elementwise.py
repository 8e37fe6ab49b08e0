"""Native code for the elementwise operators: binary, unary, ternary, comparison and activation groups.

Every one becomes loops over the result in C order with numpy's broadcasting (an operand's dimension of
size 1 is read with stride 0), after dimensions that every operand walks contiguously are merged; the
innermost loop reads each operand with stride 0 or 1, which the compiler vectorises. The per-element
expression is the one of the numpy kernel it replaces (see ``backends/cpu/ops``):

* fp32 +, -, * and / are single IEEE operations in float32; fp32 exp, erf, tanh, sigmoid and rsqrt are
  evaluated in double and rounded once, like the kernels' float64 path; a NaN result is the plain NaN
  of its sign (``numerics.canonical_nans``).
* Integer arithmetic wraps to the result type (two's complement), computed in 64 bits where the numpy
  kernel computes in int64. Conversions to a narrower signed type are modulo 2**bits, as GCC and
  Clang define them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .....tosa.attributes import NanPropagationMode
from .....tosa.dtypes import DType
from .....tosa.operators import Op
from ...ops.activation import decode_scalar
from .. import polls
from ..lowering import Epilogue, Kernel, NotNative, OpView, c_float, c_int, c_type, lowering, size, strides

_INTS = (DType.INT8, DType.INT16, DType.INT32)
_UNSIGNED = {DType.INT8: "uint8_t", DType.INT16: "uint16_t", DType.INT32: "uint32_t"}


# At least this many elements, an operator's loops are cut into units that threads share (codegen splits
# from 1 << 16). A unit is one index of the outermost merged dimension, or CHUNK elements of a single one.
SPLIT_ELEMENTS = 1 << 16
CHUNK = 1 << 12


def _merged(
    shape: Sequence[int], operands: Sequence[tuple[str, str, Sequence[int]]]
) -> list[tuple[int, list[int], int]]:
    """The loop dimensions of ``shape`` (count, each operand's stride, the result's stride), dimensions that
    every operand and the result walk as one merged, those of size 1 dropped."""
    rank = len(shape)
    per_operand = []
    for _, _, operand_shape in operands:
        full = (1,) * (rank - len(operand_shape)) + tuple(operand_shape)
        dense = strides(full)
        per_operand.append([0 if full[d] == 1 and shape[d] != 1 else dense[d] for d in range(rank)])
    out_strides = strides(tuple(shape))
    dims: list[tuple[int, list[int], int]] = []
    for d in range(rank):
        if shape[d] == 1:
            continue
        n, steps, out_step = shape[d], [s[d] for s in per_operand], out_strides[d]
        if dims:
            outer_n, outer_steps, outer_out = dims[-1]
            if outer_out == out_step * n and all(o == s * n for o, s in zip(outer_steps, steps, strict=True)):
                dims[-1] = (outer_n * n, steps, out_step)
                continue
        dims.append((n, steps, out_step))
    return dims or [(1, [0] * len(operands), 1)]


def _nest(
    dims: list[tuple[int, list[int], int]],
    operands: Sequence[tuple[str, str, Sequence[int]]],
    result: tuple[str, str],
    expression: str,
) -> str:
    """The loops over ``dims`` (see :func:`_merged`) from the given base pointers."""
    nest = polls.plan([n for n, _, _ in dims], polls.ELEMENT_WORK)
    block = ["{"]
    for k, (pointer, ct, _) in enumerate(operands):
        offset = " + ".join(f"i{d} * {dims[d][1][k]}" for d in range(len(dims) - 1) if dims[d][1][k]) or "0"
        block.append(f"    const {ct} *restrict p{k} = {pointer} + {offset};")
    out_offset = " + ".join(f"i{d} * {dims[d][2]}" for d in range(len(dims) - 1)) or "0"
    block.append(f"    {result[1]} *restrict q = {result[0]} + {out_offset};")
    n_last, last_steps, _ = dims[-1]
    head, close = polls.innermost_loop("j", n_last, nest)
    block += [f"    {line}" for line in head]
    block[-1] += " {"
    for k, (_, ct, _) in enumerate(operands):
        index = "j" if last_steps[k] else "0"
        block.append(f"        const {ct} v{k} = p{k}[{index}];")
    block.append(f"        q[j] = ({result[1]})({expression});")
    block.append(f"    }}{close}")
    block.append("}")
    lines = polls.outer_loops([n for n, _, _ in dims[:-1]], nest, block)
    return "\n".join(["{", *(f"    {line}" for line in lines), "}"])


def map_loops(
    shape: Sequence[int], operands: Sequence[tuple[str, str, Sequence[int]]], result: tuple[str, str], expression: str
) -> str:
    """C statements setting ``result[i] = expression`` for every index of ``shape``.

    ``operands``: (pointer, C type, shape) broadcast against ``shape``; the expression reads them as
    ``v0, v1, ...``. ``result``: (pointer, C type) of a C-contiguous array of ``shape``."""
    return _nest(_merged(shape, operands), operands, result, expression)


def map_units(
    shape: Sequence[int], operands: Sequence[tuple[str, str, Sequence[int]]], result: tuple[str, str], expression: str
) -> tuple[str, int]:
    """As :func:`map_loops`, cut into units that threads may share: the body covers units [lo, hi) of the
    returned count (0: one body for everything, too small to split). The dimensions before the last
    merged one count as rows; a unit is CHUNK elements of a long row, or as many short rows as make
    about CHUNK elements. Every result element is computed by the same expression either way, so a
    split changes no bit."""
    dims = _merged(shape, operands)
    if size(tuple(shape)) < SPLIT_ELEMENTS:
        return _nest(dims, operands, result, expression), 0
    *leading, (length, steps, _) = dims  # the result is C-contiguous: stride 1 along the last
    rows = size(tuple(n for n, _, _ in leading))
    # Row r's index along each leading dimension, and so each operand's offset and the result's.
    index, below = [], 1
    for d in range(len(leading) - 1, -1, -1):
        index.insert(0, f"(r / {below}) % {leading[d][0]}" if below > 1 else f"r % {leading[d][0]}")
        below *= leading[d][0]
    row = [f"const ptrdiff_t i{d} = {expr};" for d, expr in enumerate(index)]

    def at(k: int | None) -> str:
        terms = [f"i{d} * {n_steps[k] if k is not None else n_out}" for d, (_, n_steps, n_out) in enumerate(leading)]
        return " + ".join(t for t in terms if not t.endswith(" * 0")) or "0"

    row += [f"const {ct} *restrict p{k} = {pointer} + {at(k)};" for k, (pointer, ct, _) in enumerate(operands)]
    row.append(f"{result[1]} *restrict q = {result[0]} + {at(None)};")
    loads = [f"const {ct} v{k} = p{k}[{'j' if steps[k] else '0'}];" for k, (_, ct, _) in enumerate(operands)]
    inner = ["{", *(f"    {line}" for line in loads), f"    q[j] = ({result[1]})({expression});", "}"]
    if length >= CHUNK:
        chunks = -(-length // CHUNK)
        units = rows * chunks
        head = [
            f"const ptrdiff_t r = u / {chunks}, j0 = (u % {chunks}) * {CHUNK};",
            f"const ptrdiff_t j1 = {length} - j0 < {CHUNK} ? {length} : j0 + {CHUNK};",
            *row,
            "for (ptrdiff_t j = j0; j < j1; j++)",
            *inner,
        ]
    else:
        per = max(1, CHUNK // length)
        units = -(-rows // per)
        head = [
            f"const ptrdiff_t r1 = (u + 1) * {per} < {rows} ? (u + 1) * {per} : {rows};",
            "for (ptrdiff_t r = u * " + str(per) + "; r < r1; r++) {",
            *(f"    {line}" for line in [*row, f"for (ptrdiff_t j = 0; j < {length}; j++)", *inner]),
            "}",
        ]
    declare, poll = polls.countdown(units, CHUNK)
    body = [declare, "for (ptrdiff_t u = lo; u < hi; u++) {", f"    {poll}", *(f"    {line}" for line in head), "}"]
    return "\n".join(line for line in body if line.strip()), units


def elementwise(view: OpView, expression: str, operands: Sequence[int] = (0, 1)) -> Kernel:
    """The kernel computing ``expression`` (over v0, v1, ... = the given operands) into result 0, in units
    that threads may share when it is large."""
    out = view.outputs[0]
    sources = [(f"X{i}", c_type(view.inputs[i].dtype), view.inputs[i].shape) for i in operands]
    body, units = map_units(out.shape, sources, ("Y0", c_type(out.dtype)), expression)
    return Kernel(body, macs=size(out.shape), units=units)


def _same_types(view: OpView, allowed: Sequence[DType], count: int = 2) -> DType:
    dtype = view.dtype(0)
    if dtype not in allowed or any(view.dtype(i) is not dtype for i in range(count)):
        raise NotNative(f"{view.op.name} on {dtype}")
    return dtype


def _nan_mode(view: OpView) -> NanPropagationMode:
    return getattr(view.attribute, "nan_mode", NanPropagationMode.PROPAGATE)


# -- binary ---------------------------------------------------------------------------------------------
def _wrapping(op: str) -> str:
    """``a op b`` modulo 2**32, stored to the (equal or narrower) result type."""
    return f"(uint32_t)v0 {op} (uint32_t)v1"


@lowering(Op.ADD)
def add(view: OpView) -> Kernel:
    if _same_types(view, (DType.FP32, *_INTS)) is DType.FP32:
        return elementwise(view, "ia_canon(v0 + v1)")
    return elementwise(view, _wrapping("+"))


@lowering(Op.SUB)
def sub(view: OpView) -> Kernel:
    if _same_types(view, (DType.FP32, *_INTS)) is DType.FP32:
        return elementwise(view, "ia_canon(v0 - v1)")
    return elementwise(view, _wrapping("-"))


@lowering(Op.MUL)
def mul(view: OpView) -> Kernel:
    dtype = _same_types(view, (DType.FP32, *_INTS))
    if dtype is DType.FP32:
        return elementwise(view, "ia_canon(v0 * v1)")
    shift = view.scalar(2, "the shift") if len(view.inputs) > 2 else 0
    if dtype is DType.INT32 and shift > 0:
        s = min(shift, 63)
        return elementwise(view, f"ia_wrap32(ia_round_shift((int64_t)v0 * (int64_t)v1, {s}))")
    return elementwise(view, "(uint32_t)((int64_t)v0 * (int64_t)v1)")


@lowering(Op.MAXIMUM)
def maximum(view: OpView) -> Kernel:
    if _same_types(view, (DType.FP32, *_INTS)) is DType.FP32:
        fn = "ia_max_i" if _nan_mode(view) == NanPropagationMode.IGNORE else "ia_max_p"
        return elementwise(view, f"{fn}(v0, v1)")
    return elementwise(view, "v0 >= v1 ? v0 : v1")


@lowering(Op.MINIMUM)
def minimum(view: OpView) -> Kernel:
    if _same_types(view, (DType.FP32, *_INTS)) is DType.FP32:
        fn = "ia_min_i" if _nan_mode(view) == NanPropagationMode.IGNORE else "ia_min_p"
        return elementwise(view, f"{fn}(v0, v1)")
    return elementwise(view, "v0 < v1 ? v0 : v1")


@lowering(Op.INTDIV)
def intdiv(view: OpView) -> Kernel:
    """Truncating division in 64 bits; division by zero (a REQUIRE violation) gives 0, as the kernel."""
    _same_types(view, (DType.INT32,))
    return elementwise(view, "v1 == 0 ? 0 : (uint32_t)((int64_t)v0 / (int64_t)v1)")


def _shift(count: str) -> str:
    return f"({count} < 0 ? 0 : ({count} > 63 ? 63 : (int64_t){count}))"


@lowering(Op.ARITHMETIC_RIGHT_SHIFT)
def arithmetic_right_shift(view: OpView) -> Kernel:
    _same_types(view, _INTS)
    s = _shift("v1")
    value = f"((int64_t)v0 >> {s})"
    if getattr(view.attribute, "round", False):
        value = f"({value} + ({s} > 0 ? (((int64_t)v0 >> ({s} > 0 ? {s} - 1 : 0)) & 1) : 0))"
    return elementwise(view, f"(uint64_t){value}")


@lowering(Op.LOGICAL_LEFT_SHIFT)
def logical_left_shift(view: OpView) -> Kernel:
    _same_types(view, _INTS)
    return elementwise(view, f"(uint64_t)(int64_t)v0 << {_shift('v1')}")


@lowering(Op.LOGICAL_RIGHT_SHIFT)
def logical_right_shift(view: OpView) -> Kernel:
    dtype = _same_types(view, _INTS)
    return elementwise(view, f"(uint64_t)({_UNSIGNED[dtype]})v0 >> {_shift('v1')}")


def _bitwise(c_op: str):
    def lower(view: OpView) -> Kernel:
        _same_types(view, _INTS)
        return elementwise(view, f"v0 {c_op} v1")

    return lower


lowering(Op.BITWISE_AND)(_bitwise("&"))
lowering(Op.BITWISE_OR)(_bitwise("|"))
lowering(Op.BITWISE_XOR)(_bitwise("^"))


def _logical(c_expression: str):
    def lower(view: OpView) -> Kernel:
        _same_types(view, (DType.BOOL,))
        return elementwise(view, c_expression)

    return lower


lowering(Op.LOGICAL_AND)(_logical("(v0 != 0) & (v1 != 0)"))
lowering(Op.LOGICAL_OR)(_logical("(v0 != 0) | (v1 != 0)"))
lowering(Op.LOGICAL_XOR)(_logical("(v0 != 0) ^ (v1 != 0)"))


# -- comparison -------------------------------------------------------------------------------------------
def _compare(c_op: str):
    def lower(view: OpView) -> Kernel:
        _same_types(view, (DType.FP32, *_INTS))
        return elementwise(view, f"v0 {c_op} v1")

    return lower


lowering(Op.EQUAL)(_compare("=="))
lowering(Op.GREATER)(_compare(">"))
lowering(Op.GREATER_EQUAL)(_compare(">="))


# -- unary --------------------------------------------------------------------------------------------------
def _float_unary(expression: str):
    def lower(view: OpView) -> Kernel:
        _same_types(view, (DType.FP32,), count=1)
        return elementwise(view, expression, operands=(0,))

    return lower


lowering(Op.CEIL)(_float_unary("ia_canon(ceilf(v0))"))
lowering(Op.FLOOR)(_float_unary("ia_canon(floorf(v0))"))
lowering(Op.EXP)(_float_unary("ia_round_f(ia_exp_d((double)v0))"))
lowering(Op.RECIPROCAL)(_float_unary("ia_canon(1.0f / v0)"))
lowering(Op.RSQRT)(_float_unary("ia_round_f(1.0 / sqrt((double)v0))"))
lowering(Op.ERF)(_float_unary("ia_round_f(ia_erf_d((double)v0))"))
lowering(Op.SIGMOID)(_float_unary("ia_round_f(ia_sigmoid_d((double)v0))"))
lowering(Op.TANH)(_float_unary("ia_round_f(ia_tanh_d((double)v0))"))


@lowering(Op.ABS)
def abs_(view: OpView) -> Kernel:
    if _same_types(view, (DType.FP32, *_INTS), count=1) is DType.FP32:
        return elementwise(view, "ia_canon(fabsf(v0))", operands=(0,))
    return elementwise(view, "v0 < 0 ? -(uint64_t)(int64_t)v0 : (uint64_t)(int64_t)v0", operands=(0,))


@lowering(Op.NEGATE)
def negate(view: OpView) -> Kernel:
    dtype = _same_types(view, (DType.FP32, *_INTS), count=1)
    if dtype is DType.FP32:
        return elementwise(view, "ia_canon(-v0)", operands=(0,))
    zp_in = view.scalar(1, "input1_zp") if len(view.inputs) > 1 else 0
    zp_out = view.scalar(2, "output_zp") if len(view.inputs) > 2 else 0
    lo, hi = -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1
    value = f"{c_int(zp_out)} - ((int64_t)v0 - {c_int(zp_in)})"
    return elementwise(view, f"ia_clip64({value}, {c_int(lo)}, {c_int(hi)})", operands=(0,))


@lowering(Op.BITWISE_NOT)
def bitwise_not(view: OpView) -> Kernel:
    _same_types(view, _INTS, count=1)
    return elementwise(view, "~v0", operands=(0,))


@lowering(Op.LOGICAL_NOT)
def logical_not(view: OpView) -> Kernel:
    _same_types(view, (DType.BOOL,), count=1)
    return elementwise(view, "v0 == 0", operands=(0,))


@lowering(Op.CLZ)
def clz(view: OpView) -> Kernel:
    _same_types(view, (DType.INT32,), count=1)
    return elementwise(view, "v0 == 0 ? 32 : __builtin_clz((uint32_t)v0)", operands=(0,))


# -- ternary and activation --------------------------------------------------------------------------------
@lowering(Op.SELECT)
def select(view: OpView) -> Kernel:
    """Values are moved as they are stored (a NaN's bits included), as np.where moves them."""
    if (
        view.dtype(0) is not DType.BOOL
        or view.dtype(1) is not view.dtype(2)
        or view.dtype(1)
        not in (
            DType.BOOL,
            DType.FP32,
            *_INTS,
        )
    ):
        raise NotNative(f"SELECT on {view.dtype(1)}")
    return elementwise(view, "v0 ? v1 : v2", operands=(0, 1, 2))


def clamp_expression(view: OpView, value: str) -> str:
    """CLAMP of ``value`` as a C expression (also what a convolution it is fused into applies)."""
    dtype = _same_types(view, (DType.FP32, *_INTS), count=1)
    lo, hi = decode_scalar(view.attribute.min_val, dtype), decode_scalar(view.attribute.max_val, dtype)
    if dtype is DType.FP32:
        ignore = _nan_mode(view) == NanPropagationMode.IGNORE
        upper, lower = ("ia_min_i", "ia_max_i") if ignore else ("ia_min_p", "ia_max_p")
        return f"{upper}({lower}({value}, {c_float(lo)}), {c_float(hi)})"
    return f"ia_clip64({value}, {c_int(lo)}, {c_int(hi)})"


def clamp_epilogue(view: OpView) -> Epilogue:
    """A CLAMP as the epilogue of the operator producing its fp32 input (see codegen.fusions)."""
    scalar = clamp_expression(view, "v")
    lo, hi = decode_scalar(view.attribute.min_val, DType.FP32), decode_scalar(view.attribute.max_val, DType.FP32)
    if np.isnan(lo) or np.isnan(hi):
        return Epilogue(scalar)
    ignore = _nan_mode(view) == NanPropagationMode.IGNORE
    nan = (lo if lo < hi else hi) if ignore else float("nan")  # ia_min_i(lo, hi), or the plain NaN
    return Epilogue(scalar, f"ia_vclamp(v, {c_float(lo)}, {c_float(hi)}, {c_float(nan)})")


@lowering(Op.CLAMP)
def clamp(view: OpView) -> Kernel:
    return elementwise(view, clamp_expression(view, "v0"), operands=(0,))
