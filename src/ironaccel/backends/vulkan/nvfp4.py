"""NVFP4 projections on Vulkan: a projection (ADR 0012) planned as a :class:`~.plan.Plan` of our kernels.

A projection has no graph, so it skips TOSA planning and becomes a plan directly: its operands and
result get places in one arena, in slot order, and :class:`~.program.LoadedProgram` records and submits
it like any program (submission copies the bound ranges in and out, or replays a direct recording on
the caller's buffers, :mod:`.direct`).

Three ways to compute ``y = act(x @ w_hat.T)``, chosen at load from the shape and the device:

* **Decode shapes** (m below COOP_FROM_M or TILED_FROM_M, every batched form, and any shape whose
  decoded weights would not fit the arena): ``nvfp4_gemv.comp`` reads the packed weights once per
  GEMV_X_ROWS rows of x and decodes them in registers. These shapes are bound by the weights' bytes,
  which NVFP4 makes a quarter of fp16's.
* **Larger m on devices with fp16 cooperative matrices** (:data:`.ops.matmul.COOP_FP16`): the weights
  are decoded exactly to binary16 (an E2M1 value times an E4M3 scale fits it), x is split per row into
  binary16 x_hi + x_lo after an exact power-of-two scaling, and ``matmul_coop.comp`` multiplies
  [x_hi | x_lo] by [w; w] with fp32 sums: tensor-core speed at about fp32's accuracy.
* **Larger m elsewhere**: ``nvfp4_decode.comp`` decodes each weight matrix exactly (the CPU backend's
  bits) into fp32 scratch, transposed to [k, n]; the fp32 MATMUL kernels of :mod:`.ops.matmul` multiply
  (the expert form's matrices are its batches, one MATMUL for all); ``nvfp4_activate.comp`` applies the
  activation.

Every path meets the same 1e-5 relative bound against the decode.

The mixture-of-experts form (:class:`~ironaccel.nvfp4.MoEProjection`, ADR 0042) is two expert-form GEMV
passes back to back: the up projections with the squared ReLU into arena scratch, then the down
projections from it. Its weight planes sit at the artifact's offsets inside each expert's binding, which
upstream aligns to 4 bytes only: a plane whose place meets the device's binding alignment is bound where
it lies, any other is copied to aligned scratch first (as is each expert's tensor scale).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ...core.errors import ResourceLimit
from ...nvfp4.bounds import ACTIVATIONS, Form
from ...nvfp4.moe import MoEProjection
from ...nvfp4.projection import ExpertProjection, ProjectionArtifact
from ...tosa.arena import Copy
from .direct import VECTOR_ALIGNMENT
from .ops.common import WORKGROUP, Dispatch, Place, Step, groups
from .ops.matmul import COOP_FP16, COOP_TILE, coop, tiled
from .plan import ARENA_ALIGNMENT, Plan, place_barriers

GEMV_TEAM = 64  # invocations splitting k per workgroup (a power of two), at most
GEMV_ROWS = 4  # weight rows per workgroup: each x value loaded serves this many
# (more rows reuse x more but need registers: 64 x 4 with 2 words per step was among the fastest tiles at
# small m, and 16 rows spilled; ADR 0012)
GEMV_X_ROWS = 8  # rows of x per pass over the weights, at most
GEMV_VEC = 2  # packed words per invocation per weight row and step, at most (fewer with more rows of x)
SPLIT_WORKGROUP = 256  # invocations per row of x in nvfp4_split.comp (a power of two)
COOP_SLICE = 1024  # columns of k per cooperative-matrix MATMUL, summed in fp32 (see nvfp4_finish.comp: the
# device's accumulator loses precision with the length it sums; 1024 keeps results within 1e-5 while
# giving small m more workgroups; ADR 0012)
COOP_MAX_SLICES = 64  # beyond (k with no multiple of 16 near COOP_SLICE dividing it): the fp32 path
# Rows of x from which a MATMUL path is taken: the GEMV decodes the weights once per 8 rows of x, so its
# time grows with m, while a MATMUL path decodes once and keeps its time nearly flat; the crossings were
# measured (ADR 0012): the cooperative-matrix path from m = 32, the fp32 one from 64.
COOP_FROM_M = 32
TILED_FROM_M = 64


class _Scratch:
    """The context :func:`.ops.matmul.tiled` plans in: the device's limits and arena scratch."""

    def __init__(
        self,
        top: int,
        alignment: int,
        max_groups: tuple[int, int, int],
        max_loop_iterations: int | None,
        max_shared_memory: int,
    ) -> None:
        self.top = top
        self.alignment = alignment
        self.max_groups = max_groups
        self.max_loop_iterations = max_loop_iterations
        self.max_shared_memory = max_shared_memory

    def scratch(self, size: int) -> Place:
        place = Place("arena", self.top, size)
        self.top = _align(self.top + max(size, 1), self.alignment)
        return place


