"""Load-time planning: an admitted TOSA program -> byte places and the steps that run it, in order.

Pure Python (the driver is never touched), so plans are tested without a GPU; :mod:`.program` turns a plan
into device memory, compiled kernels and packed launches.

* Memory: :func:`ironaccel.tosa.analysis.plan_memory` lays out one arena for the block's tensors, graph
  inputs and outputs included (``include_io``): a run copies the bound input ranges into their arena places
  and the output places back out, so every launch's addresses are fixed at load and the steps never change
  between runs. Intermediates share bytes where their live intervals allow (the liveness pass of
  ``tosa.analysis``); RESHAPE / IDENTITY results the analysis makes views take their source's bytes.
  Offsets are aligned to 256 bytes.
* Constants: the CONST tensors some step or graph output uses, packed into one constants allocation that
  is uploaded once at load. RESHAPE / IDENTITY of a constant folds into the constant's own bytes.
* Steps: each live operator, in the analysis's execution order, becomes launches and copies through the
  lowering :mod:`.ops` registers for its types. The steps of one run go to one stream, in order, so no
  barrier is needed between them.

A program the table cannot lower (an operator or a type combination with no registration, a dynamic
shape) is refused here with a LoweringError naming the operator, before anything is allocated.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...core.errors import InternalError
from ...tosa.analysis import analyze, plan_memory
from ...tosa.errors import LoweringError
from ...tosa.ir import Operator, Program, Tensor
from ...tosa.operators import Op
from .ops import lowering_for
from .ops.common import Kernel, Launch, Place, Step

ALIGNMENT = 256
_VIEW_OPS = (Op.RESHAPE, Op.IDENTITY)


@dataclasses.dataclass(frozen=True)
class Plan:
    arena_bytes: int  # 0 when nothing lives in the arena
    const_bytes: int  # 0 when no constant is needed on the device
    constants: tuple[tuple[int, np.ndarray], ...]  # (offset, storage array) to upload
    steps: tuple[Step, ...]
    inputs: tuple[Place, ...]  # per graph input, in order
    outputs: tuple[Place, ...]  # per graph output, in order

    @property
    def launches(self) -> tuple[Launch, ...]:
        return tuple(s for s in self.steps if isinstance(s, Launch))

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """The distinct kernels the steps launch, in first-use order."""
        return tuple(dict.fromkeys(s.kernel for s in self.launches))


class _Context:
    """The :class:`~.ops.common.LoweringContext` of one operator."""

    def __init__(self, planner: _Planner, operator: Operator) -> None:
        block = planner.block
        self.planner = planner
        self.operator = operator
        self.inputs = tuple(block.tensor(n) for n in operator.inputs)
        self.outputs = tuple(block.tensor(n) for n in operator.outputs)

    def place(self, tensor: Tensor) -> Place:
        return self.planner.place(tensor.name)

    def constant(self, index: int) -> np.ndarray | None:
        return self.planner.constant_data(self.operator.inputs[index])


class _Planner:
    def __init__(self, program: Program) -> None:
        self.block = program.main
        for t in self.block.tensors:
            if t.unranked or any(d < 0 for d in t.shape):
                raise LoweringError(f"tensor {t.name!r} has no static shape; the CUDA backend needs static shapes")
        # Folding policy: only RESHAPE / IDENTITY, whose result is the constant's own bytes.
        self.analysis = analyze(self.block, program, foldable=lambda op: op.op in _VIEW_OPS)
        self.memory = plan_memory(self.analysis, ALIGNMENT, include_io=True, fold=True)
        self.const_places: dict[str, Place] = {}
        self.constants: list[tuple[int, np.ndarray]] = []
        self.const_top = 0

    def constant_root(self, name: str) -> Tensor | None:
        """The tensor holding the data of constant (or folded view) ``name``. The chain of views ends: the
        analysis has refused cyclic programs."""
        while True:
            t = self.block.tensor(name)
            if t.data is not None and not t.variable:
                return t
            producer = self.analysis.producers.get(name)
            if producer is None or self.block.operators[producer].op not in _VIEW_OPS:
                return None
            name = self.block.operators[producer].inputs[0]

    def constant_data(self, name: str) -> np.ndarray | None:
        root = self.constant_root(name) if name in self.analysis.folded else None
        return None if root is None else root.data

    def place(self, name: str) -> Place:
        if name in self.memory.offsets:
            return Place("arena", self.memory.offsets[name], self.memory.sizes[name])
        root = self.constant_root(name) if name in self.analysis.folded else None
        if root is None:
            raise InternalError(f"tensor {name!r} was given no place (neither in the arena nor a constant)")
        found = self.const_places.get(root.name)
        if found is None:
            data = np.ascontiguousarray(root.data)
            offset = _align(self.const_top)
            found = Place("const", offset, data.nbytes)
            self.const_places[root.name] = found
            self.constants.append((offset, data))
            self.const_top = offset + data.nbytes
        return found

    def run(self) -> Plan:
        block, dead = self.block, set(self.analysis.dead)
        steps: list[Step] = []
        for index in self.analysis.order:
            if index in dead:
                continue
            operator = block.operators[index]
            ctx = _Context(self, operator)
            lower = lowering_for(operator, ctx.inputs, ctx.outputs)
            if lower is None:
                types = ", ".join(f"{t.name}: {t.dtype}" for t in (*ctx.inputs, *ctx.outputs))
                raise LoweringError(
                    f"operator #{index} {operator.op.name}: the CUDA backend has no lowering for it ({types})"
                )
            steps += lower(ctx)
        inputs = tuple(self.place(n) for n in block.inputs)
        outputs = tuple(self.place(n) for n in block.outputs)
        return Plan(
            arena_bytes=_align(self.memory.total_bytes),
            const_bytes=_align(self.const_top),
            constants=tuple(self.constants),
            steps=tuple(steps),
            inputs=inputs,
            outputs=outputs,
        )


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def build(program: Program) -> Plan:
    """The plan of ``program`` (validated; LoweringError for what the operator table cannot run)."""
    return _Planner(program).run()


__all__ = ["ALIGNMENT", "Plan", "build"]
