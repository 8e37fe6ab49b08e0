"""Load-time planning: an admitted TOSA program -> byte places and the steps that run it, in order.

Pure Python (the driver is never touched), so plans are tested without a GPU; :mod:`.program` turns a plan
into device memory, compiled kernels and packed launches.

* Memory: :class:`ironaccel.tosa.arena.ArenaLayout` (:func:`ironaccel.tosa.analysis.plan_memory`) lays out
  one arena for the block's tensors, graph inputs and outputs included (``include_io``): a run copies the
  bound input ranges into their arena places and the output places back out, so every launch's addresses
  are fixed at load and the steps never change between runs. Intermediates share bytes where their live
  intervals allow (the liveness pass of ``tosa.analysis``); RESHAPE / IDENTITY results the analysis makes
  views take their source's bytes. Offsets are aligned to 256 bytes. The graph's inputs and outputs share
  their bytes with no other tensor (``exclusive_io``), so that a run may bind the caller's buffers in their
  place instead of copying (:mod:`.program`).
* Constants: the CONST tensors some step or graph output uses, packed into one constants allocation that
  is uploaded once at load. RESHAPE / IDENTITY of a constant folds into the constant's own bytes.
* Steps: each live operator, in the analysis's execution order, becomes launches and copies through the
  lowering :mod:`.ops` registers for its types. The steps of one run go to one stream, in order, so no
  barrier is needed between them.
* Passes over the steps (:mod:`.fusion`): chains of elementwise launches fused into one kernel each
  (``IRONACCEL_CUDA_FUSION=0`` turns that off), then each elementwise launch that reads every operand in
  order given its kernel's contiguous variant.

A program the table cannot lower (an operator or a type combination with no registration, a dynamic
shape) is refused here with a LoweringError naming the operator, before anything is allocated.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ...tosa.arena import ArenaLayout
from ...tosa.errors import LoweringError
from ...tosa.ir import Operator, Program, Tensor
from .fusion import contiguous_launches, fuse
from .ops import lowering_for
from .ops.common import Gemm, Kernel, Launch, Place, Step

ALIGNMENT = 256


@dataclasses.dataclass(frozen=True)
class Plan:
    arena_bytes: int  # 0 when nothing lives in the arena
    const_bytes: int  # 0 when no constant is needed on the device
    scratch_bytes: int  # what the lowerings staged between their own steps (one region, reused by each)
    constants: tuple[tuple[int, np.ndarray], ...]  # (offset, storage array) to upload
    steps: tuple[Step, ...]
    inputs: tuple[Place, ...]  # per graph input, in order
    outputs: tuple[Place, ...]  # per graph output, in order

    @property
    def launches(self) -> tuple[Launch, ...]:
        return tuple(s for s in self.steps if isinstance(s, Launch))

    @property
    def gemms(self) -> tuple[Gemm, ...]:
        return tuple(s for s in self.steps if isinstance(s, Gemm))

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """The distinct kernels the steps launch, in first-use order."""
        return tuple(dict.fromkeys(s.kernel for s in self.launches))


class _Context:
    """The :class:`~.ops.common.LoweringContext` of one operator."""

    def __init__(self, layout: ArenaLayout, operator: Operator, native_fp8: bool) -> None:
        block = layout.block
        self.layout = layout
        self.operator = operator
        self.native_fp8 = native_fp8
        self.inputs = tuple(block.tensor(n) for n in operator.inputs)
        self.outputs = tuple(block.tensor(n) for n in operator.outputs)
        self.scratch_top = 0

    def upload(self, key: str, data: np.ndarray) -> Place:
        return self.layout.upload(key, data)

    def scratch(self, size: int) -> Place:
        # Steps of one run follow each other on one stream, so each operator's staging starts again at 0.
        place = Place("scratch", self.scratch_top, size)
        self.scratch_top = self.layout.align(self.scratch_top + size)
        return place

    def place(self, tensor: Tensor) -> Place:
        return self.layout.place(tensor.name)

    def constant(self, index: int) -> np.ndarray | None:
        return self.layout.constant_data(self.operator.inputs[index])


def build(program: Program, native_fp8: bool = True) -> Plan:
    """The plan of ``program`` (validated; LoweringError for what the operator table cannot run).
    ``native_fp8``: whether fp8 products may run on cuBLASLt's fp8 kernels (otherwise they are widened to
    fp16 first, exactly)."""
    layout = ArenaLayout(program, ALIGNMENT, "CUDA", exclusive_io=True)
    steps: list[Step] = []
    scratch = 0
    for index, operator in layout.live_operators():
        ctx = _Context(layout, operator, native_fp8)
        lower = lowering_for(operator, ctx.inputs, ctx.outputs)
        if lower is None:
            types = ", ".join(f"{t.name}: {t.dtype}" for t in (*ctx.inputs, *ctx.outputs))
            raise LoweringError(
                f"operator #{index} {operator.op.name}: the CUDA backend has no lowering for it ({types})"
            )
        steps += lower(ctx)
        scratch = max(scratch, ctx.scratch_top)
    inputs, outputs = layout.io_places()
    if os.environ.get("IRONACCEL_CUDA_FUSION", "1") != "0":
        steps = fuse(steps, (*inputs, *outputs))
    steps = contiguous_launches(steps)
    return Plan(
        arena_bytes=layout.align(layout.memory.total_bytes),
        const_bytes=layout.align(layout.const_top),
        scratch_bytes=scratch,
        constants=tuple(layout.constants),
        steps=tuple(steps),
        inputs=inputs,
        outputs=outputs,
    )


__all__ = ["ALIGNMENT", "Plan", "build"]
