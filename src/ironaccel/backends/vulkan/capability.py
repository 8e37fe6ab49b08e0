"""What the Vulkan backend admits: its FP32 and FP16 tiers, exactly the operators and types :mod:`.ops`
lowers.

The tier is the TOSA 1.0 PRO-FP profile without extensions, restricted to fp32: every PRO-FP operator
in its fp32 signature, and the BOOL and integer signatures the profile has beside them (comparison
results, SELECT / layout operators on BOOL, logical operators, INT32 arithmetic for index
computations, ARGMAX's INT32 result, GATHER / SCATTER's INT32 indices, and CAST between fp32 and
INT8 / INT16 / INT32). The extensions FFT, control flow, variables and dynamic shapes are not
offered; bf16 and fp8 are the BF16 and FP8 tiers'.

The FP16 tier is the FP32 tier's descriptor extended with every fp16 signature PRO-FP has for those
operators (CONV / AVG_POOL2D with either accumulator type, CAST between fp16 and fp32 / INT8 / INT16 /
INT32), MATMUL's included (its kernels read fp16 directly, ``ops/matmul.py``). fp16 needs no device
feature (it is stored as 16-bit halves of words and computed in fp32, see ``ops/fp16.py``), so every
device offers both tiers and advertises the FP16 one: a single descriptor is what admits the programs
that mix the two types (an fp32 CAST of an fp16 result), which one tier per type could not.

The BF16 tier (:func:`bf16_descriptor`, ``vulkan-bf16``) is the FP16 tier's descriptor with every
signature the BF16 extension adds to PRO-FP: bf16 is stored as 16-bit halves too, widened exactly to
fp32, computed by the fp32 kernels and rounded once (``shaders/include/bf16.glsl``), on every device.

The FP8 tier (:func:`fp8_descriptor`, ``vulkan-fp8``) adds what the FP8E4M3 and FP8E5M2 extensions
allow: fp8 stored as bytes, widened exactly, products and pools computed in fp32 with fp16 results,
CAST to and from fp32 / fp16 rounding once (``shaders/include/fp8.glsl``), data movement on bytes.

The integer tier (TOSA PRO-INT) has its own descriptor (:func:`int_descriptor`, ``vulkan-int``): the
integer and BOOL signatures :data:`INT_SIGNATURES` lists, with zero points of any value where the
specification allows them. Its kernels are exact, so integer results equal the CPU backend's bit for bit
(ADR 0008, "The integer tier"). Every device offers it without a device feature (64-bit intermediates
are carried in 32-bit words), and what a device advertises is the union of the tiers
(:func:`descriptor`, ``vulkan-float-int``, profiles PRO-FP and PRO-INT, the BF16 and FP8 extensions): one
descriptor admits the programs that mix the tiers, such as a quantized model with a float input or
output.

Everything else is refused at load by :func:`ironaccel.tosa.capability.admit` with a LoweringError that
names the operator, tensor and type. Tensor sizes are bounded by maxStorageBufferRange (a kernel binds
each tensor as one storage-buffer range); ranks by the kernels' six push-constant dimensions.
"""

from __future__ import annotations

from ...tosa.capability import (
    CapabilityDescriptor,
    Constraint,
    OperatorSupport,
    OperatorView,
    Signature,
    constant_operand,
    zero_zero_points,
)
from ...tosa.dtypes import DType
from ...tosa.operators import Op
from ...tosa.target import Target
from .device import Limits
from .ops.common import MAX_RANK

FP32 = Signature.of(in_out_t="fp32")
BOOL = Signature.of(in_out_t="bool")
INT32 = Signature.of(in_out_t="int32")
FP32_OR_BOOL = (FP32, BOOL)
CONV = (Signature.of(in_t="fp32", weight_t="fp32", out_t="fp32", acc_t="fp32"),)


def _constant_shift(view: OperatorView) -> bool:
    return len(view.consts) > 2 and view.consts[2] is not None


CONSTANT_SHIFT = Constraint("constant MUL shift only", _constant_shift)
ZERO_POINTS = (zero_zero_points(),)

