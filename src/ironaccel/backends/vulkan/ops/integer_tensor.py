"""The tensor operators on integers (the integer tier): int8 x int8 -> int32 with zero points.

CONV2D, CONV3D and TRANSPOSE_CONV2D run ``conv_int.comp``, chosen in :mod:`.tensor` (the integer
twin of the fp32 implicit GEMM, same tiling). Sums are int32 with wrap-around: TOSA REQUIREs the int32
accumulator not to overflow, and the low 32 bits of a sum do not depend on its order, so results are
the CPU backend's exact sums narrowed to int32, bit for bit. Zero points are read by the kernels from
their tensors.
"""

from __future__ import annotations

from ....tosa.dtypes import DType

INTEGER_TYPES = frozenset({DType.INT8, DType.INT16, DType.INT32})