def build(
    projection: ProjectionArtifact,
    min_offset_alignment: int = 16,
    max_groups: tuple[int, int, int] = (65535,) * 3,
    max_buffer_bytes: int | None = None,
    max_loop_iterations: int | None = None,
    max_shared_memory: int = 16384,
    max_binding_bytes: int | None = None,
    matrix_tiles: frozenset[str] = frozenset(),
) -> Plan:
    """The plan of ``projection`` (checked when it was read) on a device with these limits. ResourceLimit
    names the operand when one exceeds what a binding reaches (``max_binding_bytes``) or the arena what
    one buffer holds (``max_buffer_bytes``). ``matrix_tiles``: the device's cooperative-matrix
    configurations (with fp16 ones, larger m multiplies on them)."""
    alignment = max(ARENA_ALIGNMENT, min_offset_alignment)
    top = 0
    places: list[Place] = []
    for operand in (*projection.inputs, *projection.outputs):
        if max_binding_bytes is not None and operand.nbytes > max_binding_bytes:
            raise ResourceLimit(
                f"{projection}: operand {operand} takes {operand.nbytes} bytes; a device binding reaches"
                f" {max_binding_bytes}"
            )
        places.append(Place("arena", top, operand.nbytes))
        top = _align(top + max(operand.nbytes, 1), alignment)
    inputs, (y,) = tuple(places[:-1]), places[-1:]
    steps: list[Step] | None = None
    binding_alignment = max(min_offset_alignment, VECTOR_ALIGNMENT)
    if isinstance(projection, MoEProjection):
        ctx = _Scratch(top, alignment, max_groups, max_loop_iterations, max_shared_memory)
        steps = _moe_steps(projection, inputs, y, ctx, binding_alignment)
    candidates = []
    if projection.form in (Form.SINGLE, Form.EXPERTS):
        slices = projection.k // coop_slice(projection.k)
        coop_ok = COOP_FP16 in matrix_tiles and projection.n % 8 == 0 and slices <= COOP_MAX_SLICES
        if coop_ok and projection.m >= COOP_FROM_M:
            candidates.append(_coop_steps)
        if projection.m >= TILED_FROM_M:
            candidates.append(_tiled_steps)
    for candidate in candidates:  # the first whose scratch fits
        ctx = _Scratch(top, alignment, max_groups, max_loop_iterations, max_shared_memory)
        steps = candidate(projection, inputs, y, ctx, binding_alignment)
        widest = max(place.size for step in steps for place in (*step.reads, *step.writes))
        if (max_binding_bytes is None or widest <= max_binding_bytes) and (
            max_buffer_bytes is None or ctx.top + alignment <= max_buffer_bytes
        ):
            break
        steps = None  # the decoded weights do not fit: decode in registers instead
    if steps is None:
        ctx = _Scratch(top, alignment, max_groups, max_loop_iterations, max_shared_memory)
        steps = _gemv_steps(projection, inputs, y, ctx, binding_alignment)
    arena = ctx.top + alignment  # room past the last place for whole words
    if max_buffer_bytes is not None and arena > max_buffer_bytes:
        raise ResourceLimit(
            f"{projection}: its operands and result need {arena} bytes in one buffer; the device"
            f" allocates {max_buffer_bytes}"
        )
    return Plan(arena, 0, [], steps, place_barriers(steps), inputs, (y,))


