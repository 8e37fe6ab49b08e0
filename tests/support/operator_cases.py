"""One small program per TOSA 1.0 operator and type signature, with inputs in the operator's domain.

:func:`case` builds, for an operator and one binding of its type variables (a capability descriptor's
:class:`~ironaccel.tosa.Signature`), a program whose main graph is that operator (with the constants its
operands need: zero points, MUL's shift, RESCALE's multiplier and shift, TABLE's table, shape operands),
and the inputs to run it on. Shapes are tiny (1x4x5x3 for the element-wise operators, rank-appropriate
elsewhere) and the data comes from a fixed seed per case, so every run and every device sees the same
numbers. The values stay inside what the specification defines: positive arguments for LOG and RSQRT, no
zero divisors, shift amounts below the width, in-range and (for SCATTER) distinct indices, multipliers and
shifts RESCALE accepts, zero points only where the type allows one.

Operators without a meaningful single-operator form still get a case where one can be written (COND_IF
with two one-operator branches, WHILE_LOOP counting to three, a variable read then written); what is left
is in :data:`EXEMPT` with the reason. Each case also names how its floating-point results are compared
(``kind``): ``exact`` for operators that move or pick values, ``rounded`` for one rounded operation per
element, ``accumulated`` for sums over several terms.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ironaccel.tosa import DType, Op, Program, ProgramBuilder, Signature
from ironaccel.tosa.spec import operator as spec_of

SEED = 102  # with the case's name, the seed of its data: every run and every device sees the same

FLOATS = (DType.FP32, DType.FP16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2)
SHAPE = (1, 4, 5, 3)  # element-wise operands
NARROW = (1, 4, 1, 3)  # the second operand of a binary operator: broadcast along W


@dataclasses.dataclass(frozen=True)
class Case:
    """A program and the input sets to call it with, in order, on one loaded executable (a program with
    variables sees the state the earlier calls left)."""

    program: Program
    calls: tuple[tuple[np.ndarray, ...], ...]
    kind: str = "rounded"  # exact | rounded | accumulated: how float results are compared


# Operators a device may advertise that have no case, and why.
EXEMPT: dict[Op, str] = {
    Op.CUSTOM: "implementation-defined: the specification gives it no semantics to compare against, and the"
    " reference interpreter runs no CUSTOM operator",
}


# ---- types and data ------------------------------------------------------------------------------------


def _rows(op: Op, signature: Signature) -> list[Mapping[str, DType]]:
    """The rows of the specification's type table that agree with ``signature``."""
    types = dict(signature.types)
    spec = spec_of(op)
    rows = [row.types for row in (spec.typesupport if spec else ())]
    return [row for row in rows if all(row.get(var, dt) == dt for var, dt in types.items())]


def in_specification(op: Op, signature: Signature) -> bool:
    """Whether some row of TOSA 1.0's type table for ``op`` agrees with ``signature`` (operators without
    a table, such as COND_IF, take any types): a signature that none does describes no valid program."""
    spec = spec_of(op)
    return not (spec and spec.typesupport) or bool(_rows(op, signature))


def binding(op: Op, signature: Signature) -> dict[str, DType]:
    """Every type variable of ``op``: the signature's, completed from the first row of the specification's
    table that agrees with it (a descriptor may name only the variables it restricts)."""
    rows = _rows(op, signature)
    return {**(rows[0] if rows else {}), **dict(signature.types)}


def _limits(dtype: DType) -> tuple[float, float]:
    """The smallest and the largest value of a type (floats: the largest finite magnitude, either sign)."""
    if dtype is DType.INT4:
        return -8, 7
    if dtype is DType.INT48:
        return -(2**47), 2**47 - 1
    if dtype.is_integer:
        info = np.iinfo(dtype.numpy)
        return int(info.min), int(info.max)
    top = float(np.finfo(dtype.numpy).max)
    return -top, top


