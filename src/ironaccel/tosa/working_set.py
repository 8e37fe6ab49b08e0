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
read, and the cost is linear in the program's operators and tensors (plus the analysis' ordering).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from .analysis import analyze, storage_size
from .attributes import ATTRIBUTE_OF
from .errors import ValidationError
from .ir import Block, Operator, Program, Tensor
from .operators import Op

# A resident bound at or above this means "no bound" (what runtime.Device.compile passes when its caller
# sets none): only then may a program whose working set has no bound be loaded.
NO_BOUND = 1 << 62

_GRAPHS = {Op.COND_IF: ("then_graph", "else_graph"), Op.WHILE_LOOP: ("cond_graph", "body_graph")}
_VIEW_OPS = (Op.RESHAPE, Op.IDENTITY)
_STATEFUL = frozenset({Op.CUSTOM, Op.VARIABLE, Op.VARIABLE_READ, Op.VARIABLE_WRITE})


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
class _Summary:
    """One block, independent of who runs it: its peak (graph inputs excluded), where, what each
    output keeps live, the names it reads from enclosing blocks, and the first tensor without a size."""

    peak: int
    where: _Where | None
    outputs: tuple[_Pin, ...]
    reads: frozenset[str]
    unbounded: tuple[str | None, str, str] | None  # (tensor, block, reason)


_UNKNOWN = _Summary(0, None, (), frozenset(), None)


def _summary(summaries: Mapping[str, _Summary], name: str) -> _Summary:
    """A graph's summary; one still being summarised runs itself (recursion: no bound, said elsewhere)."""
    return summaries.get(name, _UNKNOWN)


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
                size = _size(t)
                if size is None:
                    unbounded = unbounded or (t.name, block.name, _no_shape(t.name, block.name))
                key = t.variable_name or t.name
                variables[key] = max(variables.get(key, 0), size or 0)
    order, recursive = _children_first(program)
    if recursive is not None and unbounded is None:
        unbounded = (None, recursive, f"block {recursive!r} runs itself through control flow")
    summaries: dict[str, _Summary] = {}
    for block in order:
        summaries[block.name] = _summarize(block, summaries, sharing)
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


def _size(tensor: Tensor) -> int | None:
    if tensor.unranked or any(d < 0 for d in tensor.shape):
        return None
    return storage_size(tensor)


def _no_shape(tensor: str, block: str) -> str:
    return f"tensor {tensor!r} of block {block!r} has no static shape"


def _graphs(op: Operator) -> tuple[str, ...]:
    fields = _GRAPHS.get(op.op)
    if fields is None:
        return ()
    return tuple(getattr(op.attribute, f, None) or "" for f in fields)


def _may_fold(op: Operator) -> bool:
    """Whether some backend may compute ``op`` at load when its operands are constants."""
    return op.op not in _GRAPHS and op.op not in _STATEFUL


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
        yield from _graphs(op)


class _Block:
    """The state of one block's walk (see :func:`_summarize`)."""

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
        size = _size(tensor) if tensor is not None else None
        if size is None:
            if self.unbounded is None:
                self.unbounded = (name, self.block.name, _no_shape(name, self.block.name))
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

    def control(self, index: int, op: Operator, summaries: Mapping[str, _Summary]) -> tuple[int, _Where | None]:
        """Account for a COND_IF / WHILE_LOOP's results; returns the bytes its graphs add to what is live
        around it, and where their peak is."""
        subs = [_summary(summaries, g) for g in _graphs(op)]
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


def _summarize(block: Block, summaries: Mapping[str, _Summary], sharing: Sharing | None) -> _Summary:
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
            walk.fresh(test, sum(p.bytes for p in _summary(summaries, _graphs(op)[0]).outputs), [here + 1, after])
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
        for graph in _graphs(op):
            reads |= {n for n in _summary(summaries, graph).reads if n not in local}
    outputs = tuple(walk.pin_of(n) for n in block.outputs)
    return _Summary(best, where, outputs, frozenset(reads), walk.unbounded)


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


__all__ = ["NO_BOUND", "NUMPY_SHARING", "Sharing", "WorkingSet", "estimate"]
