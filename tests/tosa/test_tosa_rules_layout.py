"""Operator rules of the data-layout, scatter/gather and image groups, called directly.

Each operator gets a valid case with its inferred shapes asserted, and each of its ERROR_IF / REQUIRE
conditions firing with the rule text that names it. :class:`RuleContext` is the minimal rule Context
the other ``test_tosa_rules_*`` modules use too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest

from ironaccel.tosa.attributes import (
    Attribute,
    ConcatAttribute,
    ResizeAttribute,
    ResizeMode,
    ReverseAttribute,
    TransposeAttribute,
    default_attribute,
)
from ironaccel.tosa.dtypes import DType
from ironaccel.tosa.errors import ValidationError
from ironaccel.tosa.operators import Op
from ironaccel.tosa.ops.rule import LEVEL_NONE, Level, TensorType, rule_for

Shape = tuple[int, ...]


@dataclasses.dataclass
class RuleContext:
    """A rule Context over explicit operand types; constants by input index."""

    op: Op
    attribute: Attribute
    inputs: Sequence[TensorType]
    outputs: Sequence[TensorType] | None = None
    level: Level = LEVEL_NONE
    consts: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)

    def const(self, index: int) -> np.ndarray | None:
        return self.consts.get(index)

    def error_if(self, condition: bool, rule: str, tensor: str | None = None) -> None:
        if condition:
            raise ValidationError(rule, op=self.op.name, tensor=tensor)

    def require(self, condition: bool, rule: str, tensor: str | None = None) -> None:
        if not condition:
            raise ValidationError(rule, op=self.op.name, tensor=tensor, unpredictable=True)


class Operand:
    """An input operand: its type, and its value when it is a compile-time constant."""

    def __init__(self, shape: Shape, dtype: DType | str = DType.FP32, value: object = None, name: str = "") -> None:
        self.type = TensorType(tuple(shape), DType.parse(dtype), name)
        self.value = None if value is None else np.asarray(value, dtype=self.type.dtype.numpy)


def t(*shape: int, dtype: DType | str = DType.FP32, name: str = "") -> Operand:
    return Operand(shape, dtype, name=name)


def shape_value(*values: int, name: str = "") -> Operand:
    """A constant SHAPE operand (as CONST_SHAPE makes it)."""
    return Operand((len(values),), DType.SHAPE, list(values), name)


def const(values: Sequence, dtype: DType | str, name: str = "") -> Operand:
    arr = np.asarray(values)
    return Operand(arr.shape, dtype, arr, name)


def make(
    op: Op,
    *inputs: Operand,
    attribute: Attribute | None = None,
    outputs: Sequence[TensorType] | None = None,
    level: Level = LEVEL_NONE,
    **extra: object,
) -> RuleContext:
    ctx = RuleContext(
        op,
        attribute if attribute is not None else default_attribute(op),
        [o.type for o in inputs],
        outputs,
        level,
        {i: o.value for i, o in enumerate(inputs) if o.value is not None},
    )
    for key, value in extra.items():
        setattr(ctx, key, value)
    return ctx


def infer(op: Op, *inputs: Operand, **kwargs) -> list[Shape]:
    rule = rule_for(op)
    assert rule is not None, f"no rule for {op.name}"
    return rule(make(op, *inputs, **kwargs))


def fails(op: Op, *inputs: Operand, match: str, **kwargs) -> ValidationError:
    with pytest.raises(ValidationError, match=match) as info:
        infer(op, *inputs, **kwargs)
    return info.value


def test_every_group_operator_has_a_rule():
    for op in (
        Op.CONCAT, Op.PAD, Op.RESHAPE, Op.REVERSE, Op.SLICE, Op.TILE, Op.TRANSPOSE, Op.GATHER, Op.SCATTER,
        Op.RESIZE, Op.CAST, Op.RESCALE, Op.CONST, Op.IDENTITY, Op.CUSTOM, Op.COND_IF, Op.WHILE_LOOP,
        Op.VARIABLE, Op.VARIABLE_WRITE, Op.VARIABLE_READ, Op.CONST_SHAPE,
    ):  # fmt: skip
        assert rule_for(op) is not None, op.name


# -- CONCAT -----------------------------------------------------------------------------------------
def test_concat_sums_the_axis():
    assert infer(Op.CONCAT, t(2, 3, 4), t(2, 5, 4), t(2, 1, 4), attribute=ConcatAttribute(1)) == [(2, 9, 4)]
    assert infer(Op.CONCAT, t(7), attribute=ConcatAttribute(0)) == [(7,)]


def test_concat_unknown_dims_propagate():
    assert infer(Op.CONCAT, t(-1, 3), t(2, 3), attribute=ConcatAttribute(0)) == [(-1, 3)]
    assert infer(Op.CONCAT, t(-1, 3), t(2, 3), attribute=ConcatAttribute(1)) == [(2, 6)]


def test_concat_errors():
    fails(Op.CONCAT, match=r"ERROR_IF\(input1 == \[\]\)", attribute=ConcatAttribute(0))
    fails(Op.CONCAT, t(2, 3), match=r"ERROR_IF\(axis < 0", attribute=ConcatAttribute(-1))
    fails(Op.CONCAT, t(2, 3), match=r"axis >= max\(1, rank\(input1\[0\]\)\)", attribute=ConcatAttribute(2))
    fails(Op.CONCAT, t(2, 3), t(2, 3, 1), match=r"ERROR_IF\(rank\(input1\[i\]\) != rank", attribute=ConcatAttribute(0))
    fails(
        Op.CONCAT,
        t(2, 3),
        t(2, 4),
        match=r"input1\[0\]\.shape\[1\]\) off the concat axis",
        attribute=ConcatAttribute(0),
    )


def test_wrong_attribute_table_is_an_error_not_a_crash():
    fails(
        Op.CONCAT,
        t(2),
        match="attribute table ReverseAttribute does not belong to CONCAT",
        attribute=ReverseAttribute(0),
    )


# -- PAD --------------------------------------------------------------------------------------------
def pad_const() -> Operand:
    return const([0.0], DType.FP32)


def test_pad_grows_each_dim():
    assert infer(Op.PAD, t(2, 3), shape_value(1, 0, 2, 3), pad_const()) == [(3, 8)]
    assert infer(Op.PAD, t(-1, 3), shape_value(1, 1, 0, 0), pad_const()) == [(-1, 3)]


def test_pad_without_constant_padding_keeps_rank():
    assert infer(Op.PAD, t(2, 3), t(4, dtype=DType.SHAPE), pad_const()) == [(-1, -1)]


def test_pad_errors():
    fails(
        Op.PAD,
        t(2, 3),
        shape_value(1, -1, 0, 0),
        pad_const(),
        match=r"ERROR_IF\(padding\[0\] < 0 \|\| padding\[1\] < 0\)",
    )


# -- RESHAPE ----------------------------------------------------------------------------------------
def test_reshape_takes_the_shape_values():
    assert infer(Op.RESHAPE, t(2, 3, 4), shape_value(6, 4)) == [(6, 4)]
    assert infer(Op.RESHAPE, t(1), shape_value()) == [()]
    assert infer(Op.RESHAPE, t(2, 3), t(3, dtype=DType.SHAPE)) == [(-1, -1, -1)]


def test_reshape_element_count_must_match():
    fails(
        Op.RESHAPE,
        t(2, 3),
        shape_value(7),
        match=r"ERROR_IF\(tensor_size\(shape\(input1\)\) != tensor_size\(shape\)\): 6 != 7",
    )


# -- REVERSE ----------------------------------------------------------------------------------------
def test_reverse():
    assert infer(Op.REVERSE, t(2, 3), attribute=ReverseAttribute(1)) == [(2, 3)]
    fails(Op.REVERSE, t(2, 3), match=r"ERROR_IF\(axis < 0 \|\| axis >= rank\(input1\)\)", attribute=ReverseAttribute(2))
    fails(Op.REVERSE, t(2, 3), match=r"ERROR_IF\(axis < 0", attribute=ReverseAttribute(-1))


# -- SLICE ------------------------------------------------------------------------------------------
def test_slice_output_is_size():
    assert infer(Op.SLICE, t(4, 5), shape_value(1, 0), shape_value(3, 5)) == [(3, 5)]
    assert infer(Op.SLICE, t(4, 5), shape_value(1, 0), t(2, dtype=DType.SHAPE)) == [(-1, -1)]


def test_slice_errors():
    fails(Op.SLICE, t(4, 5), shape_value(0), shape_value(1, 1), match=r"ERROR_IF\(rank\(input1\) != length\(start\)")
    fails(Op.SLICE, t(4, 5), shape_value(0, 0), shape_value(1), match=r"rank\(input1\) != length\(size\)")
    fails(Op.SLICE, t(4, 5), shape_value(0, -1), shape_value(1, 1), match=r"ERROR_IF\(start\[1\] < 0\)")
    fails(Op.SLICE, t(4, 5), shape_value(0, 0), shape_value(1, 0), match=r"ERROR_IF\(size\[1\] <= 0\)")
    fails(
        Op.SLICE, t(4, 5), shape_value(2, 0), shape_value(3, 5),
        match=r"ERROR_IF\(start\[0\] \+ size\[0\] > shape\(input1\)\[0\]\): 2 \+ 3 > 4",
    )  # fmt: skip


# -- TILE -------------------------------------------------------------------------------------------
def test_tile_multiplies():
    assert infer(Op.TILE, t(2, 3), shape_value(3, 1)) == [(6, 3)]
    assert infer(Op.TILE, t(-1, 3), shape_value(3, 2)) == [(-1, 6)]


# -- TRANSPOSE --------------------------------------------------------------------------------------
def test_transpose_permutes():
    assert infer(Op.TRANSPOSE, t(2, 3, 4), attribute=TransposeAttribute((2, 0, 1))) == [(4, 2, 3)]


def test_transpose_errors():
    fails(
        Op.TRANSPOSE, t(2, 3), match=r"ERROR_IF\(size\(perms\) != rank\(input1\)\)", attribute=TransposeAttribute((0,))
    )
    fails(
        Op.TRANSPOSE,
        t(2, 3),
        match=r"ERROR_IF\(perms\[i\] < 0 \|\| perms\[i\] >= rank",
        attribute=TransposeAttribute((0, 2)),
    )
    fails(Op.TRANSPOSE, t(2, 3), match=r"ERROR_IF\(perms\[i\] < 0", attribute=TransposeAttribute((-1, 0)))
    fails(Op.TRANSPOSE, t(2, 3), match=r"ERROR_IF\(perms uses index 1 twice\)", attribute=TransposeAttribute((1, 1)))


# -- GATHER / SCATTER -------------------------------------------------------------------------------
def test_gather():
    assert infer(Op.GATHER, t(2, 5, 3), t(2, 4, dtype=DType.INT32)) == [(2, 4, 3)]
    assert infer(Op.GATHER, t(-1, 5, 3), t(2, 4, dtype=DType.INT32)) == [(2, 4, 3)]
    assert infer(Op.GATHER, t(2, 5, 3), const([[0, 4], [1, 1]], DType.INT32)) == [(2, 2, 3)]
    err = fails(
        Op.GATHER, t(2, 5, 3), const([[0, 5], [1, 1]], DType.INT32), match=r"REQUIRE\(0 <= indices\[n,w\] < K=5\)"
    )
    assert err.unpredictable


def test_scatter():
    values_in, indices, data = t(2, 5, 3), t(2, 4, dtype=DType.INT32), t(2, 4, 3)
    assert infer(Op.SCATTER, values_in, indices, data) == [(2, 5, 3)]
    unique = const([[0, 1, 2, 3], [4, 3, 2, 1]], DType.INT32)
    assert infer(Op.SCATTER, values_in, unique, data) == [(2, 5, 3)]
    twice = const([[0, 1, 2, 3], [4, 3, 3, 1]], DType.INT32)
    err = fails(Op.SCATTER, values_in, twice, data, match=r"REQUIRE\(each output position written at most once\)")
    assert err.unpredictable
    fails(Op.SCATTER, values_in, const([[0, 1, 2, -1]] * 2, DType.INT32), data, match=r"REQUIRE\(0 <= indices")


# -- RESIZE -----------------------------------------------------------------------------------------
def resize(
    shape: Shape = (1, 5, 9, 3),
    scale: Sequence[int] = (4, 2, 4, 2),
    offset: Sequence[int] = (0, 0),
    border: Sequence[int] = (0, 0),
    **kwargs,
) -> list[Shape]:
    return infer(
        Op.RESIZE, t(*shape), shape_value(*scale), shape_value(*offset), shape_value(*border),
        attribute=ResizeAttribute(ResizeMode.BILINEAR), **kwargs,
    )  # fmt: skip


def resize_fails(match: str, **kwargs) -> ValidationError:
    with pytest.raises(ValidationError, match=match) as info:
        resize(**kwargs)
    return info.value


def test_resize_output_size():
    # OH = ((IH - 1) * n - offset + border) / d + 1
    assert resize() == [(1, 9, 17, 3)]
    assert resize(shape=(2, 4, 4, 8), scale=(4, 1, 2, 1), offset=(-1, 0), border=(2, 1)) == [(2, 16, 8, 8)]
    assert resize(scale=(1, 2, 1, 2)) == [(1, 3, 5, 3)]  # downscale by 2


def test_resize_without_constant_parameters():
    out = infer(
        Op.RESIZE, t(1, 5, 9, 3), t(4, dtype=DType.SHAPE), t(2, dtype=DType.SHAPE), t(2, dtype=DType.SHAPE),
        attribute=ResizeAttribute(ResizeMode.NEAREST),
    )  # fmt: skip
    assert out == [(1, -1, -1, 3)]


def test_resize_errors():
    resize_fails(r"ERROR_IF\(scale_y_n <= 0 \|\| scale_y_d <= 0", scale=(4, 0, 4, 2))
    resize_fails(r"ERROR_IF\(scale_y_n <= 0", scale=(4, 2, -4, 2))
    resize_fails(r"ERROR_IF\(scale_y_n > 2048 \|\| scale_x_n > 2048\)", scale=(4, 2, 2049, 2048))
    resize_fails(r"ERROR_IF\(scale_y_d >= 16 \* scale_y_n", scale=(1, 16, 1, 1))
    resize_fails(r"ERROR_IF\(offset_y < -scale_y_n \|\| offset_y >= 16 \* scale_y_n\)", offset=(-5, 0))
    resize_fails(r"ERROR_IF\(offset_y < -scale_y_n", offset=(64, 0))
    resize_fails(r"ERROR_IF\(offset_x < -scale_x_n \|\| offset_x >= 16 \* scale_x_n\)", offset=(0, 64))
    resize_fails(r"ERROR_IF\(border_y < -16 \* scale_y_n \|\| border_y >= scale_y_n\)", border=(4, 0))
    resize_fails(r"ERROR_IF\(border_x < -16 \* scale_x_n \|\| border_x >= scale_x_n\)", border=(0, -65))
    resize_fails(
        r"ERROR_IF\(\(IH - 1\) \* scale_y_n - offset_y \+ border_y is not a multiple of scale_y_d\)", scale=(4, 3, 4, 2)
    )
    resize_fails(r"ERROR_IF\(\(IW - 1\) \* scale_x_n - offset_x \+ border_x is not a multiple", scale=(4, 2, 4, 3))
    resize_fails(r"ERROR_IF\(max\(OH, OW, IH, IW\) >= 16384\)", shape=(1, 16384, 2, 1), scale=(1, 1, 1, 1))
    resize_fails(r"ERROR_IF\(max\(OH, OW, IH, IW\) >= 16384\)", shape=(1, 2, 4097, 1), scale=(1, 1, 4, 1))


def test_resize_size_limit_uses_declared_output_when_parameters_unknown():
    with pytest.raises(ValidationError, match=r"max\(OH, OW, IH, IW\) >= 16384"):
        infer(
            Op.RESIZE, t(1, 5, 9, 3), t(4, dtype=DType.SHAPE), t(2, dtype=DType.SHAPE), t(2, dtype=DType.SHAPE),
            attribute=ResizeAttribute(ResizeMode.NEAREST), outputs=[TensorType((1, 16384, 9, 3), DType.FP32)],
        )  # fmt: skip
