"""The interface between the validator / builder and the per-group operator rules."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from ...core.lazy import LazyTable
from ..attributes import Attribute
from ..dtypes import DType
from ..operators import Op


@dataclasses.dataclass(frozen=True)
class TensorType:
    """What a rule may know about a value: its shape, element type and (for errors) its name.

    A dimension of -1 is unknown (dynamic shapes, EXT-DYNAMIC).
    """

    shape: tuple[int, ...]
    dtype: DType
    name: str = ""

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclasses.dataclass(frozen=True)
class Level:
    """Level limits (specification section "Levels"); ``none`` or ``8K``."""

    name: str = "none"
    max_rank: int = 32
    max_kernel: int = 2**31 - 1
    max_stride: int = 2**31 - 1
    max_scale: int = 2048
    max_log2_size: int = 63
    max_nesting: int = 256
    max_tensor_list_size: int = 256


LEVEL_NONE = Level()
LEVEL_8K = Level("8K", 6, 8192, 8192, 256, 31, 6, 64)


class Context(Protocol):
    """What a rule sees of one operator. Inputs and outputs are in the specification's argument order
    (only arguments of category input / output; attributes are in ``attribute``)."""

    op: Op
    attribute: Attribute
    inputs: Sequence[TensorType]
    # Declared outputs when validating a program; None when a builder asks for inference.
    outputs: Sequence[TensorType] | None
    level: Level

    def const(self, index: int) -> np.ndarray | None:
        """The compile-time-constant value of input ``index`` (from CONST / CONST_SHAPE), else None."""
        ...

    def error_if(self, condition: bool, rule: str, tensor: str | None = None) -> None:
        """Raise ValidationError(rule) naming the operator (and the tensor) when ``condition`` holds."""
        ...

    def require(self, condition: bool, rule: str, tensor: str | None = None) -> None:
        """REQUIRE: raise ValidationError(unpredictable=True) when ``condition`` does NOT hold."""
        ...

    def level_check(self, condition: bool, rule: str, tensor: str | None = None) -> None:
        """LEVEL_CHECK: raise ValidationError(level=True) when the level's limit does NOT hold."""
        ...


# A rule returns one shape per output (tuple of ints, -1 where unknown).
Rule = Callable[[Context], list[tuple[int, ...]]]
_GROUP_MODULES = (
    "tensor",
    "activation",
    "elementwise_binary",
    "elementwise_unary",
    "elementwise_ternary",
    "comparison",
    "reduction",
    "data_layout",
    "scatter_gather",
    "image",
    "type_conversion",
    "data_nodes",
    "custom",
    "control_flow",
    "variable",
    "shape",
)
_TABLE: LazyTable[Op, Rule] = LazyTable("rule", __package__, _GROUP_MODULES)
RULES = _TABLE.entries
# ``@rule(Op.X)``: register the decorated function as the rule of the given operators.
rule = _TABLE.register


def rule_for(op: Op) -> Rule | None:
    """The rule of ``op``; group modules are imported on first use."""
    return _TABLE.get(op)
