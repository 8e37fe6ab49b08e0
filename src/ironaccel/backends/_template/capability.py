"""What the backend admits: its capability descriptor, against which ``load_program`` checks every program
(``tosa.capability.admit``) before :mod:`.program` sees it.

The template admits no operator and no element type, so nothing reaches its lowering. A backend lists here
exactly what its lowering handles: an operator admitted but not lowered would fail at load with a less
helpful message, and one lowered but not listed is never reached.
"""

from __future__ import annotations

import functools

from ...tosa.capability import CapabilityDescriptor
from ...tosa.target import Target
from .registration import NAME


@functools.cache
def descriptor() -> CapabilityDescriptor:
    """The descriptor ``_capabilities`` returns (one per process: it depends on no device)."""
    # TODO(backend): list each operator program.py lowers, with the type signatures its kernels take and the
    # constraints they need, e.g. {Op.ADD: OperatorSupport((Signature.of(in_out_t="fp32"),))}; the element
    # types in ``dtypes`` ({DType.FP32}); the profiles and extensions in ``target``; and the limits the device
    # imposes (max_rank, max_tensor_bytes, max_bindings). A descriptor that depends on the device (its
    # features, its memory) is built per accelerator instead.
    return CapabilityDescriptor(target=Target(), dtypes=frozenset(), operators={}, name=NAME)
