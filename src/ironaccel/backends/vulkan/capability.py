"""What the Vulkan backend admits: its FP32 tier, exactly the operators and types :mod:`.ops` lowers.

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
    zero_zero_points,
)
from ...tosa.dtypes import DType
from ...tosa.operators import Op
from ...tosa.target import Target
from .device import Limits
from .ops.common import MAX_RANK

FP32 = Signature.of(in_out_t="fp32")
FP32_OR_BOOL = (FP32, Signature.of(in_out_t="bool"))


def _shift_is_zero(view: OperatorView) -> bool:
    shift = view.consts[2] if len(view.consts) > 2 else None
    return shift is not None and not shift.any()


SHIFT_ZERO = Constraint("MUL shift 0 only", _shift_is_zero)

OPERATORS: dict[Op, OperatorSupport] = {
    **{op: OperatorSupport((FP32,)) for op in (Op.ADD, Op.SUB, Op.MAXIMUM, Op.MINIMUM, Op.POW)},
    Op.MUL: OperatorSupport((Signature.of(in_t="fp32", out_t="fp32"),), (SHIFT_ZERO,)),
    **{
        op: OperatorSupport((FP32,))
        for op in (Op.ABS, Op.EXP, Op.LOG, Op.RECIPROCAL, Op.RSQRT, Op.FLOOR, Op.CEIL, Op.SIN, Op.COS)
    },
    Op.NEGATE: OperatorSupport((Signature.of(in_out_t="fp32", acc_t="fp32"),), (zero_zero_points(),)),
    **{op: OperatorSupport((FP32,)) for op in (Op.CLAMP, Op.TANH, Op.SIGMOID, Op.ERF)},
    Op.SELECT: OperatorSupport((FP32,)),
    **{
        op: OperatorSupport((Signature.of(in_t="fp32", out_t="bool"),))
        for op in (Op.EQUAL, Op.GREATER, Op.GREATER_EQUAL)
    },
    Op.RESHAPE: OperatorSupport(FP32_OR_BOOL),
    Op.IDENTITY: OperatorSupport(FP32_OR_BOOL),
    Op.TRANSPOSE: OperatorSupport((FP32,)),
    Op.CONST: OperatorSupport(),  # a constant's type is judged where it is used
    Op.CONST_SHAPE: OperatorSupport(),
    Op.MATMUL: OperatorSupport((Signature.of(in_t="fp32", out_t="fp32"),), (zero_zero_points(),)),
    Op.REDUCE_SUM: OperatorSupport((Signature.of(in_out_t="fp32", acc_t="fp32"),)),
    Op.REDUCE_MAX: OperatorSupport((FP32,)),
}


def fp32_descriptor(limits: Limits) -> CapabilityDescriptor:
    """The FP32 tier on a device with ``limits``."""
    return CapabilityDescriptor(
        target=Target.of(profiles=["pro-fp"], level="8k"),
        dtypes=frozenset({DType.FP32, DType.BOOL}),
        operators=OPERATORS,
        max_rank=MAX_RANK,
        max_tensor_bytes=limits.max_storage_buffer_range,
        name="vulkan-fp32",
    )
