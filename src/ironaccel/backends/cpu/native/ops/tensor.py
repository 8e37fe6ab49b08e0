"""Native code for the tensor operators: CONV2D, DEPTHWISE_CONV2D, MATMUL, AVG_POOL2D, MAX_POOL2D.

CONV2D and MATMUL are direct products through :mod:`.gemm`'s micro-kernels; their weights are packed at
load (a MATMUL's second operand in the prologue when it is not a constant). A convolution with padding,
or on integers, first copies its input into scratch with zeros around it (integers minus their zero
point, as float), so the kernels never test a bound; without padding a float input is read in place.
Work is split into units of output tiles, which threads may share. Float dot products use fused
multiply-adds in the kernels' order; the specification bounds their error against an fp64 reference,
as it does the numpy kernels' BLAS order. Integer results are exact (see :mod:`.gemm`).

DEPTHWISE_CONV2D runs over channels with vectors (multiplier 1) or per element; the pools over the
valid window of each output (padding is never materialised: an average divides by the valid count,
and a maximum never sees a padding value, since every window holds an input element).

Every loop whose work can be large polls the run's control block where :mod:`..polls` places it: the
products in their units, column blocks or micro-kernels, depthwise convolutions and pools in their
output rows, columns or window rows, and the prologues' copies and packing in their rows.
"""

from __future__ import annotations

import numpy as np

from .....tosa.attributes import NanPropagationMode
from .....tosa.dtypes import DType
from .....tosa.operators import Op
from ...numerics import wrap
from .. import polls
from ..lowering import Kernel, NotNative, OpView, c_float, c_int, c_type, lowering, size
from . import gemm

_INT8_RANGE = (-128, 127)
_POOL_STACK_CHANNELS = 4096  # AVG_POOL2D keeps a row of accumulators on the stack


def _int_range(dtype: DType) -> tuple[int, int]:
    return -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1


def _types(view: OpView) -> bool:
    """True for an integer product (int8 x int8 -> int32), False for fp32; NotNative otherwise."""
    a, b, out = view.dtype(0), view.dtype(1), view.out_dtype()
    if a is DType.FP32 and b is DType.FP32 and out is DType.FP32:
        return False
    if a is DType.INT8 and b is DType.INT8 and out is DType.INT32:
        return True
    raise NotNative(f"{view.op.name} on {a} x {b} -> {out}")


