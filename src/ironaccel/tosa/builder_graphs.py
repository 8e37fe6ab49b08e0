"""COND_IF, WHILE_LOOP and variables for :class:`~ironaccel.tosa.builder.ProgramBuilder`.

A graph of a control-flow operator is built by a callback that gets a nested builder and the graph's
inputs. The callback may use any tensor of an enclosing graph; it is not referenced across the block
boundary (the CPU backend and tosa-tools' reference model look operands up in their own block) but
copied in when it is a constant, and otherwise passed in explicitly: appended to COND_IF's input list
(every branch gets the input, used or not), or carried through WHILE_LOOP as extra loop state that the
body returns unchanged. Variables are accessed only in the graph that declares them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import InvalidArgument
from .attributes import Attribute, CondIfAttribute, WhileLoopAttribute
from .builder_types import is_value, parse_dtype, to_storage
from .dtypes import DType
from .ir import Operator, Tensor
from .operators import Op

if TYPE_CHECKING:
    from .builder import Operand, ProgramBuilder, Value

Graph = Callable[..., "Value | Sequence[Value]"]
Shape = Sequence[int]


class GraphMethods:
    """The control-flow and variable methods of ProgramBuilder (a mixin over its graph state)."""

    # Provided by ProgramBuilder.
    name: str
    root: ProgramBuilder
    _tensors: dict[str, Tensor]
    _operators: list[Operator]
    _inputs: list[str]
    _outputs: list[str]
    _args: int
    _closed: bool
    _captures: list[Value]

    if TYPE_CHECKING:

        def _own(self, value: Value, what: str) -> Value: ...
        def _capture(self, value: Value) -> Value: ...
        def _fresh(self, prefix: str, name: str | None = None) -> str: ...
        def _add(self, name: str, shape: Shape, dtype: DType, **tensor: Any) -> Value: ...
        def _check_open(self) -> None: ...
        def const(self, values: Any, dtype: str | DType | None = None, *, name: str | None = None) -> Value: ...
        def output(self, *values: Value | Sequence[Value]) -> None: ...
        def identity(self, input: Operand, *, name: str | None = None) -> Value: ...

    def _graph(self, label: str, types: Sequence[Value], body: Graph) -> ProgramBuilder:
        """Run ``body(graph, *inputs)`` in a new nested graph; what it returns becomes the outputs."""
        blocks, n = self.root._blocks, 0
        while f"{label}_{n}" in blocks:
            n += 1
        blocks.add(f"{label}_{n}")
        graph = type(self)(f"{label}_{n}", _parent=self)
        args = [graph._add(graph._fresh(f"{label}_{n}_in"), v.shape, v.dtype) for v in types]
        graph._inputs, graph._args = [a.name for a in args], len(args)
        result = body(graph, *args)
        results = [result] if is_value(result) else list(result or ())
        if not results or not all(is_value(r) for r in results):
            raise InvalidArgument(f"graph {graph.name!r} must return a Value or a sequence of Values")
        graph.output(*results)
        graph._closed = True
        return graph

    def _link(self, graphs: Sequence[ProgramBuilder], through: ProgramBuilder | None = None) -> list[Value]:
        """Give every graph one input per value any of them captured (same order in all), and return
        those values as this graph reads them: they are appended to the operator's input list.
        ``through`` (a loop body) also returns them unchanged, as loop-carried state."""
        captured: dict[str, Value] = {}
        for graph in graphs:
            captured.update((v.name, v) for v in graph._captures)
        for graph in graphs:
            locals_ = [graph._capture(v).name for v in captured.values()]
            graph._inputs = graph._inputs[: graph._args] + locals_
            if graph is through:
                graph._outputs += locals_
        return [self._own(v, "captured tensor") for v in captured.values()]

    def _operands(self, values: Sequence[Operand], what: str) -> list[Value]:
        return [self._own(v, what) if is_value(v) else self.const(v) for v in values]

    def cond_if(
        self, condition: Operand, inputs: Sequence[Operand], then_branch: Graph, else_branch: Graph, *, name: str = ""
    ) -> tuple[Value, ...]:
        """COND_IF: ``then_branch(g, *inputs)`` or ``else_branch(g, *inputs)``, each given a nested
        builder ``g`` and graph inputs shaped like ``inputs``, returns the outputs (same types both).
        The branches may use tensors of this graph: they are passed in as extra inputs."""
        self._check_open()
        cond = self._own(condition, "condition") if is_value(condition) else self.const([condition], "bool")
        args = self._operands(inputs, "COND_IF input")
        then, other = self._graph("then", args, then_branch), self._graph("else", args, else_branch)
        outs = _graph_types(then)
        if outs != _graph_types(other):
            raise InvalidArgument(f"COND_IF: then graph returns {outs} but else graph returns {_graph_types(other)}")
        extra = self._link([then, other])
        self.root._graphs += [then, other]
        record = CondIfAttribute(then_graph=then.name, else_graph=other.name)
        return self._control(Op.COND_IF, [cond, *args, *extra], outs, record, name)

    def while_loop(self, inputs: Sequence[Operand], cond: Graph, body: Graph, *, name: str = "") -> tuple[Value, ...]:
        """WHILE_LOOP: ``body(g, *state)`` returns the next state (same types) while
        ``cond(g, *state)`` returns a one-element bool Value that is true. Tensors of this graph the
        two use are carried through the loop as extra state (not returned)."""
        self._check_open()
        args = self._operands(inputs, "WHILE_LOOP input")
        cond_graph, body_graph = self._graph("cond", args, cond), self._graph("body", args, body)
        state = [(v.shape, v.dtype) for v in args]
        if _graph_types(body_graph) != state:
            raise InvalidArgument(f"WHILE_LOOP: body returns {_graph_types(body_graph)}, the state is {state}")
        test = _graph_types(cond_graph)
        if len(test) != 1 or test[0][1] is not DType.BOOL or int(np.prod(test[0][0])) != 1:
            raise InvalidArgument(f"WHILE_LOOP: cond must return one bool element, returns {test}")
        extra = self._link([cond_graph, body_graph], through=body_graph)
        self.root._graphs += [cond_graph, body_graph]
        record = WhileLoopAttribute(cond_graph=cond_graph.name, body_graph=body_graph.name)
        outs = [(v.shape, v.dtype) for v in (*args, *extra)]
        return self._control(Op.WHILE_LOOP, [*args, *extra], outs, record, name)[: len(args)]

    def _control(self, op: Op, args: list[Value], outs: list, record: Attribute, name: str) -> tuple[Value, ...]:
        prefix = name or op.name.lower()
        results = [self._add(self._fresh(prefix), shape, dt) for shape, dt in outs]
        self._operators.append(Operator(op, tuple(a.name for a in args), tuple(r.name for r in results), record))
        return tuple(results)

    def variable(self, name: str, shape: Shape, dtype: str | DType, initial_value: Any = None) -> Value:
        """Declare a variable (EXT-VARIABLE): persistent state, read and written by the operators
        below. It is a block tensor flagged ``variable`` carrying its initial value (zeros by default),
        which is how .tosa files carry VARIABLE declarations."""
        self._check_open()
        dt = parse_dtype(dtype)
        data = to_storage(np.zeros(tuple(shape)) if initial_value is None else initial_value, dt)
        if data.shape != tuple(shape):
            raise InvalidArgument(f"variable {name!r}: initial value has shape {data.shape}, declared {tuple(shape)}")
        return self._add(self._fresh("variable", name), shape, dt, data=data, variable=True, variable_name=name)

    def variable_read(self, var: Value, *, name: str | None = None) -> Value:
        """VARIABLE_READ: the variable's current value. Emitted as IDENTITY on the variable tensor
        (tosa-opt's form, which the validator and the CPU backend accept)."""
        self._check_variable(var)
        value = self._add(self._fresh("read", name), var.shape, var.dtype)
        self._operators.append(Operator(Op.IDENTITY, (var.name,), (value.name,)))
        return value

    def variable_write(self, var: Value, value: Operand) -> None:
        """VARIABLE_WRITE: store ``value`` (same shape and type) into the variable; emitted as IDENTITY
        whose output is the variable tensor."""
        self._check_variable(var)
        src = self._own(value, "variable_write") if is_value(value) else self.const(value, var.dtype)
        if (src.shape, src.dtype) != (var.shape, var.dtype):
            raise InvalidArgument(f"variable_write: {src!r} does not match variable {var.name!r} {list(var.shape)}")
        self._operators.append(Operator(Op.IDENTITY, (src.name,), (var.name,)))

    def _check_variable(self, var: Value) -> None:
        self._check_open()
        if not is_value(var) or not var.variable:
            raise InvalidArgument(f"{var!r} is not a variable (declare one with variable())")
        if var.owner is not self:
            raise InvalidArgument(
                f"variable {var.name!r} is accessed only in graph {var.owner.name!r}, which declares it"
            )


def _graph_types(graph: GraphMethods) -> list[tuple[tuple[int, ...], DType]]:
    return [(graph._tensors[n].shape, graph._tensors[n].dtype) for n in graph._outputs]
