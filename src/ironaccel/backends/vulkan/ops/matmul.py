"""MATMUL's kernels, chosen at load from the shape, the types and what the device offers (the
registrations, per signature, are in :mod:`.tensor`): [N, H, C] x [N, C, W] -> [N, H, W].

fp32, fp16, bf16 or fp8 inputs, accumulated in fp32 (:func:`float_steps`; bf16 and fp8 operands are
widened to fp32 first, :func:`widened_steps`), in three kernels:

* ``matmul.comp`` (every device, fp32 and fp16 inputs): register-blocked tiles in shared memory, each
  invocation accumulating a TM x TN block (4 or 8 each) with fma. The tile (:func:`tile_for`) follows
  the output's extent: 128 x 128 where both sides are long, 64 or 16 where one is short, so skinny
  products compute few padding rows. fp16 inputs are widened exactly as they are staged
  (``include/fp16.glsl``).
* Split-k (:func:`slices_for`): when the output has too few tiles to occupy the device and C is long,
  the reduction is cut into S slices whose partial sums go to operator scratch, and
  ``matmul_reduce.comp`` adds them in slice order. Still fp32 throughout, and deterministic.
* ``matmul_coop.comp`` (fp16 inputs, devices with VK_KHR_cooperative_matrix listing fp16 16 x 16 x 16
  with an fp32 accumulator): subgroup matrix multiply-accumulate on tiles staged in shared memory.

``matmul.comp`` and ``matmul_coop.comp`` take the shape as specialization constants for products of at
least FIXED_SHAPE_WORK multiply-adds (:func:`fixed_shape`, ADR 0022): constant addresses, and no bound
checks on whole tiles.

Accumulation is fp32 for both of TOSA's fp16 accumulator types (more accurate than an fp16
accumulator, within the specification's dot-product bound); an fp16 result is the fp32 one rounded
once by ``cast.comp``. Batches beyond the device's z group limit become further dispatches.

int8 x int8 -> int32 with zero points (:func:`int8_steps`): ``matmul_int_coop.comp`` on int8
cooperative matrices where the device lists them, else ``matmul_int.comp``, one invocation per output
walking C (split along C under a driver's loop cap, the int32 partial sums added by ``reduce_int.comp``:
wrapping addition is associative, so the result is the same exact sum narrowed to int32).
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np

from ....core.errors import ResourceLimit
from ....tosa.dtypes import DType
from ....tosa.operators import Op
from .common import WORKGROUP, Dispatch, LoweringContext, Place, Step, check_loops, groups, word_groups, words
from .reduction import INTEGER_OPCODES as REDUCE_INTEGER_OPCODES
from .widening import convert, widening

COOP_FP16 = "fp16:16x16x16:fp32"  # the cooperative-matrix configuration matmul_coop.comp is written for
COOP_TILE = (128, 128)  # rows and columns of output per matmul_coop.comp workgroup (4 subgroups of 64 x 64)
COOP_INT8 = "int8:16x16x32:int32"  # the cooperative-matrix configuration matmul_int_coop.comp is written for
INT8_COOP_TILE = (128, 128)  # rows and columns of output per matmul_int_coop.comp workgroup
COOP_BK = 32
BUSY_TILES = 256  # output tiles that keep a large GPU's multiprocessors busy; fewer invite split-k
MIN_SLICE = 256  # C per split-k slice, at least (shorter slices spend more on the partial sums)
MAX_SLICES = 32
WIDENED_INPUTS = frozenset({DType.BF16, DType.FP8E4M3, DType.FP8E5M2})  # the kernels read fp32 and fp16
FIXED_SHAPE_WORK = 1 << 30  # N x H x C x W from which the shape is compiled into the pipeline (ADR 0022)


@dataclasses.dataclass(frozen=True)
class Tile:
    """``matmul.comp``'s specialization: TX x TY invocations, TM x TN outputs each, BK of C per step."""

    tx: int
    ty: int
    tm: int
    tn: int
    bk: int

    @property
    def rows(self) -> int:
        return self.ty * self.tm

    @property
    def cols(self) -> int:
        return self.tx * self.tn

    @property
    def shared_bytes(self) -> int:
        return 2 * self.bk * (self.rows + self.cols) * 4  # two alternating buffers of fp32


def _side(extent: int) -> tuple[int, int]:
    """(invocations, outputs each) along one side of the tile."""
    if extent >= 512:
        return 16, 8
    if extent > 16:
        return 16, 4
    return 4, 4


