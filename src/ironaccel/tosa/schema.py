"""The TOSA flatbuffer schema (``tosa.fbs`` of tosa-tools 2026.8), declared once as Python data.

The codec's reader and writer are both driven by these declarations: each table lists its fields in
vtable-slot order with a wire kind and a default, so slot numbers, defaults and value kinds are never
restated anywhere else. A union occupies two slots, as in flatbuffers: ``<name>_type`` (a ubyte member
index, 0 = NONE) followed by ``<name>`` (an offset to the member table).

Enums: ``DType`` and ``Op`` are the project enums of :mod:`.dtypes` and :mod:`.operators`, the attribute
modes those of :mod:`.attributes`; the 1.1-draft-only enums are declared here so a reader can tell an
unknown code (malformed) from a known draft one. Tables and union members of the 1.1 draft are declared
too: the file format is one schema, and knowing them lets errors name what was refused.
"""

from __future__ import annotations

import dataclasses
import enum

from .attributes import NanPropagationMode, ResizeMode, RoundingMode
from .dtypes import DType
from .operators import Op

FILE_IDENTIFIER = b"TOSA"
FILE_EXTENSION = "tosa"
ROOT_TABLE = "TosaGraph"


class BlockSize(enum.IntEnum):
    """1.1 draft (block-scaled types)."""

    UNKNOWN = 0
    BLOCK_SIZE_1 = 1
    BLOCK_SIZE_32 = 32


class BlockShape(enum.IntEnum):
    """1.1 draft (block-scaled tensors)."""

    UNKNOWN = 0
    BLOCK_SHAPE_32 = 32


class CompatibilityFeature(enum.IntEnum):
    """Forward-compatibility feature bits a file may require of its reader."""

    NONE = 0
    MXFP = 1


ENUMS: dict[str, type[enum.IntEnum]] = {
    "DType": DType,
    "ResizeMode": ResizeMode,
    "NanPropagationMode": NanPropagationMode,
    "RoundingMode": RoundingMode,
    "BlockSize": BlockSize,
    "BlockShape": BlockShape,
    "CompatibilityFeature": CompatibilityFeature,
    "Op": Op,
}


class Kind(enum.Enum):
    """Wire kinds of a field. Scalars live inline in the table; the rest are reached by a uoffset."""

    BOOL = "bool"  # 1 byte
    INT32 = "int32"
    UINT32 = "uint32"
    UINT64 = "uint64"
    ENUM = "enum"  # uint32 holding a code of ENUMS[field.ref]
    UNION_TYPE = "utype"  # ubyte: 0 = NONE, k = UNIONS[field.ref][k - 1]
    STRING = "string"
    INT32_VECTOR = "[int32]"
    UBYTE_VECTOR = "[ubyte]"
    STRING_VECTOR = "[string]"
    TABLE = "table"
    TABLE_VECTOR = "[table]"
    UNION = "union"  # offset to the table named by the preceding UNION_TYPE slot

    @property
    def is_scalar(self) -> bool:
        return self in _SCALAR_SIZE

    @property
    def size(self) -> int:
        """Bytes a scalar takes inline; every offset kind takes a 4-byte uoffset."""
        return _SCALAR_SIZE.get(self, 4)


_SCALAR_SIZE = {Kind.BOOL: 1, Kind.UNION_TYPE: 1, Kind.INT32: 4, Kind.UINT32: 4, Kind.ENUM: 4, Kind.UINT64: 8}


@dataclasses.dataclass(frozen=True)
class Field:
    """One vtable slot. ``ref`` names the enum, table or union the kind refers to; ``align`` is the
    schema's ``force_align`` for byte vectors (writers honour it; readers copy misaligned data)."""

    name: str
    kind: Kind
    default: int = 0
    ref: str = ""
    required: bool = False
    align: int = 1


@dataclasses.dataclass(frozen=True)
class Table:
    name: str
    fields: tuple[Field, ...]

    def slot(self, name: str) -> int:
        for index, field in enumerate(self.fields):
            if field.name == name:
                return index
        raise KeyError(f"table {self.name} has no field {name!r}")

    def field(self, name: str) -> Field:
        return self.fields[self.slot(name)]


