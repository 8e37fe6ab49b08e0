"""Lowerings: one module per specification operator group, each mapping its operators to dispatches.

:data:`LOWERINGS` is filled by the ``@lowering`` decorator as the group modules are imported below; the
capability descriptor (``..capability``) lists the same operators with the types they accept, and a
test checks the two agree. The operators :data:`.fp16.WIDENED` names take their fp16 forms from their
fp32 lowerings through :func:`.fp16.widening`; those :data:`.integer_forms.FORMS` names take their
integer forms from the integer tier's modules.
"""

from __future__ import annotations

from collections.abc import Callable

from ....tosa.operators import Op
from .common import Lowering

LOWERINGS: dict[Op, Lowering] = {}


def lowering(*ops: Op) -> Callable[[Lowering], Lowering]:
    def register(fn: Lowering) -> Lowering:
        for op in ops:
            LOWERINGS[op] = fn
        return fn

    return register


from . import (  # noqa: E402 - the group modules register themselves through `lowering`
    activation,
    comparison,
    data_layout,
    data_nodes,
    elementwise_binary,
    elementwise_ternary,
    elementwise_unary,
    image,
    integer_elementwise,
    integer_tensor,
    matmul,
    reduction,
    rescale,
    scatter_gather,
    tensor,
    type_conversion,
)
from .fp16 import WIDENED, widening  # noqa: E402 - after the group modules have registered
from .integer_forms import FORMS, integer_first  # noqa: E402 - likewise

for _op in WIDENED:
    LOWERINGS[_op] = widening(LOWERINGS[_op])
for _op, _form in FORMS.items():
    LOWERINGS[_op] = integer_first(_form, LOWERINGS[_op])

__all__ = [
    "LOWERINGS",
    "activation",
    "comparison",
    "data_layout",
    "data_nodes",
    "elementwise_binary",
    "elementwise_ternary",
    "elementwise_unary",
    "fp16",
    "image",
    "integer_elementwise",
    "integer_forms",
    "integer_tensor",
    "lowering",
    "matmul",
    "reduction",
    "rescale",
    "scatter_gather",
    "tensor",
    "type_conversion",
]
