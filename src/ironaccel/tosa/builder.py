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
operators real models use live in :mod:`.builder_ops`; the rest are generated from the tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..core.errors import InvalidArgument
from .attributes import Attribute, CondIfAttribute, WhileLoopAttribute
from .builder_ops import OperatorMethods
from .dtypes import DType
from .errors import ValidationError
from .ir import Block, Operator, Program, Region, Tensor, Version
from .operators import Op
from .ops.rule import LEVEL_NONE, TensorType
from .spec import ELEMENT_TYPES, Argument, OperatorSpec
from .spec import operator as spec_of


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
Graph = Callable[..., "Value | Sequence[Value]"]

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
# Attribute values the records default to that are not legal values; the builder's choices instead.
_DEFAULTS: dict[Op, dict[str, Any]] = {
    Op.CONV2D: {"pad": (0, 0, 0, 0), "stride": (1, 1), "dilation": (1, 1)},
    Op.DEPTHWISE_CONV2D: {"pad": (0, 0, 0, 0), "stride": (1, 1), "dilation": (1, 1)},
    Op.CONV3D: {"pad": (0,) * 6, "stride": (1, 1, 1), "dilation": (1, 1, 1)},
    Op.TRANSPOSE_CONV2D: {"out_pad": (0, 0, 0, 0), "stride": (1, 1)},
    Op.AVG_POOL2D: {"stride": (1, 1), "pad": (0, 0, 0, 0)},
    Op.MAX_POOL2D: {"stride": (1, 1), "pad": (0, 0, 0, 0)},
    Op.RESCALE: {"rounding_mode": "single_round", "scale32": True},
}
_FROM_NUMPY = {
    np.dtype(np.bool_): DType.BOOL,
    np.dtype(np.int8): DType.INT8,
    np.dtype(np.int16): DType.INT16,
    np.dtype(np.int32): DType.INT32,
    np.dtype(np.int64): DType.INT32,  # Python ints: checked to fit
    np.dtype(np.float16): DType.FP16,
    np.dtype(np.float32): DType.FP32,
    np.dtype(np.float64): DType.FP32,  # Python floats
    DType.BF16.numpy: DType.BF16,
    DType.FP8E4M3.numpy: DType.FP8E4M3,
    DType.FP8E5M2.numpy: DType.FP8E5M2,
}
_INT_RANGE = {DType.INT4: (-8, 7), DType.INT48: (-(2**47), 2**47 - 1)}


def dtype_of(values: np.ndarray) -> DType:
    """The TOSA type numpy data stands for (float64 -> fp32 and int64 -> int32, as Python numbers)."""
    try:
        return _FROM_NUMPY[values.dtype]
    except KeyError:
        raise InvalidArgument(f"no TOSA type for numpy {values.dtype}; pass dtype=") from None


def to_storage(values: Any, dtype: DType) -> np.ndarray:
    """``values`` in the storage type of ``dtype``; integers must be integral and in range."""
    arr = np.asarray(values)
    if dtype.is_integer or dtype is DType.SHAPE:
        if arr.dtype.kind not in "biu" and not np.all(np.isfinite(arr) & (np.mod(arr, 1) == 0)):
            raise InvalidArgument(f"{dtype} values must be integers, got {arr.ravel()[:4].tolist()}...")
        lo, hi = _INT_RANGE.get(dtype) or (np.iinfo(dtype.numpy).min, np.iinfo(dtype.numpy).max)
        if arr.size and (arr.min() < lo or arr.max() > hi):
            raise InvalidArgument(f"{dtype} values must lie in [{lo}, {hi}], got [{arr.min()}, {arr.max()}]")
    return arr.astype(dtype.numpy)


