"""Graph analysis every backend shares: execution order, liveness, views, folding, dead code, and
one arena memory plan built from them.

Positions are indexes into :attr:`Analysis.order` (the execution order), not operator indexes. A
tensor's live interval is closed, ``[start, end]``: ``start`` is the position of the operator that
defines it (-1 for values that exist before the block runs: graph inputs, variables and tensors of
enclosing graphs), ``end`` the position of its last reader (``len(order)`` for graph outputs and
variables, which outlive the block; ``start`` for a value nobody reads, which still has to be
written somewhere). Two tensors may share memory only if their intervals are disjoint, so an
operator's output never shares with its own inputs: the plan never relies on in-place execution.

Variables (EXT-VARIABLE) are block tensors flagged ``variable``; an operator whose output is one
writes it, one whose input is one reads it. Their accesses keep their relative order, they are never
planned into the arena (they persist across runs) and a write keeps its operator alive.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
from collections.abc import Callable, Mapping
from types import MappingProxyType

from ..core.errors import InvalidArgument
from .attributes import ATTRIBUTE_OF
from .errors import ValidationError
from .ir import Block, Operator, Program, Tensor
from .operators import Group, Op

_CONST_OPS = (Op.CONST, Op.CONST_SHAPE)
_GRAPH_OPS = (Op.COND_IF, Op.WHILE_LOOP)
# Groups whose operators are cheap and deterministic enough to evaluate at load time. Convolutions,
# matmuls, FFTs and RESIZE can multiply work or data, so they are left to run.
CHEAP_GROUPS = frozenset(
    {
        Group.ACTIVATION,
        Group.ELEMENTWISE_BINARY,
        Group.ELEMENTWISE_UNARY,
        Group.ELEMENTWISE_TERNARY,
        Group.COMPARISON,
        Group.REDUCTION,
        Group.DATA_LAYOUT,
        Group.SCATTER_GATHER,
        Group.TYPE_CONVERSION,
        Group.DATA_NODES,
        Group.SHAPE,
    }
)


def cheap(op: Operator) -> bool:
    """The default folding policy: operators of :data:`CHEAP_GROUPS`."""
    return op.op.group in CHEAP_GROUPS


@dataclasses.dataclass(frozen=True)
class Interval:
    """Closed range of execution positions during which a tensor's storage must hold its value."""

    start: int
    end: int

    def overlaps(self, other: Interval) -> bool:
        return self.start <= other.end and other.start <= self.end

    def union(self, other: Interval) -> Interval:
        return Interval(min(self.start, other.start), max(self.end, other.end))


@dataclasses.dataclass(frozen=True)
class Analysis:
    """What :func:`analyze` found out about one block (all mappings are read-only).

    ``producers`` / ``consumers`` use operator indexes of ``block.operators``; ``use_counts`` counts
    operand slots (an operator reading a tensor twice uses it twice; a COND_IF / WHILE_LOOP uses once
    each tensor its graphs read from this block). ``views`` maps a view to the tensor whose storage it
    shares (the root of a chain of views). ``constants`` are CONST / CONST_SHAPE results;
    ``foldable`` are the operators all of whose inputs are constant or foldable (CONST and CONST_SHAPE
    included), so ``folded`` is what a backend can compute once at load time.
    """

    block: Block
    order: tuple[int, ...]
    producers: Mapping[str, int]
    consumers: Mapping[str, tuple[int, ...]]
    use_counts: Mapping[str, int]
    intervals: Mapping[str, Interval]
    constants: frozenset[str]
    variables: frozenset[str]
    captures: frozenset[str]
    views: Mapping[str, str]
    foldable: tuple[int, ...]
    folded: frozenset[str]
    dead: tuple[int, ...]

    @property
    def end(self) -> int:
        """The position graph outputs live to (one past the last operator)."""
        return len(self.order)

    @functools.cached_property
    def positions(self) -> Mapping[int, int]:
        """Operator index -> its position in :attr:`order`."""
        return MappingProxyType({op: p for p, op in enumerate(self.order)})

    def position(self, op_index: int) -> int:
        return self.positions[op_index]


_GRAPH_FIELDS = ("then_graph", "else_graph", "cond_graph", "body_graph")


def _graphs_of(op: Operator) -> list[str]:
    return [name for field in _GRAPH_FIELDS if (name := getattr(op.attribute, field, None))]