OPERATORS: dict[Op, OperatorSupport] = {
    # elementwise binary
    **{op: OperatorSupport((FP32, INT32)) for op in (Op.ADD, Op.SUB)},
    Op.MUL: OperatorSupport(
        (Signature.of(in_t="fp32", out_t="fp32"), Signature.of(in_t="int32", out_t="int32")), (CONSTANT_SHIFT,)
    ),
    **{op: OperatorSupport((FP32,)) for op in (Op.MAXIMUM, Op.MINIMUM, Op.POW)},
    Op.INTDIV: OperatorSupport((INT32,)),
    **{op: OperatorSupport((BOOL,)) for op in (Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR)},
    **{
        op: OperatorSupport(tuple(Signature.of(in_out_t=t) for t in ("int8", "int16", "int32")))
        for op in (Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT)
    },
    # elementwise unary and activations
    **{
        op: OperatorSupport((FP32,))
        for op in (Op.ABS, Op.EXP, Op.LOG, Op.RECIPROCAL, Op.RSQRT, Op.FLOOR, Op.CEIL, Op.SIN, Op.COS)
    },
    Op.NEGATE: OperatorSupport((Signature.of(in_out_t="fp32", acc_t="fp32"),), ZERO_POINTS),
    Op.LOGICAL_NOT: OperatorSupport((BOOL,)),
    **{op: OperatorSupport((FP32,)) for op in (Op.CLAMP, Op.TANH, Op.SIGMOID, Op.ERF)},
    # ternary and comparisons
    Op.SELECT: OperatorSupport(FP32_OR_BOOL),
    **{
        op: OperatorSupport((Signature.of(in_t="fp32", out_t="bool"),))
        for op in (Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL)
    },
    # data layout and data nodes
    **{
        op: OperatorSupport(FP32_OR_BOOL)
        for op in (Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.PAD, Op.TILE, Op.REVERSE, Op.CONCAT)
    },
    Op.IDENTITY: OperatorSupport(tuple(Signature.of(in_out_t=t) for t in ("fp32", "bool", "int8", "int16", "int32"))),
    Op.CONST: OperatorSupport(),  # a constant's type is judged where it is used
    Op.CONST_SHAPE: OperatorSupport(),
    # tensor operators
    Op.MATMUL: OperatorSupport((Signature.of(in_t="fp32", out_t="fp32"),), ZERO_POINTS),
    **{
        op: OperatorSupport(CONV, ZERO_POINTS)
        for op in (Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D)
    },
    Op.AVG_POOL2D: OperatorSupport((Signature.of(in_out_t="fp32", acc_t="fp32"),), ZERO_POINTS),
    Op.MAX_POOL2D: OperatorSupport((FP32,)),
    Op.ARGMAX: OperatorSupport((Signature.of(in_t="fp32", out_t="int32"),)),
    # reductions
    Op.REDUCE_SUM: OperatorSupport((Signature.of(in_out_t="fp32", acc_t="fp32"),)),
    **{op: OperatorSupport((FP32,)) for op in (Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_PRODUCT)},
    **{op: OperatorSupport((BOOL,)) for op in (Op.REDUCE_ALL, Op.REDUCE_ANY)},
    # scatter / gather, image, type conversion
    **{op: OperatorSupport((Signature.of(index_t="int32", in_out_t="fp32"),)) for op in (Op.GATHER, Op.SCATTER)},
    Op.RESIZE: OperatorSupport((Signature.of(resize_t="fp32", in_t="fp32", out_t="fp32"),)),
    Op.CAST: OperatorSupport(
        tuple(Signature.of(in_t=t, out_t="fp32") for t in ("int8", "int16", "int32"))
        + tuple(Signature.of(in_t="fp32", out_t=t) for t in ("int8", "int16", "int32"))
    ),
}


FP16 = Signature.of(in_out_t="fp16")
FP16_CONV = tuple(Signature.of(in_t="fp16", weight_t="fp16", out_t="fp16", acc_t=t) for t in ("fp16", "fp32"))