def _padded_copy(
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


def _scoped(pieces: list[str]) -> str:
    """A prologue of several pieces, each in a block of its own (each may declare a poll countdown)."""
    return "\n".join(f"{{\n{piece}\n}}" for piece in pieces)


def _check_windows(view: OpView, size_in: int, pad: int, kernel: int, stride: int, dilation: int, out: int) -> None:
    if out < 1 or (out - 1) * stride + (kernel - 1) * dilation >= size_in + pad:
        raise NotNative(f"{view.where()}: windows outside the padded input")


# -- CONV2D ------------------------------------------------------------------------------------------------
@lowering(Op.CONV2D)
def conv2d(view: OpView) -> Kernel:
    integer = _types(view)
    attr = view.attribute
    n, ih, iw, ic = view.inputs[0].shape
    oc, kh, kw, _ = view.inputs[1].shape
    _, oh, ow, _ = view.outputs[0].shape
    top, bottom, left, right = attr.pad
    sy, sx = attr.stride
    dy, dx = attr.dilation
    _check_windows(view, ih, top + bottom, kh, sy, dy, oh)
    _check_windows(view, iw, left + right, kw, sx, dx, ow)
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
        prologue.append(_padded_copy(c_type(view.dtype()), (n, ih, iw, ic), tuple(attr.pad), zp_x, integer, "float"))
    weights, bias, arrays, w_bound = _conv_operands(
        view, integer, tile.nr, blocks, taps, ic, oc, zp_w, scratch, prologue
    )
    bound = gemm.magnitude(_INT8_RANGE, zp_x) * w_bound if integer else 0
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
    units = -(-rows // tile.mr)
    declare, unit_poll, block_poll = _unit_polls(product.place_polls([units, product.blocks]), 2)
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
        "for (ptrdiff_t tile = lo; tile < hi; tile++) {",
        *unit_poll,
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
        *(f"        {line}" for line in product.calls(tile.mr, "a", "c", poll=block_poll)),
        "    }",
    ]
    if remainder:
        calls = product.calls(remainder, "a", "c", poll=block_poll)
        body += ["    else {", *(f"        {line}" for line in calls), "    }"]
    if view.epilogue:
        body.append("    " + view.epilogue.loop(f"Y0 + m0 * {oc}", f"rows * {oc}", view.tools))
    body.append("}")
    return Kernel(
        "\n".join(body),
        prologue=_scoped(prologue),
        helpers="\n".join(helpers),
        scratch=tuple(scratch),
        arrays=arrays,
        units=units,
        macs=rows * oc * product.taps * ic,
        poll_work=polls.PRODUCT_WORK,
        vectors=True,
    )


def _unit_polls(nest: polls.Nest | None, outer: int) -> tuple[list[str], list[str], str]:
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
        w_bound = gemm.magnitude(_INT8_RANGE, zp_w) if integer else 0
    bias_t = "int32_t" if integer else "float"
    if b_value is not None:
        arrays["b"] = _bias(np.asarray(b_value).reshape(-1), columns, blocks * nr, integer)
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


def _bias(bias: np.ndarray, channels: int, padded: int, integer: bool) -> np.ndarray:
    full = np.broadcast_to(bias, (channels,)) if bias.shape[0] != channels else bias
    out = np.zeros(padded, np.int32 if integer else np.float32)
    out[:channels] = full
    return out


# -- MATMUL ------------------------------------------------------------------------------------------------
@lowering(Op.MATMUL)
def matmul(view: OpView) -> Kernel:
    integer = _types(view)
    batch, h, c = view.inputs[0].shape
    _, _, w = view.inputs[1].shape
    zp_a = view.scalar(2, "A_zp") if integer else 0
    zp_b = view.scalar(3, "B_zp") if integer else 0
    if integer and view.tools.dot_int8:
        if view.values[1] is None and zp_b == 0:
            return _matmul_dot4(view, zp_a, None)
        if view.values[1] is not None:
            wide = np.asarray(view.values[1]).astype(np.int64) - zp_b
            if not wide.size or (wide.min() >= -128 and wide.max() <= 127):
                return _matmul_dot4(view, zp_a, wide.astype(np.int8))
    tile = gemm.tiling(view.tools, h, w)
    blocks = -(-w // tile.nr)
    panel = blocks * c * tile.nr  # floats of one batch's packed B
    b_value = view.values[1]
    arrays: dict[str, np.ndarray] = {}
    prologue: list[str] = []
    scratch: list[int] = []
    if b_value is not None:
        wide = np.asarray(b_value).astype(np.float64) - zp_b
        arrays["w"] = np.stack([gemm.pack_weights(wide[i][None], tile.nr) for i in range(batch)])
        b_bound = int(np.abs(wide).max(initial=0)) if integer else 0
        weights = "K_w"
    else:
        b_bound = gemm.magnitude(_INT8_RANGE, zp_b)
        convert = f"(float)((int32_t)src[k * {w} + col] - {zp_b})" if integer else f"src[k * {w} + col]"
        declare, poll = polls.countdown(batch * blocks * c, tile.nr)
        prologue.append(
            f"""float *restrict PB = (float *)S{len(scratch)};
{declare}
for (ptrdiff_t b = 0; b < {batch}; b++)
    for (ptrdiff_t nb = 0; nb < {blocks}; nb++) {{
        const {c_type(view.dtype(1))} *restrict src = X1 + b * {c * w};
        float *restrict dst = PB + b * {panel} + nb * {c * tile.nr};
        for (ptrdiff_t k = 0; k < {c}; k++) {{
            {poll}
            for (ptrdiff_t j = 0; j < {tile.nr}; j++) {{
                const ptrdiff_t col = nb * {tile.nr} + j;
                dst[k * {tile.nr} + j] = col < {w} ? {convert} : 0.0f;
            }}
        }}
    }}"""
        )
        weights = f"(const float *)S{len(scratch)}"
        scratch.append(batch * panel * 4)
    if integer:
        head, close = polls.innermost_loop("j", batch * h * c, polls.plan([batch * h * c], polls.ELEMENT_WORK))
        loop = "\n".join([*head[:-1], f"{head[-1]} PA[j] = (float)((int32_t)X0[j] - {zp_a});", close])
        prologue.append(f"float *restrict PA = (float *)S{len(scratch)};\n{loop}")
        a_source = f"(const float *)S{len(scratch)}"
        scratch.append(batch * h * c * 4)
    else:
        a_source = "X0"
    bound = gemm.magnitude(_INT8_RANGE, zp_a) * b_bound if integer else 0
    product = gemm.Product(view.prefix, tile, h, w, 1, c, None, integer, gemm.chunks(1, c, bound))
    arrays["b"] = np.zeros(blocks * tile.nr, np.int32 if integer else np.float32)
    types = ("float", "float", "int32_t" if integer else "float")
    return _matmul_kernel(view, product, types, (a_source, weights, "K_b"), panel, prologue, scratch, arrays)


def _matmul_kernel(
    view: OpView,
    product: gemm.Product,
    types: tuple[str, str, str],
    pointers: tuple[str, str, str],
    panel: int,
    prologue: list[str],
    scratch: list[int],
    arrays: dict[str, np.ndarray],
) -> Kernel:
    """The units of a MATMUL through ``product``'s kernels. ``types``: C element types of A (as the
    kernels read it, product.depth per row), of the packed B and of the result; ``pointers``: C
    expressions of A, of the packed B (``panel`` elements per batch) and of the bias, which may use the
    unit's batch ``b``."""
    batch, h, c = view.inputs[0].shape
    w = view.inputs[1].shape[2]
    a_t, w_t, out_t = types
    a_source, weights, bias = pointers
    tile = product.tile
    blocks, tiles = product.blocks, -(-h // tile.mr)
    remainder = h % tile.mr
    declare, unit_poll, _ = _unit_polls(product.place_polls([batch * blocks * tiles]), 1)
    body = [
        f"const {a_t} *restrict A = {a_source};",
        *declare,
        # A unit is one tile of rows in one column block, in (batch, block, tile) order: a stretch of units
        # keeps one block's packed panel of B in cache while the tiles of A pass by.
        "for (ptrdiff_t unit = lo; unit < hi; unit++) {",
        *unit_poll,
        f"    const ptrdiff_t b = unit / {blocks * tiles}, nb = (unit / {tiles}) % {blocks};",
        f"    const ptrdiff_t m0 = (unit % {tiles}) * {tile.mr};",
        f"    const ptrdiff_t rows = {h} - m0 < {tile.mr} ? {h} - m0 : {tile.mr};",
        f"    const {w_t} *restrict W = {weights} + b * {panel};",
        f"    const {out_t} *restrict B = {bias};",
        f"    const {a_t} *a[{tile.mr}];",
        f"    {out_t} *c[{tile.mr}];",
        "    for (ptrdiff_t i = 0; i < rows; i++) {",
        f"        a[i] = A + (b * {h} + m0 + i) * {product.depth};",
        f"        c[i] = Y0 + (b * {h} + m0 + i) * {w};",
        "    }",
        f"    if (rows == {tile.mr}) {{",
        *(f"        {line}" for line in product.calls(tile.mr, "a", "c", block_loop=False)),
        "    }",
    ]
    if remainder:
        calls = product.calls(remainder, "a", "c", block_loop=False)
        body += ["    else {", *(f"        {line}" for line in calls), "    }"]
    body.append("}")
    return Kernel(
        "\n".join(body),
        prologue=_scoped(prologue),
        helpers=product.kernels([tile.mr, remainder or tile.mr]),
        scratch=tuple(scratch),
        arrays=arrays,
        units=batch * blocks * tiles,
        macs=batch * h * w * c,
        poll_work=polls.PRODUCT_WORK,
        vectors=True,
    )


def _matmul_dot4(view: OpView, zp_a: int, constant_b: np.ndarray | None) -> Kernel:
    """An int8 MATMUL through the VNNI kernels (see :mod:`.gemm`): A copied as bytes + 128 with rows
    padded to a multiple of 4; B minus its zero point as int8, packed at load when it is a constant (else
    by the prologue, which the caller allows only for B_zp = 0), with the bias correction per column."""
    batch, h, c = view.inputs[0].shape
    _, _, w = view.inputs[1].shape
    tile = gemm.tiling(view.tools, h, w)
    blocks = -(-w // tile.nr)
    depth4 = -(-c // 4) * 4
    panel = blocks * depth4 * tile.nr  # bytes of one batch's packed B
    fill = zp_a + 128
    scratch = [batch * h * depth4]
    arrays: dict[str, np.ndarray] = {}
    declare, poll = polls.countdown(batch * h, depth4)
    prologue = [
        f"""uint8_t *restrict PA = (uint8_t *)S0;
{declare}
for (ptrdiff_t r = 0; r < {batch * h}; r++) {{
    {poll}
    for (ptrdiff_t k = 0; k < {c}; k++) PA[r * {depth4} + k] = (uint8_t)((int32_t)X0[r * {c} + k] + 128);
    for (ptrdiff_t k = {c}; k < {depth4}; k++) PA[r * {depth4} + k] = {fill};
}}"""
    ]
    if constant_b is not None:
        arrays["w"] = np.stack([gemm.pack_weights_dot4(constant_b[i][None], tile.nr) for i in range(batch)])
        correction = np.zeros((batch, blocks * tile.nr), np.int64)
        for i in range(batch):
            correction[i, :w] = gemm.dot4_correction(constant_b[i][None], zp_a)
        arrays["b"] = wrap(-correction, DType.INT32)
        weights, bias = "K_w", "K_b"
    else:
        # B is int8 with zero point 0: its bytes are the signed operand as they are. The column sums
        # wrap like the accumulator (at most 2**16 terms of 8 bits: no int64 needed beyond the sum).
        declare, poll = polls.countdown(batch * blocks * tile.nr, depth4)
        prologue.append(
            f"""int8_t *restrict PW = (int8_t *)S1;
int32_t *restrict PB = (int32_t *)S2;
{declare}
for (ptrdiff_t b = 0; b < {batch}; b++)
    for (ptrdiff_t j = 0; j < {blocks * tile.nr}; j++) {{
        {poll}
        const ptrdiff_t nb = j / {tile.nr}, n = j % {tile.nr};
        int8_t *restrict dst = PW + b * {panel} + nb * {depth4 * tile.nr} + n * 4;
        int64_t sum = 0;
        for (ptrdiff_t k = 0; k < {depth4}; k++) {{
            const int8_t v = (j < {w} && k < {c}) ? X1[(b * {c} + k) * {w} + j] : 0;
            dst[(k / 4) * {4 * tile.nr} + (k % 4)] = v;
            sum += v;
        }}
        PB[b * {blocks * tile.nr} + j] = (int32_t)(uint32_t)(uint64_t)(-{fill} * sum);
    }}"""
        )
        scratch += [batch * panel, batch * blocks * tile.nr * 4]
        weights, bias = "(const int8_t *)S1", "(const int32_t *)S2"
    product = gemm.Product(view.prefix, tile, h, w, 1, depth4, None, True, [(0, 1, 0, depth4)], dot4=True)
    types = ("uint8_t", "int8_t", "int32_t")
    pointers = ("(const uint8_t *)S0", weights, f"{bias} + b * {blocks * tile.nr}")
    return _matmul_kernel(view, product, types, pointers, panel, prologue, scratch, arrays)


# -- DEPTHWISE_CONV2D -------------------------------------------------------------------------------------
@lowering(Op.DEPTHWISE_CONV2D)
def depthwise_conv2d(view: OpView) -> Kernel:
    integer = _types(view)
    attr = view.attribute
    n, ih, iw, c = view.inputs[0].shape
    kh, kw, _, mult = view.inputs[1].shape
    _, oh, ow, oc = view.outputs[0].shape
    top, bottom, left, right = attr.pad
    sy, sx = attr.stride
    dy, dx = attr.dilation
    _check_windows(view, ih, top + bottom, kh, sy, dy, oh)
    _check_windows(view, iw, left + right, kw, sx, dx, ow)
    zp_x = view.scalar(3, "input_zp") if integer else 0
    zp_w = view.scalar(4, "weight_zp") if integer else 0
    vl = view.tools.vector_floats
    width = -(-oc // vl) * vl
    taps = kh * kw
    elem = "int32_t" if integer else "float"
    scratch: list[int] = []
    prologue: list[str] = []
    arrays: dict[str, np.ndarray] = {}
    padded = integer or any(attr.pad)
    ph, pw = (ih + top + bottom, iw + left + right) if padded else (ih, iw)
    if padded:
        scratch.append(n * ph * pw * c * 4)
        prologue.append(_padded_copy(c_type(view.dtype()), (n, ih, iw, c), tuple(attr.pad), zp_x, integer, elem))
    if view.values[1] is not None:
        weights = np.asarray(view.values[1]).astype(np.int64 if integer else np.float32)
        packed = np.zeros((taps, width), np.int32 if integer else np.float32)
        packed[:, :oc] = (weights - zp_w).reshape(taps, oc)
        arrays["w"] = packed
        w_ptr = "K_w"
    else:
        k = len(scratch)
        scratch.append(taps * width * 4)
        value = f"({elem})((int32_t)X1[t * {oc} + j] - {zp_w})" if integer else f"X1[t * {oc} + j]"
        declare, poll = polls.countdown(taps, width)
        prologue.append(
            f"""{elem} *restrict PW = ({elem} *)S{k};
{declare}
for (ptrdiff_t t = 0; t < {taps}; t++) {{
    {poll}
    for (ptrdiff_t j = 0; j < {width}; j++) PW[t * {width} + j] = j < {oc} ? {value} : 0;
}}"""
        )
        w_ptr = f"(const {elem} *)S{k}"
    if view.values[2] is not None:
        arrays["b"] = _bias(np.asarray(view.values[2]).reshape(-1), oc, width, integer)
        b_ptr = "K_b"
    else:
        k = len(scratch)
        scratch.append(width * 4)
        spread = "j" if size(view.inputs[2].shape) == oc else "0"
        prologue.append(
            f"""{elem} *restrict PB = ({elem} *)S{k};
for (ptrdiff_t j = 0; j < {width}; j++) PB[j] = j < {oc} ? X2[{spread}] : 0;"""
        )
        b_ptr = f"(const {elem} *)S{k}"
    row = pw * c
    offsets = [ky * dy * row + kx * dx * c for ky in range(kh) for kx in range(kw)]
    table = f"static const ptrdiff_t {view.prefix}taps[{taps}] = {{{', '.join(map(str, offsets))}}};"
    nest = polls.plan([n * oh, ow], polls.DEPTHWISE_WORK, oc * taps)  # rows, columns: a countdown in either
    head = [
        f"const {elem} *restrict P = {f'(const {elem} *)S0' if padded else 'X0'};",
        f"const {elem} *restrict W = {w_ptr};",
        f"const {elem} *restrict B = {b_ptr};",
        *([polls.declare()] if nest else []),
        "for (ptrdiff_t r = lo; r < hi; r++) {",
        *([f"    {polls.poll(nest.every)}"] if nest and nest.level == 0 else []),
        f"    const ptrdiff_t b = r / {oh}, oy = r % {oh};",
        f"    for (ptrdiff_t ox = 0; ox < {ow}; ox++) {{",
        *([f"        {polls.poll(nest.every)}"] if nest and nest.level == 1 else []),
        f"        const {elem} *restrict base = P + b * {ph * row} + oy * {sy * row} + ox * {sx * c};",
        f"        {c_type(view.out_dtype())} *restrict o = Y0 + (r * {ow} + ox) * {oc};",
    ]
    if not integer and mult == 1:
        inner = [
            f"        for (ptrdiff_t c0 = 0; c0 < {oc}; c0 += IA_VL) {{",
            "            ia_vf acc = ia_vload(B + c0);",
            f"            if (c0 + IA_VL <= {oc}) {{",
            f"                for (int t = 0; t < {taps}; t++) {{",
            f"                    const ia_vf x = ia_vload(base + {view.prefix}taps[t] + c0);",
            f"                    acc = ia_vfma(x, ia_vload(W + t * {width} + c0), acc);",
            "                }",
            "                ia_vstore(o + c0, acc);",
            "            } else {",
            f"                for (int t = 0; t < {taps}; t++) {{",
            f"                    const ia_vf x = ia_vload_n(base + {view.prefix}taps[t] + c0, {oc} - (int)c0);",
            f"                    acc = ia_vfma(x, ia_vload(W + t * {width} + c0), acc);",
            "                }",
            f"                ia_vstore_n(o + c0, acc, {oc} - (int)c0);",
            "            }",
            "        }",
        ]
    elif integer:
        inner = [
            f"        for (ptrdiff_t j = 0; j < {oc}; j++) {{",
            "            int64_t acc = 0;",
            f"            for (int t = 0; t < {taps}; t++)",
            f"                acc += (int64_t)base[{view.prefix}taps[t] + j / {mult}] * W[t * {width} + j];",
            "            o[j] = (int32_t)((uint32_t)(uint64_t)acc + (uint32_t)B[j]);",
            "        }",
        ]
    else:
        inner = [
            f"        for (ptrdiff_t j = 0; j < {oc}; j++) {{",
            "            float acc = B[j];",
            f"            for (int t = 0; t < {taps}; t++)",
            f"                acc = fmaf(base[{view.prefix}taps[t] + j / {mult}], W[t * {width} + j], acc);",
            "            o[j] = acc;",
            "        }",
        ]
    body = [*head, *inner, "    }"]
    if view.epilogue:
        body.append("    " + view.epilogue.loop(f"Y0 + r * {ow * oc}", ow * oc, view.tools))
    body.append("}")
    return Kernel(
        "\n".join(body),
        prologue=_scoped(prologue),
        helpers=table,
        scratch=tuple(scratch),
        arrays=arrays,
        units=n * oh,
        macs=n * oh * ow * oc * taps,
        poll_work=polls.DEPTHWISE_WORK,
        vectors=not integer and mult == 1,
    )


# -- pools -------------------------------------------------------------------------------------------------
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
        init = c_int(_int_range(dtype)[0])
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
        lo, hi = _int_range(dtype)
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
