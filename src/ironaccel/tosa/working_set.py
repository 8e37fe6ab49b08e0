"""How much memory a program needs to run, known from its static shapes before anything is allocated.

:func:`estimate` walks the main graph and every COND_IF / WHILE_LOOP graph reachable from it and returns
a :class:`WorkingSet`: the constant data the program keeps, the variables it stores, and the peak of
intermediate bytes live at once on any execution path. A loader compares ``total_bytes`` with what its
caller allows before it builds anything (ADR 0024).

What counts, per block, at each position of the analysis' execution order (:mod:`.analysis`):

* Every tensor an operator produces is a fresh allocation of its storage size (:func:`storage_size`),
  live from its producer to its last reader (graph outputs to the end of the block), unless it is a
  view. Graph inputs are the caller's buffers and are not counted; outputs that operators produce are
  (backends allocate them before copying into bound buffers). Dead operators count too: interpreters run
  them, and a result nobody reads lives until the next operator has run. Constants are counted once,
  in ``constant_bytes``; a variable's store in ``variable_bytes``, and each write of a variable as a
  fresh copy at the writing operator.
* Views cost nothing of their own but keep their root's storage live for as long as they are: RESHAPE /
  IDENTITY results that the analysis makes views (of an intermediate), and RESHAPE / IDENTITY of a
  constant (every backend folds those into the constant's bytes). A backend whose kernels share storage
  more freely passes :class:`Sharing` (the CPU interpreter: numpy views), see there.
* A COND_IF costs what is live around it (its operands and everything else live across it, not its own
  results) plus the larger of its branches' peaks. A WHILE_LOOP costs what is live around it, plus the
  loop-carried values once (the previous iteration's values, held while the next one is computed), plus
  the larger of its cond and body peaks. Storage a graph's output keeps live (a view of one of the
  graph's tensors, or of its inputs) is what the operator's result keeps live. A control-flow
  operator's operands and results stay live until the block's next control-flow operator, as the CPU
  interpreter holds them. Nested graphs are summarised once each, children first, without recursion, so
  256 levels of nesting (TOSA level "none") cost no Python stack, and a graph run from many places is
  summarised once.

Tensors without a static shape (unranked, or a dimension of -1 under EXT-DYNAMIC) have no size to count:
the estimate then still counts everything else, but says it is no bound (``bounded`` is False and
``unbounded_tensor`` / ``unbounded_block`` name the first such tensor found). So does a graph that runs
itself through control flow (recursion), which the validator refuses anyway. A caller that has a finite
limit refuses such a program; one with no limit may load it.

Sizes are Python ints (shapes can multiply past any machine integer); no tensor data is allocated or
read, and the cost is linear in the program's operators and tensors (plus the analysis' ordering). The
walk of one block is :mod:`.block_peak`; this module orders the blocks and adds constants and variables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from .block_peak import BlockSummary, graphs_of, no_shape_reason, static_size, summarize
from .errors import ValidationError
from .ir import Block, Program
from .operators import Op

# A resident bound at or above this means "no bound" (what runtime.Device.compile passes when its caller
# sets none): only then may a program whose working set has no bound be loaded.
NO_BOUND = 1 << 62


@dataclasses.dataclass(frozen=True)
class Sharing:
    """How a backend's kernels may share a result's storage with their first operand.

    ``views``: the result is always a view of operand 0 (no bytes of its own; it keeps the operand's
    storage live for as long as it lives, which for a slice is more than its own size). ``maybe_views``:
    the result is a view or a fresh copy, decided at run time (numpy's reshape copies what its layout
    does not allow to view): it costs its own size and keeps the operand's storage live as well.
    Operators named here are not taken as the analysis' views.
    """

    views: frozenset[Op] = frozenset()
    maybe_views: frozenset[Op] = frozenset()


# Kernels that are numpy functions on whole arrays (the CPU interpreter's): basic slicing, transpose and
# flip give views, IDENTITY passes its operand on, and reshape views what its layout allows, else copies.
NUMPY_SHARING = Sharing(
    views=frozenset({Op.IDENTITY, Op.SLICE, Op.TRANSPOSE, Op.REVERSE}), maybe_views=frozenset({Op.RESHAPE})
)


@dataclasses.dataclass(frozen=True)
class WorkingSet:
    """What a program needs in memory (see the module docstring for what counts).

    Where ``peak_bytes`` is reached, ``tensor`` is the largest tensor live (``tensor_bytes`` of it, in
    the deepest graph that makes the peak), produced by ``operator``, operator #``operator_index`` of
    block ``block``; all None / 0 when the program has no intermediates. ``bounded`` is False when
    the figures are no upper bound: ``unbounded_reason`` says why, naming the first tensor without a
    static shape (``unbounded_tensor`` of ``unbounded_block``) or the graph that runs itself.
    """

    constant_bytes: int
    variable_bytes: int
    peak_bytes: int
    tensor: str | None = None
    tensor_bytes: int = 0
    operator: str | None = None
    operator_index: int | None = None
    block: str | None = None
    unbounded_tensor: str | None = None
    unbounded_block: str | None = None
    unbounded_reason: str = ""

    @property
    def total_bytes(self) -> int:
        """Constants, variables and the peak of intermediates."""
        return self.constant_bytes + self.variable_bytes + self.peak_bytes

    @property
    def bounded(self) -> bool:
        """Whether the figures are an upper bound (every counted tensor has a static shape)."""
        return not self.unbounded_reason

    def describe(self) -> str:
        """One line: "1.00 GiB at tensor 'tiled' (TILE, operator #1 of block 'then')", plus the
        constants and variables when there are any, and why there is no bound when there is none."""
        if self.tensor is None:
            text = f"{_human(self.peak_bytes)} of intermediates"
        else:
            text = f"{_human(self.peak_bytes)} at tensor {self.tensor!r}"
            if self.operator is not None:
                text += f" ({self.operator}, operator #{self.operator_index} of block {self.block!r})"
        if self.constant_bytes:
            text += f" + {_human(self.constant_bytes)} of constants"
        if self.variable_bytes:
            text += f" + {_human(self.variable_bytes)} of variables"
        if not self.bounded:
            text += f"; no bound: {self.unbounded_reason}"
        return text


def _human(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value, units = n / 1024, ["KiB", "MiB", "GiB", "TiB", "PiB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    return f"{value:.2f} {units[0]}"


def estimate(program: Program, *, sharing: Sharing | None = None) -> WorkingSet:
    """The working set of ``program`` (see the module docstring). ``sharing`` describes a backend whose
    kernels return views beyond RESHAPE / IDENTITY. Raises ValidationError when control flow names a
    block the program lacks, or a block's operators form a cycle or produce a tensor twice."""
    constant_bytes = sum(t.data.nbytes for b in program.blocks() for t in b.tensors if t.data is not None)
    unbounded: tuple[str | None, str, str] | None = None
    variables: dict[str, int] = {}
    for block in program.blocks():
        for t in block.tensors:
            if t.variable:
                size = static_size(t)
                if size is None:
                    unbounded = unbounded or (t.name, block.name, no_shape_reason(t.name, block.name))
                key = t.variable_name or t.name
                variables[key] = max(variables.get(key, 0), size or 0)
    order, recursive = _children_first(program)
    if recursive is not None and unbounded is None:
        unbounded = (None, recursive, f"block {recursive!r} runs itself through control flow")
    summaries: dict[str, BlockSummary] = {}
    for block in order:
        summaries[block.name] = summarize(block, summaries, sharing)
    main = summaries[program.main.name]
    unbounded = unbounded or main.unbounded
    where = main.where
    return WorkingSet(
        constant_bytes=constant_bytes,
        variable_bytes=sum(variables.values()),
        peak_bytes=main.peak,
        tensor=where.tensor if where else None,
        tensor_bytes=where.bytes if where else 0,
        operator=where.operator if where else None,
        operator_index=where.index if where else None,
        block=where.block if where else None,
        unbounded_tensor=unbounded[0] if unbounded else None,
        unbounded_block=unbounded[1] if unbounded else None,
        unbounded_reason=unbounded[2] if unbounded else "",
    )


def _children_first(program: Program) -> tuple[list[Block], str | None]:
    """The blocks reachable from main, each after every block it runs (an explicit stack: no recursion
    depth), and the first block found to run itself (None when none does)."""
    blocks: dict[str, Block] = {}
    for block in program.blocks():
        blocks.setdefault(block.name, block)  # Program.block() answers the first of a name
    main = program.main
    state: dict[str, int] = {main.name: 1}  # 1: on the path, 2: summarised
    stack = [(main, iter(_called(main)))]
    order: list[Block] = []
    recursive = None
    while stack:
        block, pending = stack[-1]
        name = next(pending, None)
        if name is None:
            stack.pop()
            state[block.name] = 2
            order.append(block)
            continue
        if name not in blocks:
            raise ValidationError(f"control flow refers to a missing block {name!r}", block=block.name)
        seen = state.get(name)
        if seen == 1:
            recursive = recursive or name
        elif seen is None:
            state[name] = 1
            stack.append((blocks[name], iter(_called(blocks[name]))))
    return order, recursive


def _called(block: Block) -> Iterable[str]:
    for op in block.operators:
        yield from graphs_of(op)


__all__ = ["NO_BOUND", "NUMPY_SHARING", "Sharing", "WorkingSet", "estimate"]