class ProgramBuilder(OperatorMethods):
    """Builds one graph (block); nested builders build COND_IF / WHILE_LOOP graphs and share the
    names of the root, so every tensor and block name is unique in the program."""

    def __init__(self, name: str = "main", *, target: Any = None, _parent: ProgramBuilder | None = None) -> None:
        self.name = name
        self.parent = _parent
        self.root: ProgramBuilder = _parent.root if _parent else self
        self.target = target if _parent is None else _parent.target
        self.level = getattr(self.target, "level", LEVEL_NONE)
        self._tensors: dict[str, Tensor] = {}
        self._operators: list[Operator] = []
        self._inputs: list[str] = []
        self._outputs: list[str] = []
        self._consts: dict[str, np.ndarray] = {}
        self._const_cache: dict[tuple, Value] = {}
        self._closed = False
        if _parent is None:
            self._names: set[str] = set()
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
        n = 0
        while f"{prefix}_{n}" in taken:
            n += 1
        taken.add(f"{prefix}_{n}")
        return f"{prefix}_{n}"

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgument(f"graph {self.name!r} is finished; build in the builder its callback got")

    def _own(self, value: Value, what: str) -> Value:
        """``value`` if this graph may read it (its own, or an enclosing graph's)."""
        scope: ProgramBuilder | None = self
        while scope is not None and scope is not value.owner:
            scope = scope.parent
        if scope is None:
            raise InvalidArgument(f"{what}: {value!r} belongs to graph {value.owner.name!r}, not to {self.name!r}")
        if value.variable:
            raise InvalidArgument(f"{what}: {value.name!r} is a variable; read it with variable_read()")
        return value

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
        value = self._add(self._fresh("input", name), shape, DType.parse(dtype))
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
        dt = DType.parse(dtype) if dtype is not None else dtype_of(arr)
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
        from .builder_types import resolve

        self._check_open()
        op = Op.parse(op)
        if op in _OWN_METHOD:
            raise InvalidArgument(f"{op.name} has its own method: use {_OWN_METHOD[op]}()")
        spec = spec_of(op)
        if spec is None:
            raise InvalidArgument(f"{op.name} is not a TOSA 1.0 operator")
        slots = _slots(spec, inputs)
        record = attribute if attribute is not None else None
        values, record, out_dtypes = resolve(self, spec, slots, record, attrs, _DEFAULTS.get(op, {}), out_dtype)
        shapes = self._shapes(op, record, values, out_shape, len(out_dtypes))
        if len(shapes) != len(out_dtypes):
            raise InvalidArgument(f"{op.name}: {len(shapes)} output shapes for {len(out_dtypes)} output types")
        prefix = op.name.lower()
        outs = []
        for i, (shape, dt) in enumerate(zip(shapes, out_dtypes, strict=True)):
            label = name if name is None or len(shapes) == 1 else f"{name}_{i}"
            outs.append(self._add(self._fresh(prefix, label), shape, dt))
        self._operators.append(Operator(op, tuple(v.name for v in values), tuple(v.name for v in outs), record))
        return outs[0] if len(outs) == 1 and not spec.outputs[0].is_list else tuple(outs)

    def _shapes(self, op: Op, record: Attribute, values: list[Value], declared: Any, count: int) -> list[tuple]:
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
        if inferred is not None and declared is not None and [tuple(s) for s in inferred] != declared:
            raise ValidationError(f"out_shape {declared} but the operator computes {inferred}", op=op.name)
        if inferred is not None:
            return [tuple(s) for s in inferred]
        if declared is None:
            if why is not None:
                raise why
            raise InvalidArgument(f"{op.name}: output shape unknown (no validator); pass out_shape=")
        return declared

    # -- control flow and variables -----------------------------------------------------------------
    def _graph(self, label: str, types: Sequence[Value], body: Graph) -> ProgramBuilder:
        """Run ``body(graph, *inputs)`` in a new nested graph; what it returns becomes the outputs."""
        blocks, n = self.root._blocks, 0
        while f"{label}_{n}" in blocks:
            n += 1
        blocks.add(f"{label}_{n}")
        graph = ProgramBuilder(f"{label}_{n}", _parent=self)
        args = [graph.input(graph._fresh(f"{label}_{n}_in"), v.shape, v.dtype) for v in types]
        result = body(graph, *args)
        results = [result] if isinstance(result, Value) else list(result or ())
        if not results or not all(isinstance(r, Value) for r in results):
            raise InvalidArgument(f"graph {graph.name!r} must return a Value or a sequence of Values")
        graph.output(*[r if r.owner is graph else graph.identity(graph._own(r, "output")) for r in results])
        graph._closed = True
        self.root._graphs.append(graph)
        return graph

    def _operands(self, values: Sequence[Operand], what: str) -> list[Value]:
        return [self._own(v, what) if isinstance(v, Value) else self.const(v) for v in values]

    def cond_if(
        self, condition: Operand, inputs: Sequence[Operand], then_branch: Graph, else_branch: Graph, *, name: str = ""
    ) -> tuple[Value, ...]:
        """COND_IF: ``then_branch(g, *inputs)`` or ``else_branch(g, *inputs)``, each given a nested
        builder ``g`` and graph inputs shaped like ``inputs``, returns the outputs (same types both)."""
        self._check_open()
        cond = self._own(condition, "condition") if isinstance(condition, Value) else self.const([condition], "bool")
        args = self._operands(inputs, "COND_IF input")
        then, other = self._graph("then", args, then_branch), self._graph("else", args, else_branch)
        outs = _graph_types(then)
        if outs != _graph_types(other):
            raise InvalidArgument(f"COND_IF: then graph returns {outs} but else graph returns {_graph_types(other)}")
        record = CondIfAttribute(then_graph=then.name, else_graph=other.name)
        return self._control(Op.COND_IF, [cond, *args], outs, record, name)

    def while_loop(self, inputs: Sequence[Operand], cond: Graph, body: Graph, *, name: str = "") -> tuple[Value, ...]:
        """WHILE_LOOP: ``body(g, *state)`` returns the next state (same types) while
        ``cond(g, *state)`` returns a one-element bool Value that is true."""
        self._check_open()
        args = self._operands(inputs, "WHILE_LOOP input")
        cond_graph, body_graph = self._graph("cond", args, cond), self._graph("body", args, body)
        state = [(v.shape, v.dtype) for v in args]
        if _graph_types(body_graph) != state:
            raise InvalidArgument(f"WHILE_LOOP: body returns {_graph_types(body_graph)}, the state is {state}")
        test = _graph_types(cond_graph)
        if len(test) != 1 or test[0][1] is not DType.BOOL or int(np.prod(test[0][0])) != 1:
            raise InvalidArgument(f"WHILE_LOOP: cond must return one bool element, returns {test}")
        record = WhileLoopAttribute(cond_graph=cond_graph.name, body_graph=body_graph.name)
        return self._control(Op.WHILE_LOOP, args, state, record, name)

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
        dt = DType.parse(dtype)
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
        src = self._own(value, "variable_write") if isinstance(value, Value) else self.const(value, var.dtype)
        if (src.shape, src.dtype) != (var.shape, var.dtype):
            raise InvalidArgument(f"variable_write: {src!r} does not match variable {var.name!r} {list(var.shape)}")
        self._operators.append(Operator(Op.IDENTITY, (src.name,), (var.name,)))

    def _check_variable(self, var: Value) -> None:
        self._check_open()
        if not isinstance(var, Value) or not var.variable:
            raise InvalidArgument(f"{var!r} is not a variable (declare one with variable())")

    # -- result -------------------------------------------------------------------------------------
    def block(self) -> Block:
        """This graph as an immutable Block."""
        return Block(self.name, self._operators, self._tensors.values(), self._inputs, self._outputs)

    def build(self, *, validate: bool = True) -> Program:
        """The program (TOSA 1.0.0, region "main": the main block, then the nested graphs), checked by
        :func:`ironaccel.tosa.validate.validate` against the builder's target unless ``validate=False``."""
        if self.parent is not None:
            raise InvalidArgument("build() the root builder; nested graphs are part of its program")
        blocks = [self.block(), *(g.block() for g in self._graphs)]
        program = Program((Region("main", blocks),), Version(1, 0, 0))
        if validate:
            try:
                from .validate import validate as check
            except ImportError:
                return program
            check(program, self.target)
        return program