# The fp16 signatures of the FP16 tier, by operator (added to the FP32 tier's; constraints are shared).
FP16_SIGNATURES: dict[Op, tuple[Signature, ...]] = {
    **{
        op: (FP16,)
        for op in (
            *(Op.ADD, Op.SUB, Op.MAXIMUM, Op.MINIMUM, Op.POW),
            *(Op.ABS, Op.EXP, Op.LOG, Op.RECIPROCAL, Op.RSQRT, Op.FLOOR, Op.CEIL, Op.SIN, Op.COS),
            *(Op.CLAMP, Op.TANH, Op.SIGMOID, Op.ERF, Op.SELECT, Op.IDENTITY, Op.MAX_POOL2D),
            *(Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.PAD, Op.TILE, Op.REVERSE, Op.CONCAT),
            *(Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_PRODUCT),
        )
    },
    Op.MUL: (Signature.of(in_t="fp16", out_t="fp16"),),
    Op.NEGATE: (Signature.of(in_out_t="fp16", acc_t="fp16"),),
    **{op: (Signature.of(in_t="fp16", out_t="bool"),) for op in (Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL)},
    **{op: FP16_CONV for op in (Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D)},
    Op.AVG_POOL2D: tuple(Signature.of(in_out_t="fp16", acc_t=t) for t in ("fp16", "fp32")),
    Op.ARGMAX: (Signature.of(in_t="fp16", out_t="int32"),),
    Op.MATMUL: tuple(Signature.of(in_t="fp16", out_t=t) for t in ("fp16", "fp32")),  # ops/matmul.py
    Op.REDUCE_SUM: (Signature.of(in_out_t="fp16", acc_t="fp16"),),
    **{op: (Signature.of(index_t="int32", in_out_t="fp16"),) for op in (Op.GATHER, Op.SCATTER)},
    Op.RESIZE: (Signature.of(resize_t="fp16", in_t="fp16", out_t="fp16"),),
    Op.CAST: tuple(Signature.of(in_t=t, out_t="fp16") for t in ("int8", "int16", "int32", "fp32"))
    + tuple(Signature.of(in_t="fp16", out_t=t) for t in ("int8", "int16", "int32", "fp32")),
}

BF16 = Signature.of(in_out_t="bf16")

# The BF16 tier: every signature the BF16 extension adds to PRO-FP (its operators' bf16 forms are their
# fp32 kernels between conversions, ops/fp16.py; MATMUL's likewise, ops/matmul.py).
BF16_SIGNATURES: dict[Op, tuple[Signature, ...]] = {
    **{
        op: (BF16,)
        for op in (
            *(Op.ADD, Op.SUB, Op.MAXIMUM, Op.MINIMUM, Op.POW),
            *(Op.ABS, Op.EXP, Op.LOG, Op.RECIPROCAL, Op.RSQRT, Op.FLOOR, Op.CEIL, Op.SIN, Op.COS),
            *(Op.CLAMP, Op.TANH, Op.SIGMOID, Op.ERF, Op.SELECT, Op.IDENTITY, Op.MAX_POOL2D),
            *(Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.PAD, Op.TILE, Op.REVERSE, Op.CONCAT),
            *(Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_PRODUCT),
        )
    },
    Op.MUL: (Signature.of(in_t="bf16", out_t="bf16"),),
    Op.NEGATE: (Signature.of(in_out_t="bf16", acc_t="bf16"),),
    **{op: (Signature.of(in_t="bf16", out_t="bool"),) for op in (Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL)},
    **{
        op: (Signature.of(in_t="bf16", weight_t="bf16", out_t="bf16", acc_t="fp32"),)
        for op in (Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D)
    },
    Op.AVG_POOL2D: (Signature.of(in_out_t="bf16", acc_t="fp32"),),
    Op.ARGMAX: (Signature.of(in_t="bf16", out_t="int32"),),
    Op.MATMUL: (Signature.of(in_t="bf16", out_t="fp32"),),
    Op.REDUCE_SUM: (Signature.of(in_out_t="bf16", acc_t="fp32"),),
    **{op: (Signature.of(index_t="int32", in_out_t="bf16"),) for op in (Op.GATHER, Op.SCATTER)},
    Op.RESIZE: (Signature.of(resize_t="bf16", in_t="bf16", out_t="bf16"),),
    Op.CAST: tuple(Signature.of(in_t=t, out_t="bf16") for t in ("int8", "int16", "int32", "fp32"))
    + tuple(Signature.of(in_t="bf16", out_t=t) for t in ("int8", "int16", "int32", "fp32")),
}


