"""What the CUDA backend admits: exactly the (operator, type signature) pairs :mod:`.ops` registers.

The descriptor is derived from the registrations (:mod:`.ops.registry`), never kept beside them: an
operator is advertised with the union of its registrations' signatures, and each registration's
constraints (constant MUL shifts, zero NEGATE zero points) guard its own signatures only. What stays here
is what no registration says: the target (profiles PRO-FP and PRO-INT; the BF16, INT16, INT4, FP8E4M3,
FP8E5M2 and DOUBLEROUND extensions, whose types and RESCALE rounding the kernels hold; level 8K) and
the kernels' rank limit (the argument block holds six dimensions). Every device advertises the same
table. Everything else is refused at load by :func:`ironaccel.tosa.capability.admit` with a LoweringError
that names the operator, tensor and type.
"""

from __future__ import annotations

import functools

from ...tosa.capability import CapabilityDescriptor, OperatorSupport, straight_line_refusals
from ...tosa.lowering_table import signature_types
from ...tosa.operators import Op
from ...tosa.target import Target
from .ops.registry import TABLE
from .prelude import MAX_RANK

TARGET = Target.of(
    profiles=["pro-fp", "pro-int"],
    extensions=["bf16", "int16", "int4", "fp8e4m3", "fp8e5m2", "doubleround"],
    level="8k",
)
NAME = "cuda-nvrtc-cublaslt"

REFUSALS = straight_line_refusals(
    "CUDA", "one graph of straight-line launches, and conditional graph nodes are not used"
)


def operator_table() -> dict[Op, OperatorSupport]:
    """Per registered operator, its signatures (None for CONST and CONST_SHAPE: every type) and the
    constraints of its registrations."""
    return TABLE.operator_support()


@functools.cache
def descriptor() -> CapabilityDescriptor:
    """What every CUDA device advertises (one per process: it depends on no device)."""
    operators = operator_table()
    return CapabilityDescriptor(
        target=TARGET,
        dtypes=signature_types(operators),
        operators=operators,
        max_rank=MAX_RANK,
        name=NAME,
        refusals=REFUSALS,
    )


__all__ = ["NAME", "TARGET", "descriptor", "operator_table"]
