"""The register-blocked multiply-accumulate kernel behind CONV2D and MATMUL.

Both compute, for rows m (output pixels, or matrix rows) and columns n (output channels, or matrix
columns),

    C[m][n] = init[n] + sum over taps t and k < depth of  A_m[off[t] + k] * W[t][k][n]

where A_m points at row m's data (a pixel's window corner in the input, or a matrix row) and off[t] is
tap t's offset from it (one tap for a matrix product). W is packed as [blocks][taps][depth][NR]: the
columns come in blocks of NR = NV vectors, contiguous, zero past the last column.

A micro-kernel keeps an MR x NV tile of C in vector registers (MR * NV at most about three quarters of
the registers), and for every (tap, k) loads NV weight vectors once and broadcasts one value per row:
MR * NV fused multiply-adds per MR + NV loads. The compiler sees every size as a constant.

Integer products run through the same kernel on operands converted to float (minus their zero
points): every product and partial sum is an integer below 2**24, so float arithmetic is exact in any
order. Where a whole dot product could exceed that, it is cut into chunks of taps (or of depth) that
cannot, each converted to int32 and added with wrap-around, which is the exact sum modulo 2**32: the
int32 accumulator's result.

Where the compiler targets AVX-512 VNNI, int8 products with constant weights take a third form instead
(:func:`dot4_kernel`): ``vpdpbusd`` multiplies four unsigned bytes by four signed bytes and adds the four
products to an int32 lane, which is the int32 accumulator itself (exact, wrapping), at four times the
multiply-adds of a float FMA. The operand bytes are the input plus 128 (unsigned) and the weights minus
their zero point (signed, so the weights must fit int8 after it); the 128 + input_zp that this adds to
every input value is taken back once per column, from the bias (see :func:`dot4_correction`).

A product whose single tile of one column block is over a poll budget (a long depth, or many taps)
polls inside the micro-kernel (:meth:`Product.place_polls`): on one tap in so many, or in chunks of the
depth loop. The accumulators stay in registers across a poll, so the sums are the same in every bit.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .. import polls
from ..toolchain import Toolchain

EXACT = 1 << 24  # float32 holds every integer below this


@dataclasses.dataclass(frozen=True)
class Tiling:
    mr: int  # rows per tile
    nv: int  # vectors per column block
    vl: int  # floats per vector

    @property
    def nr(self) -> int:
        return self.nv * self.vl


def tiling(tools: Toolchain, rows: int, columns: int) -> Tiling:
    """Tile sizes for a product with ``rows`` x ``columns`` results.

    The tile's MR * NV accumulators, its NV weight vectors and the broadcast value must stay in
    registers with one to spare (a spill inside the loop costs more than a smaller tile: on 16 registers a
    4 x 3 tile that fills all of them measured slower than 6 x 2); among the tiles that fit, the one with
    the most multiply-adds per load (MR * NV / (MR + NV)) wins, the taller on a tie."""
    vl = tools.vector_floats
    budget = tools.vector_registers - 1
    best: tuple[float, int, int] | None = None
    for nv in range(1, max(1, min(-(-columns // vl), 4)) + 1):
        mr = max(1, min((budget - nv - 1) // nv, 16, rows))
        score = (mr * nv / (mr + nv), mr, nv)
        if best is None or score > best:
            best = score
    assert best is not None
    _, mr, nv = best
    return Tiling(mr, nv, vl)


def pack_weights(weights: np.ndarray, nr: int) -> np.ndarray:
    """[taps, depth, columns] -> float32 [blocks, taps, depth, nr], zero past the last column."""
    taps, depth, columns = weights.shape
    blocks = -(-columns // nr)
    packed = np.zeros((blocks, taps, depth, nr), np.float32)
    for b in range(blocks):
        part = weights[:, :, b * nr : (b + 1) * nr]
        packed[b, :, :, : part.shape[2]] = part
    return packed


def pack_weights_dot4(weights: np.ndarray, nr: int) -> np.ndarray:
    """int8 [taps, depth, columns] -> int8 [blocks, taps, depth4 / 4, nr, 4], depth padded to a multiple
    of 4 (depth4) and columns to blocks of nr with zeros: a 64-byte row of the last two axes is what one
    vpdpbusd multiplies with four bytes of a row of the input."""
    taps, depth, columns = weights.shape
    blocks, depth4 = -(-columns // nr), -(-depth // 4) * 4
    padded = np.zeros((taps, depth4, blocks * nr), np.int8)
    padded[:, :depth, :columns] = weights
    return np.ascontiguousarray(padded.reshape(taps, depth4 // 4, 4, blocks, nr).transpose(3, 0, 1, 4, 2))


def dot4_correction(weights: np.ndarray, zero_point: int) -> np.ndarray:
    """What to subtract from each column's bias when the input is fed as input + 128: (128 + zero_point)
    times the column's weight sum, as int64 (the caller wraps the difference to int32).
    ``weights``: [taps, depth, columns], already minus their zero point."""
    return (128 + zero_point) * weights.astype(np.int64).sum(axis=(0, 1))


def chunks(taps: int, depth: int, bound: int) -> list[tuple[int, int, int, int]]:
    """(t0, t1, k0, k1) ranges covering taps x depth in which a sum of terms of magnitude <= ``bound``
    stays exact in float32; one range when the whole sum does (always, for float operands: bound 0)."""
    if bound * taps * depth < EXACT:
        return [(0, taps, 0, depth)]
    if bound * depth < EXACT:
        step = (EXACT - 1) // (bound * depth)
        return [(t, min(taps, t + step), 0, depth) for t in range(0, taps, step)]
    step = max(1, (EXACT - 1) // bound)
    return [(t, t + 1, k, min(depth, k + step)) for t in range(taps) for k in range(0, depth, step)]


def _tap_and_depth_loops(poll: polls.Nest | None, step: int) -> tuple[list[str], list[str], str]:
    """The lines opening a micro-kernel's tap loop and its depth loop (k by ``step``) where ``poll`` (a
    nest over [taps, depth steps]) says how they poll, and what closes the depth loop's chunks."""
    tap_head = ["    for (ptrdiff_t t = t0; t < t1; t++) {"]
    if poll is not None and poll.level == 0:
        tap_head = [f"    {polls.declare()}", *tap_head, f"        {polls.poll(poll.every)}"]
    advance = "k++" if step == 1 else f"k += {step}"
    if poll is not None and poll.level == 1:
        head, close = polls.chunked("k", "k0", "k1", poll.every * step, step)
        return tap_head, [f"        {line}" for line in head], f"        {close}"
    return tap_head, [f"        for (ptrdiff_t k = k0; k < k1; {advance})"], ""