def _gemv_steps(
    projection: ProjectionArtifact, inputs: Sequence[Place], y: Place, ctx: _Scratch, binding_alignment: int
) -> list[Step]:
    """One dispatch per expert, or per z group limit of batched matrices, each writing its part of y."""
    p = projection
    rows_of_x = min(p.m, GEMV_X_ROWS)
    vec = 4 if rows_of_x <= 2 and p.k % 32 == 0 else 2 if rows_of_x <= 4 else 1  # x values stay in registers
    vec = min(vec, GEMV_VEC)
    team = GEMV_TEAM
    chunks = p.k // (8 * vec)
    while team > 1 and (team // 2 >= chunks or 4 * team * GEMV_ROWS * rows_of_x > ctx.max_shared_memory):
        team //= 2  # no idle invocations; the partial sums fit in shared memory
    spec = (team, GEMV_ROWS, rows_of_x, ACTIVATIONS.index(p.activation), vec)
    limit_x, limit_y, limit_z = ctx.max_groups
    gx = min(-(-p.n // GEMV_ROWS), limit_x)  # the kernel loops over further rows
    gy = -(-p.m // rows_of_x)
    if gy > limit_y:
        raise ResourceLimit(f"{p}: {p.m} rows of x need {gy} workgroups along y; the device dispatches {limit_y}")
    x = inputs[0]
    matrix_bytes = 4 * p.m * p.n
    steps: list[Step] = []
    if p.form is Form.EXPERTS:
        for e in range(p.count):
            weights = tuple(inputs[1 + 3 * e : 4 + 3 * e])
            out, y_base = _part(y, e, 1, matrix_bytes, binding_alignment)
            push = struct.pack("<6I", p.m, p.n, p.k, e * p.m * p.k, y_base, 0)
            steps.append(Dispatch("nvfp4_gemv", spec, (x, *weights), (out,), push, (gx, gy, 1)))
        return steps
    weights = tuple(inputs[1:4])
    for base in range(0, p.count, limit_z):  # the batched form's matrices, z group limit at a time
        count = min(limit_z, p.count - base)
        out, y_base = _part(y, base, count, matrix_bytes, binding_alignment)
        push = struct.pack("<6I", p.m, p.n, p.k, 0, y_base, base)
        steps.append(Dispatch("nvfp4_gemv", spec, (x, *weights), (out,), push, (gx, gy, count)))
    return steps


def _moe_steps(
    p: MoEProjection, inputs: Sequence[Place], y: Place, ctx: _Scratch, binding_alignment: int
) -> list[Step]:
    """The up projections (squared ReLU) into scratch h (experts, inner), then the down projections to y,
    each pass one GEMV dispatch per expert over the planes the artifact's offsets name."""
    steps: list[Step] = []

    def bound(src: Place, offset: int, size: int) -> Place:
        place = Place("arena", src.offset + offset, size)
        if place.offset % binding_alignment == 0:
            return place
        aligned = ctx.scratch(size)
        steps.append(Copy(place, aligned))
        return aligned

    x, blobs = inputs[0], inputs[1 : 1 + p.experts]
    up_tensor, down_tensor = inputs[1 + p.experts], inputs[2 + p.experts]
    h = ctx.scratch(4 * p.experts * p.inner)
    up_inputs, down_inputs = [x], [h]
    for e, blob in enumerate(blobs):
        up_packed, up_scales, down_packed, down_scales = (
            bound(blob, offset, size) for offset, size in zip(p.offsets[e], p.plane_bytes, strict=True)
        )
        up_inputs += [up_packed, up_scales, bound(up_tensor, 4 * e, 4)]
        down_inputs += [down_packed, down_scales, bound(down_tensor, 4 * e, 4)]
    up = ExpertProjection(experts=p.experts, m=1, n=p.inner, k=p.width, activation="squared_relu")
    down = ExpertProjection(experts=p.experts, m=1, n=p.width, k=p.inner)
    steps += _gemv_steps(up, up_inputs, h, ctx, binding_alignment)
    steps += _gemv_steps(down, down_inputs, y, ctx, binding_alignment)
    return steps


def _part(y: Place, first: int, count: int, matrix_bytes: int, binding_alignment: int) -> tuple[Place, int]:
    """The binding of y for matrices [first, first + count) and the element offset a kernel adds: a range
    of its own where the offset alignment allows it, so the dispatches of different matrices need no
    barrier between them (a shared binding of y would look like one write after another)."""
    if matrix_bytes % binding_alignment:
        return y, first * matrix_bytes // 4
    return Place("arena", y.offset + first * matrix_bytes, count * matrix_bytes), 0


def _tiled_steps(
    projection: ProjectionArtifact, inputs: Sequence[Place], y: Place, ctx: _Scratch, binding_alignment: int
) -> list[Step]:
    p = projection
    decoded = ctx.scratch(4 * p.count * p.k * p.n)
    steps: list[Step] = []
    for e in range(p.count):  # the single form is one matrix
        weights = tuple(inputs[1 + 3 * e : 4 + 3 * e])
        push = struct.pack("<3I", p.n, p.k, e * p.k * p.n)
        steps.append(Dispatch("nvfp4_decode", (WORKGROUP,), weights, (decoded,), push, groups(p.n * p.k // 16, ctx)))
    act = ACTIVATIONS.index(p.activation)
    product = ctx.scratch(4 * p.count * p.m * p.n) if act else y
    steps += tiled(ctx, p.count, p.m, p.k, p.n, (inputs[0], decoded), product, False)  # type: ignore[arg-type]
    if act:
        count = p.count * p.m * p.n
        push = struct.pack("<I", count)
        steps.append(Dispatch("nvfp4_activate", (WORKGROUP, act), (product,), (y,), push, groups(count, ctx)))
    return steps


def _coop_steps(
    projection: ProjectionArtifact, inputs: Sequence[Place], y: Place, ctx: _Scratch, binding_alignment: int
) -> list[Step]:
    """x split into binary16 [x_hi | x_lo] per row (``nvfp4_split.comp``), the weights decoded exactly to
    binary16 and stacked [w; w] (``nvfp4_decode16.comp``), both cut along k into slices of at most
    COOP_SLICE columns; one cooperative-matrix MATMUL per slice (the experts are its batches); then the
    slices summed in fp32, the row scaling undone, the tensor scale and the activation
    (``nvfp4_finish.comp``)."""
    p = projection
    rows = p.count * p.m
    ks = coop_slice(p.k)
    slices = p.k // ks
    a_words = _align(rows * ks * 4, ctx.alignment) // 4  # one slice of [x_hi | x_lo]: rows x 2 ks halves
    w_words = _align(p.count * ks * p.n * 4, ctx.alignment) // 4  # one slice of every matrix's [w; w]
    c_floats = _align(rows * p.n * 4, ctx.alignment) // 4  # one slice's MATMUL results
    split = ctx.scratch(4 * a_words * slices)
    stacked = ctx.scratch(4 * w_words * slices)
    rowscale = ctx.scratch(4 * rows)
    product = ctx.scratch(4 * c_floats * slices)
    steps: list[Step] = []
    for e in range(p.count):
        weights = tuple(inputs[1 + 3 * e : 4 + 3 * e])
        push = struct.pack("<5I", p.n, p.k, ks, e * ks * p.n, w_words)
        count = p.n // 2 * (p.k // 16)
        steps.append(Dispatch("nvfp4_decode16", (WORKGROUP,), weights, (stacked,), push, groups(count, ctx)))
    push = struct.pack("<4I", rows, p.k, ks, a_words)
    groups_x = (min(rows, ctx.max_groups[0]), 1, 1)
    steps.append(Dispatch("nvfp4_split", (SPLIT_WORKGROUP,), (inputs[0],), (split, rowscale), push, groups_x))
    for s in range(slices):
        a = Place("arena", split.offset + 4 * a_words * s, 2 * rows * 2 * ks)
        w = Place("arena", stacked.offset + 4 * w_words * s, 2 * p.count * 2 * ks * p.n)
        c = Place("arena", product.offset + 4 * c_floats * s, 4 * rows * p.n)
        steps += coop(ctx, p.count, p.m, 2 * ks, p.n, (a, w), c, "matmul_coop", COOP_TILE)  # type: ignore[arg-type]
    act = ACTIVATIONS.index(p.activation)
    for e in range(p.count):
        out, y_base = _part(y, e, 1, 4 * p.m * p.n, binding_alignment)
        push = struct.pack("<7I", p.m * p.n, p.n, e * p.m * p.n, e * p.m, y_base, slices, c_floats)
        reads = (product, rowscale, inputs[3 + 3 * e])
        steps.append(Dispatch("nvfp4_finish", (WORKGROUP, act), reads, (out,), push, groups(p.m * p.n, ctx)))
    return steps


def coop_slice(k: int) -> int:
    """Columns of k per cooperative-matrix MATMUL: the largest multiple of 16 dividing k, at most
    COOP_SLICE (k itself when it is no longer)."""
    if k <= COOP_SLICE:
        return k
    return max(c for c in range(16, COOP_SLICE + 1, 16) if k % c == 0)


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment
