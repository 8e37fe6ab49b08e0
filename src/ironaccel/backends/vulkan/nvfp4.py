"""NVFP4 projections on Vulkan: a projection (ADR 0012) planned as a :class:`~.plan.Plan` of our kernels.

A projection has no graph, so it skips TOSA planning and becomes a plan directly: its operands and
result get places in one arena, in slot order, and :class:`~.program.LoadedProgram` records and submits
it like any program (submission copies the bound ranges in and out, or replays a direct recording on
the caller's buffers, :mod:`.direct`).

Two ways to compute ``y = act(x @ w_hat.T)``, chosen at load from the shape:

* **Decode shapes** (m below TILED_FROM_M, every batched form, and any shape whose decoded weights would
  not fit the arena): ``nvfp4_gemv.comp`` reads the packed weights once per GEMV_X_ROWS rows of x and
  decodes them in registers. These shapes are bound by the weights' bytes, which NVFP4 makes a quarter
  of fp16's.
* **Larger m**: ``nvfp4_decode.comp`` decodes each weight matrix exactly (the CPU backend's bits) into
  fp32 scratch, transposed to [k, n]; the fp32 MATMUL kernels of :mod:`.ops.matmul` multiply
  (the expert form's matrices are its batches, one MATMUL for all); ``nvfp4_activate.comp`` applies the
  activation. fp32 throughout, so every path meets the same 1e-5 relative bound against the decode.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ...core.errors import ResourceLimit
from ...nvfp4.bounds import ACTIVATIONS, Form
from ...nvfp4.projection import ProjectionArtifact
from .direct import VECTOR_ALIGNMENT
from .ops.common import WORKGROUP, Dispatch, Place, Step, groups
from .ops.matmul import tiled
from .plan import ARENA_ALIGNMENT, Plan, place_barriers

GEMV_TEAM = 64  # invocations splitting k per workgroup (a power of two), at most
GEMV_ROWS = 4  # weight rows per workgroup: each x value loaded serves this many
# (H200, n = k = 8192, benchmarks/vulkan/NOTES.md: 64 x 4 with 2 words was among the fastest at m = 1, 2, 8)
GEMV_X_ROWS = 8  # rows of x per pass over the weights, at most
GEMV_VEC = 2  # packed words per invocation per weight row and step, at most (fewer with more rows of x)
TILED_FROM_M = 48  # rows of x from which decode-then-MATMUL is taken (H200: GEMV wins at 32, loses at 64)


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
) -> Plan:
    """The plan of ``projection`` (checked when it was read) on a device with these limits. ResourceLimit
    names the operand when one exceeds what a binding reaches (``max_binding_bytes``) or the arena what
    one buffer holds (``max_buffer_bytes``)."""
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
    if projection.form is not Form.BATCHED and projection.m >= TILED_FROM_M:
        ctx = _Scratch(top, alignment, max_groups, max_loop_iterations, max_shared_memory)
        steps = _tiled_steps(projection, inputs, y, ctx)
        widest = max(place.size for step in steps for place in (*step.reads, *step.writes))
        if (max_binding_bytes is not None and widest > max_binding_bytes) or (
            max_buffer_bytes is not None and ctx.top + alignment > max_buffer_bytes
        ):
            steps = None  # the decoded weights do not fit: decode in registers instead
    if steps is None:
        ctx = _Scratch(top, alignment, max_groups, max_loop_iterations, max_shared_memory)
        steps = _gemv_steps(projection, inputs, y, ctx, max(min_offset_alignment, VECTOR_ALIGNMENT))
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
    """One dispatch per expert, or per z group limit of batched matrices. Each writes its own part of y,
    bound as its own range where the device's offset alignment allows it, so the dispatches need no
    barrier between them (a shared binding of y would look like one write after another)."""
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
    out_bytes = 4 * p.m * p.n  # y of one matrix
    split = out_bytes % binding_alignment == 0

    def part(first: int, count: int) -> tuple[Place, int]:
        """The y binding of matrices [first, first + count) and the element offset the kernel adds."""
        if not split:
            return y, first * p.m * p.n
        return Place("arena", y.offset + first * out_bytes, count * out_bytes), 0

    steps: list[Step] = []
    if p.form is Form.EXPERTS:
        for e in range(p.count):
            weights = tuple(inputs[1 + 3 * e : 4 + 3 * e])
            out, y_base = part(e, 1)
            push = struct.pack("<6I", p.m, p.n, p.k, e * p.m * p.k, y_base, 0)
            steps.append(Dispatch("nvfp4_gemv", spec, (x, *weights), (out,), push, (gx, gy, 1)))
        return steps
    weights = tuple(inputs[1:4])
    for base in range(0, p.count, limit_z):  # the batched form's matrices, z group limit at a time
        count = min(limit_z, p.count - base)
        out, y_base = part(base, count)
        push = struct.pack("<6I", p.m, p.n, p.k, 0, y_base, base)
        steps.append(Dispatch("nvfp4_gemv", spec, (x, *weights), (out,), push, (gx, gy, count)))
    return steps


def _tiled_steps(projection: ProjectionArtifact, inputs: Sequence[Place], y: Place, ctx: _Scratch) -> list[Step]:
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


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment
