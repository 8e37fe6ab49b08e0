"""The TOSA operator list: wire codes, the specification's groups, and which ones are TOSA 1.0.

Codes are the ``Op`` enum of the official schema; an operator's attribute table has the same index in
the schema's ``Attribute`` union. Codes above CONST_SHAPE are 1.1-draft operators.
"""

from __future__ import annotations

import enum


class Op(enum.IntEnum):
    UNKNOWN = 0
    ARGMAX = 1
    AVG_POOL2D = 2
    CONV2D = 3
    CONV3D = 4
    DEPTHWISE_CONV2D = 5
    FFT2D = 6
    MATMUL = 7
    MAX_POOL2D = 8
    RFFT2D = 9
    TRANSPOSE_CONV2D = 10
    CLAMP = 11
    ERF = 12
    SIGMOID = 13
    TANH = 14
    ADD = 15
    ARITHMETIC_RIGHT_SHIFT = 16
    BITWISE_AND = 17
    BITWISE_OR = 18
    BITWISE_XOR = 19
    INTDIV = 20
    LOGICAL_AND = 21
    LOGICAL_LEFT_SHIFT = 22
    LOGICAL_RIGHT_SHIFT = 23
    LOGICAL_OR = 24
    LOGICAL_XOR = 25
    MAXIMUM = 26
    MINIMUM = 27
    MUL = 28
    POW = 29
    SUB = 30
    TABLE = 31
    ABS = 32
    BITWISE_NOT = 33
    CEIL = 34
    CLZ = 35
    COS = 36
    EXP = 37
    FLOOR = 38
    LOG = 39
    LOGICAL_NOT = 40
    NEGATE = 41
    RECIPROCAL = 42
    RSQRT = 43
    SIN = 44
    SELECT = 45
    EQUAL = 46
    GREATER = 47
    GREATER_EQUAL = 48
    REDUCE_ALL = 49
    REDUCE_ANY = 50
    REDUCE_MAX = 51
    REDUCE_MIN = 52
    REDUCE_PRODUCT = 53
    REDUCE_SUM = 54
    CONCAT = 55
    PAD = 56
    RESHAPE = 57
    REVERSE = 58
    SLICE = 59
    TILE = 60
    TRANSPOSE = 61
    GATHER = 62
    SCATTER = 63
    RESIZE = 64
    CAST = 65
    RESCALE = 66
    CONST = 67
    IDENTITY = 68
    CUSTOM = 69
    COND_IF = 70
    WHILE_LOOP = 71
    VARIABLE = 72
    VARIABLE_WRITE = 73
    VARIABLE_READ = 74
    CONST_SHAPE = 75
    # 1.1 draft (named so errors can say which operator was refused)
    MATMUL_T_BLOCK_SCALED = 76
    CAST_FROM_BLOCK_SCALED = 77
    CAST_TO_BLOCK_SCALED = 78
    DIM = 79
    CONCAT_SHAPE = 80
    ADD_SHAPE = 81
    SUB_SHAPE = 82
    MUL_SHAPE = 83
    SLICE_SHAPE = 84
    EXP2_SHAPE = 85
    LOG2_CEIL_SHAPE = 86
    LOG2_FLOOR_SHAPE = 87
    MAX_SHAPE = 88
    MIN_SHAPE = 89
    MOD_SHAPE = 90
    DIV_CEIL_SHAPE = 91
    DIV_FLOOR_SHAPE = 92
    ASSERT_EQUAL_SHAPE = 93
    CONV2D_BLOCK_SCALED = 94
    MAX_POOL2D_ADAPTIVE = 95
    AVG_POOL2D_ADAPTIVE = 96
    RESHAPE_BLOCK_SCALED = 97
    ROW_GATHER_BLOCK_SCALED = 98
    ROW_GATHER = 99
    MATMUL_T = 100

    @property
    def is_tosa_1_0(self) -> bool:
        return Op.ARGMAX <= self <= Op.CONST_SHAPE

    @property
    def group(self) -> Group:
        return GROUP_OF[self]

    @classmethod
    def parse(cls, name: str | Op) -> Op:
        if isinstance(name, Op):
            return name
        try:
            return cls[str(name).strip().upper()]
        except KeyError:
            raise ValueError(f"unknown TOSA operator {name!r}") from None


