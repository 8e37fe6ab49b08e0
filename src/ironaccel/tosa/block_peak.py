"""The peak of intermediate bytes live at once in one block, the part of a program's working set that
depends on the order operators run in (what counts is the working set's: see :mod:`.working_set`).

:func:`summarize` walks a block in the analysis' execution order (:mod:`.analysis`), giving each tensor an
own size and a span of positions (views share their root's storage and stretch its span), then sums the
sizes live at each position. A COND_IF / WHILE_LOOP adds its graphs' peaks, taken from their summaries,
which the caller computes first (children before parents): a summary is independent of who runs the
block, so a graph run from many places is summarised once. What a graph's outputs keep live (bytes of
its own, and which of its inputs) is how storage crosses into the caller's terms.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .analysis import analyze, storage_size
from .attributes import ATTRIBUTE_OF
from .ir import Block, Operator, Tensor
from .operators import Op

if TYPE_CHECKING:
    from .working_set import Sharing

_GRAPHS = {Op.COND_IF: ("then_graph", "else_graph"), Op.WHILE_LOOP: ("cond_graph", "body_graph")}
_VIEW_OPS = (Op.RESHAPE, Op.IDENTITY)
_STATEFUL = frozenset({Op.CUSTOM, Op.VARIABLE, Op.VARIABLE_READ, Op.VARIABLE_WRITE})


@dataclasses.dataclass(frozen=True)
class _Pin:
    """The storage a value may keep live: ``bytes`` of the block's own, and whatever the block's inputs
    at ``inputs`` (indexes) hold, which the block's caller knows."""

    bytes: int = 0
    inputs: frozenset[int] = frozenset()


_NOTHING = _Pin()


@dataclasses.dataclass(frozen=True)
class _Where:
    tensor: str
    bytes: int
    operator: str | None
    index: int | None
    block: str


@dataclasses.dataclass(frozen=True)
class BlockSummary:
    """One block, independent of who runs it: its peak (graph inputs excluded), where, what each
    output keeps live, the names it reads from enclosing blocks, and the first tensor without a size."""

    peak: int
    where: _Where | None
    outputs: tuple[_Pin, ...]
    reads: frozenset[str]
    unbounded: tuple[str | None, str, str] | None  # (tensor, block, reason)


_UNKNOWN = BlockSummary(0, None, (), frozenset(), None)


def _summary(summaries: Mapping[str, BlockSummary], name: str) -> BlockSummary:
    """A graph's summary; one still being summarised runs itself (recursion: no bound, said elsewhere)."""
    return summaries.get(name, _UNKNOWN)


def static_size(tensor: Tensor) -> int | None:
    """The storage bytes of ``tensor``, or None when it has no static shape."""
    if tensor.unranked or any(d < 0 for d in tensor.shape):
        return None
    return storage_size(tensor)


def no_shape_reason(tensor: str, block: str) -> str:
    """Why an estimate is no bound, for a tensor without a static shape."""
    return f"tensor {tensor!r} of block {block!r} has no static shape"


def graphs_of(op: Operator) -> tuple[str, ...]:
    """The names of the graphs a COND_IF / WHILE_LOOP runs ("" for one its attribute lacks); () otherwise."""
    fields = _GRAPHS.get(op.op)
    if fields is None:
        return ()
    return tuple(getattr(op.attribute, f, None) or "" for f in fields)


def _may_fold(op: Operator) -> bool:
    """Whether some backend may compute ``op`` at load when its operands are constants."""
    return op.op not in _GRAPHS and op.op not in _STATEFUL


