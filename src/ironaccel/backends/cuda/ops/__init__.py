"""Lowerings: one module per operator group of the specification, each registering, per operator, every
(type signature -> lowering) it runs (:mod:`.registry`).

The group modules are named after :class:`~ironaccel.tosa.operators.Group`; what several groups share lives
in :mod:`.common` (steps, places, broadcasting, the argument block) and :mod:`.elementwise` (the one kernel
template). Importing this package imports every group module, which fills the table; ``..capability``
derives the advertised descriptor from it and ``..plan`` lowers through it.
"""

from __future__ import annotations

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
from .registry import lowering_for, registrations

__all__ = [
    "activation",
    "comparison",
    "data_layout",
    "data_nodes",
    "elementwise_binary",
    "elementwise_ternary",
    "elementwise_unary",
    "image",
    "lowering_for",
    "reduction",
    "registrations",
    "scatter_gather",
    "shape",
    "tensor",
    "type_conversion",
]