def data(
    rng: np.random.Generator, dtype: DType, shape: Sequence[int], low: float | None = None, high: float | None = None
) -> np.ndarray:
    """Random values of ``dtype`` in [low, high] (default: an integer type's whole range, [-4, 4] for
    floats; bool: even odds), in the type's storage form."""
    shape = tuple(shape)
    if dtype is DType.BOOL:
        return rng.random(shape) < 0.5
    if dtype.is_integer:
        lo, hi = _limits(dtype)
        lo = lo if low is None else max(lo, int(low))
        hi = hi if high is None else min(hi, int(high))
        return rng.integers(lo, hi, shape, endpoint=True, dtype=np.int64).astype(dtype.numpy)
    lo = -4.0 if low is None else low
    hi = 4.0 if high is None else high
    return rng.uniform(lo, hi, shape).astype(np.float32).astype(dtype.numpy)


def _zero_point(dtype: DType, value: int) -> int:
    """``value`` where the type takes a non-zero zero point (int8 only, in TOSA 1.0), else 0."""
    return value if dtype is DType.INT8 else 0


def _program(inputs: Sequence[tuple[str, Sequence[int], DType]], build: Callable[..., Any]) -> Program:
    """A program over graph inputs (name, shape, type); ``build(b, *inputs)`` returns its output(s)."""
    b = ProgramBuilder()
    values = [b.input(name, shape, dtype) for name, shape, dtype in inputs]
    outs = build(b, *values)
    b.output(*(outs if isinstance(outs, tuple) else (outs,)))
    return b.build()


def _single(
    inputs: Sequence[tuple[str, Sequence[int], DType]],
    build: Callable[..., Any],
    arrays: Sequence[np.ndarray],
    kind: str = "rounded",
) -> Case:
    program = _program(inputs, build)
    return Case(program, (tuple(arrays),), kind)


# A case factory: the operator (one factory serves a family), every type variable bound, the case's RNG.
Factory = Callable[[Op, Mapping[str, DType], np.random.Generator], Case]
CASES: dict[Op, Factory] = {}


def factory(*ops: Op) -> Callable[[Factory], Factory]:
    """Register the decorated function as the case factory of ``ops``."""

    def register(fn: Factory) -> Factory:
        CASES.update(dict.fromkeys(ops, fn))
        return fn

    return register


def case(op: Op, signature: Signature) -> Case:
    """The case of ``op`` for ``signature``. KeyError: the operator has no factory."""
    seed = zlib.crc32(f"{op.name}:{signature}".encode()) ^ SEED
    return CASES[op](op, binding(op, signature), np.random.default_rng(seed))


# ---- element-wise ---------------------------------------------------------------------------------------

# The domain of each float operator's inputs: (low, high) of the magnitude, and whether signs mix.
UNARY_DOMAIN: dict[Op, tuple[float, float, bool]] = {
    Op.LOG: (0.05, 8.0, False),
    Op.RSQRT: (0.05, 8.0, False),
    Op.RECIPROCAL: (0.1, 8.0, True),  # no zero divisor
    Op.EXP: (0.0, 6.0, True),
    Op.SIN: (0.0, 6.0, True),
    Op.COS: (0.0, 6.0, True),
    Op.SIGMOID: (0.0, 6.0, True),
    Op.ERF: (0.0, 3.0, True),
}
EXACT_UNARY = {Op.ABS, Op.CEIL, Op.FLOOR, Op.BITWISE_NOT, Op.CLZ, Op.LOGICAL_NOT}


def _float_domain(rng: np.random.Generator, op: Op, dtype: DType, shape: Sequence[int]) -> np.ndarray:
    low, high, signed = UNARY_DOMAIN.get(op, (0.0, 4.0, True))
    magnitude = rng.uniform(low, high, shape)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0) if signed else 1.0
    return (magnitude * sign).astype(np.float32).astype(dtype.numpy)