class _Block:
    """The state of one block's walk (see :func:`summarize`)."""

    def __init__(self, block: Block, sharing: Sharing | None) -> None:
        self.block = block
        self.sharing = sharing
        self.analysis = analyze(block, foldable=_may_fold)
        # Per position: the position of the next operator that surely runs (its operands are not all
        # known at load), else the end of the block.
        folded, end = set(self.analysis.foldable), self.analysis.end
        self.next_run = [end] * (end + 1)
        for position in range(end - 2, -1, -1):
            later = self.analysis.order[position + 1]
            self.next_run[position] = self.next_run[position + 1] if later in folded else position + 1
        self.tensors = block.tensor_map
        self.inputs = {name: i for i, name in reversed(list(enumerate(block.inputs)))}
        self.outputs = frozenset(block.outputs)
        self.own: dict[str, int] = {}  # bytes a tensor adds while its span lasts
        self.span: dict[str, list[int]] = {}  # [start, end] of every tensor with own bytes, or a root of views
        self.root: dict[str, str] = {}  # a view -> the tensor whose storage it shares
        self.pin: dict[str, _Pin] = {}  # storage a tensor may keep live
        self.constant = set(self.analysis.constants)  # constants and views of them: no bytes at run time
        self.unbounded: tuple[str | None, str, str] | None = None

    def size(self, name: str) -> int:
        tensor = self.tensors.get(name)
        size = static_size(tensor) if tensor is not None else None
        if size is None:
            if self.unbounded is None:
                self.unbounded = (name, self.block.name, no_shape_reason(name, self.block.name))
            return 0
        return size

    def interval(self, name: str) -> list[int]:
        i = self.analysis.intervals[name]
        if i.end > i.start:
            return [i.start, i.end]
        # A result nobody reads still lives while the next operator runs: a run loop keeps the last
        # results in hand until the next ones replace them (the CPU interpreter's does). Operators that
        # may be folded at load do not run.
        return [i.start, self.next_run[i.start]]

    def pin_of(self, name: str) -> _Pin:
        """What ``name`` keeps live, in this block's terms."""
        if name in self.pin:
            return self.pin[name]
        if name in self.inputs:
            return _Pin(0, frozenset({self.inputs[name]}))
        return _NOTHING  # a constant, a variable's store, or a tensor of an enclosing block

    def fresh(self, name: str, own: int, span: list[int], pin: _Pin | None = None) -> None:
        self.own[name] = own
        self.span[name] = span
        self.root[name] = name
        self.pin[name] = pin or _Pin(own)

    def share(self, name: str, source: str, own: int) -> None:
        """``name`` keeps ``source``'s storage live (and adds ``own`` bytes of its own)."""
        root = self.root[source]
        span, mine = self.span[root], self.interval(name)
        span[0], span[1] = min(span[0], mine[0]), max(span[1], mine[1])
        self.own[name] = own
        self.span[name] = mine
        self.root[name] = root
        src = self.pin[source]
        self.pin[name] = _Pin(max(src.bytes, own), src.inputs)

    def operator(self, index: int, op: Operator) -> None:
        """Account for the results of a non-control-flow operator at its position."""
        position = self.analysis.position(index)
        sharing = self.sharing
        single = len(op.outputs) == 1 and bool(op.inputs)
        for name in op.outputs:
            tensor = self.tensors.get(name)
            if tensor is not None and tensor.variable:
                # The store takes a fresh copy at every write (each write its own entry).
                key = name if name not in self.own else f"{name}\0{position}"
                self.fresh(key, self.size(name), [position, position])
                continue
            if name in self.constant:
                continue  # CONST / CONST_SHAPE: counted in constant_bytes
            source = op.inputs[0] if single else None
            if sharing is not None and single and op.op in (sharing.views | sharing.maybe_views):
                self.shared(name, source, position, op.op in sharing.maybe_views)
            elif sharing is None and single and self.constant_view(op, name, source):
                self.constant.add(name)
            elif sharing is None and single and name in self.analysis.views and source in self.root:
                self.share(name, source, 0)
            else:
                self.fresh(name, self.size(name), self.interval(name))

    def constant_view(self, op: Operator, name: str, source: str | None) -> bool:
        plain = type(op.attribute) is ATTRIBUTE_OF.get(op.op)
        return op.op in _VIEW_OPS and plain and source in self.constant and name not in self.outputs

    def shared(self, name: str, source: str, position: int, may_copy: bool) -> None:
        """A result of an operator of :class:`Sharing`."""
        own = self.size(name) if may_copy else 0
        src = self.tensors.get(source)
        if src is not None and src.variable:
            self.fresh(name, self.size(name), self.interval(name))  # a later write replaces the viewed store
        elif source in self.root:
            self.share(name, source, own)
        elif source in self.constant:
            if may_copy:
                self.fresh(name, own, self.interval(name))
            else:
                self.constant.add(name)
        elif source in self.inputs:
            self.fresh(name, own, self.interval(name), _Pin(own, frozenset({self.inputs[source]})))
        else:  # a tensor of an enclosing block: its storage is the caller's to count, unless copied
            self.fresh(name, self.size(name), self.interval(name))

    def control(self, index: int, op: Operator, summaries: Mapping[str, BlockSummary]) -> tuple[int, _Where | None]:
        """Account for a COND_IF / WHILE_LOOP's results; returns the bytes its graphs add to what is live
        around it, and where their peak is."""
        subs = [_summary(summaries, g) for g in graphs_of(op)]
        for sub in subs:
            if sub.unbounded is not None and self.unbounded is None:
                self.unbounded = sub.unbounded
            for name in sub.reads:  # tensors of this block the graphs read by name live across the operator
                if name in self.root:
                    span = self.span[self.root[name]]
                    span[1] = max(span[1], self.analysis.position(index))
        operands = op.inputs[1:] if op.op is Op.COND_IF else op.inputs
        pins = [self.pin_of(n) for n in operands]

        def through(pin: _Pin) -> _Pin:
            """A graph's pin in this block's terms: its inputs are ``operands``."""
            held = [pins[k] for k in pin.inputs if k < len(pins)]
            return _Pin(max([pin.bytes, *(p.bytes for p in held)]), frozenset().union(*(p.inputs for p in held)))

        sizes = [self.size(n) for n in op.outputs]
        if op.op is Op.COND_IF:
            results = []
            for j, size in enumerate(sizes):
                found = [through(sub.outputs[j]) for sub in subs if j < len(sub.outputs)]
                results.append(
                    _Pin(max([size, *(p.bytes for p in found)]), frozenset().union(*(p.inputs for p in found)))
                )
            extra = max(sub.peak for sub in subs)
        else:
            results = _carried(pins, sizes, subs[1].outputs)
            extra = sum(p.bytes for p in results) + max(sub.peak for sub in subs)
        for name, pin in zip(op.outputs, results, strict=False):
            self.fresh(name, pin.bytes, self.interval(name), pin)
        wheres = [sub.where for sub in subs if sub.where is not None]
        return extra, max(wheres, key=lambda w: w.bytes, default=None)


