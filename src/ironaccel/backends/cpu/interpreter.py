"""Runs a TOSA program on the host with the numpy kernels of :mod:`.kernel`.

:func:`load` does everything that depends only on the program, once: :mod:`.block_plan` finds the kernel
of every operator (a :class:`~ironaccel.tosa.errors.LoweringError` names the first one without), gives
every tensor of a block a slot number and works out after which operator each value is dead so a run
can drop it at once (peak memory is the live set, not every intermediate); :mod:`.folding` evaluates
operators whose inputs are all constants (constant folding). :meth:`CompiledProgram.run` then only moves
arrays between slots and calls kernels in the block's operator order, which TOSA already gives in a valid
order; load checks that every operand is produced before it is used. What a run takes from its caller
and gives back is checked by :mod:`.run_arguments`.

COND_IF and WHILE_LOOP run other blocks. A run keeps the blocks it is inside on an explicit stack, not
on Python's (see :meth:`CompiledProgram._execute_nested`), so a program nested as deep as TOSA allows runs
from any thread and any caller's depth; load refuses graphs that run themselves.

Variables live in a store that belongs to the :class:`CompiledProgram`: TOSA defines them as values
that persist across invocations of a graph, so a second ``run`` sees what the first one wrote.
Loading the same :class:`~ironaccel.tosa.ir.Program` twice gives two independent stores;
:meth:`CompiledProgram.reset_variables` restores the initial values. A tensor flagged ``variable``
stands for its variable everywhere: reading it as an operand reads the store, producing it writes the
store (tosa-opt writes VARIABLE_READ / VARIABLE_WRITE as IDENTITY operators on such tensors).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

import numpy as np

from ...core.errors import InternalError, IronAccelError
from ...tosa.errors import ValidationError
from ...tosa.ir import Block, Operator, Program, Tensor
from ...tosa.operators import Op
from .block_plan import (
    BlockPlan,
    FastStep,
    OpContext,
    Step,
    plan_block,
    refuse_recursion,
    storage_matches,
    variable_key,
)
from .folding import ConstantFolder
from .kernel import kernel_for
from .ops.control_flow import Blocks
from .parallel import single_threaded_blas
from .run_arguments import Check, check_inputs_in_detail, destination_slots, owned, with_deadline

# Operators that name a variable operand without reading it.
_NAMES_VARIABLE = frozenset({Op.VARIABLE, Op.VARIABLE_WRITE})


@dataclasses.dataclass(frozen=True)
class FoldedGraph:
    """See :meth:`CompiledProgram.folded_main`. ``stateful``: the program has variables or other blocks
    (control flow), whose semantics are more than the operator list."""

    block: Block
    operators: tuple[Operator, ...]
    constants: dict[str, np.ndarray]
    stateful: bool


class _RunState(threading.local):
    check: Check | None = None
    destinations: dict[int, np.ndarray] | None = None  # main-graph output slot -> caller's buffer


class CompiledProgram:
    """A program prepared for the CPU: run it any number of times, from any thread."""

    folded_bytes: int  # what the results of constant folding hold of their own (see .folding), set at load

    def __init__(self, program: Program) -> None:
        self.program = program
        self.main = program.main
        self._plans: dict[str, BlockPlan] = {}
        self._variables: dict[str, np.ndarray] = {}
        self._variable_decls: dict[str, Tensor] = {}
        self._state = _RunState()
        # Per main-graph input: its storage dtype and its shape when fully fixed (else None: checked in detail).
        self._input_types = tuple(
            (t.dtype.numpy, None if t.unranked or any(d < 0 for d in t.shape) else tuple(t.shape))
            for t in self.main.input_tensors
        )
        self._plan_all()
        self.reset_variables()
        # Runs that share the variable store are serialised; programs without variables run in parallel.
        self._lock = threading.Lock() if self._variable_decls else None

    # -- public ------------------------------------------------------------------------------------
    @property
    def input_tensors(self) -> list[Tensor]:
        return self.main.input_tensors

    @property
    def has_variables(self) -> bool:
        """Whether runs carry state from one to the next (TOSA variables)."""
        return bool(self._variable_decls)

    @property
    def output_tensors(self) -> list[Tensor]:
        return self.main.output_tensors

    def run(
        self,
        inputs: Sequence[np.ndarray],
        *,
        check: Check | None = None,
        deadline: float | None = None,
        destinations: Sequence[np.ndarray | None] | None = None,
    ) -> list[np.ndarray]:
        """Run the main block on ``inputs`` (storage form, declared shapes); outputs in storage form.

        ``check`` is called before every operator (and so before every loop iteration) and may raise to
        abandon the run (a cancellation hook); ``deadline`` is a :func:`time.monotonic` instant after
        which the run stops with :class:`~ironaccel.core.errors.DeadlineExpired`. ``destinations``
        (one per output, or None) are arrays of the declared type and shape that kernels may write the
        output into directly, saving a copy; an output returned as its destination array is that array.
        The caller guarantees that no destination overlaps an input or another destination.
        """
        args = self._check_inputs(inputs)
        if deadline is not None:
            check = with_deadline(check, deadline)
        state = self._state
        previous, previous_dest = state.check, state.destinations
        state.check = check
        state.destinations = (
            destination_slots(self._plans[self.main.name], self.main.output_tensors, destinations)
            if destinations
            else None
        )
        try:
            with single_threaded_blas():
                if self._lock is None:
                    outputs = self._execute(self._plans[self.main.name], args)
                else:
                    with self._lock:
                        outputs = self._execute(self._plans[self.main.name], args)
        finally:
            state.check, state.destinations = previous, previous_dest
        return owned(outputs, args, destinations)

    def folded_main(self) -> FoldedGraph:
        """The main block as a run executes it: the operators left after constant folding, in order, and
        the value of every constant tensor (declared, or computed at load) by name. For code generators
        that lower the prepared program further (:mod:`.native`)."""
        plan = self._plans[self.main.name]
        constants = {name: value for name, slot in plan.slots.items() if (value := plan.template[slot]) is not None}
        return FoldedGraph(
            self.main,
            tuple(step.ctx.operator for step in plan.steps),
            constants,
            stateful=bool(self._variable_decls) or len(self._plans) > 1,
        )

    def reset_variables(self) -> None:
        """Give every variable its initial value again (variables without one become unwritten)."""
        self._variables = {
            key: np.array(decl.data, copy=True) for key, decl in self._variable_decls.items() if decl.data is not None
        }

    def variables(self) -> dict[str, np.ndarray]:
        """A copy of the current variable values, by variable name."""
        return {key: value.copy() for key, value in self._variables.items()}

    # -- load --------------------------------------------------------------------------------------
    def _plan_all(self) -> None:
        folder = ConstantFolder(self.program)
        pending = [self.main.name]
        while pending:
            name = pending.pop()
            if name in self._plans:
                continue
            try:
                block = self.program.block(name)
            except KeyError:
                raise ValidationError(f"control flow refers to a missing block {name!r}") from None
            for tensor in block.tensors:
                if tensor.variable:
                    self._declare_variable(tensor)
            # kernel_for is looked up in this module at each load, so a caller may substitute it (tests that
            # watch what the kernels hold do).
            self._plans[name] = plan_block(self, block, kernel_for, folder.fold)
            for operator in block.operators:
                attribute = operator.attribute
                if operator.op is Op.COND_IF:
                    pending += [attribute.then_graph, attribute.else_graph]
                elif operator.op is Op.WHILE_LOOP:
                    pending += [attribute.cond_graph, attribute.body_graph]
        refuse_recursion(self._plans)
        self.folded_bytes = folder.folded_bytes

    def _declare_variable(self, tensor: Tensor) -> None:
        key = variable_key(tensor)
        known = self._variable_decls.get(key)
        if known is None or (known.data is None and tensor.data is not None):
            self._variable_decls[key] = tensor

    # -- run ---------------------------------------------------------------------------------------
    def _check_inputs(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        # Inputs of the declared dtype and (fixed) shape pass here; anything else gets the detailed check.
        expected = self._input_types
        if len(inputs) == len(expected):
            for value, (dtype, shape) in zip(inputs, expected, strict=True):
                if (
                    not isinstance(value, np.ndarray)
                    or (value.dtype is not dtype and value.dtype != dtype)
                    or shape is None
                    or value.shape != shape
                ):
                    break
            else:
                return list(inputs)
        return check_inputs_in_detail(self.main.input_tensors, inputs)

    def _run_block(self, name: str, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self._execute(self._child(name, values), values)

    def _child(self, name: str, values: Sequence[np.ndarray]) -> BlockPlan:
        """The plan of the graph ``name`` a control-flow operator runs on ``values``."""
        plan = self._plans.get(name)
        if plan is None:
            raise InternalError(f"block {name!r} was not planned")
        if len(values) != len(plan.inputs):
            raise ValidationError(
                f"block {name!r} takes {len(plan.inputs)} values, was given {len(values)}", block=name
            )
        return plan

    def _execute(self, plan: BlockPlan, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        # IEEE special values are data here, not accidents: numpy's overflow / invalid warnings are muted.
        with np.errstate(all="ignore"):
            if len(plan.segments) > 1:
                return self._execute_nested(plan, args)
            # No control flow, the common case: the operators in order, inline.
            values = plan.template.copy()
            for s, value in zip(plan.inputs, args, strict=True):
                values[s] = value
            self._execute_steps(plan.fast, values)
            return [self._read_variable(s) if isinstance(s, str) else values[s] for s in plan.outputs]  # type: ignore[misc]

    def _execute_nested(self, plan: BlockPlan, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run a block with COND_IF / WHILE_LOOP operators. Each block being run is a generator on an
        explicit stack, suspended at the control-flow operator that asked for a graph; the graph runs
        as a new generator on top. Why not plain recursion (a control-flow kernel calling the
        interpreter): each level then took five Python frames, so TOSA's 256 levels need over 1,300
        frames, past Python's default limit of 1,000 before the caller's own frames are counted. Raising
        that limit is process-wide and lets C-level recursion elsewhere overflow a thread's stack. Here
        a run takes the same few frames at any depth; the stack is bounded by the program's blocks,
        since load refuses recursive graphs."""
        check = self._state.check
        stack = [self._block_steps(plan, args)]
        sent: list[np.ndarray] | None = None
        while True:
            try:
                name, values = stack[-1].send(sent)  # type: ignore[arg-type]  # None starts a generator
            except StopIteration as done:
                stack.pop()
                if not stack:
                    return done.value
                sent = done.value
                continue
            # Also checked on entry to a graph: a loop whose graphs have no operator stays stoppable.
            if check is not None:
                check()
            stack.append(self._block_steps(self._child(name, values), values))
            sent = None

    def _block_steps(self, plan: BlockPlan, args: Sequence[np.ndarray]) -> Blocks:
        """One run of ``plan`` as a generator: it yields (graph, values) where a control-flow operator
        runs a graph, is sent that graph's outputs, and returns the block's outputs."""
        values = self._frame(plan, args)
        for fast, control in plan.segments:
            self._execute_steps(fast, values)
            if control is not None:
                assert control.blocks is not None
                operands = self._operands(control, values)
                results = yield from control.blocks(control.ctx.operator, operands)
                self._store_results(control, values, results)
        return self._block_outputs(plan, values)

    def _frame(self, plan: BlockPlan, args: Sequence[np.ndarray]) -> list[np.ndarray | None]:
        values = plan.template.copy()
        for s, value in zip(plan.inputs, args, strict=True):
            values[s] = value
        return values

    def _block_outputs(self, plan: BlockPlan, values: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self._read_variable(s) if isinstance(s, str) else values[s] for s in plan.outputs]  # type: ignore[misc]

    def _execute_steps(self, fast: tuple[FastStep, ...], values: list[np.ndarray | None]) -> None:
        """Run the operators ``fast`` (none of them control flow) on the slots ``values``."""
        check = self._state.check
        ndarray = np.ndarray
        for kernel, ctx, inputs, out, dtype, shape, release, general in fast:
            if check is not None:
                check()
            if general is not None:
                self._general_step(general, values)
                continue
            try:
                results = kernel(ctx, [values[s] for s in inputs])
            except IronAccelError:
                raise
            except Exception as exc:
                raise InternalError(f"{ctx.where()}: kernel failed: {type(exc).__name__}: {exc}") from exc
            # The declared type and shape of the result, checked inline: this runs once per operator.
            if len(results) != 1:
                _check_results(ctx, results)
            value = results[0]
            if (
                not isinstance(value, ndarray)
                or (value.dtype is not dtype and value.dtype != dtype)
                or (shape is not None and value.shape != shape)
            ):
                _check_results(ctx, results)
            values[out] = value
            for s in release:
                values[s] = None

    def _general_step(self, step: Step, values: list[np.ndarray | None]) -> None:
        """One step with variables or several results (the loop above handles the common kind inline)."""
        operands = self._operands(step, values)
        try:
            results = step.kernel(step.ctx, operands)
        except IronAccelError:
            raise
        except Exception as exc:
            raise InternalError(f"{step.ctx.where()}: kernel failed: {type(exc).__name__}: {exc}") from exc
        self._store_results(step, values, results)

    def _operands(self, step: Step, values: list[np.ndarray | None]) -> list[np.ndarray]:
        operands = [values[s] for s in step.inputs]
        for position, key in step.read_vars:
            # Declaring and writing may name a variable that holds no value yet.
            operands[position] = (
                self._variables.get(key) if step.ctx.operator.op in _NAMES_VARIABLE else self._read_variable(key)
            )
        return operands  # type: ignore[return-value]

    def _store_results(self, step: Step, values: list[np.ndarray | None], results: list[np.ndarray]) -> None:
        """Check ``results`` against the step's declarations, then put them in their slots and variables."""
        expect = step.expect
        if len(results) != len(expect):
            _check_results(step.ctx, results)
        for (dtype, shape), value in zip(expect, results, strict=True):
            if not isinstance(value, np.ndarray) or value.dtype != dtype or (shape and value.shape != shape[0]):
                _check_results(step.ctx, results)
        for s, value in zip(step.outputs, results, strict=True):
            if s >= 0:
                values[s] = value
        for position, key in step.write_vars:
            self._write_variable(key, results[position])
        for s in step.release:
            values[s] = None

    def _read_variable(self, key: str) -> np.ndarray:
        value = self._variables.get(key)
        if value is None:
            if key not in self._variable_decls:
                raise ValidationError(f"variable {key!r} is not declared", unpredictable=True)
            raise ValidationError(f"variable {key!r} is read before it is written", unpredictable=True)
        return value

    def _write_variable(self, key: str, value: np.ndarray) -> None:
        decl = self._variable_decls.get(key)
        if decl is None:
            raise ValidationError(f"variable {key!r} is not declared", unpredictable=True)
        if not storage_matches(decl, value):
            raise ValidationError(
                f"variable {key!r} is {decl.dtype}{list(decl.shape)}, written with {value.dtype}{list(value.shape)}",
                unpredictable=True,
            )
        stored = np.array(value, copy=True)
        stored.flags.writeable = False
        self._variables[key] = stored


def _check_results(ctx: OpContext, results: list[np.ndarray]) -> None:
    decls = ctx.outputs
    if len(results) != len(decls):
        raise InternalError(f"{ctx.where()}: kernel returned {len(results)} results for {len(decls)} outputs")
    for decl, value in zip(decls, results, strict=True):
        if not isinstance(value, np.ndarray) or not storage_matches(decl, value):
            got = f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__
            raise InternalError(
                f"{ctx.where()}: kernel returned {got} for {decl.name!r} declared {decl.dtype}{list(decl.shape)}"
            )


def load(program: Program) -> CompiledProgram:
    """Prepare ``program`` for the CPU (kernel lookup, constant folding, liveness); see the module doc."""
    return CompiledProgram(program)
