"""How the interpreter prepares one block of a program at load: slots, steps, liveness, and its kernel contexts.

:func:`plan_block` gives every tensor of a block a slot number (constants sit in their slots in the
plan's ``template``), finds the kernel of every operator (a
:class:`~ironaccel.tosa.errors.LoweringError` names the first one without), checks that every operand is
produced before it is used (TOSA already lists operators in a valid order), offers each operator whose
operands are all constants to the caller's folding, and marks after which step each slot is dead, so a
run drops a value at once (peak memory is the live set, not every intermediate). The result, a
:class:`BlockPlan`, holds the steps twice: as :class:`Step` records, and unpacked into the tuples the run
loop reads (:data:`FastStep`), cut at every COND_IF / WHILE_LOOP. :func:`refuse_recursion` then checks the
blocks' call graph once they are all planned.

A tensor flagged ``variable`` has no slot: it stands for its variable (:func:`variable_key`), which a
step reads from or writes to the program's store. A plan is built once and shared by every run; only
:class:`OpContext`'s cache is written after load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from ...tosa.errors import LoweringError, ValidationError
from ...tosa.ir import Block, Operator, Tensor
from ...tosa.operators import Op
from .kernel import Kernel
from .ops.control_flow import BLOCK_RUNNERS, Blocks

if TYPE_CHECKING:
    from .interpreter import CompiledProgram

T = TypeVar("T")

# The attribute fields naming the graphs a control-flow operator runs.
_GRAPH_FIELDS = {Op.COND_IF: ("then_graph", "else_graph"), Op.WHILE_LOOP: ("cond_graph", "body_graph")}


def variable_key(tensor: Tensor) -> str:
    """The name a variable tensor is stored under: its variable name, else its tensor name."""
    return tensor.variable_name or tensor.name


def storage_matches(decl: Tensor, value: np.ndarray) -> bool:
    """Whether ``value`` has the storage dtype of ``decl`` and its shape, where the declaration fixes it."""
    if value.dtype != decl.dtype.numpy:
        return False
    if decl.unranked or any(d < 0 for d in decl.shape):
        return True
    return value.shape == decl.shape


def _is_constant(tensor: Tensor) -> bool:
    return tensor.data is not None and not tensor.variable


class OpContext:
    """The :class:`~.kernel.KernelContext` of one operator; built at load, shared by every run. Its hooks
    (blocks, variables, the caller's output buffers) go to the :class:`CompiledProgram` that planned it."""

    __slots__ = (
        "_cache",
        "_compiled",
        "_offers",
        "block",
        "constants",
        "index",
        "inputs",
        "operator",
        "output_slots",
        "outputs",
        "program",
    )

    warnings_muted = True  # kernels run under np.errstate(all="ignore") (see CompiledProgram._execute)

    def __init__(self, compiled: CompiledProgram, block: Block, index: int, operator: Operator) -> None:
        self._compiled = compiled
        self._offers = block is compiled.main  # narrowed at planning to operators producing a program output
        self._cache: dict[Hashable, object] = {}
        self.block = block
        self.index = index
        self.operator = operator
        self.program = compiled.program
        self.inputs = tuple(block.tensor(n) for n in operator.inputs)
        self.outputs = tuple(block.tensor(n) for n in operator.outputs)
        self.constants: tuple[bool, ...] = ()  # per operand: a program constant (set when planned)
        self.output_slots: tuple[int, ...] = ()

    def is_constant(self, index: int) -> bool:
        return index < len(self.constants) and self.constants[index]

    def cached(self, key: Hashable, make: Callable[[], T]) -> T:
        try:
            return self._cache[key]  # type: ignore[return-value]
        except KeyError:
            value = self._cache[key] = make()  # two racing runs may both make it: same value, last one kept
            return value

    def destination(self, index: int) -> np.ndarray | None:
        if not self._offers:
            return None
        wanted = self._compiled._state.destinations
        return wanted.get(self.output_slots[index]) if wanted else None

    def run_block(self, name: str, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self._compiled._run_block(name, values)

    def variable(self, name: str) -> np.ndarray:
        return self._compiled._read_variable(name)

    def set_variable(self, name: str, value: np.ndarray) -> None:
        self._compiled._write_variable(name, value)

    def where(self) -> str:
        return f"block {self.block.name!r} operator #{self.index} {self.operator.op.name}"


@dataclasses.dataclass
class Step:
    kernel: Kernel
    ctx: OpContext
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    read_vars: tuple[tuple[int, str], ...]  # (operand position, variable) read from the store
    write_vars: tuple[tuple[int, str], ...]  # (result position, variable) written to the store
    release: tuple[int, ...] = ()  # slots dead after this step
    # Per result: its storage dtype, and (shape,) when the declaration fixes it, else ().
    expect: tuple[tuple[np.dtype, tuple[tuple[int, ...], ...]], ...] = ()
    # COND_IF / WHILE_LOOP: the generator form of the operator (ops/control_flow.py), which the run
    # drives from its explicit stack instead of calling the kernel.
    blocks: Callable[[Operator, Sequence[np.ndarray]], Blocks] | None = None


# What the run loop needs of a step, unpacked once at load: kernel, context, operand slots, result slot,
# result dtype, result shape (None: not fixed by the declaration), slots to release, and the step itself
# when it needs the general path (variables, several results, a result that is not a slot), else None.
FastStep = tuple[
    Kernel, OpContext, tuple[int, ...], int, np.dtype, tuple[int, ...] | None, tuple[int, ...], Step | None
]


@dataclasses.dataclass
class BlockPlan:
    block: Block
    inputs: tuple[int, ...]
    outputs: tuple[int | str, ...]  # a slot, or the name of a variable read at the end
    template: list[np.ndarray | None]  # constants in their slots, None elsewhere
    steps: list[Step]
    produced: frozenset[int] = frozenset()  # slots some step writes at run time
    fast: tuple[FastStep, ...] = ()
    slots: dict[str, int] = dataclasses.field(default_factory=dict)  # tensor name -> slot
    # ``fast`` cut after each COND_IF / WHILE_LOOP: (the steps before it, the control-flow step), and last
    # (the steps after the last one, None). A block without control flow is one segment.
    segments: tuple[tuple[tuple[FastStep, ...], Step | None], ...] = ()


# Offered every step whose operands are all constants, with the block's template and its constant slots:
# True when it put the step's results into the template (and their slots into the set) instead.
Fold = Callable[[Step, list[np.ndarray | None], set[int]], bool]


def plan_block(
    compiled: CompiledProgram, block: Block, kernels: Callable[[Op], Kernel | None], fold: Fold
) -> BlockPlan:
    """The plan of ``block`` (see the module doc), with the kernels ``kernels`` finds and the steps ``fold``
    does not take. ``compiled`` is the program the operators' contexts serve."""
    slots: dict[str, int] = {}
    template: list[np.ndarray | None] = []
    constant: set[int] = set()

    def slot(name: str) -> int:
        if name not in slots:
            slots[name] = len(template)
            template.append(None)
        return slots[name]

    variables = {t.name: variable_key(t) for t in block.tensors if t.variable}
    for tensor in block.tensors:
        if _is_constant(tensor):
            template[slot(tensor.name)] = tensor.data
            constant.add(slots[tensor.name])
    defined = set(slots) | set(variables)
    for name in block.inputs:
        _declared(block, name, "block input")
        defined.add(name)
    input_slots = tuple(slot(n) for n in block.inputs)

    steps: list[Step] = []
    for index, operator in enumerate(block.operators):
        fn = kernels(operator.op)
        if fn is None:
            raise LoweringError(
                f"the CPU backend has no kernel for {operator.op.name} (block {block.name!r}, operator #{index})"
            )
        for name in operator.inputs:
            _declared(block, name, f"operator #{index} {operator.op.name} operand", index)
            if name not in defined:
                raise ValidationError(
                    f"operand {name!r} is used before any operator produces it",
                    op_index=index,
                    op=operator.op.name,
                    block=block.name,
                )
        for name in operator.outputs:
            _declared(block, name, f"operator #{index} {operator.op.name} result", index)
        defined.update(operator.outputs)
        ctx = OpContext(compiled, block, index, operator)
        ctx.constants = tuple(n not in variables and slots.get(n) in constant for n in operator.inputs)
        step = Step(
            fn,
            ctx,
            tuple(-1 if n in variables else slot(n) for n in operator.inputs),
            tuple(-1 if n in variables else slot(n) for n in operator.outputs),
            tuple((i, variables[n]) for i, n in enumerate(operator.inputs) if n in variables),
            tuple((i, variables[n]) for i, n in enumerate(operator.outputs) if n in variables),
            blocks=BLOCK_RUNNERS.get(operator.op),
        )
        if not fold(step, template, constant):
            steps.append(step)
    for name in block.outputs:
        _declared(block, name, "block output")
        if name not in defined:
            raise ValidationError(f"block output {name!r} is never produced", block=block.name)
    outputs = tuple(variables[n] if n in variables else slot(n) for n in block.outputs)
    _plan_releases(steps, input_slots, outputs)
    for step in steps:
        step.ctx.output_slots = step.outputs
        step.expect = tuple(
            (t.dtype.numpy, () if t.unranked or any(d < 0 for d in t.shape) else (tuple(t.shape),))
            for t in step.ctx.outputs
        )
    if block is compiled.main:
        program_outputs = {s for s in outputs if isinstance(s, int)}
        for step in steps:
            step.ctx._offers = any(s in program_outputs for s in step.outputs)
    produced = frozenset(s for step in steps for s in step.outputs if s >= 0)
    fast = tuple(_fast(s) for s in steps)
    segments, start = [], 0
    for position, step in enumerate(steps):
        if step.blocks is not None:
            segments.append((fast[start:position], step))
            start = position + 1
    segments.append((fast[start:], None))
    return BlockPlan(block, input_slots, outputs, template, steps, produced, fast, slots, tuple(segments))


def _declared(block: Block, name: str, what: str, index: int | None = None) -> None:
    if name not in block.tensor_map:
        raise ValidationError(f"{what} {name!r} has no tensor declaration", op_index=index, block=block.name)


def _plan_releases(steps: list[Step], inputs: tuple[int, ...], outputs: tuple[int | str, ...]) -> None:
    """Mark each slot dead after its last reader (or at once after its producer if nobody reads it)."""
    keep = {s for s in outputs if isinstance(s, int)}
    last: dict[int, int] = {s: -1 for s in inputs}
    for index, step in enumerate(steps):
        for s in (*step.inputs, *step.outputs):
            if s >= 0:
                last[s] = index
    by_step: dict[int, list[int]] = {}
    for s, index in last.items():
        if s not in keep and index >= 0:
            by_step.setdefault(index, []).append(s)
    for index, step in enumerate(steps):
        step.release = tuple(by_step.get(index, ()))


def _fast(step: Step) -> FastStep:
    single = (
        len(step.outputs) == 1
        and step.outputs[0] >= 0
        and not step.read_vars
        and not step.write_vars
        and step.blocks is None
    )
    dtype, shape = step.expect[0] if step.expect else (None, ())
    return (
        step.kernel,
        step.ctx,
        step.inputs,
        step.outputs[0] if single else -1,
        dtype,
        shape[0] if shape else None,
        step.release,
        None if single else step,
    )


def _graphs_of(plan: BlockPlan) -> list[str]:
    """The graphs the control-flow operators of ``plan`` run, in operator order."""
    names = []
    for step in plan.steps:
        operator = step.ctx.operator
        if step.blocks is not None:
            names += [getattr(operator.attribute, field) for field in _GRAPH_FIELDS[operator.op]]
    return names


def refuse_recursion(plans: dict[str, BlockPlan]) -> None:
    """Raise ValidationError if a graph runs itself, directly or through others: TOSA forbids it, and a
    run would nest without end (each level holding its values) until memory ran out. Depth-first,
    with an explicit stack: the call graph may be as deep as the program has blocks."""
    done: set[str] = set()
    for root in plans:
        if root in done:
            continue
        path, on_path = [root], {root}
        pending = [iter(_graphs_of(plans[root]))]
        while pending:
            child = next(pending[-1], None)
            if child is None:
                pending.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
            elif child in on_path:
                cycle = " -> ".join(repr(n) for n in (*path[path.index(child) :], child))
                raise ValidationError(f"recursive graph: {cycle} (a COND_IF / WHILE_LOOP graph runs itself)")
            elif child not in done and child in plans:
                path.append(child)
                on_path.add(child)
                pending.append(iter(_graphs_of(plans[child])))