def tile_for(h: int, w: int, max_shared_memory: int) -> Tile:
    ty, tm = _side(h)
    tx, tn = _side(w)
    bk = 8 if ty * tm == 128 or tx * tn == 128 else 16
    tile = Tile(tx, ty, tm, tn, bk)
    while tile.shared_bytes > max_shared_memory and tile.bk > 4:
        tile = dataclasses.replace(tile, bk=tile.bk // 2)
    if tile.shared_bytes > max_shared_memory:
        tile = Tile(4, 4, 4, 4, 4)  # 512 bytes: below every Vulkan device's minimum of 16 KiB
    return tile


def slices_for(tiles: int, c: int, step: int, max_loop_iterations: int | None) -> int:
    """Split-k slices for an output of ``tiles`` workgroups reducing over ``c`` in steps of ``step``:
    enough to give the device BUSY_TILES workgroups when C is long, and enough that no invocation loops
    past a driver's cap (lavapipe's), each slice at least MIN_SLICE long."""
    slices = 1
    if tiles < BUSY_TILES and c >= 2 * MIN_SLICE:
        slices = min(-(-BUSY_TILES // tiles), c // MIN_SLICE, MAX_SLICES)
    if max_loop_iterations is not None:
        # per step of BK: the step's loop plus unrolled inner loops at worst step + a few iterations
        per_slice = max(step, (max_loop_iterations // (step + 8)) * step)
        slices = max(slices, -(-c // per_slice))
    return max(1, slices)


def _slice_length(c: int, slices: int, step: int) -> int:
    per_slice = -(-c // slices)
    return -(-per_slice // step) * step


def widened_steps(ctx: LoweringContext) -> list[Step]:
    """bf16 or fp8 operands widened to fp32 around :func:`float_steps` (an fp16 result is rounded by it)."""
    return widening(float_steps, WIDENED_INPUTS)(ctx)


def float_steps(ctx: LoweringContext) -> list[Step]:
    """fp32 or fp16 operands, an fp32 or fp16 result."""
    a, b = ctx.inputs[0], ctx.inputs[1]
    out = ctx.outputs[0]
    n, h, c = a.shape
    w = b.shape[2]
    if out.size == 0:
        return []
    fp16_in = a.dtype is DType.FP16
    after: list[Step] = []
    target = ctx.place(out)
    if out.dtype is DType.FP16:  # kernels write fp32; cast.comp rounds it once
        wide = ctx.scratch(4 * out.size)
        after.append(convert(ctx, wide, target, out.size, widen=False))
        target = wide
    reads = (ctx.place(a), ctx.place(b))
    if fp16_in and COOP_FP16 in ctx.matrix_tiles and c % 8 == 0 and w % 8 == 0:
        steps = coop(ctx, n, h, c, w, reads, target, "matmul_coop", COOP_TILE)
    else:
        steps = tiled(ctx, n, h, c, w, reads, target, fp16_in)
    return [*steps, *after]


def tiled(
    ctx: LoweringContext, n: int, h: int, c: int, w: int, reads: tuple[Place, Place], target: Place, fp16: bool
) -> list[Step]:
    tile = tile_for(h, w, ctx.max_shared_memory)
    gx, gy = -(-w // tile.cols), -(-h // tile.rows)
    limit_x, limit_y, limit_z = ctx.max_groups
    if gx > limit_x or gy > limit_y:
        raise ResourceLimit(f"MATMUL output {h}x{w} needs {gy}x{gx} tiles; the device dispatches {limit_y}x{limit_x}")
    vec = int(not fp16 and c % 4 == 0 and w % 4 == 0)
    spec = (tile.tx, tile.ty, tile.tm, tile.tn, tile.bk, int(fp16), vec)
    slices = slices_for(n * gx * gy, c, tile.bk, ctx.max_loop_iterations)
    if slices > 1 and n * slices <= limit_z:
        ks = _slice_length(c, slices, tile.bk)
        slices = -(-c // ks)
    if slices > 1 and n * slices <= limit_z:
        spec += fixed_shape(n, h, c, w, ks)
        count = n * h * w
        partial = ctx.scratch(4 * slices * count)
        push = struct.pack("<6I", 0, h, c, w, slices, ks)
        reduce_push = struct.pack("<2I", count, slices)
        return [
            Dispatch("matmul", spec, reads, (partial,), push, (gx, gy, n * slices)),
            Dispatch("matmul_reduce", (WORKGROUP,), (partial,), (target,), reduce_push, groups(count, ctx)),
        ]
    if slices > 1:
        raise ResourceLimit(f"MATMUL with C={c} needs {slices} split-k slices per batch of {n}; too many workgroups")
    ks = _slice_length(c, 1, tile.bk)
    spec += fixed_shape(n, h, c, w, ks)
    steps: list[Step] = []
    for base in range(0, n, limit_z):
        count = min(limit_z, n - base)
        push = struct.pack("<6I", base, h, c, w, 1, ks)
        steps.append(Dispatch("matmul", spec, reads, (target,), push, (gx, gy, count)))
    return steps


def fixed_shape(n: int, h: int, c: int, w: int, *more: int) -> tuple[int, ...]:
    """The specialization constants that compile H, C, W (and ``more``) into a MATMUL kernel: the values
    for a product of at least FIXED_SHAPE_WORK multiply-adds, zeros (read from the push constants)
    below it. A fixed shape costs a pipeline per shape; it pays for itself on large products, where
    constant addresses and, on whole tiles, no bound checks shorten every step (ADR 0022)."""
    if n * h * c * w >= FIXED_SHAPE_WORK:
        return (h, c, w, *more)
    return (0,) * (3 + len(more))


def coop(
    ctx: LoweringContext,
    n: int,
    h: int,
    c: int,
    w: int,
    reads: tuple[Place, Place],
    target: Place,
    shader: str,
    tile: tuple[int, int],
) -> list[Step]:
    """``shader`` (a cooperative-matrix kernel) over ``tile``-sized
    output tiles, one dispatch per z-limit of batches."""
    gx, gy = -(-w // tile[1]), -(-h // tile[0])
    limit_x, limit_y, limit_z = ctx.max_groups
    if gx > limit_x or gy > limit_y:
        raise ResourceLimit(f"MATMUL output {h}x{w} needs {gy}x{gx} tiles; the device dispatches {limit_y}x{limit_x}")
    spec: tuple[int, ...] = ()
    if shader == "matmul_coop":  # (MATMUL and nvfp4.py) 32 invocations per 64 x 64 block, then the shape
        spec = (32 * (tile[0] // 64) * (tile[1] // 64), *fixed_shape(n, h, c, w))
    steps: list[Step] = []
    for base in range(0, n, limit_z):
        count = min(limit_z, n - base)
        push = struct.pack("<4I", base, h, c, w)
        steps.append(Dispatch(shader, spec, reads, (target,), push, (gx, gy, count)))
    return steps


def int8_steps(ctx: LoweringContext) -> list[Step]:
    """``matmul_int_coop.comp`` where the device has int8 cooperative matrices, the rows of both
    operands are whole 16-byte words and the zero points are constants; else ``matmul_int.comp``,
    one invocation per output walking C."""
    a, b, a_zp, b_zp = ctx.inputs
    out = ctx.outputs[0]
    if out.size == 0:
        return []
    n, h, c = a.shape
    w = b.shape[2]
    zps = ctx.constant(2), ctx.constant(3)
    if COOP_INT8 in ctx.matrix_tiles and c % 16 == 0 and w % 16 == 0 and all(z is not None for z in zps):
        za, zb = (int(np.asarray(z).reshape(-1)[0]) for z in zps)
        return _int8_coop(ctx, n, h, c, w, (ctx.place(a), ctx.place(b)), ctx.place(out), za, zb)
    reads = tuple(ctx.place(t) for t in (a, b, a_zp, b_zp))
    limit = ctx.max_loop_iterations
    if limit is None or c * -(-out.size // (groups(out.size, ctx)[0] * WORKGROUP)) <= limit:
        push = words(out.size, h, c, w, c, 1)
        return [Dispatch("matmul_int", (WORKGROUP,), reads, (ctx.place(out),), push, groups(out.size, ctx))]
    # Split-k under a driver's loop cap: slices of at most half the cap, their int32 sums added after.
    length = limit // 2
    slices = -(-c // length)
    count = out.size * slices
    check_loops(ctx, length * -(-count // (groups(count, ctx)[0] * WORKGROUP)))
    partial = ctx.scratch(4 * count)
    reduce_grid = word_groups(out.size, 4, ctx)
    check_loops(ctx, slices * -(-out.size // (reduce_grid[0] * WORKGROUP)))
    return [
        Dispatch(
            "matmul_int", (WORKGROUP,), reads, (partial,), words(out.size, h, c, w, length, slices), groups(count, ctx)
        ),
        Dispatch(
            "reduce_int",
            (WORKGROUP, REDUCE_INTEGER_OPCODES[Op.REDUCE_SUM], 4),
            (partial,),
            (ctx.place(out),),
            struct.pack("<3I", 1, slices, out.size),
            reduce_grid,
        ),
    ]


def _int8_coop(
    ctx: LoweringContext, n: int, h: int, c: int, w: int, reads: tuple[Place, Place], target: Place, za: int, zb: int
) -> list[Step]:
    rows, cols = INT8_COOP_TILE
    gx, gy = -(-w // cols), -(-h // rows)
    limit_x, limit_y, limit_z = ctx.max_groups
    if gx > limit_x or gy > limit_y:
        raise ResourceLimit(f"MATMUL output {h}x{w} needs {gy}x{gx} tiles; the device dispatches {limit_y}x{limit_x}")
    steps: list[Step] = []
    for base in range(0, n, limit_z):
        push = struct.pack("<4I2i", base, h, c, w, za, zb)
        steps.append(Dispatch("matmul_int_coop", (), reads, (target,), push, (gx, gy, min(limit_z, n - base))))
    return steps
