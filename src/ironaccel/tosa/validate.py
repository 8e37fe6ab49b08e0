"""Validate a TOSA 1.0 program against a :class:`~ironaccel.tosa.target.Target`.

The checks the specification states as data run here, once, for every operator, from the extracted
tables (:mod:`ironaccel.tosa.spec`): argument counts, argument kinds and ranks, the shape expressions
(``[N,IH,IW,C]`` binds N, IH... across arguments; ``shape1`` binds a whole shape), element types
against the supported-types table and the target's profiles / extensions, level limits and
compile-time-constant inputs. Graph structure (single assignment, acyclicity, block interfaces of
COND_IF / WHILE_LOOP, nesting depth) is checked per block. What the tables cannot say (output shape
formulas, an operator's own ERROR_IF / REQUIRE lines) comes from the operator's rule
(:func:`ironaccel.tosa.ops.rule_for`); an operator without a rule gets only the generic checks.

REQUIRE and LEVEL_CHECK violations raise :class:`ValidationError` with ``unpredictable=True``.
Version 1.0.x is accepted with or without the draft flag (tosa-tools stamps its 1.0.2 tests draft).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from .attributes import ATTRIBUTE_OF, Attribute, CondIfAttribute, WhileLoopAttribute, default_attribute
from .dtypes import DType
from .errors import ValidationError
from .ir import Block, Operator, Program, Tensor
from .operators import Group, Op
from .ops.rule import LEVEL_NONE, Level, TensorType, rule_for
from .spec import ELEMENT_TYPES, Argument, Expr, OperatorSpec
from .spec import operator as spec_of
from .target import DEFAULT_TARGET, Extension, Target

_CONST_OPS = (Op.CONST, Op.CONST_SHAPE)
# Names the pseudocode and level limits give to the components of list-valued attributes / inputs.
_COMPONENTS: dict[tuple[str, int], tuple[str, ...]] = {
    ("pad", 4): ("pad_top", "pad_bottom", "pad_left", "pad_right"),
    ("pad", 6): ("pad_d0", "pad_d1", "pad_top", "pad_bottom", "pad_left", "pad_right"),
    ("stride", 2): ("stride_y", "stride_x"),
    ("stride", 3): ("stride_d", "stride_y", "stride_x"),
    ("dilation", 2): ("dilation_y", "dilation_x"),
    ("dilation", 3): ("dilation_d", "dilation_y", "dilation_x"),
    ("kernel", 2): ("kernel_y", "kernel_x"),
    ("out_pad", 4): ("out_pad_top", "out_pad_bottom", "out_pad_left", "out_pad_right"),
    ("scale", 4): ("scale_y_n", "scale_y_d", "scale_x_n", "scale_x_d"),
}


def fmt(shape: Sequence[int]) -> str:
    return "[" + ",".join("?" if d == -1 else str(d) for d in shape) + "]"


def same_shape(a: Sequence[int], b: Sequence[int]) -> bool:
    """Equal shapes, where -1 (unknown) matches any dimension."""
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b, strict=True))


class OperatorContext:
    """The :class:`~ironaccel.tosa.ops.rule.Context` of one operator, for validation or inference."""

    __slots__ = ("attribute", "block", "consts", "index", "inputs", "level", "op", "outputs")

    def __init__(
        self,
        op: Op,
        attribute: Attribute,
        inputs: Sequence[TensorType],
        outputs: Sequence[TensorType] | None,
        level: Level = LEVEL_NONE,
        consts: Sequence[np.ndarray | None] = (),
        *,
        index: int | None = None,
        block: str | None = None,
    ) -> None:
        self.op, self.attribute, self.inputs, self.outputs = op, attribute, inputs, outputs
        self.level, self.consts, self.index, self.block = level, consts, index, block

    def const(self, index: int) -> np.ndarray | None:
        return self.consts[index] if 0 <= index < len(self.consts) else None

    def error(
        self, rule: str, tensor: str | None = None, unpredictable: bool = False, level: bool = False
    ) -> ValidationError:
        return ValidationError(
            rule,
            op_index=self.index,
            op=self.op.name,
            tensor=tensor,
            block=self.block,
            unpredictable=unpredictable or level,
            level=level,
        )

    def error_if(self, condition: bool, rule: str, tensor: str | None = None) -> None:
        if condition:
            raise self.error(rule, tensor)

    def require(self, condition: bool, rule: str, tensor: str | None = None) -> None:
        if not condition:
            raise self.error(rule, tensor, unpredictable=True)

    def level_check(self, condition: bool, rule: str, tensor: str | None = None) -> None:
        if not condition:
            raise self.error(rule, tensor, level=True)


def _assign(args: Sequence[Argument], items: Sequence) -> list[tuple[Argument, list]] | None:
    """Pair arguments with actual values; a tensor_list_t argument takes what the fixed ones leave."""
    fixed = sum(1 for a in args if not a.is_list)
    extra = len(items) - fixed
    if extra < 0 or (fixed == len(args) and extra):
        return None
    pairs, pos = [], 0
    for arg in args:
        n = extra if arg.is_list else 1
        pairs.append((arg, list(items[pos : pos + n])))
        pos += n
    return pairs


def _count_rule(what: str, args: Sequence[Argument], n: int) -> str:
    fixed = sum(1 for a in args if not a.is_list)
    want = f"at least {fixed}" if fixed != len(args) else str(fixed)
    return f"takes {want} {what} ({', '.join(a.name for a in args) or 'none'}), got {n}"


def _check_ranks(ctx: OperatorContext, pairs: Sequence[tuple[Argument, list[TensorType]]]) -> None:
    """ERROR_IF a rank is outside the argument's bounds; above MAX_RANK is a level violation (REQUIRE)."""
    for arg, values in pairs:
        bounds = arg.rank_bounds(ctx.level)
        for t in values if bounds else ():
            lo, hi, hi_is_level = bounds  # type: ignore[misc]
            ok = lo <= t.rank and (t.rank <= hi or hi_is_level)
            ctx.error_if(not ok, f"{arg.name} must have rank {lo}" + (f"..{hi}" if hi != lo else ""), t.name)
            ctx.level_check(t.rank <= hi, f"level {ctx.level.name}: {arg.name} rank {t.rank} exceeds {hi}", t.name)


