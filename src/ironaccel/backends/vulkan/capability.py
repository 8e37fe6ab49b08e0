"""What the Vulkan backend admits: exactly the (operator, type signature) pairs :mod:`.ops` registers.

The descriptor is derived from the registrations (:mod:`.ops.registry`), never kept beside them: an
operator is advertised with the union of its registrations' signatures, and each registration's
constraints (zero zero-points for the float kernels, constant zero points for integer NEGATE, a constant
MUL shift) guard its own signatures only. The target's type extensions are derived too: BF16, FP8E4M3,
FP8E5M2, INT4 and INT16 are each claimed when the table accepts every type-support row that names the
extension (:func:`ironaccel.tosa.tiers.unmet_rows`), which holds for all but INT16 (no int48
accumulators). EXT-INT4 asks for int4 IDENTITY, CONST and int8 x int4 convolutions; int4 values are held
one per byte (``DType.INT4.numpy``), as the runtime's arrays and the CPU backend hold them. What stays
here is what no registration says: the profiles PRO-FP and PRO-INT, level 8K, RESCALE's DOUBLEROUND and
INEXACTROUND rounding modes (DOUBLE_ROUND is computed as specified, INEXACT_ROUND as single rounding,
both as in the CPU backend) and the device limits: tensor sizes are bounded by
maxStorageBufferRange (a kernel binds each tensor as one storage-buffer range), ranks by the kernels'
six push-constant dimensions. FFT, control flow, variables and dynamic shapes are not offered.

Every device advertises the same table (:func:`descriptor`, ``vulkan-float-int``): fp16, bf16 and fp8
need no device feature (stored as 16-bit halves or bytes, computed by the fp32 kernels,
:mod:`.ops.widening`), and the integer kernels carry 64-bit intermediates in 32-bit words, so one
descriptor admits the programs that mix types: an fp32 CAST of an fp16 result, a quantized model with a
float input or output. The integer kernels are exact, so integer results equal the CPU backend's bit for
bit (ADR 0008, "The integer tier").

The tiers as virtio-accel's providers list them (fp32, fp16, fp8, integer, each for one exact target)
are :func:`ironaccel.tosa.tiers.tiers` of the descriptor (ADR 0043). The tiers ADR 0008 describes are
views of the same table, by the types of each signature, for the tests and tools that judge one of
them: :data:`OPERATORS` (the FP32 tier: what PRO-FP without extensions allows, without fp16),
:data:`FP16_SIGNATURES`, :data:`BF16_SIGNATURES`, :data:`FP8_SIGNATURES`, :data:`BF16_FP8_CASTS` (CASTs
that need both extensions), :data:`INT_SIGNATURES` (the integer and BOOL signatures, PRO-INT's),
:data:`BF16_OPERATORS` / :func:`bf16_descriptor` and :data:`FP8_OPERATORS` (the FP32 and FP16 tiers with
the BF16 or FP8 signatures).

Everything else is refused at load by :func:`ironaccel.tosa.capability.admit` with a LoweringError that
names the operator, tensor and type.
"""

from __future__ import annotations

from ...tosa.capability import CapabilityDescriptor, OperatorSupport, Signature, straight_line_refusals
from ...tosa.dtypes import DType
from ...tosa.lowering_table import Keep, signature_types
from ...tosa.operators import Op
from ...tosa.spec import operator as spec_of
from ...tosa.target import Target
from ...tosa.tiers import unmet_rows
from .device import Limits
from .ops.common import MAX_RANK
from .ops.registry import TABLE

NAME = "vulkan-float-int"

FP8 = frozenset({DType.FP8E4M3, DType.FP8E5M2})
NARROW = FP8 | {DType.FP16, DType.BF16}
INTEGER_OR_BOOL = frozenset({DType.BOOL, DType.INT4, DType.INT8, DType.INT16, DType.INT32})
_PRO_FP = Target.of(profiles=["pro-fp"], level="8k").enabled


REFUSALS = straight_line_refusals("Vulkan", "one command buffer of straight-line dispatches")


