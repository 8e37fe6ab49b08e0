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

This module walks the program block by block and operator by operator; the checks of one operator against
its signature live in :mod:`.operator_signature` (with :func:`infer`), the per-block ones in
:mod:`.graph_structure`. Their public names stay importable from here.
"""

from __future__ import annotations

from collections import deque

from .attributes import ATTRIBUTE_OF
from .errors import ValidationError
from .graph_structure import Scope, check_block, check_graphs, graph_names
from .ir import Block, Operator, Program
from .operator_signature import (
    OperatorContext,
    assign,
    bind_types,
    check_levels,
    check_ranks,
    check_types,
    count_rule,
    fmt,
    infer,
    same_shape,
    unify,
)
from .operators import Group
from .ops.rule import TensorType, rule_for
from .spec import operator as spec_of
from .target import DEFAULT_TARGET, Extension, Target


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
            scope = check_block(self, block, outer)
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
                for child in graph_names(op)
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
        ipairs, opairs = assign(spec.inputs, itypes), assign(spec.outputs, otypes)
        ctx.error_if(ipairs is None, count_rule("inputs", spec.inputs, len(itypes)))
        ctx.error_if(opairs is None, count_rule("outputs", spec.outputs, len(otypes)))
        pairs = [*(ipairs or []), *(opairs or [])]
        unranked = any(t.unranked for t in (*inputs, *outputs))  # type: ignore[union-attr]
        if not unranked:
            check_ranks(ctx, pairs)
        check_types(ctx, spec, bind_types(ctx, spec, pairs), self.target)
        env = unify(ctx, pairs) if not unranked else {}
        for arg, name in zip(spec.inputs, op.inputs, strict=False):
            if arg.ctc and not self.dynamic:
                msg = f"{arg.name} must be a compile-time constant (output of CONST / CONST_SHAPE) without EXT-DYNAMIC"
                ctx.error_if(scope.const(name) is None, msg, name)
        for arg, out in zip(spec.outputs, outputs, strict=False):
            ctx.error_if(arg.ctc and out.data is None, f"{arg.name} must carry its constant values", out.name)  # type: ignore[union-attr]
        check_levels(ctx, spec, env, self.level)
        children = check_graphs(self, ctx, op, depth, stack, blocks)
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