def _carried(pins: list[_Pin], sizes: list[int], body: tuple[_Pin, ...]) -> list[_Pin]:
    """What each loop-carried value may keep live after any number of iterations: the fixed point of
    "the body's result j keeps its own bytes, or what the carried values it views kept" (at most one
    round per carried value, as every round that changes something adds a carried value's storage)."""
    carried = [_Pin(max(size, pin.bytes), pin.inputs) for size, pin in zip(sizes, pins, strict=False)]
    carried += [_Pin(size) for size in sizes[len(carried) :]]
    for _ in range(len(carried) + 1):
        changed = False
        for j, current in enumerate(carried):
            if j >= len(body):
                continue
            out = body[j]
            held = [carried[k] for k in out.inputs if k < len(carried)]
            nbytes = max([current.bytes, out.bytes, *(p.bytes for p in held)])
            inputs = current.inputs.union(*(p.inputs for p in held))
            if nbytes != current.bytes or inputs != current.inputs:
                carried[j], changed = _Pin(nbytes, inputs), True
        if not changed:
            break
    return carried


def summarize(block: Block, summaries: Mapping[str, BlockSummary], sharing: Sharing | None) -> BlockSummary:
    """The summary of ``block``, given the summaries of the graphs it runs (one missing from ``summaries``
    runs itself: it counts nothing, and the caller says there is no bound). ValidationError when the
    block's operators form a cycle or produce a tensor twice (from the analysis)."""
    walk = _Block(block, sharing)
    analysis = walk.analysis
    control: dict[int, tuple[int, tuple[str, ...], _Where | None]] = {}  # position -> (extra, results, where)
    for index in analysis.order:
        op = block.operators[index]
        if op.op in _GRAPHS:
            extra, where = walk.control(index, op, summaries)
            control[analysis.position(index)] = (extra, op.outputs, where)
        else:
            walk.operator(index, op)

    end = analysis.end
    # A runner may keep a control-flow operator's operands and results (and a WHILE_LOOP's last
    # condition) in hand until the block's next control-flow operator: the CPU interpreter's does.
    positions = sorted(control)
    for here, after in zip(positions, [*positions[1:], end], strict=False):
        op = block.operators[analysis.order[here]]
        for name in (*op.inputs, *op.outputs):
            if name in walk.root:
                span = walk.span[walk.root[name]]
                span[1] = max(span[1], after)
        if op.op is Op.WHILE_LOOP:
            test = f"\0condition of WHILE_LOOP #{analysis.order[here]}"  # not a tensor name: never reported
            walk.fresh(test, sum(p.bytes for p in _summary(summaries, graphs_of(op)[0]).outputs), [here + 1, after])
    delta = [0] * (end + 2)
    for name, own in walk.own.items():
        if own:
            start, stop = walk.span[name]
            delta[max(start, 0)] += own
            delta[stop + 1] -= own
    best, best_at, best_nested = 0, -1, None
    live = 0
    for position in range(end + 1):
        live += delta[position]
        value, nested = live, None
        if position in control:
            extra, results, where = control[position]
            around = live - sum(walk.own.get(n, 0) for n in results)  # they are made inside the graphs
            if around + extra >= live:  # the graphs' peak, named by the deepest tensor that makes it
                value, nested = around + extra, where
        if value > best:
            best, best_at, best_nested = value, position, nested

    where = _where_at(walk, best_at, best_nested) if best_at >= 0 else None
    local = set(analysis.producers) | set(block.inputs) | set(walk.tensors)
    reads = {n for op in block.operators for n in op.inputs if n not in local}
    for op in block.operators:
        for graph in graphs_of(op):
            reads |= {n for n in _summary(summaries, graph).reads if n not in local}
    outputs = tuple(walk.pin_of(n) for n in block.outputs)
    return BlockSummary(best, where, outputs, frozenset(reads), walk.unbounded)


def _where_at(walk: _Block, position: int, nested: _Where | None) -> _Where | None:
    """The largest tensor live at ``position`` (or the nested graph's, when that is larger)."""
    block, analysis = walk.block, walk.analysis
    best_name, best_bytes = None, -1
    for name, own in walk.own.items():
        start, stop = walk.span[name]
        if own > best_bytes and start <= position <= stop and name in walk.tensors:
            best_name, best_bytes = name, own
    if nested is not None and (best_name is None or nested.bytes >= best_bytes):
        return nested
    if best_name is None:
        return None
    producer = analysis.producers.get(best_name)
    if producer is None:  # a variable written here
        producer = next(i for i, op in enumerate(block.operators) if best_name in op.outputs)
    return _Where(best_name, best_bytes, block.operators[producer].op.name, producer, block.name)
