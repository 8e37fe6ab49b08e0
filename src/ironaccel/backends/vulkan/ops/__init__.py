"""Lowerings: one module per operator group of the specification, each registering, per operator, every
(type signature -> lowering) it runs (:mod:`.registry`).

The group modules are named after :class:`~ironaccel.tosa.operators.Group` and hold the fp32, fp16 /
bf16 / fp8 (``widened=``) and integer forms of their operators side by side; what several groups share
lives in a module per concern: :mod:`.common` (steps, places, shared helpers), :mod:`.elementwise` (the
elementwise kernels), :mod:`.widening` (narrow floats around the fp32 kernels), :mod:`.matmul` (MATMUL's
kernel choice). Importing this package imports every group module, which fills the table;
:data:`LOWERINGS` is then, per operator, the lowering the planner calls, and ``..capability`` derives
the advertised descriptor from the same registrations.
"""

from __future__ import annotations

from ....tosa.operators import Op
from . import (  # each group module registers its lowerings as it is imported
    activation,
    comparison,
    data_layout,
    data_nodes,
    elementwise_binary,
    elementwise_ternary,
    elementwise_unary,
    image,
    reduction,
    scatter_gather,
    shape,
    tensor,
    type_conversion,
)
from .common import Lowering
from .registry import lowerings

LOWERINGS: dict[Op, Lowering] = lowerings()

__all__ = [
    "LOWERINGS",
    "activation",
    "comparison",
    "data_layout",
    "data_nodes",
    "elementwise_binary",
    "elementwise_ternary",
    "elementwise_unary",
    "image",
    "reduction",
    "scatter_gather",
    "shape",
    "tensor",
    "type_conversion",
]
