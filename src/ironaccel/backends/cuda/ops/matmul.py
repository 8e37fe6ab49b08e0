"""MATMUL's steps (registered in :mod:`.tensor`, its group's module): one cuBLASLt product (:class:`.common.Gemm`),
with what cuBLASLt's forms need around it.

* fp32, fp16 (to fp16 or fp32) and bf16 (to fp32): the product alone. Zero points are constant zeros
  (the registration's constraint).
* int8 -> int32: cuBLASLt's integer kernels take the first column-major operand transposed, so B is held
  as ``Bt[batch, n, k]``: a constant B is transposed once at load; otherwise each run copies it transposed
  into the operator's scratch (16 x 16 tiles per thread where the extents allow). TOSA's zero points,
  constants read at load, then come as a correction of the exact product:
  ``sum (a - za)(b - zb) = sum ab - zb * rowsum(a) - za * colsum(b) + k za zb``. The row sums of A and of
  Bt (B's column sums) are themselves integer products with a matrix of ones, on the same library
  kernels. The arithmetic wraps in 32 bits as the product's does, so the result equals the reference's
  exact int32 sum wherever that fits. Shapes whose k is not a multiple of 4, which cuBLASLt's integer kernels
  refuse, run one kernel of ours instead (one thread per result).
"""

from __future__ import annotations

import numpy as np

from ....tosa.dtypes import DType
from ..prelude import PRELUDE
from .common import Gemm, Kernel, Launch, LoweringContext, Place, Step
from .elementwise import kernel

# B[batch, k, n] -> Bt[batch, n, k] for n and k multiples of 16: one thread per 16 x 16 tile, read as
# 16 rows of two 8-byte words (neighbouring threads read neighbouring words) and written the same way.
TRANSPOSE_TILES = """\
extern "C" __global__ void ia_transpose_int8_tiles(const __grid_constant__ IaArgs a) {
    const long long k = a.scalars[0], n = a.scalars[1], tiles_k = k / 16, tiles_n = n / 16;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
        const long long col = i % tiles_n, row = (i / tiles_n) % tiles_k, batch = i / (tiles_n * tiles_k);
        const unsigned long long* src =
            (const unsigned long long*)((const unsigned char*)a.in[0] + batch * k * n + 16 * row * n + 16 * col);
        unsigned long long* dst =
            (unsigned long long*)((unsigned char*)a.out + batch * n * k + 16 * col * k + 16 * row);
        unsigned long long in[16][2];
        for (int x = 0; x < 16; ++x) {
            in[x][0] = src[x * (n / 8)];
            in[x][1] = src[x * (n / 8) + 1];
        }
        for (int y = 0; y < 16; ++y) {
            unsigned long long lo = 0ull, hi = 0ull;
            const int word = y / 8, shift = 8 * (y % 8);
            for (int x = 0; x < 8; ++x) {
                lo |= ((in[x][word] >> shift) & 0xFFull) << (8 * x);
                hi |= ((in[x + 8][word] >> shift) & 0xFFull) << (8 * x);
            }
            dst[y * (k / 8)] = lo;
            dst[y * (k / 8) + 1] = hi;
        }
    }
}
"""

# cuBLASLt's integer kernels take operands whose leading dimension, k, is a multiple of 4; other shapes
# (small ones, in practice) run here: one thread per result, exact in 64 bits.
DIRECT = """\
extern "C" __global__ void ia_matmul_int8_direct(const __grid_constant__ IaArgs a) {
    const long long m = a.scalars[0], n = a.scalars[1], k = a.scalars[2], za = a.scalars[3], zb = a.scalars[4];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
        const long long col = i % n, row = (i / n) % m, batch = i / (m * n);
        const signed char* x = (const signed char*)a.in[0] + (batch * m + row) * k;
        const signed char* y = (const signed char*)a.in[1] + batch * k * n + col;
        long long sum = 0;
        for (long long t = 0; t < k; ++t) sum += ((long long)x[t] - za) * ((long long)y[t * n] - zb);
        ((int*)a.out)[i] = (int)(unsigned)(unsigned long long)sum;
    }
}
"""

