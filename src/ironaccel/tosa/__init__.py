"""The TOSA 1.0 program model: element types, operators, attributes and the immutable IR."""

from .attributes import (
    ATTRIBUTE_OF,
    Attribute,
    NanPropagationMode,
    ResizeMode,
    RoundingMode,
    attribute_class,
)
from .dtypes import DType, storage_bytes
from .ir import Block, Operator, Program, Region, Tensor, Version
from .operators import GROUP_OF, TOSA_1_0_OPS, Group, Op

__all__ = [
    "ATTRIBUTE_OF",
    "GROUP_OF",
    "TOSA_1_0_OPS",
    "Attribute",
    "Block",
    "DType",
    "Group",
    "NanPropagationMode",
    "Op",
    "Operator",
    "Program",
    "Region",
    "ResizeMode",
    "RoundingMode",
    "Tensor",
    "Version",
    "attribute_class",
    "storage_bytes",
]
from .analysis import Analysis, Interval, MemoryPlan, analyze, plan_memory
from .builder import ProgramBuilder, Value
from .capability import (
    Admission,
    CapabilityDescriptor,
    Constraint,
    OperatorSupport,
    Signature,
    admit,
    descriptor_for_all_of_tosa_1_0,
)
from .codec import DEFAULT_LIMITS, Limits, load, read, save, write

__all__ += ["DEFAULT_LIMITS", "Limits", "load", "read", "save", "write"]
__all__ += ["Analysis", "Interval", "MemoryPlan", "ProgramBuilder", "Value", "analyze", "plan_memory"]
__all__ += [
    "Admission",
    "CapabilityDescriptor",
    "Constraint",
    "OperatorSupport",
    "Signature",
    "admit",
    "descriptor_for_all_of_tosa_1_0",
]
