"""A program's tensors in byte ranges: one arena laid out by liveness, the constants packed apart.

Backends that plan a program into fixed device memory at load (Vulkan, CUDA) place it the same way,
before they touch a device:

* the block's tensors, graph inputs and outputs included, share one arena where their live intervals
  allow (:func:`.analysis.plan_memory` with ``include_io``): a run copies the bound inputs into their
  places and the outputs out of theirs, so the steps never change between runs. RESHAPE / IDENTITY
  results the analysis makes views take their source's bytes;
* the constants some step or graph output uses are packed into one constants buffer, uploaded once;
  RESHAPE / IDENTITY of a constant (or of such a view) folds into the constant's own bytes.

:class:`ArenaLayout` answers where each tensor lives (a :class:`Place`); what a backend's steps are, and
how it binds places to memory, is its own. :class:`Copy` and :func:`view_or_copy` are the step both
backends' RESHAPE and IDENTITY come down to.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from ..core.errors import InternalError
from .analysis import analyze, plan_memory
from .errors import LoweringError
from .ir import Operator, Program, Tensor
from .operators import Op

# The operators whose result may be its operand's bytes: folded into a constant, or a view in the arena.
VIEW_OPS = (Op.RESHAPE, Op.IDENTITY)


@dataclasses.dataclass(frozen=True)
class Place:
    """Where a tensor's bytes live: ``buffer`` "arena" (intermediates, inputs, outputs) or "const"."""

    buffer: str
    offset: int
    size: int


@dataclasses.dataclass(frozen=True)
class Copy:
    """``src``'s bytes into ``dst`` (of the same size), on the device."""

    src: Place
    dst: Place

    @property
    def reads(self) -> tuple[Place, ...]:
        return (self.src,)

    @property
    def writes(self) -> tuple[Place, ...]:
        return (self.dst,)


class Placing(Protocol):
    """What :func:`view_or_copy` needs of a lowering's context."""

    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]

    def place(self, tensor: Tensor) -> Place: ...


def view_or_copy(ctx: Placing) -> list[Copy]:
    """RESHAPE and IDENTITY: nothing when the layout made the result a view of the operand (the same
    arena or constant bytes), else one copy (a graph input or output is involved)."""
    src, dst = ctx.place(ctx.inputs[0]), ctx.place(ctx.outputs[0])
    if src == dst or dst.size == 0:
        return []
    return [Copy(src, dst)]


class ArenaLayout:
    """The places of one program's main block, every offset a multiple of ``alignment``. ``backend`` names
    the backend in the refusal of a tensor without a static shape (LoweringError). ``exclusive_io``: the
    graph's inputs and outputs share their bytes with no other tensor (``plan_memory``)."""

    def __init__(self, program: Program, alignment: int, backend: str, exclusive_io: bool = False) -> None:
        self.block = program.main
        self.alignment = alignment
        for t in self.block.tensors:
            if t.unranked or any(d < 0 for d in t.shape):
                raise LoweringError(f"tensor {t.name!r} has no static shape; the {backend} backend needs static shapes")
        # Folding policy: only RESHAPE / IDENTITY, whose result is the constant's own bytes.
        self.analysis = analyze(self.block, program, foldable=lambda op: op.op in VIEW_OPS)
        self.memory = plan_memory(self.analysis, alignment, include_io=True, fold=True, exclusive_io=exclusive_io)
        self.constants: list[tuple[int, np.ndarray]] = []  # (offset, storage array) to upload
        self.const_top = 0  # the constants' end
        self._const_places: dict[str, Place] = {}

    def align(self, n: int) -> int:
        return -(-n // self.alignment) * self.alignment

    def live_operators(self) -> list[tuple[int, Operator]]:
        """(index, operator) in the analysis's execution order, dead ones left out."""
        dead = set(self.analysis.dead)
        return [(i, self.block.operators[i]) for i in self.analysis.order if i not in dead]

    def constant_root(self, name: str) -> Tensor | None:
        """The tensor holding the data of constant (or folded view) ``name``. The chain of views ends: the
        analysis has refused cyclic programs."""
        while True:
            t = self.block.tensor(name)
            if t.data is not None and not t.variable:
                return t
            producer = self.analysis.producers.get(name)
            if producer is None or self.block.operators[producer].op not in VIEW_OPS:
                return None
            name = self.block.operators[producer].inputs[0]

    def constant_data(self, name: str) -> np.ndarray | None:
        """``name``'s value when it is a constant or folds into one (a host-side parameter)."""
        root = self.constant_root(name) if name in self.analysis.folded else None
        return None if root is None else root.data

    def place(self, name: str) -> Place:
        """Where tensor ``name`` lives; a constant is packed when first asked for."""
        if name in self.memory.offsets:
            return Place("arena", self.memory.offsets[name], self.memory.sizes[name])
        if name in self.analysis.folded:
            root = self.constant_root(name)
            if root is None:
                raise InternalError(f"folded tensor {name!r} has no constant data")
            return self.upload(root.name, root.data)
        raise InternalError(f"tensor {name!r} was given no place (neither in the arena nor a constant)")

    def upload(self, key: str, data: np.ndarray) -> Place:
        """The constants-buffer place of ``data``, packed once under ``key``."""
        found = self._const_places.get(key)
        if found is None:
            data = np.ascontiguousarray(data)
            offset = self.align(self.const_top)
            found = Place("const", offset, data.nbytes)
            self._const_places[key] = found
            self.constants.append((offset, data))
            self.const_top = offset + data.nbytes
        return found

    def io_places(self) -> tuple[tuple[Place, ...], tuple[Place, ...]]:
        """The places of the graph's inputs and outputs, in order."""
        return tuple(self.place(n) for n in self.block.inputs), tuple(self.place(n) for n in self.block.outputs)


__all__ = ["VIEW_OPS", "ArenaLayout", "Copy", "Place", "Placing", "view_or_copy"]