def _unify(ctx: OperatorContext, pairs: Sequence[tuple[Argument, list[TensorType]]]) -> dict:
    """Bind the shape expressions of the arguments to the actual shapes; ERROR_IF they disagree."""
    env: dict = {}
    origin: dict[str, str] = {}
    deferred = []
    for arg, values in pairs:
        if arg.is_list:
            env[arg.name] = [t.shape for t in values]
            continue
        t = values[0]
        if arg.shape_var:
            if arg.shape_var in env:
                want = f"{origin[arg.shape_var]} {fmt(env[arg.shape_var])}"
                ok = same_shape(env[arg.shape_var], t.shape)
                ctx.error_if(not ok, f"{arg.name} has shape {fmt(t.shape)} but must match {want}", t.name)
            else:
                env[arg.shape_var], origin[arg.shape_var] = t.shape, arg.name
        elif arg.dims is not None:
            spelled = "[" + ",".join(str(getattr(d, "text", d)) for d in arg.dims) + "]"
            ctx.error_if(
                len(t.shape) != len(arg.dims), f"{arg.name} must have shape {spelled}, got {fmt(t.shape)}", t.name
            )
            for i, (dim, value) in enumerate(zip(arg.dims, t.shape, strict=True)):
                if isinstance(dim, Expr):
                    deferred.append((arg, t, i, dim))
                elif value == -1:
                    continue
                elif isinstance(dim, int):
                    ctx.error_if(value != dim, f"{arg.name} dimension {i} must be {dim}, got {value}", t.name)
                elif dim in env:
                    ctx.error_if(
                        env[dim] != value,
                        f"{arg.name} dimension {i} ({dim}) is {value} but {dim} = {env[dim]} from {origin[dim]}",
                        t.name,
                    )
                else:
                    env[dim], origin[dim] = value, arg.name
    for arg, t, i, expr in deferred:
        want = expr.evaluate(env)
        if want is not None and t.shape[i] != -1:
            ctx.error_if(
                t.shape[i] != want, f"{arg.name} dimension {i} must be {expr.text} = {want}, got {t.shape[i]}", t.name
            )
    return env


