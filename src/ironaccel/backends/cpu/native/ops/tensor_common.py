"""The pieces the tensor operators' lowerings share (:mod:`.tensor` lists them).

What a product or a window operator needs before its loops: which operand types it runs on
(:func:`product_types`), its input copied into scratch with zeros around it (:func:`padded_copy`), a bias
padded to whole column blocks (:func:`padded_bias`), the check that every window lies inside the padded
input (:func:`check_windows`), and a prologue made of several pieces (:func:`scoped`). A product's
units place their polls with :func:`unit_polls`. Each returns C text or numpy arrays for the lowering
to assemble; none of them registers a lowering.
"""

from __future__ import annotations

import numpy as np

from .....tosa.dtypes import DType
from .. import polls
from ..lowering import NotNative, OpView

INT8_RANGE = (-128, 127)


def int_range(dtype: DType) -> tuple[int, int]:
    """The smallest and largest value of the signed integer ``dtype``."""
    return -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1


def product_types(view: OpView) -> bool:
    """True for an integer product (int8 x int8 -> int32), False for fp32; NotNative otherwise."""
    a, b, out = view.dtype(0), view.dtype(1), view.out_dtype()
    if a is DType.FP32 and b is DType.FP32 and out is DType.FP32:
        return False
    if a is DType.INT8 and b is DType.INT8 and out is DType.INT32:
        return True
    raise NotNative(f"{view.op.name} on {a} x {b} -> {out}")


def padded_copy(
    ct: str, shape: tuple[int, int, int, int], pads: tuple[int, int, int, int], zero_point: int, integer: bool, out: str
) -> str:
    """Statements copying the NHWC input X0 into scratch S0 as C type ``out`` ("float" or "int32_t") with zero
    rows and columns around it, subtracting ``zero_point`` from integer values."""
    n, h, w, c = shape
    top, bottom, left, right = pads
    ph, pw = h + top + bottom, w + left + right
    target = out
    convert = f"({target})((int32_t)src[j] - {zero_point})" if integer else "src[j]"
    declare, poll = polls.countdown(n * ph, pw * c)
    return f"""{target} *restrict P = ({target} *)S0;
{declare}
for (ptrdiff_t b = 0; b < {n}; b++)
    for (ptrdiff_t py = 0; py < {ph}; py++) {{
        {poll}
        {target} *restrict row = P + (b * {ph} + py) * {pw * c};
        const ptrdiff_t iy = py - {top};
        if (iy < 0 || iy >= {h}) {{ memset(row, 0, {pw * c} * sizeof({target})); continue; }}
        memset(row, 0, {left * c} * sizeof({target}));
        const {ct} *restrict src = X0 + (b * {h} + iy) * {w * c};
        {target} *restrict dst = row + {left * c};
        for (ptrdiff_t j = 0; j < {w * c}; j++) dst[j] = {convert};
        memset(row + {(left + w) * c}, 0, {right * c} * sizeof({target}));
    }}"""


def scoped(pieces: list[str]) -> str:
    """A prologue of several pieces, each in a block of its own (each may declare a poll countdown)."""
    return "\n".join(f"{{\n{piece}\n}}" for piece in pieces)


def check_windows(view: OpView, size_in: int, pad: int, kernel: int, stride: int, dilation: int, out: int) -> None:
    """NotNative unless every one of ``out`` windows along an axis lies inside the padded input."""
    if out < 1 or (out - 1) * stride + (kernel - 1) * dilation >= size_in + pad:
        raise NotNative(f"{view.where()}: windows outside the padded input")


def unit_polls(nest: polls.Nest | None, outer: int) -> tuple[list[str], list[str], str]:
    """From where a product polls (:meth:`gemm.Product.place_polls` over ``outer`` loops of the driver:
    units, then column blocks where the driver loops over them): the countdown's declaration before the
    unit loop, the statements first in a unit, and the poll first in a column block. Where the
    micro-kernels poll, a unit only looks at the stop word, so a stopped run leaves its units at once."""
    if nest is None:
        return [], [], ""
    if nest.level >= outer:
        return [], ["    if (ia_stopped(ctl)) return;"], ""
    if nest.level == 0:
        return [polls.declare()], [f"    {polls.poll(nest.every)}"], ""
    return [polls.declare()], [], polls.poll(nest.every)


def padded_bias(bias: np.ndarray, channels: int, padded: int, integer: bool) -> np.ndarray:
    """A bias of one value or ``channels`` values as ``padded`` int32 or float32 values, zero past the last
    channel (the columns of the last block)."""
    full = np.broadcast_to(bias, (channels,)) if bias.shape[0] != channels else bias
    out = np.zeros(padded, np.int32 if integer else np.float32)
    out[:channels] = full
    return out