def _fp8_signatures(t: str) -> dict[Op, tuple[Signature, ...]]:
    """What the extension of fp8 type ``t`` adds to PRO-FP: products and pools widened to fp32 with
    fp16 results (fp32 accumulation, inside the fp16 accumulator's bound), CAST to and from fp32 /
    fp16, and data movement on bytes."""
    conv = (Signature.of(in_t=t, weight_t=t, out_t="fp16", acc_t="fp16"),)
    return {
        **{op: conv for op in (Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D)},
        Op.MATMUL: (Signature.of(in_t=t, out_t="fp16"),),
        Op.AVG_POOL2D: (Signature.of(in_out_t=t, acc_t="fp16"),),
        Op.ARGMAX: (Signature.of(in_t=t, out_t="int32"),),
        **{op: (Signature.of(index_t="int32", in_out_t=t),) for op in (Op.GATHER, Op.SCATTER)},
        **{
            op: (Signature.of(in_out_t=t),)
            for op in (Op.MAX_POOL2D, Op.IDENTITY, Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.PAD, Op.TILE)
        },
        **{op: (Signature.of(in_out_t=t),) for op in (Op.REVERSE, Op.CONCAT)},
        Op.CAST: tuple(Signature.of(in_t=t, out_t=o) for o in ("fp16", "fp32"))
        + tuple(Signature.of(in_t=i, out_t=t) for i in ("fp16", "fp32")),
    }


# The FP8 tier: every signature the FP8E4M3 and FP8E5M2 extensions add to PRO-FP.
FP8_SIGNATURES: dict[Op, tuple[Signature, ...]] = {
    op: (*_fp8_signatures("fp8e4m3").get(op, ()), *_fp8_signatures("fp8e5m2").get(op, ()))
    for op in _fp8_signatures("fp8e4m3")
}


def _extended(base: dict[Op, OperatorSupport], *tables: dict[Op, tuple[Signature, ...]]) -> dict[Op, OperatorSupport]:
    """``base`` with each table's signatures added to its operators' (an operator taking every type,
    such as CONST, keeps doing so); constraints are shared."""
    extended = {}
    for op, support in base.items():
        added = tuple(sig for table in tables for sig in table.get(op, ()))
        signatures = None if support.signatures is None else (*support.signatures, *added)
        extended[op] = OperatorSupport(signatures, support.constraints)
    return extended


# CASTs between bf16 and fp8, which need both extensions: only where the tiers are advertised together.
BF16_FP8_CASTS = tuple(
    Signature.of(in_t=a, out_t=b) for f in ("fp8e4m3", "fp8e5m2") for a, b in (("bf16", f), (f, "bf16"))
)
FP16_OPERATORS = _extended(OPERATORS, FP16_SIGNATURES)
BF16_OPERATORS = _extended(FP16_OPERATORS, BF16_SIGNATURES)
FP8_OPERATORS = _extended(FP16_OPERATORS, FP8_SIGNATURES)
# The FP16, BF16 and FP8 tiers together.
FLOAT_OPERATORS = _extended(FP16_OPERATORS, BF16_SIGNATURES, FP8_SIGNATURES, {Op.CAST: BF16_FP8_CASTS})

FP32_TYPES = frozenset({DType.FP32, DType.BOOL, DType.INT8, DType.INT16, DType.INT32})
FP8_TYPES = frozenset({DType.FP8E4M3, DType.FP8E5M2})
FP8_EXTENSIONS = ("fp8e4m3", "fp8e5m2")
INT_TYPES = frozenset({DType.BOOL, DType.INT8, DType.INT16, DType.INT32})


def _ints(*types: str) -> tuple[Signature, ...]:
    return tuple(Signature.of(in_out_t=t) for t in types)


INT8_CONV = (Signature.of(in_t="int8", weight_t="int8", out_t="int32", acc_t="int32"),)
LAYOUT_TYPES = ("bool", "int8", "int16", "int32")