def _bind_types(ctx: OperatorContext, spec: OperatorSpec, pairs: Sequence[tuple[Argument, list[TensorType]]]) -> dict:
    """Element-type variables -> DType from the arguments (and acc_type); ERROR_IF two disagree."""
    bound: dict[str, DType] = {}
    origin: dict[str, str] = {}
    for arg, values in pairs:
        for t in values:
            if arg.type == "shape_t":
                ctx.error_if(t.dtype is not DType.SHAPE, f"{arg.name} must be a shape_t value, got {t.dtype}", t.name)
                continue
            ctx.error_if(t.dtype is DType.SHAPE, f"{arg.name} must be a tensor, not a shape_t value", t.name)
            if arg.element in spec.type_variables:
                if arg.element in bound:
                    other = f"{origin[arg.element]} is {bound[arg.element]} (both {arg.element})"
                    ctx.error_if(bound[arg.element] != t.dtype, f"{arg.name} is {t.dtype} but {other}", t.name)
                else:
                    bound[arg.element], origin[arg.element] = t.dtype, arg.name
            elif arg.element in ELEMENT_TYPES:
                want = ELEMENT_TYPES[arg.element]
                ctx.error_if(t.dtype != want, f"{arg.name} must be {want}, got {t.dtype}", t.name)
    for arg in spec.attributes:
        acc = getattr(ctx.attribute, arg.name, None)
        if arg.type == "acc_type_t" and "acc_t" in spec.type_variables and isinstance(acc, int):
            try:
                bound["acc_t"] = DType(acc)
            except ValueError:
                bound["acc_t"] = DType.UNKNOWN
    return bound


def _check_types(ctx: OperatorContext, spec: OperatorSpec, bound: dict, target: Target) -> None:
    rows = [r for r in spec.typesupport if all(r.types.get(v, d) == d for v, d in bound.items())]
    combo = ", ".join(f"{v}={d}" for v, d in bound.items())
    ctx.error_if(
        not rows, f"unsupported type combination {combo}; supported: {'; '.join(r.mode for r in spec.typesupport)}"
    )
    if not any(r.enabled(target.enabled) for r in rows):
        needs = "; ".join(f"{r.mode} needs {r.describe_requirement()}" for r in rows)
        raise ctx.error(f"{combo or spec.op.name}: {needs}, which the target ({target}) does not enable")


def _check_levels(ctx: OperatorContext, spec: OperatorSpec, env: dict, level: Level) -> None:
    values = dict(env)
    for arg in spec.arguments:
        raw = getattr(ctx.attribute, arg.name, None) if arg.category == "attribute" else None
        if arg.category == "input" and arg.ctc and arg.type == "shape_t":
            data = ctx.const(spec.inputs.index(arg))
            raw = tuple(int(v) for v in data.reshape(-1)) if data is not None else None
        if isinstance(raw, tuple):
            values.update(zip(_COMPONENTS.get((arg.name, len(raw)), ()), raw, strict=False))
    for arg in spec.arguments:
        for expr, limit in arg.level_limits:
            value = expr.evaluate(values, exact=True)
            bound = getattr(level, limit.lower())
            if value is not None:
                ctx.level_check(value <= bound, f"level {level.name}: {expr.text} = {value} exceeds {limit} = {bound}")


def infer(
    op: Op | str,
    attribute: Attribute | None,
    inputs: Sequence[TensorType],
    consts: Sequence[np.ndarray | None] = (),
    level: Level = LEVEL_NONE,
) -> list[tuple[int, ...]]:
    """Output shapes of ``op`` on ``inputs`` (for builders); raises ValidationError where the rule does."""
    op = Op.parse(op)
    spec = spec_of(op)
    if spec is None:
        raise ValidationError("not a TOSA 1.0 operator", op=op.name)
    ctx = OperatorContext(op, attribute or default_attribute(op), list(inputs), None, level, list(consts))
    pairs = _assign(spec.inputs, list(inputs))
    ctx.error_if(pairs is None, _count_rule("inputs", spec.inputs, len(inputs)))
    _check_ranks(ctx, pairs or [])
    env = _unify(ctx, pairs or [])
    rule = rule_for(op)
    if rule is not None:
        return [tuple(int(d) for d in s) for s in rule(ctx)]
    shapes = []
    for arg in spec.outputs:
        shape = env.get(arg.shape_var) if arg.shape_var else None
        if arg.dims is not None:
            dims = [
                d if isinstance(d, int) else d.evaluate(env) if isinstance(d, Expr) else env.get(d) for d in arg.dims
            ]
            shape = None if None in dims else tuple(dims)
        ctx.error_if(shape is None, f"output {arg.name} cannot be inferred without the operator's rule")
        shapes.append(tuple(shape))  # type: ignore[arg-type]
    return shapes


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


