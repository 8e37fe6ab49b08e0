"""Element types and attributes for :class:`~ironaccel.tosa.builder.ProgramBuilder`, from the tables.

An operator's element-type variables (``in_t``, ``weight_t``, ``out_t``, ``acc_t``...) are bound by
the tensors given; the rows of the type-support table that agree with those bindings then decide
what is still open: the output type, the type of a Python number given for a zero point or a bias,
a convolution's accumulator. When exactly one value is left it is used, so ``b.conv2d(x8, w8)`` gets
an int32 output, an int32 zero bias and int8 zero points without being told; when several are left (CAST's output, the
accumulator of an fp16 convolution) the caller says which, or a documented preference applies.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import InvalidArgument
from .attributes import ATTRIBUTE_OF, Attribute
from .dtypes import DType
from .errors import ValidationError
from .operators import Op
from .spec import ELEMENT_TYPES, Argument, OperatorSpec, TypeSupport
from .spec import operator as spec_of

if TYPE_CHECKING:
    from .builder import Operand, ProgramBuilder, Value

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


def parse_dtype(name: str | DType) -> DType:
    """``"fp32"``, ``"int8"``... as a DType; an unknown name is an InvalidArgument."""
    try:
        return DType.parse(name)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


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


def slots(spec: OperatorSpec, inputs: Sequence[Operand]) -> list[tuple[Argument, Operand]]:
    """Pair each operand with its specification argument (a tensor-list argument takes the rest)."""
    items = list(inputs)
    fixed = [a for a in spec.inputs if not a.is_list]
    extra = len(items) - len(fixed)
    has_list = len(fixed) != len(spec.inputs)
    if extra < 0 or (extra and not has_list) or (has_list and extra < 1 and spec.op is not Op.CUSTOM):
        names = ", ".join(a.name + ("..." if a.is_list else "") for a in spec.inputs) or "none"
        raise InvalidArgument(f"{spec.op.name} takes inputs ({names}), got {len(items)}")
    pairs, pos = [], 0
    for arg in spec.inputs:
        n = extra if arg.is_list else 1
        pairs += [(arg, item) for item in items[pos : pos + n]]
        pos += n
    return pairs


def is_value(item: Any) -> bool:
    """Whether ``item`` is a builder Value (imported late: builder.py imports this module)."""
    from .builder import Value

    return isinstance(item, Value)


def element_dtype(arg: Argument) -> DType | None:
    """The fixed element type of an argument (``i8_t``, ``bool_t``...), None for a type variable."""
    return ELEMENT_TYPES.get(arg.element or "")


# Attribute values the records default to that are not legal values; the builder's choices instead.
ATTRIBUTE_DEFAULTS: dict[Op, dict[str, Any]] = {
    Op.CONV2D: {"pad": (0, 0, 0, 0), "stride": (1, 1), "dilation": (1, 1)},
    Op.DEPTHWISE_CONV2D: {"pad": (0, 0, 0, 0), "stride": (1, 1), "dilation": (1, 1)},
    Op.CONV3D: {"pad": (0,) * 6, "stride": (1, 1, 1), "dilation": (1, 1, 1)},
    Op.TRANSPOSE_CONV2D: {"out_pad": (0, 0, 0, 0), "stride": (1, 1)},
    Op.AVG_POOL2D: {"stride": (1, 1), "pad": (0, 0, 0, 0)},
    Op.MAX_POOL2D: {"stride": (1, 1), "pad": (0, 0, 0, 0)},
    Op.RESCALE: {"rounding_mode": "single_round", "scale32": True},
}

# Accumulator when the table allows several for the bound types: the most precise one.
ACC_PREFERENCE = (DType.FP32, DType.INT48, DType.INT32, DType.FP16)


def rows(spec: OperatorSpec, bound: Mapping[str, DType]) -> list[TypeSupport]:
    """Rows of the type-support table that agree with ``bound`` (variables a row lacks agree)."""
    return [r for r in spec.typesupport if all(r.types.get(v, d) == d for v, d in bound.items())]


def choices(spec: OperatorSpec, bound: Mapping[str, DType], var: str) -> list[DType]:
    """The values ``var`` can still take, in table order."""
    found: list[DType] = []
    for r in rows(spec, bound):
        if var in r.types and r.types[var] not in found:
            found.append(r.types[var])
    return found


def describe(bound: Mapping[str, DType]) -> str:
    return ", ".join(f"{v}={d}" for v, d in bound.items()) or "no types"


def _bind(spec: OperatorSpec, bound: dict[str, DType], arg: Argument, value: Value) -> None:
    """Record ``value``'s type for ``arg``; a clash with an earlier binding is a ValidationError."""
    if arg.type == "shape_t" or value.dtype is DType.SHAPE:
        if arg.type != "shape_t" or value.dtype is not DType.SHAPE:
            want = "a shape_t value (const_shape)" if arg.type == "shape_t" else "a tensor, not a shape_t value"
            raise ValidationError(f"{arg.name} must be {want}", op=spec.op.name, tensor=value.name)
        return
    fixed = element_dtype(arg)
    if fixed is not None and value.dtype is not fixed:
        raise ValidationError(f"{arg.name} must be {fixed}, got {value.dtype}", op=spec.op.name, tensor=value.name)
    var = arg.element
    if var in spec.type_variables:
        if var in bound and bound[var] is not value.dtype:
            rule = f"{arg.name} is {value.dtype} but {var} is already {bound[var]}"
            raise ValidationError(rule, op=spec.op.name, tensor=value.name)
        bound[var] = value.dtype