# The integer tier: PRO-INT's signatures of the operators whose integer kernels exist (ops/rescale.py,
# ops/integer_tensor.py and the integer forms of the shared kernels).
INT_SIGNATURES: dict[Op, tuple[Signature, ...]] = {
    **{op: INT8_CONV for op in (Op.CONV2D, Op.CONV3D, Op.TRANSPOSE_CONV2D, Op.DEPTHWISE_CONV2D)},
    Op.MATMUL: (Signature.of(in_t="int8", out_t="int32"),),
    Op.AVG_POOL2D: tuple(Signature.of(in_out_t=t, acc_t="int32") for t in ("int8", "int16")),
    Op.MAX_POOL2D: _ints("int8", "int16"),
    Op.ARGMAX: tuple(Signature.of(in_t=t, out_t="int32") for t in ("int8", "int16", "int32")),
    Op.RESCALE: tuple(
        Signature.of(in_t=i, out_t=o) for i in ("int8", "int16", "int32") for o in ("int8", "int16", "int32")
    ),
    Op.TABLE: (
        Signature.of(in_t="int8", table_t="int8", out_t="int8"),
        Signature.of(in_t="int16", table_t="int16", out_t="int32"),
    ),
    Op.CLAMP: _ints("int8", "int16", "int32"),
    **{op: _ints("int32") for op in (Op.ADD, Op.SUB, Op.INTDIV, Op.MAXIMUM, Op.MINIMUM, Op.ABS, Op.CLZ)},
    Op.MUL: tuple(Signature.of(in_t=t, out_t="int32") for t in ("int8", "int16", "int32")),
    **{
        op: _ints("int8", "int16", "int32")
        for op in (
            *(Op.ARITHMETIC_RIGHT_SHIFT, Op.LOGICAL_LEFT_SHIFT, Op.LOGICAL_RIGHT_SHIFT),
            *(Op.BITWISE_AND, Op.BITWISE_OR, Op.BITWISE_XOR, Op.BITWISE_NOT),
        )
    },
    **{op: _ints("bool") for op in (Op.LOGICAL_AND, Op.LOGICAL_OR, Op.LOGICAL_XOR, Op.LOGICAL_NOT)},
    **{op: _ints("bool") for op in (Op.REDUCE_ALL, Op.REDUCE_ANY)},
    Op.NEGATE: tuple(Signature.of(in_out_t=t, acc_t="int32") for t in ("int8", "int16", "int32")),
    **{op: (Signature.of(in_t="int32", out_t="bool"),) for op in (Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL)},
    Op.SELECT: _ints(*LAYOUT_TYPES),
    **{op: _ints("int8", "int16", "int32") for op in (Op.REDUCE_MAX, Op.REDUCE_MIN)},
    Op.REDUCE_SUM: (Signature.of(in_out_t="int32", acc_t="int32"),),
    **{
        op: _ints(*LAYOUT_TYPES)
        for op in (Op.RESHAPE, Op.IDENTITY, Op.TRANSPOSE, Op.SLICE, Op.PAD, Op.TILE, Op.REVERSE, Op.CONCAT)
    },
    **{
        op: tuple(Signature.of(index_t="int32", in_out_t=t) for t in ("int8", "int16", "int32"))
        for op in (Op.GATHER, Op.SCATTER)
    },
    Op.CAST: tuple(Signature.of(in_t=i, out_t=o) for i in LAYOUT_TYPES for o in LAYOUT_TYPES if i != o),
    Op.RESIZE: tuple(Signature.of(resize_t="int16", in_t="int8", out_t=t) for t in ("int8", "int32")),
}
# RESCALE's rounding modes beyond single rounding: DOUBLE_ROUND is computed as specified, INEXACT_ROUND
# as single rounding (a single-rounded result always meets its bound), both as in the CPU backend.
INT_EXTENSIONS = ("doubleround", "inexactround")
INT_CONSTRAINTS: dict[Op, tuple[Constraint, ...]] = {
    Op.MUL: (CONSTANT_SHIFT,),
    Op.NEGATE: (constant_operand(1, "input zero point"), constant_operand(2, "output zero point")),
}

INT_OPERATORS: dict[Op, OperatorSupport] = {
    **{op: OperatorSupport(sigs, INT_CONSTRAINTS.get(op, ())) for op, sigs in INT_SIGNATURES.items()},
    Op.CONST: OperatorSupport(),
    Op.CONST_SHAPE: OperatorSupport(),
}