def _external_accesses(program: Program | None, op: Operator, memo: dict | None = None) -> tuple:
    """(read, written) names the graphs of a COND_IF / WHILE_LOOP use from enclosing blocks.

    Each graph's free names are found once (``memo``, by graph name) and bottom-up with an explicit
    stack: graphs shared by many operators, or nested deeply, cost one visit each. A graph that (in an
    invalid program) reaches itself contributes nothing on the second visit."""
    if program is None or op.op not in _GRAPH_OPS:
        return set(), set()
    memo = {} if memo is None else memo
    reads: set[str] = set()
    writes: set[str] = set()
    for name in _graphs_of(op):
        r, w = _graph_accesses(program, name, memo)
        reads |= r
        writes |= w
    return reads, writes


def _graph_accesses(program: Program, root: str, memo: dict) -> tuple[set[str], set[str]]:
    empty: tuple[set[str], set[str]] = (set(), set())
    stack = [(root, False)]
    visiting: set[str] = set()
    while stack:
        name, children_done = stack.pop()
        if name in memo:
            continue
        try:
            graph = program.block(name)
        except KeyError:
            memo[name] = empty
            continue
        inner_graphs = [g for inner in graph.operators if inner.op in _GRAPH_OPS for g in _graphs_of(inner)]
        if not children_done:
            if name in visiting:  # a cycle: this visit sees nothing more
                continue
            visiting.add(name)
            stack.append((name, True))
            stack.extend((g, False) for g in inner_graphs if g not in memo)
            continue
        local = set(graph.inputs) | {o for n in graph.operators for o in n.outputs if not _is_var(graph, o)}
        reads: set[str] = set()
        writes: set[str] = set()
        for inner in graph.operators:
            r, w = empty
            if inner.op in _GRAPH_OPS:
                nested = [memo.get(g, empty) for g in _graphs_of(inner)]
                r = set().union(*(x[0] for x in nested))
                w = set().union(*(x[1] for x in nested))
            reads |= {n for n in (*inner.inputs, *r) if n not in local}
            writes |= {n for n in (*inner.outputs, *w) if n not in local}
        memo[name] = (reads, writes)
    return memo.get(root, empty)


def _is_var(block: Block, name: str) -> bool:
    t = block.tensor_map.get(name)
    return t is not None and t.variable


def analyze(block: Block, program: Program | None = None, *, foldable: Callable[[Operator], bool] = cheap) -> Analysis:
    """Analyze ``block``. Pass the ``program`` for a block with COND_IF / WHILE_LOOP, so that what
    their graphs read from this block counts as read by the operator (otherwise it is not seen and
    such an operator is conservatively kept alive). ``foldable`` is the folding policy.

    Raises ValidationError when a tensor is produced twice or the operators form a cycle.
    """
    ops = block.operators
    producers: dict[str, int] = {}
    for i, op in enumerate(ops):
        for name in op.outputs:
            if _is_var(block, name):
                continue
            if name in producers:
                rule = f"tensor already produced by operator #{producers[name]}"
                raise ValidationError(rule, op_index=i, op=op.op.name, tensor=name, block=block.name)
            producers[name] = i
    memo: dict = {}
    nested = [_external_accesses(program, op, memo) for op in ops]
    reads = [(*op.inputs, *sorted(nested[i][0])) for i, op in enumerate(ops)]
    writes = [(*(n for n in op.outputs if _is_var(block, n)), *sorted(nested[i][1])) for i, op in enumerate(ops)]
    variables = frozenset(t.name for t in block.tensors if t.variable)

    edges: list[set[int]] = [set() for _ in ops]
    for i in range(len(ops)):
        for name in reads[i]:
            if name in producers:
                edges[producers[name]].add(i)
    last_access: dict[str, int] = {}
    for i in range(len(ops)):  # accesses of one variable keep their program order
        for name in {*reads[i], *writes[i]} & variables:
            if name in last_access and last_access[name] != i:
                edges[last_access[name]].add(i)
            last_access[name] = i
    order = _topological(block, edges)
    pos = {op_index: p for p, op_index in enumerate(order)}

    consumers: dict[str, list[int]] = {}
    use_counts: dict[str, int] = {}
    for i in order:
        for name in reads[i]:
            use_counts[name] = use_counts.get(name, 0) + 1
            if i not in consumers.setdefault(name, []):
                consumers[name].append(i)
    local = set(producers) | set(block.inputs) | variables
    captures = frozenset(n for i in range(len(ops)) for n in (*reads[i], *writes[i]) if n not in local)
    end = len(order)
    intervals: dict[str, Interval] = {}
    for name in {*producers, *block.inputs, *consumers, *block.outputs, *variables}:
        start = pos[producers[name]] if name in producers else -1
        last = max((pos[i] for i in consumers.get(name, ())), default=start)
        forever = name in variables or name in block.outputs
        intervals[name] = Interval(start, end if forever else max(start, last))

    constants = frozenset(n for n, i in producers.items() if ops[i].op in _CONST_OPS)
    constants |= frozenset(t.name for t in block.tensors if t.data is not None and not t.variable)
    folded, fold_ops = set(constants), []
    for i in order:
        op = ops[i]
        touches_state = writes[i] or any(n in variables or n in captures for n in reads[i])
        if op.op in _CONST_OPS or (foldable(op) and not touches_state and all(n in folded for n in reads[i])):
            fold_ops.append(i)
            folded.update(op.outputs)

    views = _views(block, order, producers, constants, variables)
    dead = _dead(block, program, producers, reads, writes)
    frozen = MappingProxyType
    return Analysis(
        block=block,
        order=order,
        producers=frozen(producers),
        consumers=frozen({k: tuple(v) for k, v in consumers.items()}),
        use_counts=frozen(use_counts),
        intervals=frozen(intervals),
        constants=constants,
        variables=variables,
        captures=captures,
        views=frozen(views),
        foldable=tuple(sorted(fold_ops)),
        folded=frozenset(folded),
        dead=dead,
    )