def _convert(op_name: str, field: dataclasses.Field, value: Any, input_dtype: DType | None) -> Any:
    """A keyword argument as the record's field type: ints lists, DType and enum names, raw bytes."""
    default = field.default
    try:
        if isinstance(default, tuple):
            return tuple(int(v) for v in np.asarray(value).reshape(-1))
        if isinstance(default, DType):
            return DType.parse(value)
        if isinstance(default, enum.Enum):
            return type(default)[value.strip().upper()] if isinstance(value, str) else type(default)(value)
        if isinstance(default, bytes) and not isinstance(value, bytes | bytearray):
            if input_dtype is None:
                raise InvalidArgument(f"{op_name}: {field.name} needs the input's type")
            return to_storage(np.asarray([value]), input_dtype).tobytes()
        if isinstance(default, bool):
            return bool(value)
        return type(default)(value)
    except (KeyError, ValueError, TypeError) as exc:
        raise InvalidArgument(f"{op_name}: bad value {value!r} for attribute {field.name}: {exc}") from None


def make_attribute(
    spec: OperatorSpec, attrs: Mapping[str, Any], defaults: Mapping[str, Any], input_dtype: DType | None
) -> Attribute:
    """The operator's attribute record from keyword arguments, over the builder's defaults."""
    cls = ATTRIBUTE_OF[spec.op]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(attrs) - set(fields))
    if unknown:
        have = ", ".join(fields) or "none"
        raise InvalidArgument(f"{spec.op.name} has no attribute {', '.join(unknown)} (its attributes: {have})")
    given = {**{k: v for k, v in defaults.items() if k in fields}, **attrs}
    return cls(**{k: _convert(spec.op.name, fields[k], v, input_dtype) for k, v in given.items()})


def _acc(spec: OperatorSpec, record: Attribute, bound: dict[str, DType]) -> Attribute:
    """Bind acc_t from the record's acc_type, choosing one (ACC_PREFERENCE) when it is UNKNOWN."""
    acc = getattr(record, "acc_type", None)
    if acc is None or "acc_t" not in spec.type_variables:
        return record
    if acc is DType.UNKNOWN:
        options = choices(spec, bound, "acc_t")
        if not options:
            return record  # the input types are wrong; reported with the output type
        acc = options[0] if len(options) == 1 else next((d for d in ACC_PREFERENCE if d in options), options[0])
        record = dataclasses.replace(record, acc_type=acc)  # type: ignore[call-arg]
    bound["acc_t"] = DType(acc)
    return record


def _operand_dtype(spec: OperatorSpec, arg: Argument, item: Any, bound: dict, record: Attribute) -> DType:
    """The type a Python number / array becomes at ``arg``."""
    if arg.type == "shape_t":
        return DType.SHAPE
    if arg.element == "mul_t":  # RESCALE's multiplier: i32_t with scale32, else i16_t
        return DType.INT32 if getattr(record, "scale32", True) else DType.INT16
    fixed = element_dtype(arg)
    if fixed is not None:
        return fixed
    var = arg.element or ""
    if var in bound:
        return bound[var]
    options = choices(spec, bound, var)
    if len(options) == 1:
        return options[0]
    if isinstance(item, np.ndarray):
        return dtype_of(item)
    known = describe(bound)
    raise InvalidArgument(
        f"{spec.op.name}: cannot tell the type of {arg.name} from a Python value ({known}; it could be "
        f"{', '.join(map(str, options)) or 'nothing'}); pass a Value or a typed numpy array"
    )


def _realize(builder: ProgramBuilder, arg: Argument, item: Any, dtype: DType, like: Value | None) -> Value:
    """A constant for ``item`` at ``arg``: scalars take the argument's [1]-style shape, or broadcast
    as rank-matched ones against the operator's first tensor for element-wise arguments."""
    if arg.type == "shape_t":
        return builder.const_shape(np.asarray(item).reshape(-1).tolist())
    arr = np.asarray(item)
    if arr.ndim == 0:
        if arg.dims is not None and len(arg.dims) == 1:
            arr = arr.reshape(1)
        elif arg.shape_var is not None and like is not None:
            arr = arr.reshape((1,) * like.rank)
    return builder.const(arr, dtype)