class Group(enum.Enum):
    """The operator groups of the TOSA 1.0 specification, chapter "Operators"."""

    TENSOR = "tensor"
    ACTIVATION = "activation"
    ELEMENTWISE_BINARY = "elementwise_binary"
    ELEMENTWISE_UNARY = "elementwise_unary"
    ELEMENTWISE_TERNARY = "elementwise_ternary"
    COMPARISON = "comparison"
    REDUCTION = "reduction"
    DATA_LAYOUT = "data_layout"
    SCATTER_GATHER = "scatter_gather"
    IMAGE = "image"
    TYPE_CONVERSION = "type_conversion"
    DATA_NODES = "data_nodes"
    CUSTOM = "custom"
    CONTROL_FLOW = "control_flow"
    VARIABLE = "variable"
    SHAPE = "shape"
    DRAFT = "draft"


_GROUPS: dict[Group, tuple[Op, ...]] = {
    Group.TENSOR: (
        Op.ARGMAX, Op.AVG_POOL2D, Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.FFT2D, Op.MATMUL,
        Op.MAX_POOL2D, Op.RFFT2D, Op.TRANSPOSE_CONV2D,
    ),
    Group.ACTIVATION: (Op.CLAMP, Op.ERF, Op.SIGMOID, Op.TANH),
    Group.ELEMENTWISE_BINARY: (
        Op.ADD, Op.ARITHMETIC_RIGHT_SHIFT, Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR, Op.INTDIV,
        Op.LOGICAL_AND, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT, Op.LOGICAL_OR, Op.LOGICAL_XOR,
        Op.MAXIMUM, Op.MINIMUM, Op.MUL, Op.POW, Op.SUB, Op.TABLE,
    ),
    Group.ELEMENTWISE_UNARY: (
        Op.ABS, Op.BITWISE_NOT, Op.CEIL, Op.CLZ, Op.COS, Op.EXP, Op.FLOOR, Op.LOG, Op.LOGICAL_NOT,
        Op.NEGATE, Op.RECIPROCAL, Op.RSQRT, Op.SIN,
    ),
    Group.ELEMENTWISE_TERNARY: (Op.SELECT,),
    Group.COMPARISON: (Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL),
    Group.REDUCTION: (
        Op.REDUCE_ALL, Op.REDUCE_ANY, Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_PRODUCT, Op.REDUCE_SUM,
    ),
    Group.DATA_LAYOUT: (
        Op.CONCAT, Op.PAD, Op.RESHAPE, Op.REVERSE, Op.SLICE, Op.TILE, Op.TRANSPOSE,
    ),
    Group.SCATTER_GATHER: (Op.GATHER, Op.SCATTER),
    Group.IMAGE: (Op.RESIZE,),
    Group.TYPE_CONVERSION: (Op.CAST, Op.RESCALE),
    Group.DATA_NODES: (Op.CONST, Op.IDENTITY),
    Group.CUSTOM: (Op.CUSTOM,),
    Group.CONTROL_FLOW: (Op.COND_IF, Op.WHILE_LOOP),
    Group.VARIABLE: (Op.VARIABLE, Op.VARIABLE_WRITE, Op.VARIABLE_READ),
    Group.SHAPE: (Op.CONST_SHAPE,),
}

GROUP_OF: dict[Op, Group] = {op: group for group, ops in _GROUPS.items() for op in ops}
for _op in Op:
    GROUP_OF.setdefault(_op, Group.DRAFT)
GROUP_OF[Op.UNKNOWN] = Group.DRAFT

TOSA_1_0_OPS: tuple[Op, ...] = tuple(op for op in Op if op.is_tosa_1_0)
assert len(TOSA_1_0_OPS) == 75
