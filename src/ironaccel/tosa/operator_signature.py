"""One operator against its signature in the specification tables, and the context its rule sees.

An operator's signature (:mod:`ironaccel.tosa.spec`) gives its arguments: how many, their kinds and rank
bounds, shape expressions (``[N,IH,IW,C]`` binds N, IH... across arguments; ``shape1`` binds a whole
shape), element-type variables with the supported-types table, and level limits. The checks here pair an
operator's tensors with those arguments and raise :class:`ValidationError` (through the
:class:`OperatorContext`) at the first disagreement; REQUIRE and LEVEL_CHECK violations are
``unpredictable``. :func:`infer` runs the same pairing for a builder and returns output shapes from the
operator's rule, or from the signature's shape expressions where it has none.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .attributes import Attribute, default_attribute
from .dtypes import DType
from .errors import ValidationError
from .operators import Op
from .ops.rule import LEVEL_NONE, Level, TensorType, rule_for
from .spec import ELEMENT_TYPES, Argument, Expr, OperatorSpec
from .spec import operator as spec_of
from .target import Target

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


def assign(args: Sequence[Argument], items: Sequence) -> list[tuple[Argument, list]] | None:
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


def count_rule(what: str, args: Sequence[Argument], n: int) -> str:
    fixed = sum(1 for a in args if not a.is_list)
    want = f"at least {fixed}" if fixed != len(args) else str(fixed)
    return f"takes {want} {what} ({', '.join(a.name for a in args) or 'none'}), got {n}"


def check_ranks(ctx: OperatorContext, pairs: Sequence[tuple[Argument, list[TensorType]]]) -> None:
    """ERROR_IF a rank is outside the argument's bounds; above MAX_RANK is a level violation (REQUIRE)."""
    for arg, values in pairs:
        bounds = arg.rank_bounds(ctx.level)
        for t in values if bounds else ():
            lo, hi, hi_is_level = bounds  # type: ignore[misc]
            ok = lo <= t.rank and (t.rank <= hi or hi_is_level)
            ctx.error_if(not ok, f"{arg.name} must have rank {lo}" + (f"..{hi}" if hi != lo else ""), t.name)
            ctx.level_check(t.rank <= hi, f"level {ctx.level.name}: {arg.name} rank {t.rank} exceeds {hi}", t.name)


def unify(ctx: OperatorContext, pairs: Sequence[tuple[Argument, list[TensorType]]]) -> dict:
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


def bind_types(ctx: OperatorContext, spec: OperatorSpec, pairs: Sequence[tuple[Argument, list[TensorType]]]) -> dict:
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


def check_types(ctx: OperatorContext, spec: OperatorSpec, bound: dict, target: Target) -> None:
    rows = [r for r in spec.typesupport if all(r.types.get(v, d) == d for v, d in bound.items())]
    combo = ", ".join(f"{v}={d}" for v, d in bound.items())
    ctx.error_if(
        not rows, f"unsupported type combination {combo}; supported: {'; '.join(r.mode for r in spec.typesupport)}"
    )
    if not any(r.enabled(target.enabled) for r in rows):
        needs = "; ".join(f"{r.mode} needs {r.describe_requirement()}" for r in rows)
        raise ctx.error(f"{combo or spec.op.name}: {needs}, which the target ({target}) does not enable")


def check_levels(ctx: OperatorContext, spec: OperatorSpec, env: dict, level: Level) -> None:
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
    pairs = assign(spec.inputs, list(inputs))
    ctx.error_if(pairs is None, count_rule("inputs", spec.inputs, len(inputs)))
    check_ranks(ctx, pairs or [])
    env = unify(ctx, pairs or [])
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