def resolve(
    builder: ProgramBuilder,
    spec: OperatorSpec,
    slots: Sequence[tuple[Argument, Operand]],
    record: Attribute | None,
    attrs: Mapping[str, Any],
    defaults: Mapping[str, Any],
    out_dtype: Any,
) -> tuple[list[Value], Attribute, list[DType]]:
    """Operand Values (constants made for raw operands), the attribute record and output types."""
    from .builder import Value

    name = spec.op.name
    bound: dict[str, DType] = {}
    given = [builder._own(item, f"{name} {arg.name}") if isinstance(item, Value) else None for arg, item in slots]
    for (arg, _), value in zip(slots, given, strict=True):
        if value is not None:
            _bind(spec, bound, arg, value)
    wanted = [] if out_dtype is None else [out_dtype] if isinstance(out_dtype, str | DType) else list(out_dtype)
    wanted = [parse_dtype(d) for d in wanted]
    fixed_outputs = [a for a in spec.outputs if not a.is_list]
    if wanted and fixed_outputs and len(wanted) != len(fixed_outputs):
        raise InvalidArgument(f"{name} has {len(fixed_outputs)} outputs, got {len(wanted)} out_dtype values")
    for arg, dt in zip(fixed_outputs if wanted else (), wanted, strict=False):
        if arg.element in bound and bound[arg.element] is not dt:
            raise ValidationError(f"out_dtype {dt} but {arg.element} is {bound[arg.element]} here", op=name)
        if arg.element in spec.type_variables and arg.element not in bound:
            if choices(spec, bound, arg.element) and dt not in choices(spec, bound, arg.element):
                ok = ", ".join(map(str, choices(spec, bound, arg.element)))
                raise ValidationError(
                    f"out_dtype {dt} is not possible with {describe(bound)} (possible: {ok})", op=name
                )
            bound[arg.element] = dt
    if record is None:
        first = next((v.dtype for v in given if v is not None and v.dtype is not DType.SHAPE), None)
        record = make_attribute(spec, attrs, defaults, first)
    elif attrs:
        raise InvalidArgument(f"{name}: pass attribute= or keyword attributes, not both")
    record = _acc(spec, record, bound)
    like = next((v for (a, _), v in zip(slots, given, strict=True) if v is not None and a.shape_var), None)
    values = []
    for (arg, item), value in zip(slots, given, strict=True):
        if value is None:
            value = _realize(builder, arg, item, _operand_dtype(spec, arg, item, bound, record), like)
            _bind(spec, bound, arg, value)
        values.append(value)
    if spec.typesupport and not rows(spec, bound):
        modes = "; ".join(r.mode for r in spec.typesupport)
        raise ValidationError(f"unsupported type combination {describe(bound)}; supported: {modes}", op=name)
    outs: list[DType] = []
    for arg in spec.outputs:
        if arg.is_list:
            if not wanted:
                raise InvalidArgument(f"{name}: pass out_dtype= (one per output) and out_shape= for its outputs")
            outs += wanted
            continue
        dt = element_dtype(arg) or bound.get(arg.element or "")
        options = choices(spec, bound, arg.element or "")
        if dt is None and len(options) != 1:
            raise InvalidArgument(
                f"{name}: the output type is one of {', '.join(map(str, options))} for {describe(bound)}; "
                "pass out_dtype="
            )
        outs.append(dt or options[0])
    return values, record, outs


def generated_method(op: Op) -> Any:
    """A method for ``op`` from its argument list: inputs positional, attribute fields keyword-only."""
    spec = spec_of(op)
    assert spec is not None
    inputs = [a.name.lower() for a in spec.inputs]
    fields = dataclasses.fields(ATTRIBUTE_OF[op])
    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_OR_KEYWORD)] + [P(n, P.POSITIONAL_OR_KEYWORD) for n in inputs]
    params += [P(f.name, P.KEYWORD_ONLY, default=f.default) for f in fields]
    params += [P(k, P.KEYWORD_ONLY, default=None) for k in ("name", "out_shape", "out_dtype")]
    signature = inspect.Signature(params)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        given = {k: v for k, v in bound.arguments.items() if k != "self"}
        operands = [given.pop(n) for n in inputs]
        return self.op(op, operands, **given)

    method.__name__ = method.__qualname__ = op.name.lower()
    method.__signature__ = signature  # type: ignore[attr-defined]
    arguments = ", ".join(f"{a.name} ({a.category})" for a in spec.arguments)
    modes = "; ".join(r.mode for r in spec.typesupport)
    method.__doc__ = f"{op.name} ({spec.group}), generated from the specification: {arguments}. Types: {modes}."
    return method


__all__ = [
    "ATTRIBUTE_DEFAULTS",
    "dtype_of",
    "element_dtype",
    "generated_method",
    "is_value",
    "make_attribute",
    "parse_dtype",
    "resolve",
    "slots",
    "to_storage",
]