def _float_zero_points() -> Constraint:
    """The float tiers' zero-point rule, for an operator whose integer form takes any zero points."""
    zero = zero_zero_points()
    return Constraint(
        "zero zero-points for float operands",
        lambda view: (bool(view.inputs) and view.inputs[0].dtype in INT_TYPES) or zero(view),
    )


FLOAT_ZERO_POINTS = _float_zero_points()


def _united(first: dict[Op, OperatorSupport], second: dict[Op, OperatorSupport]) -> dict[Op, OperatorSupport]:
    """Both tiers' signatures per operator; constraints kept by name, the float tiers' zero-point rule
    narrowed to float operands where the integer tier takes the operator too."""
    united: dict[Op, OperatorSupport] = {}
    for op in (*first, *(o for o in second if o not in first)):
        a, b = first.get(op), second.get(op)
        if a is None or b is None:
            united[op] = a or b  # type: ignore[assignment]
            continue
        if a.signatures is None or b.signatures is None:
            signatures = None
        else:
            signatures = tuple(dict.fromkeys((*a.signatures, *b.signatures)))
        constraints: dict[str, Constraint] = {}
        for c in (*a.constraints, *b.constraints):
            c = FLOAT_ZERO_POINTS if c.name == ZERO_POINTS[0].name else c
            constraints.setdefault(c.name, c)
        united[op] = OperatorSupport(signatures, tuple(constraints.values()))
    return united


ALL_OPERATORS = _united(FLOAT_OPERATORS, INT_OPERATORS)


def fp32_descriptor(limits: Limits) -> CapabilityDescriptor:
    """The FP32 tier on a device with ``limits``."""
    return _descriptor(limits, FP32_TYPES, OPERATORS, "vulkan-fp32")


def fp16_descriptor(limits: Limits) -> CapabilityDescriptor:
    """The FP16 tier (the FP32 tier and its fp16 signatures) on a device with ``limits``."""
    return _descriptor(limits, FP32_TYPES | {DType.FP16}, FP16_OPERATORS, "vulkan-fp16")


def bf16_descriptor(limits: Limits) -> CapabilityDescriptor:
    """The BF16 tier (the FP16 tier and the BF16 extension's signatures) on a device with ``limits``."""
    types = FP32_TYPES | {DType.FP16, DType.BF16}
    return _descriptor(limits, types, BF16_OPERATORS, "vulkan-bf16", extensions=("bf16",))


def fp8_descriptor(limits: Limits) -> CapabilityDescriptor:
    """The FP8 tier (the FP16 tier and the FP8E4M3 / FP8E5M2 extensions' signatures)."""
    types = FP32_TYPES | {DType.FP16} | FP8_TYPES
    return _descriptor(limits, types, FP8_OPERATORS, "vulkan-fp8", extensions=FP8_EXTENSIONS)


def int_descriptor(limits: Limits) -> CapabilityDescriptor:
    """The integer tier (PRO-INT) alone on a device with ``limits``."""
    return _descriptor(limits, INT_TYPES, INT_OPERATORS, "vulkan-int", ("pro-int",), INT_EXTENSIONS)


def descriptor(limits: Limits) -> CapabilityDescriptor:
    """What every Vulkan device advertises: the FP16, BF16, FP8 and integer tiers in one descriptor."""
    types = FP32_TYPES | {DType.FP16, DType.BF16} | FP8_TYPES
    extensions = ("bf16", *FP8_EXTENSIONS, *INT_EXTENSIONS)
    return _descriptor(limits, types, ALL_OPERATORS, "vulkan-float-int", ("pro-fp", "pro-int"), extensions)


def _descriptor(
    limits: Limits,
    dtypes: frozenset[DType],
    operators: dict[Op, OperatorSupport],
    name: str,
    profiles: tuple[str, ...] = ("pro-fp",),
    extensions: tuple[str, ...] = (),
) -> CapabilityDescriptor:
    return CapabilityDescriptor(
        target=Target.of(profiles=list(profiles), extensions=list(extensions), level="8k"),
        dtypes=dtypes,
        operators=operators,
        max_rank=MAX_RANK,
        max_tensor_bytes=limits.max_storage_buffer_range,
        name=name,
    )