# Field constructors, so the declarations below read like the .fbs file.
def boolean(name: str, default: bool = False) -> Field:
    return Field(name, Kind.BOOL, int(default))


def int32(name: str, default: int = 0) -> Field:
    return Field(name, Kind.INT32, default)


def uint32(name: str) -> Field:
    return Field(name, Kind.UINT32)


def uint64(name: str) -> Field:
    return Field(name, Kind.UINT64)


def enum_(name: str, ref: str) -> Field:
    return Field(name, Kind.ENUM, 0, ref)


def string(name: str) -> Field:
    return Field(name, Kind.STRING)


def int32s(name: str) -> Field:
    return Field(name, Kind.INT32_VECTOR)


def ubytes(name: str, align: int = 1) -> Field:
    return Field(name, Kind.UBYTE_VECTOR, align=align)


def strings(name: str) -> Field:
    return Field(name, Kind.STRING_VECTOR)


def table(name: str, ref: str, required: bool = False) -> Field:
    return Field(name, Kind.TABLE, ref=ref, required=required)


def tables(name: str, ref: str) -> Field:
    return Field(name, Kind.TABLE_VECTOR, ref=ref)


def union(name: str, ref: str) -> tuple[Field, Field]:
    return Field(f"{name}_type", Kind.UNION_TYPE, ref=ref), Field(name, Kind.UNION, ref=ref)


def _conv(*extra: Field) -> tuple[Field, ...]:
    return (int32s("pad"), int32s("stride"), int32s("dilation"), boolean("local_bound"), *extra)


NAN_MODE = enum_("nan_mode", "NanPropagationMode")
ACC_TYPE = enum_("acc_type", "DType")
AXIS = int32("axis")
BLOCK_SIZE = enum_("block_size", "BlockSize")

# Attribute tables with fields, in schema order. Every other union member is an empty table.
_ATTRIBUTE_FIELDS: dict[str, tuple[Field, ...]] = {
    "ArgMaxAttribute": (AXIS, NAN_MODE),
    "AvgPool2dAttribute": (int32s("kernel"), int32s("stride"), int32s("pad"), ACC_TYPE),
    "AvgPool2dAdaptiveAttribute": (ACC_TYPE,),
    "Conv2dAttribute": _conv(ACC_TYPE),
    "Conv3dAttribute": _conv(ACC_TYPE),
    "DepthwiseConv2dAttribute": _conv(ACC_TYPE),
    "FFT2dAttribute": (boolean("inverse"), boolean("local_bound")),
    "MaxPool2dAttribute": (int32s("kernel"), int32s("stride"), int32s("pad"), NAN_MODE),
    "MaxPool2dAdaptiveAttribute": (NAN_MODE,),
    "RFFT2dAttribute": (boolean("local_bound"),),
    "TransposeConv2dAttribute": (int32s("out_pad"), int32s("stride"), boolean("local_bound"), ACC_TYPE),
    "ClampAttribute": (ubytes("min_val", align=8), ubytes("max_val", align=8), NAN_MODE),
    "ArithmeticRightShiftAttribute": (boolean("round"),),
    "MaximumAttribute": (NAN_MODE,),
    "MinimumAttribute": (NAN_MODE,),
    "ReduceAllAttribute": (AXIS,),
    "ReduceAnyAttribute": (AXIS,),
    "ReduceMaxAttribute": (AXIS, NAN_MODE),
    "ReduceMinAttribute": (AXIS, NAN_MODE),
    "ReduceProductAttribute": (AXIS,),
    "ReduceSumAttribute": (AXIS,),
    "ConcatAttribute": (AXIS,),
    "ReshapeBlockScaledAttribute": (BLOCK_SIZE,),
    "ReverseAttribute": (AXIS,),
    "TransposeAttribute": (int32s("perms"),),
    "RowGatherBlockScaledAttribute": (BLOCK_SIZE,),
    "ResizeAttribute": (enum_("mode", "ResizeMode"),),
    "RescaleAttribute": (
        boolean("scale32"),
        enum_("rounding_mode", "RoundingMode"),
        boolean("per_channel"),
        boolean("input_unsigned"),
        boolean("output_unsigned"),
    ),
    "CustomAttribute": (string("operator_name"), string("domain_name"), ubytes("implementation_attrs")),
    "CondIfAttribute": (string("then_graph"), string("else_graph")),
    "WhileLoopAttribute": (string("cond_graph"), string("body_graph")),
    "MatMulTBlockScaledAttribute": (BLOCK_SIZE,),
    "CastFromBlockScaledAttribute": (BLOCK_SIZE,),
    "CastToBlockScaledAttribute": (BLOCK_SIZE,),
    "Conv2dBlockScaledAttribute": (BLOCK_SIZE,),
    "DimAttribute": (AXIS,),
    "AssertEqualShapeAttribute": (boolean("allow_broadcast"),),
}