def _graph_types(graph: ProgramBuilder) -> list[tuple[tuple[int, ...], DType]]:
    return [(graph._tensors[n].shape, graph._tensors[n].dtype) for n in graph._outputs]


def _slots(spec: OperatorSpec, inputs: Sequence[Operand]) -> list[tuple[Argument, Operand]]:
    """Pair each operand with its specification argument (a tensor-list argument takes the rest)."""
    items = list(inputs)
    fixed = [a for a in spec.inputs if not a.is_list]
    extra = len(items) - len(fixed)
    has_list = len(fixed) != len(spec.inputs)
    if extra < 0 or (extra and not has_list) or (has_list and extra < 1 and spec.op is not Op.CUSTOM):
        names = ", ".join(a.name + ("..." if a.is_list else "") for a in spec.inputs) or "none"
        raise InvalidArgument(f"{spec.op.name} takes inputs ({names}), got {len(items)}")
    slots, pos = [], 0
    for arg in spec.inputs:
        n = extra if arg.is_list else 1
        slots += [(arg, item) for item in items[pos : pos + n]]
        pos += n
    return slots


def element_dtype(arg: Argument) -> DType | None:
    """The fixed element type of an argument (``i8_t``, ``bool_t``...), None for a type variable."""
    return ELEMENT_TYPES.get(arg.element or "")


__all__ = ["Operand", "ProgramBuilder", "Value", "dtype_of", "element_dtype", "to_storage"]
