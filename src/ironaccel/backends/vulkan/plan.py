"""Load-time planning: an admitted TOSA program -> byte places, a step list and its barriers.

Pure Python (no Vulkan object is touched), so it is tested on its own; :mod:`.program` turns a plan into
buffers, descriptor sets and the one prerecorded command buffer.

* Memory: :class:`ironaccel.tosa.arena.ArenaLayout` (:func:`ironaccel.tosa.analysis.plan_memory`) lays
  out one arena for the block's tensors, graph inputs and outputs included (``include_io``): submission
  copies bound input ranges into their arena places and output places back out, so the command buffer
  never changes. Intermediates share bytes where their live intervals allow; RESHAPE / IDENTITY results
  that the analysis makes views take their source's bytes. Offsets are aligned to 256 bytes (and to the
  device's storage-buffer offset alignment), which is also what lets BOOL kernels write whole 32-bit words.
* Constants: the CONST tensors some step or graph output uses, packed into one constants buffer that
  is uploaded once. RESHAPE / IDENTITY of a constant is folded at load into the same bytes.
* Steps: each operator (in the analysis's execution order, dead ones skipped) becomes dispatches and
  copies through its lowering in :mod:`.ops`.
* Barriers: a step waits for earlier steps only where a byte range it reads was written since the last
  barrier (read after write), or a range it writes was read or written since then (write after read /
  write). A barrier makes every pending write visible (buffer memory barriers over those ranges of the
  arena), so after it nothing is pending; a write-after-read alone gets an execution dependency.
  Ranges are counted in whole 32-bit words, as the kernels write them, and a barrier names every range
  accessed since the last one, read ranges included. The execution dependency of a buffer barrier is
  not limited to its range, so the reads would be ordered anyway; but Khronos' synchronization
  validation models it per range, and the tests run with it (``make test``). Constants are never
  written after upload and need none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ...core.errors import InternalError, ResourceLimit
from ...tosa.arena import ArenaLayout
from ...tosa.ir import Operator, Program, Tensor
from .ops import LOWERINGS
from .ops.common import Dispatch, Place, Step

ARENA_ALIGNMENT = 256


@dataclasses.dataclass(frozen=True)
class Barrier:
    """Before a step: make ``ranges`` (arena (offset, size)) written so far visible; ``execution_only``
    when no write is pending and only earlier reads must finish first."""

    ranges: tuple[tuple[int, int], ...]
    execution_only: bool = False


@dataclasses.dataclass
class Plan:
    arena_bytes: int  # the arena buffer's size (padded so every place has room for a whole word)
    const_bytes: int  # 0 when no constant is needed on the device
    constants: list[tuple[int, np.ndarray]]  # (offset, storage array) to upload
    steps: list[Step]
    barriers: list[Barrier | None]  # one per step: what to wait for before it
    inputs: tuple[Place, ...]  # per graph input, in order
    outputs: tuple[Place, ...]  # per graph output, in order

    @property
    def dispatches(self) -> int:
        return sum(1 for s in self.steps if isinstance(s, Dispatch))


class _Context:
    """The :class:`~.ops.common.LoweringContext` of one operator."""

    def __init__(self, planner: _Planner, operator: Operator) -> None:
        block = planner.layout.block
        self.planner = planner
        self.operator = operator
        self.inputs = tuple(block.tensor(n) for n in operator.inputs)
        self.outputs = tuple(block.tensor(n) for n in operator.outputs)
        self.max_groups = planner.max_groups
        self.max_loop_iterations = planner.max_loop_iterations
        self.max_shared_memory = planner.max_shared_memory
        self.matrix_tiles = planner.matrix_tiles

    def place(self, tensor: Tensor) -> Place:
        return self.planner.layout.place(tensor.name)

    def constant(self, index: int) -> np.ndarray | None:
        return self.planner.layout.constant_data(self.operator.inputs[index])

    def scratch(self, size: int) -> Place:
        return self.planner.scratch(size)

    def constant_place(self, key: str, data: np.ndarray) -> Place:
        return self.planner.layout.upload(key, data)


class _Planner:
    def __init__(
        self,
        program: Program,
        alignment: int,
        max_groups: tuple[int, int, int],
        max_loop_iterations: int | None,
        max_shared_memory: int = 16384,
        matrix_tiles: frozenset[str] = frozenset(),
    ) -> None:
        self.layout = ArenaLayout(program, alignment, "Vulkan")
        self.alignment = alignment
        self.max_groups = max_groups
        self.max_loop_iterations = max_loop_iterations
        self.max_shared_memory = max_shared_memory
        self.matrix_tiles = matrix_tiles
        # Scratch: ranges one operator's steps use among themselves (fp16 operands widened to fp32),
        # past the tensors' bytes; every operator starts again at its base, and the barrier rule
        # orders one operator's use after the previous one's like any other reuse of arena bytes.
        self.scratch_base = self.layout.align(self.layout.memory.total_bytes)
        self.scratch_top = 0
        self.scratch_bytes = 0

    def scratch(self, size: int) -> Place:
        offset = self.scratch_base + self.scratch_top
        self.scratch_top += self.layout.align(max(size, 1))
        self.scratch_bytes = max(self.scratch_bytes, self.scratch_top)
        return Place("arena", offset, size)

    def run(self) -> Plan:
        layout = self.layout
        steps: list[Step] = []
        for index, operator in layout.live_operators():
            lower = LOWERINGS.get(operator.op)
            if lower is None:  # admission lists exactly LOWERINGS; reaching here is a bug
                raise InternalError(f"no Vulkan lowering for {operator.op.name} (operator #{index})")
            self.scratch_top = 0
            steps += lower(_Context(self, operator))
        inputs, outputs = layout.io_places()
        arena = self.scratch_base + self.scratch_bytes + self.alignment
        const = layout.align(layout.const_top) + self.alignment if layout.constants else 0
        return Plan(arena, const, layout.constants, steps, place_barriers(steps), inputs, outputs)


def build(
    program: Program,
    min_offset_alignment: int = 16,
    max_groups: tuple[int, int, int] = (65535,) * 3,
    max_buffer_bytes: int | None = None,
    max_loop_iterations: int | None = None,
    max_shared_memory: int = 16384,
    matrix_tiles: frozenset[str] = frozenset(),
) -> Plan:
    """Plan ``program`` (validated and admitted) for a device with these limits. ResourceLimit when the
    arena or the constants exceed ``max_buffer_bytes`` (one buffer holds each), or a kernel would loop
    more than ``max_loop_iterations`` times in one invocation (a driver's cap). ``max_shared_memory``
    (bytes per workgroup) and ``matrix_tiles`` (cooperative-matrix configurations) pick kernels."""
    alignment = max(ARENA_ALIGNMENT, min_offset_alignment)
    plan = _Planner(program, alignment, max_groups, max_loop_iterations, max_shared_memory, matrix_tiles).run()
    if max_buffer_bytes is not None:
        for what, size in (("intermediates, inputs and outputs", plan.arena_bytes), ("constants", plan.const_bytes)):
            if size > max_buffer_bytes:
                raise ResourceLimit(
                    f"the program's {what} need {size} bytes in one buffer; the device allocates {max_buffer_bytes}"
                )
    return plan


def _words(place: Place) -> tuple[int, int]:
    """A place's bytes as the kernels touch them: whole 32-bit words, as its descriptor range binds them
    (:meth:`.program.LoadedProgram.resolve`; every buffer is padded to allow it)."""
    return place.offset, max(4, -(-place.size // 4) * 4)


def _overlaps(ranges: Sequence[tuple[int, int]], offset: int, size: int) -> bool:
    return any(o < offset + size and offset < o + s for o, s in ranges)


def _merged(ranges: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for offset, size in sorted(ranges):
        if out and offset <= out[-1][0] + out[-1][1]:
            out[-1][1] = max(out[-1][1], offset + size - out[-1][0])
        else:
            out.append([offset, size])
    return tuple((o, s) for o, s in out)


def place_barriers(steps: Sequence[Step]) -> list[Barrier | None]:
    """The barrier (or None) before each step; see the module doc for the rule."""
    barriers: list[Barrier | None] = []
    written: list[tuple[int, int]] = []  # arena ranges written since the last barrier
    read: list[tuple[int, int]] = []
    for step in steps:
        reads = [_words(p) for p in step.reads if p.buffer == "arena" and p.size]
        writes = [_words(p) for p in step.writes if p.buffer == "arena" and p.size]
        raw_waw = any(_overlaps(written, o, s) for o, s in (*reads, *writes))
        war = [(o, s) for o, s in writes if _overlaps(read, o, s)]
        if raw_waw or war:
            # Every range accessed since the last barrier: the pending writes, made visible, and the reads,
            # ordered before whatever touches their bytes next.
            if written:
                barriers.append(Barrier(_merged([*written, *read])))
            else:
                barriers.append(Barrier(_merged(read), execution_only=True))
            written, read = [], []
        else:
            barriers.append(None)
        written += writes
        read += reads
    return barriers
