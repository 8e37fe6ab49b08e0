"""Native code for the tensor operators: CONV2D, DEPTHWISE_CONV2D, MATMUL, AVG_POOL2D, MAX_POOL2D.

The lowering table imports this module (the group "tensor"); importing it registers the lowerings of
the modules below, one per kind of loop nest:

- :mod:`.convolution` (CONV2D) and :mod:`.matmul` (MATMUL): direct products through :mod:`.gemm`'s
  micro-kernels, their weights packed at load (a MATMUL's second operand in the prologue when it is not
  a constant). A convolution with padding, or on integers, first copies its input into scratch with
  zeros around it (integers minus their zero point, as float), so the kernels never test a bound;
  without padding a float input is read in place. Work is split into units of output tiles, which
  threads may share. Float dot products use fused multiply-adds in the kernels' order; the
  specification bounds their error against an fp64 reference, as it does the numpy kernels' BLAS order.
  Integer results are exact (see :mod:`.gemm`).
- :mod:`.depthwise` (DEPTHWISE_CONV2D): over channels with vectors (multiplier 1) or per element.
- :mod:`.pooling` (AVG_POOL2D, MAX_POOL2D): over the valid window of each output (padding is never
  materialised: an average divides by the valid count, and a maximum never sees a padding value, since
  every window holds an input element).

:mod:`.tensor_common` holds what they share. Every loop whose work can be large polls the run's control
block where :mod:`..polls` places it: the products in their units, column blocks or micro-kernels,
depthwise convolutions and pools in their output rows, columns or window rows, and the prologues' copies
and packing in their rows.
"""

from __future__ import annotations

from . import convolution, depthwise, matmul, pooling

# The modules register their lowerings when imported; the names are kept for readers and tools.
__all__ = ["convolution", "depthwise", "matmul", "pooling"]