# Irregular names of attribute tables; every other one is the CamelCase operator name + "Attribute".
_ATTRIBUTE_NAME = {
    Op.ARGMAX: "ArgMaxAttribute",
    Op.FFT2D: "FFT2dAttribute",
    Op.RFFT2D: "RFFT2dAttribute",
    Op.MATMUL: "MatMulAttribute",
    Op.INTDIV: "IntDivAttribute",
    Op.MATMUL_T_BLOCK_SCALED: "MatMulTBlockScaledAttribute",
    Op.MATMUL_T: "MatMulTAttribute",
}


def attribute_table_name(op: Op) -> str:
    """The schema table of ``op``'s attribute, e.g. ``AvgPool2dAttribute`` for AVG_POOL2D."""
    if op in _ATTRIBUTE_NAME:
        return _ATTRIBUTE_NAME[op]
    return "".join(word.capitalize() for word in op.name.split("_")) + "Attribute"


# The Attribute union: member k (1-based) is the attribute table of the operator with code k.
ATTRIBUTE_MEMBERS: tuple[str, ...] = tuple(attribute_table_name(op) for op in Op if op is not Op.UNKNOWN)
UNIONS: dict[str, tuple[str, ...]] = {"Attribute": ATTRIBUTE_MEMBERS}

_CORE: tuple[Table, ...] = (
    Table("SoftwareVersion", (int32("_major", -1), int32("_minor", -1), int32("_micro", -1), string("_modifier"))),
    Table("SerializationCompatibility", (table("min_reader_version", "SoftwareVersion"), uint64("features"))),
    Table("Version", (int32("_major", -1), int32("_minor", -1), int32("_patch", -1), boolean("_draft", True))),
    Table(
        "TosaTensor",
        (
            string("name"),
            int32s("shape"),
            enum_("type", "DType"),
            ubytes("data", align=8),
            boolean("variable"),
            boolean("is_unranked"),
            string("variable_name"),
            uint64("offset"),
            uint64("size"),
            enum_("scale_type", "DType"),
            ubytes("scale_data", align=8),
            enum_("block_shape", "BlockShape"),
            uint64("scale_offset"),
            uint64("scale_size"),
        ),
    ),
    Table("TosaShape", (string("name"), uint32("rank"), ubytes("data", align=8))),
    Table("OpLocation", (string("text"),)),
    Table(
        "TosaOperator",
        (
            enum_("op", "Op"),
            *union("attribute", "Attribute"),
            strings("inputs"),
            strings("outputs"),
            table("location", "OpLocation"),
        ),
    ),
    Table(
        "TosaBasicBlock",
        (
            string("name"),
            tables("operators", "TosaOperator"),
            tables("tensors", "TosaTensor"),
            strings("inputs"),
            strings("outputs"),
            tables("shapes", "TosaShape"),
        ),
    ),
    Table("TosaRegion", (string("name"), tables("blocks", "TosaBasicBlock"))),
    Table(
        "TosaGraph",
        (
            table("version", "Version", required=True),
            tables("regions", "TosaRegion"),
            table("software_version", "SoftwareVersion"),
            table("compatibility", "SerializationCompatibility"),
        ),
    ),
)

TABLES: dict[str, Table] = {t.name: t for t in _CORE}
TABLES.update({name: Table(name, _ATTRIBUTE_FIELDS.get(name, ())) for name in ATTRIBUTE_MEMBERS})

assert set(_ATTRIBUTE_FIELDS) <= set(ATTRIBUTE_MEMBERS), set(_ATTRIBUTE_FIELDS) - set(ATTRIBUTE_MEMBERS)