@factory(
    *(Op.ABS, Op.CEIL, Op.FLOOR, Op.COS, Op.SIN, Op.EXP, Op.LOG, Op.RECIPROCAL, Op.RSQRT),
    *(Op.ERF, Op.SIGMOID, Op.TANH, Op.BITWISE_NOT, Op.CLZ, Op.LOGICAL_NOT),
)
def _unary(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_out_t"]
    if dtype.is_float:
        x = _float_domain(rng, op, dtype, SHAPE)
    elif op is Op.ABS:
        x = data(rng, dtype, SHAPE, low=_limits(dtype)[0] + 1)  # |minimum| does not fit
    else:
        x = data(rng, dtype, SHAPE)
    kind = "exact" if op in EXACT_UNARY else "rounded"
    return _single([("x", SHAPE, dtype)], lambda b, v: b.op(op, [v]), [x], kind)


@factory(Op.NEGATE)
def _negate(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_out_t"]
    if dtype.is_float:
        x = data(rng, dtype, SHAPE)
    else:
        x = data(rng, dtype, SHAPE, low=_limits(dtype)[0] + 1)  # -minimum does not fit
    izp, ozp = _zero_point(dtype, 5), _zero_point(dtype, -3)
    return _single([("x", SHAPE, dtype)], lambda b, v: b.negate(v, izp, ozp), [x], "exact")


def _binary_operands(op: Op, dtype: DType, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Both operands of a binary operator, the second broadcast along W, within the operator's domain."""
    bits = dtype.bits
    if dtype is DType.BOOL or op.name.startswith("BITWISE") or op in (Op.MAXIMUM, Op.MINIMUM):
        return data(rng, dtype, SHAPE), data(rng, dtype, NARROW)
    if op in (Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL):
        # few distinct values, so that equal pairs occur
        a, c = rng.integers(-3, 4, SHAPE), rng.integers(-3, 4, NARROW)
        scale = 0.5 if dtype.is_float else 1
        return (a * scale).astype(np.float32).astype(dtype.numpy), (c * scale).astype(np.float32).astype(dtype.numpy)
    if dtype.is_float:
        if op is Op.POW:  # positive bases, small exponents: finite real results
            return data(rng, dtype, SHAPE, 0.5, 3.0), data(rng, dtype, NARROW, -2.0, 2.0)
        return data(rng, dtype, SHAPE), data(rng, dtype, NARROW)
    if op in (Op.ARITHMETIC_RIGHT_SHIFT, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT):
        return data(rng, dtype, SHAPE), data(rng, dtype, NARROW, 0, bits - 1)
    if op is Op.INTDIV:
        divisor = data(rng, dtype, NARROW, 1, 1000) * np.where(rng.random(NARROW) < 0.5, -1, 1).astype(dtype.numpy)
        return data(rng, dtype, SHAPE, -(2**30), 2**30), divisor
    # ADD, SUB: sums that do not overflow
    half = 2 ** (bits - 2)
    return data(rng, dtype, SHAPE, -half, half), data(rng, dtype, NARROW, -half, half)


@factory(
    *(Op.ADD, Op.SUB, Op.MAXIMUM, Op.MINIMUM, Op.POW, Op.INTDIV, Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR),
    *(Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT),
    *(Op.ARITHMETIC_RIGHT_SHIFT, Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL),
)
def _binary(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types.get("in_out_t") or types["in_t"]
    a, c = _binary_operands(op, dtype, rng)
    attrs = {"round": True} if op is Op.ARITHMETIC_RIGHT_SHIFT else {}
    kind = "exact" if op in (Op.MAXIMUM, Op.MINIMUM) else "rounded"
    inputs = [("a", SHAPE, dtype), ("c", NARROW, dtype)]
    return _single(inputs, lambda b, x, y: b.op(op, [x, y], **attrs), [a, c], kind)


@factory(Op.MUL)
def _mul(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_t"]
    shift = 5 if dtype is DType.INT32 else 0  # a shift is for int32 only
    if dtype is DType.INT32:  # products within 2^31 << shift
        a, c = data(rng, dtype, SHAPE, -40000, 40000), data(rng, dtype, NARROW, -40000, 40000)
    else:
        a, c = data(rng, dtype, SHAPE), data(rng, dtype, NARROW)
    inputs = [("a", SHAPE, dtype), ("c", NARROW, dtype)]
    return _single(inputs, lambda b, x, y: b.mul(x, y, shift), [a, c])


@factory(Op.TABLE)
def _table(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype, table_t = types["in_t"], types["table_t"]
    size = 256 if dtype is DType.INT8 else 513
    table = data(rng, table_t, (size,), -(2**14), 2**14)
    x = data(rng, dtype, SHAPE)
    return _single([("x", SHAPE, dtype)], lambda b, v: b.table(v, b.const(table, table_t)), [x])


@factory(Op.SELECT)
def _select(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_out_t"]
    inputs = [("cond", SHAPE, DType.BOOL), ("t", SHAPE, dtype), ("f", NARROW, dtype)]
    arrays = [data(rng, DType.BOOL, SHAPE), data(rng, dtype, SHAPE), data(rng, dtype, NARROW)]
    return _single(inputs, lambda b, c, t, f: b.select(c, t, f), arrays, "exact")


@factory(Op.CLAMP)
def _clamp(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_out_t"]
    low, high = (-1.5, 2.0) if dtype.is_float else (-50, 60)
    x = data(rng, dtype, SHAPE) if dtype.is_float else data(rng, dtype, SHAPE, -100, 100)
    return _single([("x", SHAPE, dtype)], lambda b, v: b.clamp(v, low, high), [x], "exact")


# ---- reductions -----------------------------------------------------------------------------------------


@factory(Op.REDUCE_ALL, Op.REDUCE_ANY, Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_PRODUCT, Op.REDUCE_SUM)
def _reduce(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_out_t"]
    if dtype is DType.BOOL:  # odds that leave both results in the output
        x = rng.random(SHAPE) < (0.8 if op is Op.REDUCE_ALL else 0.2)
    elif op is Op.REDUCE_PRODUCT:
        x = data(rng, dtype, SHAPE, -1.5, 1.5)
    elif op is Op.REDUCE_SUM and not dtype.is_float:
        x = data(rng, dtype, SHAPE, -1000, 1000)
    else:
        x = data(rng, dtype, SHAPE)
    kind = "accumulated" if op in (Op.REDUCE_SUM, Op.REDUCE_PRODUCT) else "exact"
    return _single([("x", SHAPE, dtype)], lambda b, v: b.op(op, [v], axis=1), [x], kind)


@factory(Op.ARGMAX)
def _argmax(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_t"]
    return _single([("x", SHAPE, dtype)], lambda b, v: b.argmax(v, axis=2), [data(rng, dtype, SHAPE)], "exact")


# ---- data layout, scatter / gather ----------------------------------------------------------------------


def _pad_value(dtype: DType) -> Any:
    return True if dtype is DType.BOOL else 1.5 if dtype.is_float else 5


LAYOUT: dict[Op, Callable[[ProgramBuilder, Any, DType], Any]] = {
    Op.IDENTITY: lambda b, v, dt: b.identity(v),
    Op.RESHAPE: lambda b, v, dt: b.reshape(v, [4, 15]),
    Op.REVERSE: lambda b, v, dt: b.reverse(v, axis=2),
    Op.SLICE: lambda b, v, dt: b.slice(v, [0, 1, 1, 0], [1, 2, 3, 3]),
    Op.TILE: lambda b, v, dt: b.tile(v, [1, 2, 1, 2]),
    Op.TRANSPOSE: lambda b, v, dt: b.transpose(v, [2, 0, 3, 1]),
    Op.PAD: lambda b, v, dt: b.pad(v, [[0, 0], [1, 0], [0, 2], [1, 1]], _pad_value(dt)),
}


@factory(*LAYOUT)
def _layout(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_out_t"]
    x = data(rng, dtype, SHAPE)
    return _single([("x", SHAPE, dtype)], lambda b, v: LAYOUT[op](b, v, dtype), [x], "exact")


@factory(Op.CONCAT)
def _concat(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_out_t"]
    second = (1, 2, 5, 3)
    inputs = [("a", SHAPE, dtype), ("c", second, dtype)]
    arrays = [data(rng, dtype, SHAPE), data(rng, dtype, second)]
    return _single(inputs, lambda b, x, y: b.concat([x, y], axis=1), arrays, "exact")


@factory(Op.GATHER)
def _gather(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype, index_t = types["in_out_t"], types["index_t"]
    values, indices = data(rng, dtype, (2, 6, 3)), data(rng, index_t, (2, 4), 0, 5)
    inputs = [("values", (2, 6, 3), dtype), ("indices", (2, 4), index_t)]
    return _single(inputs, lambda b, v, i: b.gather(v, i), [values, indices], "exact")


@factory(Op.SCATTER)
def _scatter(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype, index_t = types["in_out_t"], types["index_t"]
    # each row of values_in written at most once: distinct indices per batch
    indices = np.stack([rng.permutation(6)[:4] for _ in range(2)]).astype(index_t.numpy)
    inputs = [("values_in", (2, 6, 3), dtype), ("indices", (2, 4), index_t), ("input", (2, 4, 3), dtype)]
    arrays = [data(rng, dtype, (2, 6, 3)), indices, data(rng, dtype, (2, 4, 3))]
    return _single(inputs, lambda b, v, i, x: b.scatter(v, i, x), arrays, "exact")


# ---- type conversion ------------------------------------------------------------------------------------


def _cast_input(rng: np.random.Generator, src: DType, dst: DType) -> np.ndarray:
    if src is DType.BOOL:
        return data(rng, src, SHAPE)
    if dst is DType.BOOL:  # zeros among the values
        return data(rng, src, SHAPE, -3, 3)
    reach = min(_limits(src)[1], _limits(dst)[1])
    if src.is_integer:
        return data(rng, src, SHAPE, -reach, reach)
    # floats: within the target's range, half of them on a multiple of 1/2 (ties of the rounding to integer)
    top = min(0.5 * reach, 1e6)
    x = rng.uniform(-top, top, SHAPE)
    ties = rng.random(SHAPE) < 0.5
    x[ties] = np.round(x[ties] * 2) / 2
    return x.astype(np.float32).astype(src.numpy)


@factory(Op.CAST)
def _cast(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    src, dst = types["in_t"], types["out_t"]
    x = _cast_input(rng, src, dst)
    # every conversion is exactly specified (round to nearest, ties to even; saturation)
    return _single([("x", SHAPE, src)], lambda b, v: b.cast(v, dst), [x], "exact")


def _scale_parameters(src: DType, dst: DType, scale32: bool) -> tuple[int, int]:
    """A multiplier and shift that map ``src``'s range onto a little under ``dst``'s."""
    target = 0.4 * _limits(dst)[1] / _limits(src)[1]
    top = 30 if scale32 else 14  # the multiplier's leading bit
    shift = top - int(np.floor(np.log2(target)))
    shift = min(max(shift, 2), 62)
    return int(target * 2.0**shift), shift


@factory(Op.RESCALE)
def _rescale(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    src, dst = types["in_t"], types["out_t"]
    scale32 = src is not DType.INT48  # a 48-bit input takes the 16-bit multiplier
    multiplier, shift = _scale_parameters(src, dst, scale32)
    multiplier_t = DType.INT32 if scale32 else DType.INT16
    x = data(rng, src, SHAPE, -(2**40), 2**40)

    def build(b: ProgramBuilder, v: Any) -> Any:
        mul = b.const(np.array([multiplier]), multiplier_t)
        sh = b.const(np.array([shift]), DType.INT8)
        izp, ozp = _zero_point(src, 3), _zero_point(dst, -4)
        return b.rescale(v, mul, sh, izp, ozp, out_dtype=dst, scale32=scale32)

    return _single([("x", SHAPE, src)], build, [x])


# ---- data nodes -----------------------------------------------------------------------------------------


@factory(Op.CONST)
def _const(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["out_t"]
    values = data(rng, dtype, (2, 3))
    b = ProgramBuilder()
    b.output(b.const(values, dtype))
    return Case(b.build(), ((),), "exact")


@factory(Op.CONST_SHAPE)
def _const_shape(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    # a shape value is read by the operator it feeds: RESHAPE's new shape
    x = data(rng, DType.FP32, SHAPE)
    return _single([("x", SHAPE, DType.FP32)], lambda b, v: b.reshape(v, b.const_shape([5, 12])), [x], "exact")


# ---- tensor operators -----------------------------------------------------------------------------------


def _tensor_data(rng: np.random.Generator, dtype: DType, shape: Sequence[int]) -> np.ndarray:
    return data(rng, dtype, shape, -2.0, 2.0) if dtype.is_float else data(rng, dtype, shape)


def _bias(rng: np.random.Generator, dtype: DType, channels: int) -> np.ndarray:
    return data(rng, dtype, (channels,), -1.0, 1.0) if dtype.is_float else data(rng, dtype, (channels,), -1000, 1000)


# operator: (input shape, weight shape, output channels, attributes)
CONVOLUTIONS: dict[Op, tuple[tuple[int, ...], tuple[int, ...], int, dict[str, Any]]] = {
    Op.CONV2D: ((1, 4, 5, 3), (4, 2, 2, 3), 4, {"pad": (0, 1, 1, 0), "stride": (1, 2), "dilation": (1, 1)}),
    Op.CONV3D: (
        (1, 3, 4, 5, 2),
        (3, 2, 2, 2, 2),
        3,
        {"pad": (0, 0, 1, 0, 0, 1), "stride": (1, 1, 2), "dilation": (1, 1, 1)},
    ),
    Op.DEPTHWISE_CONV2D: ((1, 4, 5, 3), (2, 2, 3, 2), 6, {"pad": (1, 0, 0, 0), "stride": (1, 1), "dilation": (1, 2)}),
    Op.TRANSPOSE_CONV2D: ((1, 4, 5, 3), (4, 2, 2, 3), 4, {"out_pad": (0, 1, 0, 0), "stride": (2, 1)}),
}


@factory(*CONVOLUTIONS)
def _convolution(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    in_t, weight_t, out_t = types["in_t"], types["weight_t"], types["out_t"]
    in_shape, w_shape, channels, attrs = CONVOLUTIONS[op]
    izp, wzp = _zero_point(in_t, 3), _zero_point(weight_t, -2)
    inputs = [("x", in_shape, in_t), ("w", w_shape, weight_t), ("bias", (channels,), out_t)]
    arrays = [_tensor_data(rng, in_t, in_shape), _tensor_data(rng, weight_t, w_shape), _bias(rng, out_t, channels)]

    def build(b: ProgramBuilder, x: Any, w: Any, bias: Any) -> Any:
        zps = [b.const(np.array([izp]), in_t), b.const(np.array([wzp]), weight_t)]
        return b.op(op, [x, w, bias, *zps], acc_type=types["acc_t"], **attrs)

    return _single(inputs, build, arrays, "accumulated")


@factory(Op.MATMUL)
def _matmul(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    in_t = types["in_t"]
    inputs = [("a", (2, 3, 4), in_t), ("c", (2, 4, 5), in_t)]
    arrays = [_tensor_data(rng, in_t, (2, 3, 4)), _tensor_data(rng, in_t, (2, 4, 5))]
    zps = (_zero_point(in_t, 2), _zero_point(in_t, -1))

    def build(b: ProgramBuilder, a: Any, c: Any) -> Any:
        return b.op(op, [a, c, *(b.const(np.array([z]), in_t) for z in zps)], out_dtype=types["out_t"])

    return _single(inputs, build, arrays, "accumulated")


POOL = {"kernel": (2, 2), "stride": (1, 2), "pad": (0, 0, 1, 0)}


@factory(Op.AVG_POOL2D)
def _avg_pool(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_out_t"]
    izp, ozp = _zero_point(dtype, -1), _zero_point(dtype, 2)

    def build(b: ProgramBuilder, v: Any) -> Any:
        return b.avg_pool2d(v, izp, ozp, acc_type=str(types["acc_t"]), **POOL)

    return _single([("x", SHAPE, dtype)], build, [_tensor_data(rng, dtype, SHAPE)], "accumulated")


@factory(Op.MAX_POOL2D)
def _max_pool(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype = types["in_out_t"]
    x = _tensor_data(rng, dtype, SHAPE)
    return _single([("x", SHAPE, dtype)], lambda b, v: b.max_pool2d(v, **POOL), [x], "exact")


@factory(Op.FFT2D)
def _fft(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype, shape = types["in_out_t"], (1, 4, 8)
    inputs = [("re", shape, dtype), ("im", shape, dtype)]
    arrays = [data(rng, dtype, shape), data(rng, dtype, shape)]
    return _single(inputs, lambda b, re, im: b.fft2d(re, im, inverse=False), arrays, "accumulated")


@factory(Op.RFFT2D)
def _rfft(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    dtype, shape = types["in_out_t"], (1, 4, 8)
    return _single([("re", shape, dtype)], lambda b, re: b.rfft2d(re), [data(rng, dtype, shape)], "accumulated")


# ---- image ----------------------------------------------------------------------------------------------


@factory(Op.RESIZE)
def _resize(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    in_t, out_t = types["in_t"], types["out_t"]
    # integers keep their type only when NEAREST (BILINEAR widens them by the scale's numerators)
    mode = "nearest" if in_t.is_integer and in_t == out_t else "bilinear"
    x = _tensor_data(rng, in_t, SHAPE)

    def build(b: ProgramBuilder, v: Any) -> Any:
        return b.resize(v, [4, 2, 3, 2], [1, -1], [1, -1], mode=mode, out_dtype=str(out_t))

    # a weighted sum of four neighbours, in resize_t's precision
    return _single([("x", SHAPE, in_t)], build, [x], "accumulated")


# ---- control flow and variables -------------------------------------------------------------------------

SMALL = (2, 3)


@factory(Op.COND_IF)
def _cond_if(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    def build(b: ProgramBuilder, cond: Any, x: Any) -> Any:
        return b.cond_if(cond, [x], lambda g, v: g.add(v, v), lambda g, v: g.mul(v, v))

    program = _program([("cond", (1,), DType.BOOL), ("x", SMALL, DType.FP32)], build)
    x = data(rng, DType.FP32, SMALL)
    calls = ((np.array([False]), x), (np.array([True]), x))  # both branches, one executable
    return Case(program, calls)


@factory(Op.WHILE_LOOP)
def _while_loop(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    def build(b: ProgramBuilder, count: Any, x: Any) -> Any:
        def cond(g: ProgramBuilder, i: Any, v: Any) -> Any:
            return g.greater(g.const(np.array([3], np.int32)), i)

        def body(g: ProgramBuilder, i: Any, v: Any) -> Any:
            return g.add(i, g.const(np.array([1], np.int32))), g.add(v, v)

        return b.while_loop([count, x], cond, body)

    program = _program([("count", (1,), DType.INT32), ("x", SMALL, DType.FP32)], build)
    return Case(program, ((np.array([0], np.int32), data(rng, DType.FP32, SMALL)),))


@factory(Op.VARIABLE, Op.VARIABLE_READ, Op.VARIABLE_WRITE)
def _variable(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    # one program declares, reads and then writes the variable: the first call returns the initial value,
    # the second what the first wrote
    dtype = types.get("in_t") or types["out_t"]

    def build(b: ProgramBuilder, x: Any) -> Any:
        state = b.variable("state", SMALL, dtype, initial_value=data(rng, dtype, SMALL))
        now = b.variable_read(state)
        b.variable_write(state, x)
        return now

    program = _program([("x", SMALL, dtype)], build)
    return Case(program, ((data(rng, dtype, SMALL),), (data(rng, dtype, SMALL),)), "exact")


@factory(Op.CUSTOM)
def _custom(op: Op, types: Mapping[str, DType], rng: np.random.Generator) -> Case:
    # built for the refusal test only (CUSTOM is EXEMPT from running)
    def build(b: ProgramBuilder, x: Any) -> Any:
        return b.custom([x], [(SMALL, "fp32")], operator_name="ironaccel.suite.copy")

    program = _program([("x", SMALL, DType.FP32)], build)
    return Case(program, ((data(rng, DType.FP32, SMALL),),))


__all__ = ["CASES", "EXEMPT", "FLOATS", "SEED", "Case", "binding", "case", "data", "in_specification"]