def _topological(block: Block, edges: list[set[int]]) -> tuple[int, ...]:
    """Kahn's algorithm taking the lowest ready operator index first: a block already in a valid
    order keeps it, and otherwise the result is still deterministic."""
    pending = [0] * len(edges)
    for targets in edges:
        for j in targets:
            pending[j] += 1
    ready = [i for i, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in edges[i]:
            pending[j] -= 1
            if pending[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(edges):
        first = next(i for i, n in enumerate(pending) if n)
        op = block.operators[first].op.name
        raise ValidationError("operators form a cycle", op_index=first, op=op, block=block.name)
    return tuple(order)


def _views(
    block: Block, order: tuple[int, ...], producers: dict, constants: frozenset[str], variables: frozenset[str]
) -> dict[str, str]:
    """Outputs that can alias their input's storage: the single output of a RESHAPE or a plain
    IDENTITY (not tosa-opt's variable form) whose input is an intermediate of this block (produced
    here, not a constant, a variable, a graph input or a graph output) and which is not a graph output
    or variable itself. Graph inputs and outputs live in caller-bound buffers, which must not depend
    on each other; constants and variables live outside the arena."""
    boundary = set(block.inputs) | set(block.outputs) | variables | constants
    views: dict[str, str] = {}
    for i in order:
        op = block.operators[i]
        plain = type(op.attribute) is ATTRIBUTE_OF.get(op.op)
        if op.op not in (Op.RESHAPE, Op.IDENTITY) or not plain or len(op.outputs) != 1 or not op.inputs:
            continue
        src, out = op.inputs[0], op.outputs[0]
        if src not in producers or src in boundary or out in boundary:
            continue
        a, b = block.tensor_map.get(src), block.tensor_map.get(out)
        if a is None or b is None or a.dtype != b.dtype or a.size != b.size or a.unranked or b.unranked:
            continue
        views[out] = views.get(src, src)
    return views


def _dead(block: Block, program: Program | None, producers: dict, reads: list, writes: list) -> tuple[int, ...]:
    """Operators whose results reach no graph output and no variable write. CUSTOM operators, and
    COND_IF / WHILE_LOOP when the program is not given, are kept: their effects are not visible here."""
    ops = block.operators
    live: set[int] = set()
    stack = [producers[n] for n in block.outputs if n in producers]
    for i, op in enumerate(ops):
        opaque = op.op is Op.CUSTOM or (op.op in _GRAPH_OPS and program is None)
        if writes[i] or opaque:
            stack.append(i)
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        stack += [producers[n] for n in reads[i] if n in producers]
    return tuple(i for i in range(len(ops)) if i not in live)


# -- memory planning ----------------------------------------------------------------------------------
def storage_size(tensor: Tensor) -> int:
    """Bytes of a tensor in host storage (:attr:`DType.numpy`: INT4 one byte, INT48 eight)."""
    if tensor.unranked or any(d < 0 for d in tensor.shape):
        raise InvalidArgument(f"tensor {tensor.name!r} has no static shape; pass sizes= to plan its memory")
    return tensor.size * tensor.dtype.numpy.itemsize


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """Where every planned tensor lives in one arena of ``total_bytes``.

    ``offsets`` / ``sizes`` cover the tensors in the arena, views included (a view has its source's
    offset). ``external`` are the tensors the arena does not hold: constants, variables, tensors of
    enclosing graphs, and graph inputs / outputs unless planned with ``include_io``.
    """

    offsets: Mapping[str, int]
    sizes: Mapping[str, int]
    total_bytes: int
    alignment: int
    views: Mapping[str, str]
    intervals: Mapping[str, Interval]
    external: frozenset[str]

    def range(self, name: str) -> tuple[int, int]:
        return self.offsets[name], self.offsets[name] + self.sizes[name]


def plan_memory(
    analysis: Analysis,
    alignment: int = 256,
    sizes: Callable[[Tensor], int] | None = None,
    *,
    include_io: bool = False,
    fold: bool = False,
    exclusive_io: bool = False,
) -> MemoryPlan:
    """Place the block's intermediates into one arena.

    Placed: every tensor of the block that is not a constant, a variable or a view (with
    ``fold=True``, also not a result of a foldable operator), and graph inputs / outputs only with
    ``include_io``. A view takes the offset of its root, whose interval grows to cover the views. With
    ``exclusive_io`` (and ``include_io``) the bytes of the graph's inputs and outputs (and of what they are
    views of) are live for the whole block, so no other tensor shares them: a backend may then bind the
    caller's buffers in their place.

    Algorithm: greedy by size with best fit. Tensors are taken largest first (ties: earlier start,
    then name, so the plan is deterministic); each goes into the smallest gap between the
    already-placed tensors whose intervals overlap its own that fits it, else just above the highest
    of them. Offsets are multiples of ``alignment``. Largest-first keeps big tensors from being split
    around by small ones; best fit keeps large gaps for later tensors. The arena is never larger than
    the sum of the aligned sizes and is usually close to the peak of simultaneously live bytes.
    Cost: O(n^2 log n) in the number of planned tensors, fine for the thousands a model has.
    """
    if alignment < 1:
        raise InvalidArgument(f"alignment must be >= 1, got {alignment}")
    block = analysis.block
    size_of = sizes or storage_size
    io = set(block.inputs) | set(block.outputs)
    skip = analysis.constants | analysis.variables | analysis.captures | (analysis.folded if fold else frozenset())
    external = {n for n in analysis.intervals if n in skip or n not in block.tensor_map}
    if not include_io:
        external |= io & set(analysis.intervals)
    candidates = [n for n in analysis.intervals if n not in external]
    views = {v: r for v, r in analysis.views.items() if v in candidates and r in candidates}
    group = {n: analysis.intervals[n] for n in candidates if n not in views}
    for view, root in views.items():
        group[root] = group[root].union(analysis.intervals[view])
    if exclusive_io and group:
        whole = Interval(min(i.start for i in group.values()), max(i.end for i in group.values()))
        for root in {views.get(n, n) for n in io if n in candidates}:
            group[root] = whole
    size = {n: int(size_of(block.tensor_map[n])) for n in candidates}

    def up(n: int) -> int:
        return -(-n // alignment) * alignment

    placed: list[tuple[int, int, Interval]] = []
    offsets: dict[str, int] = {}
    for name in sorted(group, key=lambda n: (-size[n], group[n].start, n)):
        span, best, best_gap, top = group[name], None, None, 0
        for offset, length, _ in sorted((p for p in placed if p[2].overlaps(span)), key=lambda p: p[:2]):
            gap = offset - top
            if gap >= size[name] and (best_gap is None or gap < best_gap):
                best, best_gap = top, gap
            top = max(top, up(offset + length))
        offsets[name] = top if best is None else best
        placed.append((offsets[name], size[name], span))
    for view, root in views.items():
        offsets[view] = offsets[root]
    total = max((offsets[n] + size[n] for n in offsets), default=0)
    return MemoryPlan(
        offsets=MappingProxyType(offsets),
        sizes=MappingProxyType(size),
        total_bytes=total,
        alignment=alignment,
        views=MappingProxyType(views),
        intervals=MappingProxyType({n: group[views.get(n, n)] for n in offsets}),
        external=frozenset(external),
    )


__all__ = ["CHEAP_GROUPS", "Analysis", "Interval", "MemoryPlan", "analyze", "cheap", "plan_memory", "storage_size"]
