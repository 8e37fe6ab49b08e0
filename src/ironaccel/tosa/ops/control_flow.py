"""Rules of COND_IF and WHILE_LOOP (EXT-CONTROLFLOW), and the graph-interface checks the engine calls.

A rule only sees the operator's own operands, not the graphs its attributes name. So the work is split:

* the rules (called like every other rule) check what the operands alone decide: COND_IF's condition
  holds one value; WHILE_LOOP's output list matches its input list;
* :func:`check_cond_if_interface` and :func:`check_while_loop_interface`, which the engine calls once it
  has resolved the named graphs (and validates their bodies itself), check the operands against the
  graphs' inputs and outputs and the nesting depth. Build the graph side with
  :meth:`GraphInterface.of` from an :class:`~ironaccel.tosa.ir.Block`.

Lists are compared element by element in count, shape (where both dims are known) and element type: the
specification compares the list shapes, and a graph cannot take a value of another type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..dtypes import DType
from ..ir import Block
from ..operators import Op
from .data_layout import known, product
from .rule import Context, TensorType, rule

Shape = tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class GraphInterface:
    """The inputs and outputs of a graph named by a control-flow attribute."""

    name: str
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]

    @classmethod
    def of(cls, block: Block) -> GraphInterface:
        def types(tensors: Sequence) -> tuple[TensorType, ...]:
            return tuple(TensorType(t.shape, t.dtype, t.name) for t in tensors)

        return cls(block.name, types(block.input_tensors), types(block.output_tensors))


def _mismatch(values: Sequence[TensorType], graph: Sequence[TensorType]) -> str | None:
    """Why two tensor lists differ, or None when they agree."""
    if len(values) != len(graph):
        return f"{len(values)} tensors against {len(graph)}"
    for i, (a, b) in enumerate(zip(values, graph, strict=True)):
        same = a.rank == b.rank and all(not known(x, y) or x == y for x, y in zip(a.shape, b.shape, strict=True))
        if not same or a.dtype != b.dtype:
            return f"element {i} is {list(a.shape)} {a.dtype} against {list(b.shape)} {b.dtype}"
    return None


def _check_list(ctx: Context, values: Sequence[TensorType], graph: Sequence[TensorType], rule_text: str) -> None:
    why = _mismatch(values, graph)
    ctx.error_if(why is not None, f"{rule_text}: {why}")


def _check_depth(ctx: Context, depth: int | None) -> None:
    if depth is not None:
        limit = ctx.level.max_nesting
        ctx.error_if(depth >= limit, f"ERROR_IF(nesting depth >= MAX_NESTING): depth {depth}, limit {limit}")


@rule(Op.COND_IF)
def cond_if(ctx: Context) -> list[Shape]:
    """condition (operand 0) holds exactly one value; the outputs are declared (their shapes are the
    graphs' outputs, which :func:`check_cond_if_interface` checks and returns)."""
    condition = ctx.inputs[0]  # its bool_t element type is the argument table's, checked by the engine
    size = product(condition.shape)
    ctx.error_if(
        known(size) and size != 1,
        f"ERROR_IF(tensor_size(shape(condition)) != 1): condition has shape {list(condition.shape)}",
        condition.name or None,
    )
    if ctx.outputs is None:
        ctx.error_if(True, "COND_IF: output_list must be declared (use check_cond_if_interface to get it)")
        return []
    return [out.shape for out in ctx.outputs]


def check_cond_if_interface(
    ctx: Context, then_graph: GraphInterface, else_graph: GraphInterface, depth: int | None = None
) -> list[Shape]:
    """All graph-level ERROR_IFs of COND_IF; returns the output shapes (then_graph's outputs).

    ``depth`` is the number of control-flow operators this COND_IF is nested in (0 in the main graph);
    when given, ERROR_IF(depth >= MAX_NESTING) is checked with ``ctx.level``.
    """
    _check_depth(ctx, depth)
    input_list = list(ctx.inputs[1:])
    _check_list(ctx, input_list, then_graph.inputs, "ERROR_IF(shapes of input_list != input shapes of then_graph)")
    _check_list(ctx, input_list, else_graph.inputs, "ERROR_IF(shapes of input_list != input shapes of else_graph)")
    output_list = list(ctx.outputs) if ctx.outputs is not None else list(then_graph.outputs)
    _check_list(ctx, output_list, then_graph.outputs, "ERROR_IF(shapes of output_list != output shapes of then_graph)")
    _check_list(ctx, output_list, else_graph.outputs, "ERROR_IF(shapes of output_list != output shapes of else_graph)")
    return [t.shape for t in then_graph.outputs]


@rule(Op.WHILE_LOOP)
def while_loop(ctx: Context) -> list[Shape]:
    """The loop carries its values: output_list has the shapes of input_list."""
    if ctx.outputs is not None:
        _check_list(ctx, ctx.inputs, ctx.outputs, "ERROR_IF(shapes of input_list != shapes of output_list)")
    return [t.shape for t in ctx.inputs]


def check_while_loop_interface(
    ctx: Context, cond_graph: GraphInterface, body_graph: GraphInterface, depth: int | None = None
) -> None:
    """All graph-level ERROR_IFs of WHILE_LOOP: the body maps the carried list onto itself, the
    condition graph takes the carried list and yields exactly one bool value. ``depth`` as for
    :func:`check_cond_if_interface`."""
    _check_depth(ctx, depth)
    input_list = list(ctx.inputs)
    _check_list(ctx, input_list, cond_graph.inputs, "ERROR_IF(shapes of input_list != input shapes of cond_graph)")
    _check_list(ctx, input_list, body_graph.inputs, "ERROR_IF(shapes of input_list != input shapes of body_graph)")
    _check_list(ctx, input_list, body_graph.outputs, "ERROR_IF(shapes of input_list != output shapes of body_graph)")
    outputs = cond_graph.outputs
    ctx.error_if(
        len(outputs) != 1 or (known(product(outputs[0].shape)) and product(outputs[0].shape) != 1),
        "ERROR_IF(tensor_size(output shape of cond_graph) != 1): cond_graph must yield one single-value tensor, "
        f"it yields {[list(t.shape) for t in outputs]}",
    )
    ctx.error_if(
        any(t.dtype != DType.BOOL for t in outputs),
        f"ERROR_IF(output type of cond_graph != bool_t): it yields {[str(t.dtype) for t in outputs]}",
    )