def _types(sig: Signature) -> frozenset[DType]:
    return frozenset(dt for _, dt in sig.types)


def operator_table(keep: Keep | None = None) -> dict[Op, OperatorSupport]:
    """Per registered operator, its signatures (those ``keep`` accepts, when given; operators left with
    none are left out) and the constraints of the registrations they come from
    (:meth:`~ironaccel.tosa.lowering_table.LoweringTable.operator_support`). Operators registered for
    every type (CONST, CONST_SHAPE) are in every table."""
    return TABLE.operator_support(keep)


def signature_table(keep: Keep) -> dict[Op, tuple[Signature, ...]]:
    """The signatures ``keep`` accepts, by operator (operators registered for every type left out)."""
    return {op: s.signatures for op, s in operator_table(keep).items() if s.signatures is not None}


def fp32_tier(op: Op, sig: Signature) -> bool:
    """A signature the PRO-FP profile has without extensions and without fp16."""
    spec = spec_of(op)
    rows = spec.typesupport if spec else ()
    return not _types(sig) & NARROW and any(r.enabled(_PRO_FP) and sig.matches(dict(r.types)) for r in rows)


def fp16_tier(op: Op, sig: Signature) -> bool:
    types = _types(sig)
    return DType.FP16 in types and not types & (FP8 | {DType.BF16})


def bf16_tier(op: Op, sig: Signature) -> bool:
    types = _types(sig)
    return DType.BF16 in types and not types & FP8


def fp8_tier(op: Op, sig: Signature) -> bool:
    types = _types(sig)
    return bool(types & FP8) and DType.BF16 not in types


def integer_tier(op: Op, sig: Signature) -> bool:
    return _types(sig) <= INTEGER_OR_BOOL


ALL_OPERATORS = operator_table()
# Extensions that add type-support rows: claimed only where every row naming them is registered.
TYPE_EXTENSIONS = ("int16", "int4", "bf16", "fp8e4m3", "fp8e5m2")
TARGET = Target.of(
    profiles=["pro-fp", "pro-int"],
    extensions=[*(e for e in TYPE_EXTENSIONS if not unmet_rows(ALL_OPERATORS, e)), "doubleround", "inexactround"],
    level="8k",
)
OPERATORS = operator_table(fp32_tier)
FP16_SIGNATURES = signature_table(fp16_tier)
BF16_SIGNATURES = signature_table(bf16_tier)
FP8_SIGNATURES = signature_table(fp8_tier)
INT_SIGNATURES = signature_table(integer_tier)
BF16_FP8_CASTS = signature_table(lambda op, s: DType.BF16 in _types(s) and bool(_types(s) & FP8)).get(Op.CAST, ())
BF16_OPERATORS = operator_table(lambda op, s: fp32_tier(op, s) or fp16_tier(op, s) or bf16_tier(op, s))
FP8_OPERATORS = operator_table(lambda op, s: fp32_tier(op, s) or fp16_tier(op, s) or fp8_tier(op, s))


def descriptor(limits: Limits) -> CapabilityDescriptor:
    """What every Vulkan device advertises: every registered signature, on a device with ``limits``."""
    return _descriptor(limits, ALL_OPERATORS, NAME, TARGET)


def bf16_descriptor(limits: Limits) -> CapabilityDescriptor:
    """The BF16 tier alone (the FP32 and FP16 tiers and the BF16 extension's signatures)."""
    target = Target.of(profiles=["pro-fp"], extensions=["bf16"], level="8k")
    return _descriptor(limits, BF16_OPERATORS, "vulkan-bf16", target)


def _descriptor(
    limits: Limits, operators: dict[Op, OperatorSupport], name: str, target: Target
) -> CapabilityDescriptor:
    return CapabilityDescriptor(
        target=target,
        dtypes=signature_types(operators),
        operators=operators,
        max_rank=MAX_RANK,
        max_tensor_bytes=limits.max_storage_buffer_range,
        name=name,
        refusals=REFUSALS,
    )
