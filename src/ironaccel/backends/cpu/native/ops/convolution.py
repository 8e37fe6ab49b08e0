"""Native code for CONV2D: a direct product through :mod:`.gemm`'s micro-kernels.

The weights are packed at load when they are a constant, else by the prologue. With padding, or on
integers, the input is first copied into scratch with zeros around it (integers minus their zero point,
as float), so the kernels never test a bound; without padding a float input is read in place. Where
the compiler targets VNNI and the constant int8 weights fit int8 after their zero point, the product
runs on bytes instead (:func:`_conv2d_dot4`). Work is split into units of output tiles, which threads
may share; a following CLAMP (the view's epilogue) is applied to each tile while it is in cache.

Polls: the products in their units, column blocks or micro-kernels (:func:`.tensor_common.unit_polls`),
the prologues' copies and packing in their rows.
"""

from __future__ import annotations

import numpy as np

from .....tosa.dtypes import DType
from .....tosa.operators import Op
from ...numerics import wrap
from .. import polls
from ..lowering import Kernel, OpView, c_type, lowering, size
from . import gemm
from .tensor_common import INT8_RANGE, check_windows, padded_bias, padded_copy, product_types, scoped, unit_polls

BLOCK_MAJOR_BYTES = 1 << 20  # packed weights beyond this run block by block (see _conv_kernel)


