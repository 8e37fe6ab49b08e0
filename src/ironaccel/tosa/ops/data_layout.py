"""Rules of the data-layout operators: CONCAT, PAD, RESHAPE, REVERSE, SLICE, TILE, TRANSPOSE.

These operators move data without computing on it, so everything that can go wrong is a shape
relation. The SHAPE operands (PAD's padding, RESHAPE's shape, SLICE's start/size, TILE's multiples)
must be compile-time constants in TOSA 1.0 (the engine checks that); when a value is nevertheless not
known (EXT-DYNAMIC, or a builder asking before the constant exists) the dimensions that depend on it
are inferred as -1 ("unknown") and the value checks are skipped, while every rank relation is still
enforced.

A -1 dimension in an input is unknown too; a check that needs it is skipped and an output dimension
computed from it is -1. The engine compares the inferred shapes with the declared outputs, which is
how the specification's ``ERROR_IF(shape[i] != ...)`` conditions on output dimensions are enforced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ..attributes import Attribute, ConcatAttribute, ReverseAttribute, TransposeAttribute
from ..operators import Op
from .rule import Context, rule

A = TypeVar("A", bound=Attribute)

UNKNOWN = -1
Shape = tuple[int, ...]


def attribute_of(ctx: Context, cls: type[A]) -> A:
    """The operator's attribute record as ``cls``; a record of another operator's table is an error
    (a hostile file can pair any operator code with any attribute table)."""
    attr = ctx.attribute
    if isinstance(attr, cls):
        return attr
    ctx.error_if(True, f"the attribute table {type(attr).__name__} does not belong to {ctx.op.name}")
    return cls()


def known(*dims: int) -> bool:
    """True when no dimension is unknown (-1); checks that need a dimension are skipped otherwise."""
    return all(d != UNKNOWN for d in dims)


def shape_values(ctx: Context, index: int) -> tuple[int, ...] | None:
    """The integer values of SHAPE input ``index`` when they are compile-time constants, else None."""
    value = ctx.const(index)
    if value is None:
        return None
    return tuple(int(v) for v in value.reshape(-1))


def shape_length(ctx: Context, index: int) -> int:
    """The number of values of SHAPE input ``index`` (its declared length, else its constant's length)."""
    tensor = ctx.inputs[index]
    if tensor.rank == 1 and tensor.shape[0] != UNKNOWN:
        return tensor.shape[0]
    values = shape_values(ctx, index)
    return UNKNOWN if values is None else len(values)


def product(dims: Sequence[int]) -> int:
    """tensor_size of a shape, or -1 when a dimension is unknown."""
    size = 1
    for d in dims:
        if d == UNKNOWN:
            return UNKNOWN
        size *= d
    return size


@rule(Op.CONCAT)
def concat(ctx: Context) -> list[Shape]:
    """Every input has the rank and (off the axis) the dims of the first; the axis dim is their sum."""
    attr = attribute_of(ctx, ConcatAttribute)
    inputs = ctx.inputs
    if not inputs:
        ctx.error_if(True, "ERROR_IF(input1 == []): CONCAT needs at least one input")
        return [()]
    first = inputs[0]
    axis = attr.axis
    ctx.error_if(
        axis < 0 or axis >= max(1, first.rank),
        f"ERROR_IF(axis < 0 || axis >= max(1, rank(input1[0]))) with axis={axis}, rank={first.rank}",
    )
    for tensor in inputs[1:]:
        ctx.error_if(
            tensor.rank != first.rank,
            f"ERROR_IF(rank(input1[i]) != rank(input1[0])): {tensor.rank} != {first.rank}",
            tensor.name,
        )
        if tensor.rank != first.rank:
            continue
        for i, (dim, dim0) in enumerate(zip(tensor.shape, first.shape, strict=True)):
            ctx.error_if(
                i != axis and known(dim, dim0) and dim != dim0,
                f"ERROR_IF(input1[t].shape[{i}] != input1[0].shape[{i}]) off the concat axis: {dim} != {dim0}",
                tensor.name,
            )
    if not 0 <= axis < first.rank or any(t.rank != first.rank for t in inputs):
        return [first.shape]
    out = list(first.shape)
    axis_dims = [t.shape[axis] for t in inputs]
    out[axis] = UNKNOWN if UNKNOWN in axis_dims else sum(axis_dims)
    for i in range(first.rank):
        if i != axis and out[i] == UNKNOWN:
            # Another input may know the dimension that the first leaves open.
            out[i] = next((t.shape[i] for t in inputs if t.shape[i] != UNKNOWN), UNKNOWN)
    return [tuple(out)]


@rule(Op.PAD)
def pad(ctx: Context) -> list[Shape]:
    """padding holds [before, after] per dimension, both >= 0; the output grows by both."""
    input1 = ctx.inputs[0]
    rank = input1.rank
    # length(padding) == 2 * rank is the argument table's shape, checked by the engine.
    padding = shape_values(ctx, 1)
    if padding is None or len(padding) != 2 * rank:
        return [(UNKNOWN,) * rank]
    out = []
    for i, dim in enumerate(input1.shape):
        before, after = padding[2 * i], padding[2 * i + 1]
        ctx.error_if(
            before < 0 or after < 0,
            f"ERROR_IF(padding[{2 * i}] < 0 || padding[{2 * i + 1}] < 0): padding is ({before}, {after})",
            ctx.inputs[1].name,
        )
        out.append(UNKNOWN if dim == UNKNOWN else before + dim + after)
    return [tuple(out)]


@rule(Op.RESHAPE)
def reshape(ctx: Context) -> list[Shape]:
    """The output takes the shape input's values, and must hold as many elements as input1."""
    input1 = ctx.inputs[0]
    length = shape_length(ctx, 1)
    values = shape_values(ctx, 1)
    if values is None:
        return [(UNKNOWN,) * max(length, 0)]
    in_size = product(input1.shape)
    out_size = product(values)
    ctx.error_if(
        in_size != UNKNOWN and out_size != UNKNOWN and in_size != out_size,
        f"ERROR_IF(tensor_size(shape(input1)) != tensor_size(shape)): {in_size} != {out_size}",
    )
    return [values]


@rule(Op.REVERSE)
def reverse(ctx: Context) -> list[Shape]:
    """The axis must name a dimension of the input; the output keeps the input's shape."""
    attr = attribute_of(ctx, ReverseAttribute)
    input1 = ctx.inputs[0]
    ctx.error_if(
        attr.axis < 0 or attr.axis >= input1.rank,
        f"ERROR_IF(axis < 0 || axis >= rank(input1)) with axis={attr.axis}, rank={input1.rank}",
    )
    return [input1.shape]


@rule(Op.SLICE)
def slice_(ctx: Context) -> list[Shape]:
    """start/size give one value per dimension; the window [start, start+size) must lie in input1."""
    input1 = ctx.inputs[0]
    rank = input1.rank
    start_len, size_len = shape_length(ctx, 1), shape_length(ctx, 2)
    ctx.error_if(
        (start_len != UNKNOWN and start_len != rank) or (size_len != UNKNOWN and size_len != rank),
        f"ERROR_IF(rank(input1) != length(start) || rank(input1) != length(size)): "
        f"rank {rank}, start {start_len}, size {size_len}",
    )
    start, size = shape_values(ctx, 1), shape_values(ctx, 2)
    if start is not None and len(start) == rank:
        for i, s in enumerate(start):
            ctx.error_if(s < 0, f"ERROR_IF(start[{i}] < 0): start[{i}] = {s}", ctx.inputs[1].name)
    if size is None or len(size) != rank:
        return [(UNKNOWN,) * rank]
    for i, n in enumerate(size):
        ctx.error_if(n <= 0, f"ERROR_IF(size[{i}] <= 0): size[{i}] = {n}", ctx.inputs[2].name)
        if start is not None and len(start) == rank and known(input1.shape[i]):
            ctx.error_if(
                start[i] + n > input1.shape[i],
                f"ERROR_IF(start[{i}] + size[{i}] > shape(input1)[{i}]): {start[i]} + {n} > {input1.shape[i]}",
            )
    return [size]


@rule(Op.TILE)
def tile(ctx: Context) -> list[Shape]:
    """multiples gives one factor per dimension; each output dim is the input dim times its factor."""
    input1 = ctx.inputs[0]
    rank = input1.rank
    # length(multiples) == rank is the argument table's shape, checked by the engine.
    multiples = shape_values(ctx, 1)
    if multiples is None or len(multiples) != rank:
        return [(UNKNOWN,) * rank]
    return [tuple(UNKNOWN if d == UNKNOWN else d * m for d, m in zip(input1.shape, multiples, strict=True))]


@rule(Op.TRANSPOSE)
def transpose(ctx: Context) -> list[Shape]:
    """perms must be a permutation of 0..rank-1; output dim i is input dim perms[i]."""
    attr = attribute_of(ctx, TransposeAttribute)
    input1 = ctx.inputs[0]
    perms = tuple(attr.perms)
    rank = input1.rank
    ctx.error_if(len(perms) != rank, f"ERROR_IF(size(perms) != rank(input1)): {len(perms)} != {rank}")
    used: set[int] = set()
    for p in perms:
        ctx.error_if(p < 0 or p >= rank, f"ERROR_IF(perms[i] < 0 || perms[i] >= rank(input1)): {p} of rank {rank}")
        ctx.error_if(p in used, f"ERROR_IF(perms uses index {p} twice): perms must be a permutation")
        used.add(p)
    if sorted(perms) != list(range(rank)):
        return [(UNKNOWN,) * rank]
    return [tuple(input1.shape[p] for p in perms)]


__all__ = ["UNKNOWN", "attribute_of", "known", "product", "shape_length", "shape_values"]