def _check_block(v: _Validator, block: Block, outer: Scope | None) -> Scope:
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


def _check_acyclic(v: _Validator, block: Block, scope: Scope) -> None:
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


def _check_tensor(v: _Validator, t: Tensor, where: dict) -> None:
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


def _check_graphs(v: _Validator, ctx: OperatorContext, op: Operator, depth: int, stack: tuple, blocks: dict) -> list:
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


def _graph_names(op: Operator) -> tuple[str, ...]:
    attr = op.attribute
    if isinstance(attr, CondIfAttribute):
        return (attr.then_graph, attr.else_graph)
    if isinstance(attr, WhileLoopAttribute):
        return (attr.cond_graph, attr.body_graph)
    return ()


class _Validator:
    def __init__(self, program: Program, target: Target, collect: bool) -> None:
        self.program, self.target, self.collect = program, target, collect
        self.level = target.level
        self.dynamic = Extension.DYNAMIC in target.extensions
        self.errors: list[ValidationError] = []

    def report(self, error: ValidationError) -> None:
        if not self.collect:
            raise error
        self.errors.append(error)

    def run(self) -> list[ValidationError]:
        version = self.program.version
        if (version.major, version.minor) != (1, 0):
            self.report(ValidationError(f"program version {version} is not TOSA 1.0"))
        try:
            main = self.program.main
        except ValueError as exc:
            self.report(ValidationError(str(exc)))
            return self.errors
        blocks: dict[str, list[Block]] = {}
        for block in self.program.blocks():
            blocks.setdefault(block.name, []).append(block)
        queue: deque[tuple[Block, Scope | None, int, tuple[str, ...]]] = deque([(main, None, 0, (main.name,))])
        seen = {main.name: 0}  # block -> the depth it was checked at (its shallowest)
        while queue:
            block, outer, depth, stack = queue.popleft()
            scope = _check_block(self, block, outer)
            for index, op in enumerate(block.operators):
                try:
                    children = self.operator(scope, index, op, depth, stack, blocks)
                except ValidationError as error:
                    self.report(error)
                    continue
                for child in children:
                    if child.name not in seen:
                        seen[child.name] = depth + 1
                        queue.append((child, scope, depth + 1, (*stack, child.name)))
        self._check_call_graph(blocks, seen)
        return self.errors

    def _check_call_graph(self, blocks: dict[str, list[Block]], checked: dict[str, int]) -> None:
        """What the walk above cannot see, having checked each block once at its shallowest depth: a cycle
        between graphs reached along different paths (main -> a, main -> b, a -> b, b -> a), and a graph
        also reached deeper than it was checked at. Kahn's algorithm orders the graph calls; what it cannot
        order is a cycle; the longest path from main is each block's deepest nesting."""
        calls: dict[str, list[tuple[int, Operator, str]]] = {}
        for name in checked:
            block = blocks[name][0]
            calls[name] = [
                (index, op, child)
                for index, op in enumerate(block.operators)
                for child in _graph_names(op)
                if child in checked and len(blocks.get(child, ())) == 1
            ]
        callers = {name: 0 for name in checked}
        for edges in calls.values():
            for _, _, child in edges:
                callers[child] += 1
        ready = deque(name for name, n in callers.items() if n == 0)
        deepest = dict.fromkeys(checked, 0)
        order = 0
        while ready:
            name = ready.popleft()
            order += 1
            for _, _, child in calls[name]:
                deepest[child] = max(deepest[child], deepest[name] + 1)
                callers[child] -= 1
                if callers[child] == 0:
                    ready.append(child)
        if order < len(checked):
            cyclic = sorted(name for name, n in callers.items() if n > 0)
            self.report(ValidationError(f"graphs {', '.join(map(repr, cyclic))} call each other (recursive graphs)"))
            return
        limit = self.level.max_nesting
        for name, edges in calls.items():
            if deepest[name] >= limit > checked[name]:  # the walk checked it shallower: not reported yet
                for index, op, _ in edges[:1]:
                    self.report(
                        ValidationError(
                            f"nesting depth {deepest[name]} reaches MAX_NESTING = {limit}",
                            op_index=index,
                            op=op.op.name,
                            block=name,
                        )
                    )

    def operator(self, scope: Scope, index: int, op: Operator, depth: int, stack: tuple, blocks: dict) -> list[Block]:
        block = scope.block
        fail = ValidationError
        if not op.op.is_tosa_1_0:
            raise fail(f"{op.op.name} is not a TOSA 1.0 operator", op_index=index, op=op.op.name, block=block.name)
        spec = spec_of(op.op)
        assert spec is not None
        attribute = op.attribute
        if op.op.group is not Group.VARIABLE and not isinstance(attribute, ATTRIBUTE_OF[op.op]):
            name = type(attribute).__name__
            raise fail(
                f"attribute {name} is not the attribute of {op.op.name}",
                op_index=index,
                op=op.op.name,
                block=block.name,
            )
        inputs = [scope.tensor(n) for n in op.inputs]
        outputs = [scope.tensor(n) for n in op.outputs]
        if None in inputs or None in outputs:
            return []  # reported by the block checks
        itypes = [TensorType(t.shape, t.dtype, t.name) for t in inputs]  # type: ignore[union-attr]
        otypes = [TensorType(t.shape, t.dtype, t.name) for t in outputs]  # type: ignore[union-attr]
        consts = [scope.const(n) for n in op.inputs]
        ctx = OperatorContext(op.op, attribute, itypes, otypes, self.level, consts, index=index, block=block.name)
        ipairs, opairs = _assign(spec.inputs, itypes), _assign(spec.outputs, otypes)
        ctx.error_if(ipairs is None, _count_rule("inputs", spec.inputs, len(itypes)))
        ctx.error_if(opairs is None, _count_rule("outputs", spec.outputs, len(otypes)))
        pairs = [*(ipairs or []), *(opairs or [])]
        unranked = any(t.unranked for t in (*inputs, *outputs))  # type: ignore[union-attr]
        if not unranked:
            _check_ranks(ctx, pairs)
        _check_types(ctx, spec, _bind_types(ctx, spec, pairs), self.target)
        env = _unify(ctx, pairs) if not unranked else {}
        for arg, name in zip(spec.inputs, op.inputs, strict=False):
            if arg.ctc and not self.dynamic:
                msg = f"{arg.name} must be a compile-time constant (output of CONST / CONST_SHAPE) without EXT-DYNAMIC"
                ctx.error_if(scope.const(name) is None, msg, name)
        for arg, out in zip(spec.outputs, outputs, strict=False):
            ctx.error_if(arg.ctc and out.data is None, f"{arg.name} must carry its constant values", out.name)  # type: ignore[union-attr]
        _check_levels(ctx, spec, env, self.level)
        children = _check_graphs(self, ctx, op, depth, stack, blocks)
        rule = rule_for(op.op)
        if rule is None or unranked:
            return children
        try:  # a rule must not crash on hostile input: anything it trips over is a malformed operator
            shapes = rule(ctx)
        except ValidationError:
            raise
        except (ArithmeticError, ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
            raise ctx.error(f"malformed operator ({type(exc).__name__}: {exc})") from exc
        for shape, out in zip(shapes, otypes, strict=False):
            ctx.error_if(
                not same_shape(tuple(shape), out.shape),
                f"output {out.name} has shape {fmt(out.shape)} but the operator computes {fmt(tuple(shape))}",
                out.name,
            )
        return children


def check(program: Program, target: Target | None = None) -> list[ValidationError]:
    """Every problem found (at most one per operator); empty when the program is valid."""
    return _Validator(program, target or DEFAULT_TARGET, collect=True).run()


def validate(program: Program, target: Target | None = None) -> None:
    """Raise the first :class:`ValidationError` of ``program`` under ``target`` (default: all of TOSA 1.0)."""
    _Validator(program, target or DEFAULT_TARGET, collect=False).run()


__all__ = ["OperatorContext", "Scope", "check", "fmt", "infer", "same_shape", "validate"]
