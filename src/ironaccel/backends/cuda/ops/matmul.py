"""MATMUL's steps (registered in :mod:`.tensor`, its group's module): one cuBLASLt product (:class:`.common.Gemm`),
with what cuBLASLt's forms need around it.

* fp32, fp16 (to fp16 or fp32) and bf16 (to fp32): the product alone. Zero points are constant zeros
  (the registration's constraint).
* int8 -> int32: cuBLASLt's integer kernels take the first column-major operand transposed, so B is first
  copied transposed into the operator's scratch (``Bt[batch, n, k]``; a strided copy with the elementwise
  template). TOSA's zero points, constants read at load, then come as a correction of the exact product:
  ``sum (a - za)(b - zb) = sum ab - zb * rowsum(a) - za * colsum(b) + k za zb``, with the row sums of A and
  of Bt (B's column sums) in scratch. The arithmetic wraps in 32 bits as the product's does, so the
  result equals the reference's exact int32 sum wherever that fits.
"""

from __future__ import annotations

import numpy as np

from ....tosa.dtypes import DType
from ..prelude import PRELUDE
from .common import Gemm, Kernel, Launch, LoweringContext, Step
from .elementwise import kernel

ROW_SUMS = """\
extern "C" __global__ void ia_matmul_row_sums_int8(const __grid_constant__ IaArgs a) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
        const signed char* row = (const signed char*)a.in[0] + i * a.scalars[0];
        unsigned sum = 0u;
        for (long long t = 0; t < a.scalars[0]; ++t) sum += (unsigned)(int)row[t];
        ((int*)a.out)[i] = (int)sum;
    }
}
"""

# x0: the exact product, x1: A's row sum, x2: B's column sum; scalars: za, zb, k * za * zb (wrapped).
CORRECTION = (
    "(int)((unsigned)x0 - (unsigned)a.scalars[1] * (unsigned)x1 - (unsigned)a.scalars[0] * (unsigned)x2"
    " + (unsigned)a.scalars[2])"
)


def _zero_point(ctx: LoweringContext, index: int) -> int:
    value = ctx.constant(index) if len(ctx.inputs) > index else None
    return 0 if value is None or not np.asarray(value).size else int(np.asarray(value).reshape(-1)[0])


def _shape(ctx: LoweringContext) -> tuple[int, int, int, int]:
    batch, m, k = (int(d) for d in ctx.inputs[0].shape)
    return batch, m, int(ctx.inputs[1].shape[2]), k


def float_steps(ctx: LoweringContext) -> list[Step]:
    a, b, out = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    batch, m, n, k = _shape(ctx)
    if batch * m * n == 0:
        return []
    if k == 0:  # an empty sum: cuBLASLt takes no k of 0, the result is zeros
        zeros = kernel(f"ia_fill_zero_{out.dtype.name.lower()}", (), out.dtype, "0")
        return [Launch(zeros, (), ctx.place(out), batch * m * n, (batch * m * n,), ())]
    return [Gemm(ctx.place(a), ctx.place(b), ctx.place(out), batch, m, n, k, a.dtype, out.dtype)]


def int8_steps(ctx: LoweringContext) -> list[Step]:
    a, b, out = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    batch, m, n, k = _shape(ctx)
    if batch * m * n == 0:
        return []
    if k == 0:
        zeros = kernel("ia_fill_zero_int32", (), DType.INT32, "0")
        return [Launch(zeros, (), ctx.place(out), batch * m * n, (batch * m * n,), ())]
    bt = ctx.scratch(batch * n * k)
    copy = kernel("ia_copy_int8", (DType.INT8,), DType.INT8, "x0")
    steps: list[Step] = [
        Launch(copy, (ctx.place(b),), bt, batch * n * k, (batch, n, k), ((k * n, 1, n),)),
        Gemm(ctx.place(a), bt, ctx.place(out), batch, m, n, k, DType.INT8, DType.INT32, b_transposed=True),
    ]
    za, zb = _zero_point(ctx, 2), _zero_point(ctx, 3)
    if za == 0 and zb == 0:
        return steps
    sums = Kernel("ia_matmul_row_sums_int8", PRELUDE + "\n" + ROW_SUMS)
    rows_a, cols_b = ctx.scratch(4 * batch * m), ctx.scratch(4 * batch * n)
    place = ctx.place(out)
    wrapped = (k * za * zb) & 0xFFFFFFFF
    fix = kernel("ia_matmul_zero_points_int32", (DType.INT32,) * 3, DType.INT32, CORRECTION)
    return [
        *steps,
        Launch(sums, (ctx.place(a),), rows_a, batch * m, (batch * m,), ((1,),), (k,)),
        Launch(sums, (bt,), cols_b, batch * n, (batch * n,), ((1,),), (k,)),
        Launch(
            fix,
            (place, rows_a, cols_b),
            place,
            batch * m * n,
            (batch, m, n),
            ((m * n, n, 1), (m, 1, 0), (n, 0, 1)),
            (za, zb, wrapped),
        ),
    ]


__all__ = ["float_steps", "int8_steps"]