SUM_COLUMNS = 16  # the sums are products with a matrix of ones this wide: the integer kernels' narrowest

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


def _transposed(ctx: LoweringContext, batch: int, n: int, k: int) -> tuple[Place, list[Step]]:
    """B as ``Bt[batch, n, k]``: a constant transposed once at load, otherwise copied transposed into the
    operator's scratch by every run (by 16 x 16 tiles where the extents allow)."""
    b = ctx.inputs[1]
    weights = ctx.constant(1)
    if weights is not None:
        data = np.asarray(weights).astype(np.int8).reshape(batch, k, n).transpose(0, 2, 1)
        return ctx.upload(f"{b.name}:transposed", np.ascontiguousarray(data)), []
    bt = ctx.scratch(batch * n * k)
    if n % 16 == 0 and k % 16 == 0:
        tiles = Kernel("ia_transpose_int8_tiles", PRELUDE + "\n" + TRANSPOSE_TILES)
        count = batch * (k // 16) * (n // 16)
        return bt, [Launch(tiles, (ctx.place(b),), bt, count, (count,), ((1,),), (k, n))]
    copy = kernel("ia_copy_int8", (DType.INT8,), DType.INT8, "x0")
    return bt, [Launch(copy, (ctx.place(b),), bt, batch * n * k, (batch, n, k), ((k * n, 1, n),))]


def int8_steps(ctx: LoweringContext) -> list[Step]:
    a, out = ctx.inputs[0], ctx.outputs[0]
    batch, m, n, k = _shape(ctx)
    if batch * m * n == 0:
        return []
    if k == 0:
        zeros = kernel("ia_fill_zero_int32", (), DType.INT32, "0")
        return [Launch(zeros, (), ctx.place(out), batch * m * n, (batch * m * n,), ())]
    za, zb = _zero_point(ctx, 2), _zero_point(ctx, 3)
    place = ctx.place(out)
    if k % 4:
        direct = Kernel("ia_matmul_int8_direct", PRELUDE + "\n" + DIRECT)
        count = batch * m * n
        reads = (ctx.place(a), ctx.place(ctx.inputs[1]))
        return [Launch(direct, reads, place, count, (count,), ((1,), (1,)), (m, n, k, za, zb))]
    bt, steps = _transposed(ctx, batch, n, k)
    steps.append(Gemm(ctx.place(a), bt, place, batch, m, n, k, DType.INT8, DType.INT32, b_transposed=True))
    if za == 0 and zb == 0:
        return steps
    # The row sums of A and of Bt (B's column sums) as products with ones, on the same integer kernels.
    ones = ctx.upload(f"ones:{batch}x{SUM_COLUMNS}x{k}", np.ones((batch, SUM_COLUMNS, k), np.int8))
    w = SUM_COLUMNS
    rows_a, cols_b = ctx.scratch(4 * batch * m * w), ctx.scratch(4 * batch * n * w)
    wrapped = (k * za * zb) & 0xFFFFFFFF
    fix = kernel("ia_matmul_zero_points_int32", (DType.INT32,) * 3, DType.INT32, CORRECTION)
    strides = ((m * n, n, 1), (m * w, w, 0), (n * w, 0, w))  # column 0 of each sum matrix
    return [
        *steps,
        Gemm(ctx.place(a), ones, rows_a, batch, m, w, k, DType.INT8, DType.INT32, b_transposed=True),
        Gemm(bt, ones, cols_b, batch, n, w, k, DType.INT8, DType.INT32, b_transposed=True),
        Launch(fix, (place, rows_a, cols_b), place, batch * m * n, (batch, m, n), strides, (za, zb, wrapped)),
    ]


__all__ = ["float_steps", "int8_steps"]
