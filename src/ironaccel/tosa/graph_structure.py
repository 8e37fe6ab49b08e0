"""The structure of a program's graphs: what the validator checks per block rather than per operator.

A block's tensors are declared, each assigned once (by a graph input, one operator, or as a variable),
read only once produced, and its operators form no cycle; every tensor has a static TOSA 1.0 shape (unless
EXT-DYNAMIC) within the level's MAX_LOG2_SIZE. A COND_IF / WHILE_LOOP operator names existing graphs whose
inputs and outputs match its lists, within MAX_NESTING. Problems go to the :class:`Checker`'s ``report``,
which raises or collects them; a :class:`Scope` then tells the per-operator checks which tensors an
operator of the block can read, and which are constants.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .attributes import CondIfAttribute, WhileLoopAttribute
from .dtypes import DType
from .errors import ValidationError
from .ir import Block, Operator, Tensor
from .operator_signature import OperatorContext, fmt, same_shape
from .operators import Op
from .ops.rule import Level, TensorType

_CONST_OPS = (Op.CONST, Op.CONST_SHAPE)


class Checker(Protocol):
    """What the structure checks need of the validator: its level, whether shapes may be dynamic, and
    where a problem goes (raised at once, or collected)."""

    level: Level
    dynamic: bool

    def report(self, error: ValidationError) -> None: ...


class Scope:
    """The tensors an operator of ``block`` can read: its own (graph inputs, operator outputs,
    variables) and, for a COND_IF / WHILE_LOOP graph, those of the enclosing blocks."""

    def __init__(self, block: Block, outer: Scope | None) -> None:
        self.block, self.outer = block, outer
        self.inputs = set(block.inputs)
        self.producers: dict[str, Operator] = {}

    def find(self, name: str) -> Scope | None:
        scope: Scope | None = self
        while scope is not None:
            t = scope.block.tensor_map.get(name)
            if t is not None and (name in scope.producers or name in scope.inputs or t.variable):
                return scope
            scope = scope.outer
        return None

    def tensor(self, name: str) -> Tensor | None:
        scope = self.find(name)
        return scope.block.tensor_map[name] if scope else None

    def is_constant(self, name: str) -> bool:
        scope = self.find(name)
        producer = scope.producers.get(name) if scope else None
        return producer is not None and producer.op in _CONST_OPS

    def const(self, name: str) -> np.ndarray | None:
        return self.block_tensor_data(name) if self.is_constant(name) else None

    def block_tensor_data(self, name: str) -> np.ndarray | None:
        t = self.tensor(name)
        return t.data if t is not None else None


def check_block(v: Checker, block: Block, outer: Scope | None) -> Scope:
    """Structure of one graph: declared, single-assignment, acyclic, shapes of TOSA 1.0."""
    scope = Scope(block, outer)
    where = {"block": block.name}
    for name in block.inputs:
        t = block.tensor_map.get(name)
        if t is None:
            v.report(ValidationError(f"graph input {name!r} is not a tensor of the block", **where))
        elif t.dtype is DType.SHAPE:
            v.report(ValidationError("graph inputs may not be shape_t values", tensor=name, **where))
    if len(scope.inputs) != len(block.inputs):
        v.report(ValidationError("a tensor is listed twice as graph input", **where))
    for i, op in enumerate(block.operators):
        at = {"op_index": i, "op": op.op.name, **where}
        for name in op.outputs:
            t = block.tensor_map.get(name)
            if t is None:
                v.report(ValidationError(f"output {name!r} is not a tensor of the block", **at))
            elif t.variable:
                continue
            elif name in scope.inputs:
                v.report(ValidationError("writes a graph input (single assignment)", tensor=name, **at))
            elif name in scope.producers:
                first = block.operators.index(scope.producers[name])
                v.report(ValidationError(f"tensor already produced by operator #{first}", tensor=name, **at))
            else:
                scope.producers[name] = op
    for i, op in enumerate(block.operators):
        for name in op.inputs:
            if scope.find(name) is None:
                what = "is not a tensor of the block" if name not in block.tensor_map else "is never produced"
                v.report(ValidationError(f"input {name!r} {what}", op_index=i, op=op.op.name, tensor=name, **where))
    for name in block.outputs:
        t = scope.tensor(name)
        if t is None:
            v.report(ValidationError(f"graph output {name!r} is not produced in the block", tensor=name, **where))
        elif t.dtype is DType.SHAPE:
            v.report(ValidationError("graph outputs may not be shape_t values", tensor=name, **where))
    _check_acyclic(v, block, scope)
    for t in block.tensors:
        _check_tensor(v, t, where)
    return scope


def _check_acyclic(v: Checker, block: Block, scope: Scope) -> None:
    index = {id(op): i for i, op in enumerate(block.operators)}
    users: list[list[int]] = [[] for _ in block.operators]
    pending = [0] * len(block.operators)
    for i, op in enumerate(block.operators):
        for name in set(op.inputs):
            producer = scope.producers.get(name)
            if producer is not None and name in block.tensor_map:
                users[index[id(producer)]].append(i)
                pending[i] += 1
    ready = deque(i for i, n in enumerate(pending) if n == 0)
    done = 0
    while ready:
        i = ready.popleft()
        done += 1
        for j in users[i]:
            pending[j] -= 1
            if pending[j] == 0:
                ready.append(j)
    if done != len(block.operators):
        first = next(i for i, n in enumerate(pending) if n)
        v.report(ValidationError("operators form a cycle", op_index=first, block=block.name))


def _check_tensor(v: Checker, t: Tensor, where: dict) -> None:
    if t.unranked or -1 in t.shape:
        if not v.dynamic:
            v.report(ValidationError("shape is not static (needs EXT-DYNAMIC)", tensor=t.name, **where))
        return
    low = 0 if t.dtype is DType.SHAPE else 1
    if any(d < low for d in t.shape):
        v.report(ValidationError(f"dimensions must be >= {low}, shape is {fmt(t.shape)}", tensor=t.name, **where))
        return
    size = int(np.prod(t.shape, dtype=object)) * max(1, (t.dtype.bits + 7) // 8)
    if size >= 1 << v.level.max_log2_size:
        rule = f"level {v.level.name}: {size} bytes exceed 2^{v.level.max_log2_size} - 1 (MAX_LOG2_SIZE)"
        v.report(ValidationError(rule, tensor=t.name, unpredictable=True, level=True, **where))


def check_graphs(v: Checker, ctx: OperatorContext, op: Operator, depth: int, stack: tuple, blocks: dict) -> list:
    """COND_IF / WHILE_LOOP: nesting depth, the named graphs exist and match the operator's lists."""
    attr = ctx.attribute
    if isinstance(attr, CondIfAttribute):
        names = {"then_graph": attr.then_graph, "else_graph": attr.else_graph}
    elif isinstance(attr, WhileLoopAttribute):
        names = {"cond_graph": attr.cond_graph, "body_graph": attr.body_graph}
    else:
        return []
    ctx.error_if(depth >= v.level.max_nesting, f"nesting depth {depth} reaches MAX_NESTING = {v.level.max_nesting}")
    graphs: dict[str, Block] = {}
    for field, name in names.items():
        found = blocks.get(name, [])
        ctx.error_if(len(found) != 1, f"{field} {name!r} names {'no' if not found else 'more than one'} block")
        ctx.error_if(name in stack, f"{field} {name!r} contains this operator (recursive graph)")
        graphs[field] = found[0]

    def io(block: Block, which: str) -> list[Tensor]:
        names = block.inputs if which == "inputs" else block.outputs
        return [block.tensor_map[n] for n in names if n in block.tensor_map]

    def match(what: str, actual: Sequence[TensorType], field: str, which: str) -> None:
        expected = io(graphs[field], which)
        label = f"{field} {graphs[field].name!r} {which}"
        ctx.error_if(len(actual) != len(expected), f"{what}: {len(actual)} tensors, {label}: {len(expected)}")
        for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
            ok = a.dtype == e.dtype and same_shape(a.shape, e.shape)
            got, want = f"{a.dtype}{fmt(a.shape)}", f"{e.dtype}{fmt(e.shape)}"
            ctx.error_if(not ok, f"{what} #{k} is {got} but {label} #{k} ({e.name}) is {want}", a.name)

    outputs = ctx.outputs or []
    if isinstance(attr, CondIfAttribute):
        cond = ctx.inputs[0]
        ctx.error_if(int(np.prod(cond.shape)) not in (1, -1), "condition must hold exactly one element", cond.name)
        for field in names:
            match("input_list", ctx.inputs[1:], field, "inputs")
            match("output_list", outputs, field, "outputs")
    else:
        match("input_list", ctx.inputs, "cond_graph", "inputs")
        match("input_list", ctx.inputs, "body_graph", "inputs")
        match("input_list", ctx.inputs, "body_graph", "outputs")
        match("output_list", outputs, "body_graph", "outputs")
        result = io(graphs["cond_graph"], "outputs")
        ok = len(result) == 1 and result[0].dtype is DType.BOOL and int(np.prod(result[0].shape)) in (1, -1)
        ctx.error_if(not ok, f"cond_graph {names['cond_graph']!r} must output one bool element")
    return list(graphs.values())


def graph_names(op: Operator) -> tuple[str, ...]:
    attr = op.attribute
    if isinstance(attr, CondIfAttribute):
        return (attr.then_graph, attr.else_graph)
    if isinstance(attr, WhileLoopAttribute):
        return (attr.cond_graph, attr.body_graph)
    return ()
