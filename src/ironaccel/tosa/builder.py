"""Build TOSA 1.0 programs in Python: ``ProgramBuilder`` reads like the operator list.

    b = ProgramBuilder()
    x = b.input("x", (1, 8), "fp32")
    y = b.add(x, b.const(np.ones((1, 8), np.float32)))
    b.output(y)
    program = b.build()  # immutable ir.Program, validated

Everything operator-specific comes from the specification tables (:mod:`ironaccel.tosa.spec`), so the
75 operators share one code path (:meth:`ProgramBuilder.op`): the argument list says which operands are
tensors and in which order, the type-support table gives the output element type (and the type of a
Python number or list passed where a tensor is expected: zero points, MUL's shift, PAD's pad_const),
and the validator's :func:`~ironaccel.tosa.validate.infer` gives output shapes. Typed wrappers for the
operators real models use live in :mod:`.builder_ops` (the rest are generated from the tables), type
and attribute resolution in :mod:`.builder_types`, COND_IF / WHILE_LOOP and variables in
:mod:`.builder_graphs`. An operator that fails leaves the builder as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..core.errors import InvalidArgument
from .attributes import Attribute
from .builder_graphs import GraphMethods
from .builder_ops import OperatorMethods
from .builder_types import ATTRIBUTE_DEFAULTS, dtype_of, element_dtype, parse_dtype, resolve, slots, to_storage
from .dtypes import DType
from .errors import ValidationError
from .ir import Block, Operator, Program, Region, Tensor, Version
from .operators import Op
from .ops.rule import LEVEL_NONE, TensorType
from .spec import OperatorSpec
from .spec import operator as spec_of
from .target import Target


@dataclasses.dataclass(frozen=True, eq=False)
class Value:
    """A tensor of the program being built: what builder methods take and return."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    owner: ProgramBuilder = dataclasses.field(repr=False)
    variable: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Value({self.name!r}, {list(self.shape)}, {self.dtype})"


# What may stand where a tensor is expected: a Value, or data that becomes a constant.
Operand = Value | np.ndarray | int | float | bool | Sequence[Any]
Shape = Sequence[int]

# Operators with their own builder method, because they are not "operands in, tensors out".
_OWN_METHOD = {
    Op.CONST: "const",
    Op.CONST_SHAPE: "const_shape",
    Op.COND_IF: "cond_if",
    Op.WHILE_LOOP: "while_loop",
    Op.VARIABLE: "variable",
    Op.VARIABLE_READ: "variable_read",
    Op.VARIABLE_WRITE: "variable_write",
}


