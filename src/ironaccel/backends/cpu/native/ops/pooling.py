"""Native code for MAX_POOL2D and AVG_POOL2D: each output over the valid window of its input.

Padding is never materialised: an average divides by the count of valid elements, and a maximum never
sees a padding value, since every window holds an input element. fp32 averages sum in double and round
once; integer averages scale by reciprocal_scale(count) with apply_scale_32's rounding (the numpy
kernel's steps). A unit is one output row. Polls: in output rows, columns, or the window's rows or
columns, wherever the work between two polls fits the budget.
"""

from __future__ import annotations

from .....tosa.attributes import NanPropagationMode
from .....tosa.dtypes import DType
from .....tosa.operators import Op
from .. import polls
from ..lowering import Kernel, NotNative, OpView, c_float, c_int, c_type, lowering, size
from .tensor_common import int_range

_POOL_STACK_CHANNELS = 4096  # AVG_POOL2D keeps a row of accumulators on the stack


def _pool_head(view: OpView) -> tuple[list[str], tuple[int, ...], polls.Nest | None]:
    """The loops over output rows and columns of a pool, and where its nest of loops polls (over output
    rows, columns, window rows and window columns: a countdown at any of them)."""
    attr = view.attribute
    n, h, w, c = view.inputs[0].shape
    _, oh, ow, _ = view.outputs[0].shape
    ky, kx = attr.kernel
    sy, sx = attr.stride
    top, _, left, _ = attr.pad
    nest = polls.plan([n * oh, ow, ky, kx], polls.ELEMENT_WORK, c)
    lines = [
        *([polls.declare()] if nest else []),
        "for (ptrdiff_t r = lo; r < hi; r++) {",
        *([f"    {polls.poll(nest.every)}"] if nest and nest.level == 0 else []),
        f"    const ptrdiff_t b = r / {oh}, oy = r % {oh};",
        f"    const ptrdiff_t y0 = oy * {sy} - {top}, y1 = y0 + {ky};",
        f"    const ptrdiff_t ya = y0 < 0 ? 0 : y0, yb = y1 > {h} ? {h} : y1;",
        f"    for (ptrdiff_t ox = 0; ox < {ow}; ox++) {{",
        *([f"        {polls.poll(nest.every)}"] if nest and nest.level == 1 else []),
        f"        const ptrdiff_t x0 = ox * {sx} - {left}, x1 = x0 + {kx};",
        f"        const ptrdiff_t xa = x0 < 0 ? 0 : x0, xb = x1 > {w} ? {w} : x1;",
        f"        {c_type(view.out_dtype())} *restrict o = Y0 + (r * {ow} + ox) * {c};",
    ]
    return lines, (n, h, w, c, oh), nest


def _window_loop(ct: str, c: int, h: int, w: int, statement: str, nest: polls.Nest | None) -> list[str]:
    """Statements running ``statement`` for every channel j of every valid input pixel p of the window,
    with the poll of ``nest`` where it is in the window's rows or columns."""
    row_poll = f" {{ {polls.poll(nest.every)}" if nest and nest.level == 2 else ""
    column_poll = [f"                {polls.poll(nest.every)}"] if nest and nest.level == 3 else []
    return [
        f"        for (ptrdiff_t iy = ya; iy < yb; iy++){row_poll}",
        "            for (ptrdiff_t ix = xa; ix < xb; ix++) {",
        *column_poll,
        f"                const {ct} *restrict p = X0 + ((b * {h} + iy) * {w} + ix) * {c};",
        f"                for (ptrdiff_t j = 0; j < {c}; j++) {statement}",
        "            }",
        *(["        }"] if row_poll else []),
    ]


@lowering(Op.MAX_POOL2D)
def max_pool2d(view: OpView) -> Kernel:
    dtype = view.dtype()
    head, (n, h, w, c, oh), nest = _pool_head(view)
    ct = c_type(dtype)
    if dtype is DType.FP32:
        ignore = view.attribute.nan_mode == NanPropagationMode.IGNORE
        init = c_float(float("nan") if ignore else float("-inf"))
        step = f"o[j] = {'ia_max_i' if ignore else 'ia_max_p'}(o[j], p[j]);"
    elif dtype in (DType.INT8, DType.INT16, DType.INT32):
        init = c_int(int_range(dtype)[0])
        step = "o[j] = o[j] >= p[j] ? o[j] : p[j];"
    else:
        raise NotNative(f"MAX_POOL2D on {dtype}")
    body = [
        *head,
        f"        for (ptrdiff_t j = 0; j < {c}; j++) o[j] = ({ct})({init});",
        *_window_loop(ct, c, h, w, step, nest),
        "    }",
        "}",
    ]
    return Kernel("\n".join(body), units=n * oh, macs=size(view.outputs[0].shape) * size(view.attribute.kernel))


@lowering(Op.AVG_POOL2D)
def avg_pool2d(view: OpView) -> Kernel:
    """fp32: the double sum of the valid elements divided by their count, rounded once. Integers: the
    sum minus zero points, scaled by reciprocal_scale(count) with apply_scale_32's rounding, plus the
    output zero point, saturated (the numpy kernel's steps)."""
    dtype = view.dtype()
    head, (n, h, w, c, oh), nest = _pool_head(view)
    if c > _POOL_STACK_CHANNELS:
        raise NotNative(f"AVG_POOL2D over {c} channels")
    ct = c_type(dtype)
    if dtype is DType.FP32:
        accumulate = "acc[j] += (double)p[j];"
        finish = [f"        for (ptrdiff_t j = 0; j < {c}; j++) o[j] = (float)(acc[j] / (double)count);"]
        acc_t = "double"
    elif dtype in (DType.INT8, DType.INT16):
        zp_in = view.scalar(1, "input_zp")
        zp_out = view.scalar(2, "output_zp")
        lo, hi = int_range(dtype)
        accumulate = f"acc[j] += (int64_t)p[j] - {zp_in};"
        acc_t = "int64_t"
        finish = [
            "        const int64_t k = count > 1 ? 64 - __builtin_clzll((uint64_t)(count - 1)) : 0;",
            "        const int64_t mult = (((INT64_C(1) << 30) + 1) << k) / count, shift = 30 + k;",
            f"        for (ptrdiff_t j = 0; j < {c}; j++) {{",
            "            const int64_t scaled = (acc[j] * mult + (INT64_C(1) << (shift - 1))) >> shift;",
            f"            o[j] = ({ct})ia_clip64(scaled + {zp_out}, {lo}, {hi});",
            "        }",
        ]
    else:
        raise NotNative(f"AVG_POOL2D on {dtype}")
    body = [
        *head,
        "        const int64_t count = (int64_t)(yb - ya) * (xb - xa);",
        f"        {acc_t} acc[{c}];",
        f"        for (ptrdiff_t j = 0; j < {c}; j++) acc[j] = 0;",
        *_window_loop(ct, c, h, w, accumulate, nest),
        *finish,
        "    }",
        "}",
    ]
    return Kernel("\n".join(body), units=n * oh, macs=size(view.outputs[0].shape) * size(view.attribute.kernel))
