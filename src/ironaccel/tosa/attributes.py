"""Operator attributes as typed, frozen records, one per operator of TOSA 1.0.

Field order is the field order of the official schema's attribute tables, so the codec can map a
record to its flatbuffer table slot by position. In TOSA 1.0 many operands that look like attributes
(zero points, PAD's padding, SLICE's start/size, RESCALE's multiplier and shift, MUL's shift) are
operator inputs, not attributes; they live in the graph, not here.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import ClassVar

from .dtypes import DType
from .operators import Op


class NanPropagationMode(enum.IntEnum):
    UNKNOWN = 0
    PROPAGATE = 1
    IGNORE = 2


class ResizeMode(enum.IntEnum):
    UNKNOWN = 0
    NEAREST = 1
    BILINEAR = 2


class RoundingMode(enum.IntEnum):
    UNKNOWN = 0
    SINGLE_ROUND = 1
    INEXACT_ROUND = 2
    DOUBLE_ROUND = 3


@dataclasses.dataclass(frozen=True)
class Attribute:
    """Base of every attribute record; ``op`` names the operator it belongs to."""

    op: ClassVar[Op]


def _attr(op: Op):
    def wrap(cls):
        cls.op = op
        ATTRIBUTE_OF[op] = cls
        return dataclasses.dataclass(frozen=True)(cls)

    return wrap


ATTRIBUTE_OF: dict[Op, type[Attribute]] = {}

Ints = tuple[int, ...]
NAN = NanPropagationMode.PROPAGATE


@_attr(Op.ARGMAX)
class ArgMaxAttribute(Attribute):
    axis: int = 0
    nan_mode: NanPropagationMode = NAN


@_attr(Op.AVG_POOL2D)
class AvgPool2dAttribute(Attribute):
    kernel: Ints = ()
    stride: Ints = ()
    pad: Ints = ()
    acc_type: DType = DType.UNKNOWN


@_attr(Op.CONV2D)
class Conv2dAttribute(Attribute):
    pad: Ints = ()
    stride: Ints = ()
    dilation: Ints = ()
    local_bound: bool = False
    acc_type: DType = DType.UNKNOWN


@_attr(Op.CONV3D)
class Conv3dAttribute(Attribute):
    pad: Ints = ()
    stride: Ints = ()
    dilation: Ints = ()
    local_bound: bool = False
    acc_type: DType = DType.UNKNOWN


@_attr(Op.DEPTHWISE_CONV2D)
class DepthwiseConv2dAttribute(Attribute):
    pad: Ints = ()
    stride: Ints = ()
    dilation: Ints = ()
    local_bound: bool = False
    acc_type: DType = DType.UNKNOWN


@_attr(Op.FFT2D)
class FFT2dAttribute(Attribute):
    inverse: bool = False
    local_bound: bool = False


@_attr(Op.MATMUL)
class MatMulAttribute(Attribute):
    pass


@_attr(Op.MAX_POOL2D)
class MaxPool2dAttribute(Attribute):
    kernel: Ints = ()
    stride: Ints = ()
    pad: Ints = ()
    nan_mode: NanPropagationMode = NAN


@_attr(Op.RFFT2D)
class RFFT2dAttribute(Attribute):
    local_bound: bool = False


@_attr(Op.TRANSPOSE_CONV2D)
class TransposeConv2dAttribute(Attribute):
    out_pad: Ints = ()
    stride: Ints = ()
    local_bound: bool = False
    acc_type: DType = DType.UNKNOWN


@_attr(Op.CLAMP)
class ClampAttribute(Attribute):
    """min/max are stored as raw little-endian bytes of the input's dtype, as in the schema."""

    min_val: bytes = b""
    max_val: bytes = b""
    nan_mode: NanPropagationMode = NAN


@_attr(Op.ARITHMETIC_RIGHT_SHIFT)
class ArithmeticRightShiftAttribute(Attribute):
    round: bool = False


@_attr(Op.MAXIMUM)
class MaximumAttribute(Attribute):
    nan_mode: NanPropagationMode = NAN


@_attr(Op.MINIMUM)
class MinimumAttribute(Attribute):
    nan_mode: NanPropagationMode = NAN


@_attr(Op.REDUCE_ALL)
class ReduceAllAttribute(Attribute):
    axis: int = 0


@_attr(Op.REDUCE_ANY)
class ReduceAnyAttribute(Attribute):
    axis: int = 0


@_attr(Op.REDUCE_MAX)
class ReduceMaxAttribute(Attribute):
    axis: int = 0
    nan_mode: NanPropagationMode = NAN


@_attr(Op.REDUCE_MIN)
class ReduceMinAttribute(Attribute):
    axis: int = 0
    nan_mode: NanPropagationMode = NAN


@_attr(Op.REDUCE_PRODUCT)
class ReduceProductAttribute(Attribute):
    axis: int = 0


@_attr(Op.REDUCE_SUM)
class ReduceSumAttribute(Attribute):
    axis: int = 0


@_attr(Op.CONCAT)
class ConcatAttribute(Attribute):
    axis: int = 0


@_attr(Op.REVERSE)
class ReverseAttribute(Attribute):
    axis: int = 0


@_attr(Op.TRANSPOSE)
class TransposeAttribute(Attribute):
    perms: Ints = ()


@_attr(Op.RESIZE)
class ResizeAttribute(Attribute):
    mode: ResizeMode = ResizeMode.UNKNOWN


@_attr(Op.RESCALE)
class RescaleAttribute(Attribute):
    scale32: bool = False
    rounding_mode: RoundingMode = RoundingMode.UNKNOWN
    per_channel: bool = False
    input_unsigned: bool = False
    output_unsigned: bool = False


@_attr(Op.CUSTOM)
class CustomAttribute(Attribute):
    operator_name: str = ""
    domain_name: str = ""
    implementation_attrs: bytes = b""


@_attr(Op.COND_IF)
class CondIfAttribute(Attribute):
    then_graph: str = ""
    else_graph: str = ""


@_attr(Op.WHILE_LOOP)
class WhileLoopAttribute(Attribute):
    cond_graph: str = ""
    body_graph: str = ""


def _empty(op: Op) -> type[Attribute]:
    name = "".join(part.capitalize() for part in op.name.split("_")) + "Attribute"
    cls = type(name, (Attribute,), {"__module__": __name__, "__doc__": f"{op.name} has no attributes."})
    return _attr(op)(cls)


# Operators whose schema table has no fields get an empty record, so every 1.0 operator has one.
for _op in Op:
    if _op.is_tosa_1_0 and _op not in ATTRIBUTE_OF:
        _cls = _empty(_op)
        globals()[_cls.__name__] = _cls


def attribute_class(op: Op) -> type[Attribute]:
    return ATTRIBUTE_OF[op]


def default_attribute(op: Op) -> Attribute:
    return ATTRIBUTE_OF[op]()