@lowering(Op.CONV2D)
def conv2d(view: OpView) -> Kernel:
    integer = product_types(view)
    attr = view.attribute
    n, ih, iw, ic = view.inputs[0].shape
    oc, kh, kw, _ = view.inputs[1].shape
    _, oh, ow, _ = view.outputs[0].shape
    top, bottom, left, right = attr.pad
    sy, sx = attr.stride
    dy, dx = attr.dilation
    check_windows(view, ih, top + bottom, kh, sy, dy, oh)
    check_windows(view, iw, left + right, kw, sx, dx, ow)
    zp_x = view.scalar(3, "input_zp") if integer else 0
    zp_w = view.scalar(4, "weight_zp") if integer else 0
    dot4 = _dot4_weights(view, zp_w) if integer else None
    if dot4 is not None:
        return _conv2d_dot4(view, zp_x, dot4)
    padded = integer or any(attr.pad)
    ph, pw = (ih + top + bottom, iw + left + right) if padded else (ih, iw)
    rows, taps = n * oh * ow, kh * kw
    tile = gemm.tiling(view.tools, rows, oc)
    blocks = -(-oc // tile.nr)
    scratch = [n * ph * pw * ic * 4] if padded else []
    prologue = []
    if padded:
        prologue.append(padded_copy(c_type(view.dtype()), (n, ih, iw, ic), tuple(attr.pad), zp_x, integer, "float"))
    weights, bias, arrays, w_bound = _conv_operands(
        view, integer, tile.nr, blocks, taps, ic, oc, zp_w, scratch, prologue
    )
    bound = gemm.magnitude(INT8_RANGE, zp_x) * w_bound if integer else 0
    offsets = f"{view.prefix}taps"
    product = gemm.Product(view.prefix, tile, rows, oc, taps, ic, offsets, integer, gemm.chunks(taps, ic, bound))
    out_t = "int32_t" if integer else "float"
    source = "(const float *)S0" if padded else "X0"
    types = ("float", "float", out_t)
    return _conv_kernel(view, product, types, (source, weights, bias), (ph, pw), prologue, scratch, arrays)


def _conv_kernel(
    view: OpView,
    product: gemm.Product,
    types: tuple[str, str, str],
    pointers: tuple[str, str, str],
    padded_hw: tuple[int, int],
    prologue: list[str],
    scratch: list[int],
    arrays: dict[str, np.ndarray],
) -> Kernel:
    """The units of a CONV2D, one tile of output pixels each, through ``product``'s kernels.

    ``types``: C element types of the (copied) input, the packed weights and the result; ``pointers``:
    C expressions of the input the windows read (``padded_hw`` rows x columns per image, product.depth
    elements per pixel), the packed weights and the bias."""
    attr = view.attribute
    oh, ow = view.outputs[0].shape[1:3]
    _, kh, kw, ic = view.inputs[1].shape
    sy, sx = attr.stride
    dy, dx = attr.dilation
    ph, pw = padded_hw
    a_t, w_t, out_t = types
    tile, rows, oc, depth = product.tile, product.rows, product.columns, product.depth
    row, image = pw * depth, ph * pw * depth
    table = ", ".join(str(ky * dy * row + kx * dx * depth) for ky in range(kh) for kx in range(kw))
    remainder = rows % tile.mr
    tiles = -(-rows // tile.mr)
    # Weights past a core's L2 share: a unit is one tile in one column block, block by block, so that
    # a block's weights stay in cache while the tiles pass (as MATMUL's units do). Read tile by tile,
    # every tile would stream all the weights from memory again.
    weight_bytes = product.taps * depth * product.blocks * tile.nr * (1 if product.dot4 else 4)
    by_block = product.blocks > 1 and weight_bytes > BLOCK_MAJOR_BYTES
    units = tiles * product.blocks if by_block else tiles
    if by_block:
        declare, unit_poll, block_poll = unit_polls(product.place_polls([units]), 1)
    else:
        declare, unit_poll, block_poll = unit_polls(product.place_polls([units, product.blocks]), 2)
    helpers = [
        f"static const ptrdiff_t {product.offsets}[{product.taps}] = {{{table}}};",
        product.kernels([tile.mr, remainder or tile.mr]),
    ]
    source, weights, bias = pointers
    body = [
        f"const {a_t} *restrict P = {source};",
        f"const {w_t} *restrict W = {weights};",
        f"const {out_t} *restrict B = {bias};",
        *declare,
        "for (ptrdiff_t unit = lo; unit < hi; unit++) {",
        *unit_poll,
        *([f"    const ptrdiff_t nb = unit / {tiles}, tile = unit % {tiles};"] if by_block else []),
        *([] if by_block else ["    const ptrdiff_t tile = unit;"]),
        f"    const ptrdiff_t m0 = tile * {tile.mr};",
        f"    const ptrdiff_t rows = {rows} - m0 < {tile.mr} ? {rows} - m0 : {tile.mr};",
        f"    const {a_t} *a[{tile.mr}];",
        f"    {out_t} *c[{tile.mr}];",
        "    for (ptrdiff_t i = 0; i < rows; i++) {",
        f"        const ptrdiff_t m = m0 + i, b = m / {oh * ow}, r = m % {oh * ow};",
        f"        a[i] = P + b * {image} + (r / {ow}) * {sy * row} + (r % {ow}) * {sx * depth};",
        f"        c[i] = Y0 + m * {oc};",
        "    }",
        f"    if (rows == {tile.mr}) {{",
        *(f"        {line}" for line in product.calls(tile.mr, "a", "c", not by_block, block_poll)),
        "    }",
    ]
    if remainder:
        calls = product.calls(remainder, "a", "c", not by_block, block_poll)
        body += ["    else {", *(f"        {line}" for line in calls), "    }"]
    if view.epilogue and by_block:
        first, last = f"nb * {tile.nr}", f"({oc} - nb * {tile.nr} < {tile.nr} ? {oc} - nb * {tile.nr} : {tile.nr})"
        loop = view.epilogue.loop(f"c[i] + {first}", last, view.tools)
        body.append(f"    for (ptrdiff_t i = 0; i < rows; i++) {loop}")
    elif view.epilogue:
        body.append("    " + view.epilogue.loop(f"Y0 + m0 * {oc}", f"rows * {oc}", view.tools))
    body.append("}")
    return Kernel(
        "\n".join(body),
        prologue=scoped(prologue),
        helpers="\n".join(helpers),
        scratch=tuple(scratch),
        arrays=arrays,
        units=units,
        macs=rows * oc * product.taps * ic,
        poll_work=polls.PRODUCT_WORK,
        vectors=True,
    )


def _dot4_weights(view: OpView, zp_w: int) -> np.ndarray | None:
    """A convolution's weights minus their zero point as int8 [taps, depth, columns], when the VNNI
    kernels can take them: the compiler targets VNNI, the weights are a constant and fit int8."""
    value = view.values[1]
    if not view.tools.dot_int8 or value is None:
        return None
    wide = np.asarray(value).astype(np.int64) - zp_w
    if wide.size and (wide.min() < -128 or wide.max() > 127):
        return None
    oc, kh, kw, ic = wide.shape
    return wide.reshape(oc, kh * kw, ic).transpose(1, 2, 0).astype(np.int8)


def _byte_copy(
    ct: str, shape: tuple[int, int, int, int], pads: tuple[int, int, int, int], depth4: int, fill: int
) -> str:
    """Statements copying the int8 NHWC input X0 into scratch S0 as bytes x + 128, each pixel's channels
    padded to ``depth4``, with pixels of value ``fill`` (the input zero point + 128) around it and in the
    padded channels (whose weights are zero)."""
    n, h, w, c = shape
    top, bottom, left, right = pads
    ph, pw = h + top + bottom, w + left + right
    if depth4 == c:
        inner = f"for (ptrdiff_t j = 0; j < {w * c}; j++) dst[j] = (uint8_t)((int32_t)src[j] + 128);"
    else:
        inner = f"""for (ptrdiff_t x = 0; x < {w}; x++) {{
            for (ptrdiff_t k = 0; k < {c}; k++) dst[x * {depth4} + k] = (uint8_t)((int32_t)src[x * {c} + k] + 128);
            memset(dst + x * {depth4} + {c}, {fill}, {depth4 - c});
        }}"""
    declare, poll = polls.countdown(n * ph, pw * depth4)
    return f"""uint8_t *restrict P = (uint8_t *)S0;
{declare}
for (ptrdiff_t b = 0; b < {n}; b++)
    for (ptrdiff_t py = 0; py < {ph}; py++) {{
        {poll}
        uint8_t *restrict row = P + (b * {ph} + py) * {pw * depth4};
        const ptrdiff_t iy = py - {top};
        if (iy < 0 || iy >= {h}) {{ memset(row, {fill}, {pw * depth4}); continue; }}
        memset(row, {fill}, {left * depth4});
        const {ct} *restrict src = X0 + (b * {h} + iy) * {w * c};
        uint8_t *restrict dst = row + {left * depth4};
        {inner}
        memset(row + {(left + w) * depth4}, {fill}, {right * depth4});
    }}"""


def _conv2d_dot4(view: OpView, zp_x: int, weights: np.ndarray) -> Kernel:
    """An int8 CONV2D through the VNNI kernels (see :mod:`.gemm`) with ``weights`` from
    :func:`_dot4_weights`: the input copied as bytes + 128 with every pixel's channels padded to a
    multiple of 4, the bias corrected for that + 128."""
    attr = view.attribute
    n, ih, iw, ic = view.inputs[0].shape
    oc, kh, kw, _ = view.inputs[1].shape
    _, oh, ow, _ = view.outputs[0].shape
    top, bottom, left, right = attr.pad
    depth4 = -(-ic // 4) * 4
    ph, pw = ih + top + bottom, iw + left + right
    rows, taps = n * oh * ow, kh * kw
    tile = gemm.tiling(view.tools, rows, oc)
    blocks = -(-oc // tile.nr)
    fill = zp_x + 128
    scratch = [n * ph * pw * depth4]
    prologue = [_byte_copy(c_type(view.dtype()), (n, ih, iw, ic), tuple(attr.pad), depth4, fill)]
    arrays = {"w": gemm.pack_weights_dot4(weights, tile.nr)}
    correction = np.zeros(blocks * tile.nr, np.int64)
    correction[:oc] = gemm.dot4_correction(weights, zp_x)
    if view.values[2] is not None:
        bias = np.zeros(blocks * tile.nr, np.int64)
        bias[:oc] = np.broadcast_to(np.asarray(view.values[2]).astype(np.int64).reshape(-1), (oc,))
        arrays["b"] = wrap(bias - correction, DType.INT32)
        bias_ptr = "K_b"
    else:
        arrays["c"] = wrap(correction, DType.INT32)
        spread = "j" if size(view.inputs[2].shape) == oc else "0"
        prologue.append(
            f"""int32_t *restrict PB = (int32_t *)S1;
for (ptrdiff_t j = 0; j < {blocks * tile.nr}; j++)
    PB[j] = (int32_t)((uint32_t)(j < {oc} ? X2[{spread}] : 0) - (uint32_t)K_c[j]);"""
        )
        scratch.append(blocks * tile.nr * 4)
        bias_ptr = "(const int32_t *)S1"
    offsets = f"{view.prefix}taps"
    product = gemm.Product(view.prefix, tile, rows, oc, taps, depth4, offsets, True, [(0, taps, 0, depth4)], dot4=True)
    types = ("uint8_t", "int8_t", "int32_t")
    pointers = ("(const uint8_t *)S0", "K_w", bias_ptr)
    return _conv_kernel(view, product, types, pointers, (ph, pw), prologue, scratch, arrays)


def _conv_operands(
    view: OpView,
    integer: bool,
    nr: int,
    blocks: int,
    taps: int,
    depth: int,
    columns: int,
    zp_w: int,
    scratch: list[int],
    prologue: list[str],
) -> tuple[str, str, dict[str, np.ndarray], int]:
    """Where a convolution's packed weights and bias come from (C expressions), the arrays made at load
    for them, and a bound on |weight - weight_zp|. Constant operands are packed now; others by the
    prologue, into scratch buffers appended to ``scratch``."""
    arrays: dict[str, np.ndarray] = {}
    w_value, b_value = view.values[1], view.values[2]
    if w_value is not None:
        w = np.asarray(w_value).astype(np.float64) - zp_w
        arrays["w"] = gemm.pack_weights(w.reshape(columns, taps, depth).transpose(1, 2, 0), nr)
        weights, w_bound = "K_w", int(np.abs(w).max(initial=0)) if integer else 0
    else:
        k = len(scratch)
        scratch.append(blocks * taps * depth * nr * 4)
        convert = (
            f"(float)((int32_t)X1[(col * {taps} + t) * {depth} + k] - {zp_w})"
            if integer
            else (f"X1[(col * {taps} + t) * {depth} + k]")
        )
        declare, poll = polls.countdown(blocks * taps * depth, nr)
        prologue.append(
            f"""float *restrict PW = (float *)S{k};
{declare}
for (ptrdiff_t nb = 0; nb < {blocks}; nb++)
    for (ptrdiff_t t = 0; t < {taps}; t++)
        for (ptrdiff_t k = 0; k < {depth}; k++) {{
            {poll}
            for (ptrdiff_t j = 0; j < {nr}; j++) {{
                const ptrdiff_t col = nb * {nr} + j;
                PW[((nb * {taps} + t) * {depth} + k) * {nr} + j] = col < {columns} ? {convert} : 0.0f;
            }}
        }}"""
        )
        weights = f"(const float *)S{k}"
        w_bound = gemm.magnitude(INT8_RANGE, zp_w) if integer else 0
    bias_t = "int32_t" if integer else "float"
    if b_value is not None:
        arrays["b"] = padded_bias(np.asarray(b_value).reshape(-1), columns, blocks * nr, integer)
        bias = "K_b"
    else:
        k = len(scratch)
        scratch.append(blocks * nr * 4)
        spread = "j" if size(view.inputs[2].shape) == columns else "0"
        prologue.append(
            f"""{bias_t} *restrict PB = ({bias_t} *)S{k};
for (ptrdiff_t j = 0; j < {blocks * nr}; j++) PB[j] = j < {columns} ? X2[{spread}] : 0;"""
        )
        bias = f"(const {bias_t} *)S{k}"
    return weights, bias, arrays, w_bound
