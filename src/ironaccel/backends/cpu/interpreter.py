"""Runs a TOSA program on the host with the numpy kernels of :mod:`.kernel`.

:func:`load` does everything that depends only on the program, once: it finds the kernel of every
operator (a :class:`~ironaccel.tosa.errors.LoweringError` names the first one without), gives every
tensor of a block a slot number, evaluates operators whose inputs are all constants (constant
folding), and works out after which operator each value is dead so a run can drop it at once (peak
memory is the live set, not every intermediate). :meth:`CompiledProgram.run` then only moves arrays
between slots and calls kernels in the block's operator order, which TOSA already gives in a valid
order; load checks that every operand is produced before it is used.

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
import time
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np

from ...core.errors import DeadlineExpired, InternalError, InvalidArgument, IronAccelError
from ...tosa.errors import LoweringError, ValidationError
from ...tosa.ir import Block, Operator, Program, Tensor
from ...tosa.operators import Op
from .kernel import Kernel, kernel_for
from .ops.control_flow import BLOCK_RUNNERS, Blocks
from .parallel import single_threaded_blas

T = TypeVar("T")

# Operators never evaluated at load: they have effects, or they run other blocks.
_NOT_FOLDABLE = frozenset({Op.COND_IF, Op.WHILE_LOOP, Op.VARIABLE, Op.VARIABLE_READ, Op.VARIABLE_WRITE, Op.CUSTOM})
# The attribute fields naming the graphs a control-flow operator runs.
_GRAPH_FIELDS = {Op.COND_IF: ("then_graph", "else_graph"), Op.WHILE_LOOP: ("cond_graph", "body_graph")}
# Operators that name a variable operand without reading it.
_NAMES_VARIABLE = frozenset({Op.VARIABLE, Op.VARIABLE_WRITE})
# Folding trades memory for time; a constant that big (a TILE of a small constant, say) stays lazy.
FOLD_LIMIT_BYTES = 64 << 20
# Folded results stay with the program, so what folding adds in all is bounded as well: by the program's
# estimated peak working set (tosa.working_set, which the runtime checks against the caller's bounds
# before load), and never beyond this. Past it, the remaining foldable operators run at run time.
FOLD_TOTAL_LIMIT_BYTES = 256 << 20
_FOLDED_FREE = frozenset({Op.CONST, Op.CONST_SHAPE, Op.IDENTITY})

Check = Callable[[], None]


def variable_key(tensor: Tensor) -> str:
    """The name a variable tensor is stored under: its variable name, else its tensor name."""
    return tensor.variable_name or tensor.name


def _is_constant(tensor: Tensor) -> bool:
    return tensor.data is not None and not tensor.variable


def _storage_matches(decl: Tensor, value: np.ndarray) -> bool:
    if value.dtype != decl.dtype.numpy:
        return False
    if decl.unranked or any(d < 0 for d in decl.shape):
        return True
    return value.shape == decl.shape


class _OpContext:
    """The :class:`~.kernel.KernelContext` of one operator; built at load, shared by every run."""

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

    warnings_muted = True  # kernels run under np.errstate(all="ignore") (see _execute)

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
class _Step:
    kernel: Kernel
    ctx: _OpContext
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
_Fast = tuple[Kernel, _OpContext, tuple[int, ...], int, np.dtype, tuple[int, ...] | None, tuple[int, ...], _Step | None]


@dataclasses.dataclass
class _BlockPlan:
    block: Block
    inputs: tuple[int, ...]
    outputs: tuple[int | str, ...]  # a slot, or the name of a variable read at the end
    template: list[np.ndarray | None]  # constants in their slots, None elsewhere
    steps: list[_Step]
    produced: frozenset[int] = frozenset()  # slots some step writes at run time
    fast: tuple[_Fast, ...] = ()
    slots: dict[str, int] = dataclasses.field(default_factory=dict)  # tensor name -> slot
    # ``fast`` cut after each COND_IF / WHILE_LOOP: (the steps before it, the control-flow step), and last
    # (the steps after the last one, None). A block without control flow is one segment.
    segments: tuple[tuple[tuple[_Fast, ...], _Step | None], ...] = ()


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

    def __init__(self, program: Program) -> None:
        self.program = program
        self.main = program.main
        self._plans: dict[str, _BlockPlan] = {}
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
            check = _with_deadline(check, deadline)
        state = self._state
        previous, previous_dest = state.check, state.destinations
        state.check = check
        state.destinations = self._destination_slots(destinations) if destinations else None
        try:
            with single_threaded_blas():
                if self._lock is None:
                    outputs = self._execute(self._plans[self.main.name], args)
                else:
                    with self._lock:
                        outputs = self._execute(self._plans[self.main.name], args)
        finally:
            state.check, state.destinations = previous, previous_dest
        return _owned(outputs, args, destinations)

    def _destination_slots(self, destinations: Sequence[np.ndarray | None]) -> dict[int, np.ndarray] | None:
        plan = self._plans[self.main.name]
        if len(destinations) != len(plan.outputs):
            raise InvalidArgument(f"{len(destinations)} destinations for {len(plan.outputs)} outputs")
        found: dict[int, np.ndarray] = {}
        for slot, decl, dest in zip(plan.outputs, self.main.output_tensors, destinations, strict=True):
            # Only a slot an operator produces (not an input, a constant or a variable), only once.
            if dest is None or not isinstance(slot, int) or slot in found or slot not in plan.produced:
                continue
            if dest.dtype == decl.dtype.numpy and dest.shape == tuple(decl.shape) and dest.flags.writeable:
                found[slot] = dest
        return found or None

    def folded_main(self) -> FoldedGraph:
        """The main block as a run executes it: the operators left after constant folding, in order, and
        the value of every constant tensor (declared, or computed at load) by name. For code generators
        that lower the prepared program further (:mod:`.native`)."""
        plan = self._plans[self.main.name]
        constants = {
            name: value for name, slot in plan.slots.items() if (value := plan.template[slot]) is not None
        }
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
        pending = [self.main.name]
        while pending:
            name = pending.pop()
            if name in self._plans:
                continue
            try:
                block = self.program.block(name)
            except KeyError:
                raise ValidationError(f"control flow refers to a missing block {name!r}") from None
            self._plans[name] = self._plan(block)
            for operator in block.operators:
                attribute = operator.attribute
                if operator.op is Op.COND_IF:
                    pending += [attribute.then_graph, attribute.else_graph]
                elif operator.op is Op.WHILE_LOOP:
                    pending += [attribute.cond_graph, attribute.body_graph]
        _refuse_recursion(self._plans)

    def _plan(self, block: Block) -> _BlockPlan:
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
            if tensor.variable:
                self._declare_variable(tensor)
            elif _is_constant(tensor):
                template[slot(tensor.name)] = tensor.data
                constant.add(slots[tensor.name])
        defined = set(slots) | set(variables)
        for name in block.inputs:
            _declared(block, name, "block input")
            defined.add(name)
        input_slots = tuple(slot(n) for n in block.inputs)

        steps: list[_Step] = []
        for index, operator in enumerate(block.operators):
            fn = kernel_for(operator.op)
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
            ctx = _OpContext(self, block, index, operator)
            ctx.constants = tuple(n not in variables and slots.get(n) in constant for n in operator.inputs)
            step = _Step(
                fn,
                ctx,
                tuple(-1 if n in variables else slot(n) for n in operator.inputs),
                tuple(-1 if n in variables else slot(n) for n in operator.outputs),
                tuple((i, variables[n]) for i, n in enumerate(operator.inputs) if n in variables),
                tuple((i, variables[n]) for i, n in enumerate(operator.outputs) if n in variables),
                blocks=BLOCK_RUNNERS.get(operator.op),
            )
            if not self._fold(step, template, constant):
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
        if block is self.main:
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
        return _BlockPlan(block, input_slots, outputs, template, steps, produced, fast, slots, tuple(segments))

    def _declare_variable(self, tensor: Tensor) -> None:
        key = variable_key(tensor)
        known = self._variable_decls.get(key)
        if known is None or (known.data is None and tensor.data is not None):
            self._variable_decls[key] = tensor

    # Folding's account for the whole program (instance attributes from the first fold on): the bytes
    # folded results hold of their own, and what they may hold in all (see FOLD_TOTAL_LIMIT_BYTES).
    folded_bytes = 0
    _fold_budget: int | None = None

    def _fold(self, step: _Step, template: list[np.ndarray | None], constant: set[int]) -> bool:
        """Evaluate ``step`` now if all its operands are constants; True when it became constants.

        Never allocates past the program's folding budget: an operator whose results could take more
        than what is left of it stays for the run. ``folded_bytes`` grows by what the results hold
        of their own (a view of a constant holds nothing)."""
        ctx = step.ctx
        if ctx.operator.op in _NOT_FOLDABLE or step.read_vars or step.write_vars:
            return False
        if not all(s in constant for s in step.inputs):
            return False
        if any(t.unranked or any(d < 0 for d in t.shape) for t in ctx.outputs):
            return False
        need = sum(t.size * t.dtype.numpy.itemsize for t in ctx.outputs)
        if need > FOLD_LIMIT_BYTES:
            return False
        operands = [template[s] for s in step.inputs]
        op = ctx.operator.op
        # CONST gives its tensor's data, IDENTITY its operand, and RESHAPE views a C-contiguous operand: they
        # cost no bytes, within any budget.
        free = op in _FOLDED_FREE or (op is Op.RESHAPE and operands[0] is not None and operands[0].flags.c_contiguous)
        if not free:
            if self._fold_budget is None:  # once per program, at its first fold that may cost bytes
                from ...tosa.working_set import estimate

                try:
                    peak = estimate(self.program).peak_bytes
                except ValidationError:
                    peak = 0  # the load reports what is wrong; meanwhile nothing is folded that costs bytes
                self._fold_budget = min(FOLD_TOTAL_LIMIT_BYTES, peak)
            if self.folded_bytes + need > self._fold_budget:
                return False
        try:
            with np.errstate(all="ignore"):
                results = step.kernel(ctx, operands)
        except Exception:  # noqa: BLE001 - leave it to the run, which reports the error with its context
            return False
        if len(results) != len(step.outputs) or not all(
            isinstance(r, np.ndarray) and _storage_matches(t, r) for t, r in zip(ctx.outputs, results, strict=True)
        ):
            return False
        if op not in (Op.CONST, Op.CONST_SHAPE):  # their data is the program's already
            owned = [r for r in results if not any(np.may_share_memory(r, x) for x in operands if x is not None)]
            self.folded_bytes += sum(r.nbytes for r in owned)
        for s, value in zip(step.outputs, results, strict=True):
            if value.flags.writeable:  # a fresh result: freeze a view of it, constants are shared by runs
                value = value.view()
                value.flags.writeable = False
            template[s] = value
            constant.add(s)
        return True

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
        return self._check_inputs_in_detail(inputs)

    def _check_inputs_in_detail(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        decls = self.main.input_tensors
        if len(inputs) != len(decls):
            names = ", ".join(repr(t.name) for t in decls)
            raise InvalidArgument(f"the program takes {len(decls)} inputs ({names}), got {len(inputs)}")
        args = []
        for index, (decl, value) in enumerate(zip(decls, inputs, strict=True)):
            if not isinstance(value, np.ndarray):
                raise InvalidArgument(
                    f"input #{index} {decl.name!r}: expected a numpy array, got {type(value).__name__}"
                )
            if value.dtype != decl.dtype.numpy:
                raise InvalidArgument(
                    f"input #{index} {decl.name!r}: expected {decl.dtype} (numpy {decl.dtype.numpy}), got {value.dtype}"
                )
            if not decl.unranked and (
                value.ndim != len(decl.shape)
                or any(d >= 0 and d != v for d, v in zip(decl.shape, value.shape, strict=True))
            ):
                raise InvalidArgument(
                    f"input #{index} {decl.name!r}: expected shape {list(decl.shape)}, got {list(value.shape)}"
                )
            args.append(value)
        return args

    def _run_block(self, name: str, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self._execute(self._child(name, values), values)

    def _child(self, name: str, values: Sequence[np.ndarray]) -> _BlockPlan:
        """The plan of the graph ``name`` a control-flow operator runs on ``values``."""
        plan = self._plans.get(name)
        if plan is None:
            raise InternalError(f"block {name!r} was not planned")
        if len(values) != len(plan.inputs):
            raise ValidationError(
                f"block {name!r} takes {len(plan.inputs)} values, was given {len(values)}", block=name
            )
        return plan

    def _execute(self, plan: _BlockPlan, args: Sequence[np.ndarray]) -> list[np.ndarray]:
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

    def _execute_nested(self, plan: _BlockPlan, args: Sequence[np.ndarray]) -> list[np.ndarray]:
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

    def _block_steps(self, plan: _BlockPlan, args: Sequence[np.ndarray]) -> Blocks:
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

    def _frame(self, plan: _BlockPlan, args: Sequence[np.ndarray]) -> list[np.ndarray | None]:
        values = plan.template.copy()
        for s, value in zip(plan.inputs, args, strict=True):
            values[s] = value
        return values

    def _block_outputs(self, plan: _BlockPlan, values: list[np.ndarray | None]) -> list[np.ndarray]:
        return [self._read_variable(s) if isinstance(s, str) else values[s] for s in plan.outputs]  # type: ignore[misc]

    def _execute_steps(self, fast: tuple[_Fast, ...], values: list[np.ndarray | None]) -> None:
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

    def _general_step(self, step: _Step, values: list[np.ndarray | None]) -> None:
        """One step with variables or several results (the loop above handles the common kind inline)."""
        operands = self._operands(step, values)
        try:
            results = step.kernel(step.ctx, operands)
        except IronAccelError:
            raise
        except Exception as exc:
            raise InternalError(f"{step.ctx.where()}: kernel failed: {type(exc).__name__}: {exc}") from exc
        self._store_results(step, values, results)

    def _operands(self, step: _Step, values: list[np.ndarray | None]) -> list[np.ndarray]:
        operands = [values[s] for s in step.inputs]
        for position, key in step.read_vars:
            # Declaring and writing may name a variable that holds no value yet.
            operands[position] = (
                self._variables.get(key) if step.ctx.operator.op in _NAMES_VARIABLE else self._read_variable(key)
            )
        return operands  # type: ignore[return-value]

    def _store_results(self, step: _Step, values: list[np.ndarray | None], results: list[np.ndarray]) -> None:
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
        if not _storage_matches(decl, value):
            raise ValidationError(
                f"variable {key!r} is {decl.dtype}{list(decl.shape)}, written with {value.dtype}{list(value.shape)}",
                unpredictable=True,
            )
        stored = np.array(value, copy=True)
        stored.flags.writeable = False
        self._variables[key] = stored


def _graphs_of(plan: _BlockPlan) -> list[str]:
    """The graphs the control-flow operators of ``plan`` run, in operator order."""
    names = []
    for step in plan.steps:
        operator = step.ctx.operator
        if step.blocks is not None:
            names += [getattr(operator.attribute, field) for field in _GRAPH_FIELDS[operator.op]]
    return names


def _refuse_recursion(plans: dict[str, _BlockPlan]) -> None:
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


def _declared(block: Block, name: str, what: str, index: int | None = None) -> None:
    if name not in block.tensor_map:
        raise ValidationError(f"{what} {name!r} has no tensor declaration", op_index=index, block=block.name)


def _plan_releases(steps: list[_Step], inputs: tuple[int, ...], outputs: tuple[int | str, ...]) -> None:
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


def _fast(step: _Step) -> _Fast:
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


def _check_results(ctx: _OpContext, results: list[np.ndarray]) -> None:
    decls = ctx.outputs
    if len(results) != len(decls):
        raise InternalError(f"{ctx.where()}: kernel returned {len(results)} results for {len(decls)} outputs")
    for decl, value in zip(decls, results, strict=True):
        if not isinstance(value, np.ndarray) or not _storage_matches(decl, value):
            got = f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__
            raise InternalError(
                f"{ctx.where()}: kernel returned {got} for {decl.name!r} declared {decl.dtype}{list(decl.shape)}"
            )


def _owned(
    outputs: list[np.ndarray], args: Sequence[np.ndarray], destinations: Sequence[np.ndarray | None] | None = None
) -> list[np.ndarray]:
    """Outputs the caller may keep and modify: no views of inputs or constants, no array twice. An output
    written into its destination is the caller's own array already."""
    seen: set[int] = set()
    result = []
    for index, value in enumerate(outputs):
        if destinations and destinations[index] is value and id(value) not in seen:
            seen.add(id(value))
            result.append(value)
            continue
        shared = (
            value.base is not None
            or not value.flags.writeable
            or id(value) in seen
            or any(value is a or np.may_share_memory(value, a) for a in args)
        )
        if shared:
            value = np.array(value, copy=True, order="C")
        seen.add(id(value))
        result.append(value)
    return result


def _with_deadline(check: Check | None, deadline: float) -> Check:
    def hook() -> None:
        if time.monotonic() > deadline:
            raise DeadlineExpired("the program ran past its deadline")
        if check is not None:
            check()

    return hook


def load(program: Program) -> CompiledProgram:
    """Prepare ``program`` for the CPU (kernel lookup, constant folding, liveness); see the module doc."""
    return CompiledProgram(program)