def micro_kernel(
    name: str,
    tile: Tiling,
    rows: int,
    columns: int,
    taps: int,
    depth: int,
    offsets: str | None,
    integer: bool,
    poll: polls.Nest | None = None,
) -> str:
    """A kernel for ``rows`` (<= MR) rows and the ``columns`` (<= NR) valid columns of one block.

    Signature: (a, w, bias, c, t0, t1, k0, k1[, first]): a / c hold a pointer per row (into the input and
    the output), w points at the block's packed weights, bias at its NR initial values (float) or its
    columns' int32 biases. ``offsets`` names the C array of tap offsets (None: one tap at offset 0).
    Float results are stored; integer ones are converted, and with ``first`` get the bias added, else
    are added to what the earlier chunks stored. With ``poll`` (see :meth:`Product.place_polls`) it
    takes ``ctl`` last and returns early, storing nothing, when a poll sees a stop."""
    vl = tile.vl
    nv = -(-columns // vl)
    nr = tile.nr
    out_t = "int32_t" if integer else "float"
    bias_t = "int32_t" if integer else "float"
    lines = [
        f"IA_INLINE void {name}(const float *const *restrict a, const float *restrict w, "
        f"const {bias_t} *restrict bias, {out_t} *const *restrict c, "
        "ptrdiff_t t0, ptrdiff_t t1, ptrdiff_t k0, ptrdiff_t k1"
        + (", int first" if integer else "")
        + (", int64_t *ctl)" if poll is not None else ")"),
        "{",
    ]
    for i in range(rows):
        lines.append(f"    const float *restrict a{i} = a[{i}];")
    for i in range(rows):
        for v in range(nv):
            init = "ia_vzero()" if integer else f"ia_vload(bias + {v * vl})"
            lines.append(f"    ia_vf c{i}_{v} = {init};")
    tap_head, depth_head, depth_close = _tap_and_depth_loops(poll, 1)
    lines += tap_head
    lines.append(f"        const ptrdiff_t off = {offsets}[t];" if offsets else "        const ptrdiff_t off = 0;")
    lines.append(f"        const float *restrict wt = w + t * {depth * nr};")
    lines += depth_head
    lines[-1] += " {"
    for v in range(nv):
        lines.append(f"            const ia_vf w{v} = ia_vload(wt + k * {nr} + {v * vl});")
    for i in range(rows):
        lines.append(f"            {{ const ia_vf x = ia_vset1(a{i}[off + k]);")
        for v in range(nv):
            lines.append(f"              c{i}_{v} = ia_vfma(x, w{v}, c{i}_{v});")
        lines.append("            }")
    lines.append("        }")
    if depth_close:
        lines.append(depth_close)
    lines.append("    }")
    for i in range(rows):
        if integer:
            lines.append("    {")
            lines.append(f"        float tmp[{nv * vl}];")
            for v in range(nv):
                lines.append(f"        ia_vstore(tmp + {v * vl}, c{i}_{v});")
            lines.append(f"        int32_t *restrict row = c[{i}];")
            lines.append(f"        if (first) for (int n = 0; n < {columns}; n++)")
            lines.append("            row[n] = (int32_t)((uint32_t)(int32_t)tmp[n] + (uint32_t)bias[n]);")
            lines.append(f"        else for (int n = 0; n < {columns}; n++)")
            lines.append("            row[n] = (int32_t)((uint32_t)row[n] + (uint32_t)(int32_t)tmp[n]);")
            lines.append("    }")
            continue
        for v in range(nv):
            lanes = min(vl, columns - v * vl)
            if lanes == vl:
                lines.append(f"    ia_vstore(c[{i}] + {v * vl}, c{i}_{v});")
            else:
                lines.append(f"    ia_vstore_n(c[{i}] + {v * vl}, c{i}_{v}, {lanes});")
    lines.append("}")
    return "\n".join(lines)


def dot4_kernel(
    name: str, tile: Tiling, rows: int, columns: int, depth4: int, offsets: str | None, poll: polls.Nest | None = None
) -> str:
    """The VNNI micro-kernel for ``rows`` (<= MR) rows and the ``columns`` valid columns of one block.

    Signature as :func:`micro_kernel`'s with bytes: (a, w, bias, c, t0, t1, k0, k1): a holds unsigned
    bytes (input + 128, depth padded to depth4), w a block's packed int8 weights (see
    :func:`pack_weights_dot4`), bias the block's corrected int32 biases; k counts bytes, by fours.
    Never inlined: inlined into its driver, where the tap and depth loops have constant bounds, GCC
    unrolls them and spills accumulators to the stack (the int8 CNN's convolutions ran 5% slower)."""
    vl = tile.vl
    nv = -(-columns // vl)
    nr = tile.nr
    lines = [
        f"static __attribute__((noinline)) void {name}(const uint8_t *const *restrict a, const int8_t *restrict w, "
        "const int32_t *restrict bias, int32_t *const *restrict c, "
        "ptrdiff_t t0, ptrdiff_t t1, ptrdiff_t k0, ptrdiff_t k1" + (", int64_t *ctl)" if poll is not None else ")"),
        "{",
    ]
    for i in range(rows):
        lines.append(f"    const uint8_t *restrict a{i} = a[{i}];")
    for i in range(rows):
        for v in range(nv):
            lines.append(f"    ia_vi c{i}_{v} = ia_viload(bias + {v * vl});")
    tap_head, depth_head, depth_close = _tap_and_depth_loops(poll, 4)
    lines += tap_head
    lines.append(f"        const ptrdiff_t off = {offsets}[t];" if offsets else "        const ptrdiff_t off = 0;")
    lines.append(f"        const int8_t *restrict wt = w + t * {depth4 * nr};")
    lines += depth_head
    lines[-1] += " {"
    for v in range(nv):
        lines.append(f"            const ia_vi w{v} = ia_viload(wt + k * {nr} + {v * vl * 4});")
    for i in range(rows):
        lines.append(f"            {{ const ia_vi x = ia_vset4(a{i} + off + k);")
        for v in range(nv):
            lines.append(f"              c{i}_{v} = ia_vdot4(c{i}_{v}, x, w{v});")
        lines.append("            }")
    lines.append("        }")
    if depth_close:
        lines.append(depth_close)
    lines.append("    }")
    for i in range(rows):
        for v in range(nv):
            lanes = min(vl, columns - v * vl)
            if lanes == vl:
                lines.append(f"    ia_vistore(c[{i}] + {v * vl}, c{i}_{v});")
            else:
                lines.append(f"    ia_vistore_n(c[{i}] + {v * vl}, c{i}_{v}, {lanes});")
    lines.append("}")
    return "\n".join(lines)


@dataclasses.dataclass
class Product:
    """What a driver needs to call the micro-kernels of one product."""

    prefix: str
    tile: Tiling
    rows: int  # M
    columns: int  # N
    taps: int
    depth: int
    offsets: str | None
    integer: bool
    ranges: list[tuple[int, int, int, int]]
    dot4: bool = False  # the VNNI form: byte operands, depth = depth4 (a multiple of 4), one range
    poll: polls.Nest | None = None  # how the micro-kernels poll (over [taps, depth steps]): place_polls

    @property
    def blocks(self) -> int:
        return -(-self.columns // self.tile.nr)

    def place_polls(self, outer: list[int]) -> polls.Nest | None:
        """Where the whole product polls, as a nest over ``outer`` (the caller's loops around one call of
        a micro-kernel: units, column blocks) then the micro-kernel's taps and depth steps. A nest
        inside the micro-kernel is kept in :attr:`poll` for the kernels to place; one outside is the
        caller's to place."""
        step = 4 if self.dot4 else 1  # the VNNI kernels step over the depth by four bytes
        unit = self.tile.mr * self.tile.nr * step
        nest = polls.plan([*outer, self.taps, self.depth // step], polls.PRODUCT_WORK, unit)
        if nest is not None and nest.level >= len(outer):
            self.poll = polls.Nest(nest.level - len(outer), nest.every, nest.innermost)
        return nest

    def kernels(self, tile_rows: list[int]) -> str:
        """The micro-kernels for tiles of each height in ``tile_rows`` (full and last column block)."""
        out = []
        last = self.columns - (self.blocks - 1) * self.tile.nr
        for rows in sorted(set(tile_rows)):
            for columns in sorted({self.tile.nr if self.blocks > 1 else last, last}):
                name = self.kernel_name(rows, columns)
                if self.dot4:
                    out.append(dot4_kernel(name, self.tile, rows, columns, self.depth, self.offsets, self.poll))
                    continue
                tile, taps, depth, offsets = self.tile, self.taps, self.depth, self.offsets
                out.append(micro_kernel(name, tile, rows, columns, taps, depth, offsets, self.integer, self.poll))
        return "\n".join(out)

    def kernel_name(self, rows: int, columns: int) -> str:
        return f"{self.prefix}mk{rows}x{columns}"

    def calls(self, rows: int, a: str, c: str, block_loop: bool = True, poll: str = "") -> list[str]:
        """C statements running the column blocks of one tile of ``rows`` rows; ``a`` / ``c`` name the
        row-pointer arrays, ``W`` / ``B`` the packed weights and bias in the caller. Without
        ``block_loop``, only block ``nb`` (a variable of the caller's loop) runs. ``poll``: a statement
        run first for every block (the caller's poll, where :meth:`place_polls` put it there)."""
        last = self.columns - (self.blocks - 1) * self.tile.nr
        out_t = "int32_t" if self.integer else "float"
        w_t = "int8_t" if self.dot4 else "float"
        lines = [f"for (ptrdiff_t nb = 0; nb < {self.blocks}; nb++) {{" if block_loop else "{"]
        if poll:
            lines.append(f"    {poll}")
        lines.append(f"    const {w_t} *restrict wb = W + nb * {self.taps * self.depth * self.tile.nr};")
        lines.append(f"    const {out_t} *restrict bb = B + nb * {self.tile.nr};")
        lines.append(f"    {out_t} *cb[{rows}];")
        lines.append(f"    for (int i = 0; i < {rows}; i++) cb[i] = {c}[i] + nb * {self.tile.nr};")

        def run(columns: int) -> list[str]:
            out = []
            for index, (t0, t1, k0, k1) in enumerate(self.ranges):
                first = ", 1" if self.integer and index == 0 else (", 0" if self.integer else "")
                first = "" if self.dot4 else first
                ctl = ", ctl" if self.poll is not None else ""
                name = self.kernel_name(rows, columns)
                out.append(f"{name}({a}, wb, bb, cb, {t0}, {t1}, {k0}, {k1}{first}{ctl});")
            return out

        if self.blocks == 1:
            lines += [f"    {line}" for line in run(last)]
        else:
            lines.append(f"    if (nb + 1 < {self.blocks}) {{")
            lines += [f"        {line}" for line in run(self.tile.nr)]
            lines.append("    } else {")
            lines += [f"        {line}" for line in run(last)]
            lines.append("    }")
        lines.append("}")
        return lines


def magnitude(dtype_range: tuple[int, int], zero_point: int) -> int:
    """The largest |x - zero_point| for x of a type with ``dtype_range``."""
    lo, hi = dtype_range
    return max(hi - zero_point, zero_point - lo)


def prod(values) -> int:
    return math.prod(int(v) for v in values)
