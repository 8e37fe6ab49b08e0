"""Native code for MATMUL: a direct product through :mod:`.gemm`'s micro-kernels.

The second operand B is packed at load when it is a constant, else by the prologue (once per run, before
the units), unless A has only a few rows: B is then read in place (:func:`_matmul_direct`). Integer
operands are converted to float minus their zero points (exact, see :mod:`.gemm`); where the compiler
targets VNNI and B fits int8 after its zero point (a B that is not a constant only with zero point 0),
they are multiplied as bytes instead (:func:`_matmul_dot4`). A unit is one tile of rows in one column
block, so threads share the work.

Polls: the products in their units or micro-kernels (:func:`.tensor_common.unit_polls`), the prologues'
copies and packing in their rows.
"""

from __future__ import annotations

import numpy as np

from .....tosa.dtypes import DType
from .....tosa.operators import Op
from ...numerics import wrap
from .. import polls
from ..lowering import Kernel, OpView, c_type, lowering
from . import gemm
from .tensor_common import INT8_RANGE, product_types, scoped, unit_polls

DIRECT_ROWS = 4  # an fp32 MATMUL of at most this many rows with a B computed by the run reads B unpacked


@lowering(Op.MATMUL)
def matmul(view: OpView) -> Kernel:
    integer = product_types(view)
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
    b_value = view.values[1]
    if not integer and b_value is None and h <= DIRECT_ROWS:
        return _matmul_direct(view)
    tile = gemm.tiling(view.tools, h, w)
    blocks = -(-w // tile.nr)
    panel = blocks * c * tile.nr  # floats of one batch's packed B
    arrays: dict[str, np.ndarray] = {}
    prologue: list[str] = []
    scratch: list[int] = []
    if b_value is not None:
        wide = np.asarray(b_value).astype(np.float64) - zp_b
        arrays["w"] = np.stack([gemm.pack_weights(wide[i][None], tile.nr) for i in range(batch)])
        b_bound = int(np.abs(wide).max(initial=0)) if integer else 0
        weights = "K_w"
    else:
        b_bound = gemm.magnitude(INT8_RANGE, zp_b)
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
    bound = gemm.magnitude(INT8_RANGE, zp_a) * b_bound if integer else 0
    product = gemm.Product(view.prefix, tile, h, w, 1, c, None, integer, gemm.chunks(1, c, bound))
    arrays["b"] = np.zeros(blocks * tile.nr, np.int32 if integer else np.float32)
    types = ("float", "float", "int32_t" if integer else "float")
    return _matmul_kernel(view, product, types, (a_source, weights, "K_b"), panel, prologue, scratch, arrays)


def _matmul_direct(view: OpView) -> Kernel:
    """An fp32 MATMUL of a few rows whose B is computed by the run (attention in a decode step): B is read in
    place, a block of NR columns of every row of it per unit, instead of packed first, which would move
    B twice more than the product reads it. The sums are the packed kernels' (from +0, fused multiply-adds
    in k order), so the results are theirs bit for bit."""
    batch, h, c = view.inputs[0].shape
    w = view.inputs[1].shape[2]
    vl = view.tools.vector_floats
    # As many vectors of columns as keep h rows of accumulators, the vectors of B and x in registers.
    nv = max(1, min(4, -(-w // vl), (view.tools.vector_registers - 2) // (h + 1)))
    nr = nv * vl
    blocks = -(-w // nr)
    units = batch * blocks

    def block(columns: int) -> list[str]:
        vectors = -(-columns // vl)
        lanes = [min(vl, columns - v * vl) for v in range(vectors)]
        lines = [f"ia_vf c{i}_{v} = ia_vzero();" for i in range(h) for v in range(vectors)]
        lines.append(f"for (ptrdiff_t k = 0; k < {c}; k++) {{")
        for v, n in enumerate(lanes):
            load = f"ia_vload(Bb + k * {w} + {v * vl})" if n == vl else f"ia_vload_n(Bb + k * {w} + {v * vl}, {n})"
            lines.append(f"    const ia_vf w{v} = {load};")
        for i in range(h):
            lines.append(f"    {{ const ia_vf x = ia_vset1(Ab[{i * c} + k]);")
            lines += [f"      c{i}_{v} = ia_vfma(x, w{v}, c{i}_{v});" for v in range(vectors)]
            lines.append("    }")
        lines.append("}")
        for i in range(h):
            for v, n in enumerate(lanes):
                target = f"Cb + {i * w + v * vl}"
                lines.append(f"ia_vstore({target}, c{i}_{v});" if n == vl else f"ia_vstore_n({target}, c{i}_{v}, {n});")
        return lines

    declare, poll = polls.countdown(units, h * c * nr, polls.PRODUCT_WORK)
    last = w - (blocks - 1) * nr
    body = [
        declare,
        "for (ptrdiff_t unit = lo; unit < hi; unit++) {",
        f"    {poll}",
        f"    const ptrdiff_t b = unit / {blocks}, n0 = (unit % {blocks}) * {nr};",
        f"    const float *restrict Ab = X0 + b * {h * c};",
        f"    const float *restrict Bb = X1 + b * {c * w} + n0;",
        f"    float *restrict Cb = Y0 + b * {h * w} + n0;",
    ]
    if last == nr:
        body += ["    {", *(f"        {line}" for line in block(nr)), "    }"]
    else:
        body += [f"    if (n0 + {nr} <= {w}) {{", *(f"        {line}" for line in block(nr)), "    } else {"]
        body += [*(f"        {line}" for line in block(last)), "    }"]
    body.append("}")
    return Kernel(
        "\n".join(line for line in body if line.strip()),
        units=units,
        macs=batch * h * w * c,
        poll_work=polls.PRODUCT_WORK,
        vectors=True,
    )


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
    declare, unit_poll, _ = unit_polls(product.place_polls([batch * blocks * tiles]), 1)
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
        prologue=scoped(prologue),
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