class ProgramBuilder(GraphMethods, OperatorMethods):
    """Builds one graph (block); nested builders build COND_IF / WHILE_LOOP graphs and share the
    names of the root, so every tensor and block name is unique in the program."""

    def __init__(
        self, name: str = "main", *, target: Target | None = None, _parent: ProgramBuilder | None = None
    ) -> None:
        self.name = name
        self.parent = _parent
        self.root: ProgramBuilder = _parent.root if _parent else self
        self.target = target if _parent is None else _parent.target
        self.level = self.target.level if self.target is not None else LEVEL_NONE
        self._tensors: dict[str, Tensor] = {}
        self._operators: list[Operator] = []
        self._inputs: list[str] = []
        self._outputs: list[str] = []
        self._consts: dict[str, np.ndarray] = {}
        self._const_cache: dict[tuple, Value] = {}
        self._closed = False
        self._args = 0  # graph inputs that are callback arguments; captures follow them
        self._captured: dict[str, Value] = {}  # enclosing graph's tensor -> this graph's input for it
        self._captures: list[Value] = []
        if _parent is None:
            self._names: set[str] = set()
            self._counters: dict[str, int] = {}
            self._blocks: set[str] = {name}
            self._graphs: list[ProgramBuilder] = []

    # -- names, ownership -------------------------------------------------------------------------
    def _fresh(self, prefix: str, name: str | None = None) -> str:
        taken = self.root._names
        if name is not None:
            if not name or name in taken:
                raise InvalidArgument(f"tensor name {name!r} is {'empty' if not name else 'already used'}")
            taken.add(name)
            return name
        n = self.root._counters.get(prefix, 0)
        while f"{prefix}_{n}" in taken:
            n += 1
        self.root._counters[prefix] = n + 1
        taken.add(f"{prefix}_{n}")
        return f"{prefix}_{n}"

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgument(f"graph {self.name!r} is finished; build in the builder its callback got")

    def _own(self, value: Value, what: str) -> Value:
        """``value`` as this graph can read it. A tensor of an enclosing graph is not read across the
        block boundary (the CPU backend and tosa-tools look names up in the block): a constant is
        copied into this graph, anything else becomes an extra graph input (see :meth:`cond_if`)."""
        if not isinstance(value, Value):
            raise InvalidArgument(f"{what}: expected a Value, got {type(value).__name__}")
        if value.variable:
            raise InvalidArgument(f"{what}: {value.name!r} is a variable; read it with variable_read()")
        if value.owner is self:
            return value
        scope = self.parent
        while scope is not None and scope is not value.owner:
            scope = scope.parent
        if scope is None:
            raise InvalidArgument(f"{what}: {value!r} belongs to graph {value.owner.name!r}, not to {self.name!r}")
        data = self._const_value(value)
        if data is not None:
            return self.const_shape(data) if value.dtype is DType.SHAPE else self.const(data, value.dtype)
        return self._capture(value)

    def _capture(self, value: Value) -> Value:
        if value.name not in self._captured:
            self._captured[value.name] = self._add(self._fresh(f"{self.name}_capture"), value.shape, value.dtype)
            self._captures.append(value)
        return self._captured[value.name]

    @staticmethod
    def _const_value(value: Value) -> np.ndarray | None:
        return value.owner._consts.get(value.name)

    def _add(self, name: str, shape: Shape, dtype: DType, **tensor: Any) -> Value:
        self._tensors[name] = Tensor(name, tuple(shape), dtype, **tensor)
        return Value(name, tuple(int(d) for d in shape), dtype, self, bool(tensor.get("variable")))

    # -- graph interface and data nodes -------------------------------------------------------------
    def input(self, name: str, shape: Shape, dtype: str | DType) -> Value:
        """Declare a graph input (inputs are bound in declaration order)."""
        self._check_open()
        if self.parent is not None:
            raise InvalidArgument(f"graph {self.name!r} gets its inputs as callback arguments")
        value = self._add(self._fresh("input", name), shape, parse_dtype(dtype))
        self._inputs.append(value.name)
        return value

    def output(self, *values: Value | Sequence[Value]) -> None:
        """Mark graph outputs (in order); a graph input or a constant may be an output too."""
        self._check_open()
        for v in values:
            for item in [v] if isinstance(v, Value) else v:
                self._outputs.append(self._own(item, "output").name)

    def const(self, values: Any, dtype: str | DType | None = None, *, name: str | None = None) -> Value:
        """A CONST tensor; ``dtype`` defaults to the numpy data's (Python floats -> fp32, ints -> int32).
        Small constants (zero points, shifts) are shared within a graph."""
        self._check_open()
        arr = np.asarray(values)
        dt = parse_dtype(dtype) if dtype is not None else dtype_of(arr)
        data = to_storage(arr, dt)
        key = (dt, data.shape, data.tobytes()) if name is None and data.size <= 64 else None
        if key in self._const_cache:
            return self._const_cache[key]
        value = self._add(self._fresh("const", name), data.shape, dt, data=data)
        self._consts[value.name] = data
        self._operators.append(Operator(Op.CONST, (), (value.name,)))
        if key is not None:
            self._const_cache[key] = value
        return value

    def const_shape(self, values: Iterable[int], *, name: str | None = None) -> Value:
        """A CONST_SHAPE value (a shape_t list such as RESHAPE's new shape or PAD's padding)."""
        self._check_open()
        data = to_storage(np.asarray(list(values), dtype=np.int64).reshape(-1), DType.SHAPE)
        key = ("shape", data.tobytes()) if name is None else None
        if key in self._const_cache:
            return self._const_cache[key]
        value = self._add(self._fresh("shape", name), (data.size,), DType.SHAPE, data=data)
        self._consts[value.name] = data
        self._operators.append(Operator(Op.CONST_SHAPE, (), (value.name,)))
        if key is not None:
            self._const_cache[key] = value
        return value

    # -- the general form ---------------------------------------------------------------------------
    def op(
        self,
        op: Op | str,
        inputs: Sequence[Operand] = (),
        *,
        attribute: Attribute | None = None,
        name: str | None = None,
        out_shape: Shape | Sequence[Shape] | None = None,
        out_dtype: str | DType | Sequence[str | DType] | None = None,
        **attrs: Any,
    ) -> Any:
        """Add operator ``op`` on ``inputs`` (the specification's input arguments, in order; a
        tensor-list argument takes the operands the fixed ones leave). ``attrs`` are the fields of the
        operator's attribute record (lists, dtype and enum names are converted), or pass ``attribute``.

        Output types come from the type-support table and shapes from the validator's inference;
        ``out_dtype`` picks among several legal output types (CAST, RESCALE) and ``out_shape`` declares
        what cannot be inferred (CUSTOM). Returns one Value, or a tuple for several outputs.
        """
        self._check_open()
        op = Op.parse(op)
        if op in _OWN_METHOD:
            raise InvalidArgument(f"{op.name} has its own method: use {_OWN_METHOD[op]}()")
        spec = spec_of(op)
        if spec is None:
            raise InvalidArgument(f"{op.name} is not a TOSA 1.0 operator")
        mark = (len(self._operators), len(self._tensors), len(self._captures))
        try:
            return self._emit(op, spec, inputs, attribute, attrs, name, out_shape, out_dtype)
        except Exception:
            self._rollback(*mark)  # constants made for a failed operator would be dead code
            raise

    def _emit(
        self,
        op: Op,
        spec: OperatorSpec,
        inputs: Sequence[Operand],
        attribute: Attribute | None,
        attrs: dict[str, Any],
        name: str | None,
        out_shape: Any,
        out_dtype: Any,
    ) -> Any:
        defaults = ATTRIBUTE_DEFAULTS.get(op, {})
        values, record, out_dtypes = resolve(self, spec, slots(spec, inputs), attribute, attrs, defaults, out_dtype)
        shapes = self._shapes(op, record, values, out_shape)
        if len(shapes) != len(out_dtypes):
            raise InvalidArgument(f"{op.name}: {len(shapes)} output shapes for {len(out_dtypes)} output types")
        prefix = op.name.lower()
        outs = []
        for i, (shape, dt) in enumerate(zip(shapes, out_dtypes, strict=True)):
            label = name if name is None or len(shapes) == 1 else f"{name}_{i}"
            outs.append(self._add(self._fresh(prefix, label), shape, dt))
        self._operators.append(Operator(op, tuple(v.name for v in values), tuple(v.name for v in outs), record))
        return outs[0] if len(outs) == 1 and not spec.outputs[0].is_list else tuple(outs)

    def _rollback(self, operators: int, tensors: int, captures: int) -> None:
        """Forget what a failed operator added (its constants, captured inputs, reserved names)."""
        del self._operators[operators:]
        for name in list(self._tensors)[tensors:]:
            del self._tensors[name]
            self._consts.pop(name, None)
            self.root._names.discard(name)
        self._const_cache = {k: v for k, v in self._const_cache.items() if v.name in self._tensors}
        for value in self._captures[captures:]:
            del self._captured[value.name]
        del self._captures[captures:]

    def _shapes(self, op: Op, record: Attribute, values: list[Value], declared: Any) -> list[tuple]:
        """Inferred output shapes, checked against ``declared`` when both exist."""
        if declared is not None and (len(declared) == 0 or not isinstance(declared[0], Sequence)):
            declared = [declared]
        declared = None if declared is None else [tuple(int(d) for d in s) for s in declared]
        try:
            from .validate import infer
        except ImportError:  # the validator is optional at build time
            infer = None  # type: ignore[assignment]
        inferred, why = None, None
        if infer is not None:
            types = [TensorType(v.shape, v.dtype, v.name) for v in values]
            consts = [self._const_value(v) for v in values]
            try:
                inferred = infer(op, record, types, consts, self.level)
            except ValidationError as error:
                why = error
            except (ArithmeticError, ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
                why = ValidationError(f"malformed operator ({type(exc).__name__}: {exc})", op=op.name)
        if inferred is not None and declared is not None and [tuple(s) for s in inferred] != declared:
            raise ValidationError(f"out_shape {declared} but the operator computes {inferred}", op=op.name)
        if inferred is not None:
            return [tuple(s) for s in inferred]
        if declared is None:
            if why is not None:
                raise why
            raise InvalidArgument(f"{op.name}: output shape unknown (no validator); pass out_shape=")
        return declared

    # -- result -------------------------------------------------------------------------------------
    def block(self) -> Block:
        """This graph as an immutable Block (SHAPE values last, as the codec stores them, so that a
        built program survives a write / read round trip unchanged)."""
        tensors = sorted(self._tensors.values(), key=lambda t: t.dtype is DType.SHAPE)
        return Block(self.name, self._operators, tensors, self._inputs, self._outputs)

    def build(self, *, validate: bool = True) -> Program:
        """The program (TOSA 1.0.0: region "main" with block "main", then one region per nested graph,
        named like its block, as tosa-tools lays them out), checked by
        :func:`ironaccel.tosa.validate.validate` against the builder's target unless ``validate=False``."""
        if self.parent is not None:
            raise InvalidArgument("build() the root builder; nested graphs are part of its program")
        graphs = [Region(g.name, (g.block(),)) for g in self._graphs]
        program = Program((Region("main", (self.block(),)), *graphs), Version(1, 0, 0))
        if validate:
            try:
                from .validate import validate as check
            except ImportError:
                return program
            check(program, self.target)
        return program


__all__ = ["Operand", "ProgramBuilder", "Value", "dtype_of", "element_dtype", "to_storage"]
