"""MATMUL's steps (registered in :mod:`.tensor`, its group's module): one cuBLASLt product (:class:`.common.Gemm`),
with what cuBLASLt's forms need around it.

* fp32, fp16 (to fp16 or fp32) and bf16 (to fp32): the product alone. Zero points are constant zeros
  (the registration's constraint).
* fp8 (E4M3, E5M2) -> fp16: cuBLASLt's fp8 kernels for E4M3 on devices that have them (B held
  transposed, as for int8); otherwise both operands widened exactly to fp16 and multiplied as fp16.
* int8 -> int32: cuBLASLt's integer kernels take the first column-major operand transposed, so B is held
  as ``Bt[batch, n, k]``: a constant B is transposed once at load; otherwise each run copies it transposed
  into the operator's scratch (64 x 64-byte tiles through shared memory where the extents allow). TOSA's zero points,
  constants read at load, then come as a correction of the exact product:
  ``sum (a - za)(b - zb) = sum ab - zb * rowsum(a) - za * colsum(b) + k za zb``: a row term and a column
  term added to the product in one pass over it. The row sums of A and of an input Bt are two small kernels
  of ours (a constant B's column terms are computed at load). The arithmetic wraps in 32 bits as the
  product's does, so the result equals the reference's exact int32 sum wherever that fits. Shapes whose k
  is not a multiple of 4, which cuBLASLt's integer kernels refuse, run one kernel of ours instead (one
  thread per result).
* int16 -> int48: one kernel of ours (cuBLASLt has no int16 product), one thread per result.
"""

from __future__ import annotations

import numpy as np

from ....tosa.dtypes import DType
from ..prelude import PRELUDE
from .common import BLOCK, Gemm, Kernel, Launch, LoweringContext, Place, Step
from .elementwise import kernel

# B[batch, k, n] -> Bt[batch, n, k] for n and k multiples of 16, by 64 x 64-byte tiles staged in shared
# memory, one tile per block at a time: a thread reads 16 bytes of a row (as two 8-byte words, neighbouring
# threads reading neighbouring words) and writes 16 bytes of a row of the result the same way, so both the
# reads and the writes of a warp are coalesced. Each thread reading a strided column of the result straight
# from global memory instead writes 8 bytes per 32-byte sector and runs at a fraction of the copy rate.
# A block of any size (one thread on the host) walks the tile's 256 chunks in steps of its size.
TRANSPOSE_TILES = """\
#define IA_TILE 64
extern "C" __global__ void ia_transpose_int8_tiles(const __grid_constant__ IaArgs a) {
    __shared__ unsigned char tile[IA_TILE][IA_TILE + 8];  /* the pad spreads a column over the banks */
    const long long k = a.scalars[0], n = a.scalars[1], batches = a.scalars[2];
    const long long tiles_k = (k + IA_TILE - 1) / IA_TILE, tiles_n = (n + IA_TILE - 1) / IA_TILE;
    const long long tiles = batches * tiles_k * tiles_n;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long col0 = IA_TILE * (t % tiles_n), row0 = IA_TILE * ((t / tiles_n) % tiles_k);
        const long long batch = t / (tiles_n * tiles_k);
        const unsigned char* src = (const unsigned char*)a.in[0] + batch * k * n;
        unsigned char* dst = (unsigned char*)a.out + batch * n * k;
        for (int e = threadIdx.x; e < IA_TILE * IA_TILE / 16; e += blockDim.x) {
            const int r = e / (IA_TILE / 16), c = 16 * (e % (IA_TILE / 16));
            if (row0 + r < k && col0 + c < n) {  /* both extents are multiples of 16: whole chunks */
                const unsigned long long* from = (const unsigned long long*)(src + (row0 + r) * n + col0 + c);
                const unsigned long long w0 = from[0], w1 = from[1];
                for (int j = 0; j < 8; ++j) {
                    tile[r][c + j] = (unsigned char)(w0 >> (8 * j));
                    tile[r][c + 8 + j] = (unsigned char)(w1 >> (8 * j));
                }
            }
        }
        __syncthreads();
        for (int e = threadIdx.x; e < IA_TILE * IA_TILE / 16; e += blockDim.x) {
            const int r = e / (IA_TILE / 16), c = 16 * (e % (IA_TILE / 16));  /* r along n, c along k */
            if (col0 + r < n && row0 + c < k) {
                unsigned long long w0 = 0ull, w1 = 0ull;
                for (int j = 0; j < 8; ++j) {
                    w0 |= (unsigned long long)tile[c + j][r] << (8 * j);
                    w1 |= (unsigned long long)tile[c + 8 + j][r] << (8 * j);
                }
                unsigned long long* to = (unsigned long long*)(dst + (col0 + r) * k + row0 + c);
                to[0] = w0;
                to[1] = w1;
            }
        }
        __syncthreads();  /* the tile is read before the next one overwrites it */
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

# int16 -> int48, which no cuBLASLt kernel computes: one thread per result, exact in 64 bits, wrapped to 48
# bits as TOSA's int48 accumulator holds it (stored in 64).
DIRECT_INT16 = """\
extern "C" __global__ void ia_matmul_int16_direct(const __grid_constant__ IaArgs a) {
    const long long m = a.scalars[0], n = a.scalars[1], k = a.scalars[2], za = a.scalars[3], zb = a.scalars[4];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
        const long long col = i % n, row = (i / n) % m, batch = i / (m * n);
        const short* x = (const short*)a.in[0] + (batch * m + row) * k;
        const short* y = (const short*)a.in[1] + batch * k * n + col;
        unsigned long long sum = 0ull;
        for (long long t = 0; t < k; ++t)
            sum += (unsigned long long)(((long long)x[t] - za) * ((long long)y[t * n] - zb));
        const unsigned long long low = sum & 0xFFFFFFFFFFFFull; /* two's complement in 48 bits */
        ((long long*)a.out)[i] = (long long)(low ^ 0x800000000000ull) - 0x800000000000ll;
    }
}
"""

# Zero points: a sum over each row of an int8 matrix, ``PARTS`` threads per row, each reading every
# PARTS-th 16-byte (or 4-byte) word of it, so that neighbouring threads read neighbouring words; then one thread
# per row adds its row's parts and scales them: ``term = c0 + c1 * sum`` (scalars; wrapping in 32 bits).
PARTS = 32
ROW_SUMS_PARTIAL = """\
extern "C" __global__ void ia_int8_row_sums_partial(const __grid_constant__ IaArgs a) {
    const long long k = a.scalars[0], parts = a.scalars[1], wide = a.scalars[2];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
        const long long row = i / parts, part = i % parts;
        const unsigned char* x = (const unsigned char*)a.in[0] + row * k;
        unsigned total = 0u;
        if (wide) {
            const IaWords4* words = (const IaWords4*)x;
            for (long long w = part; w < k / 16; w += parts) {
                const IaWords4 v = words[w];
                for (int j = 0; j < 4; ++j) total += ia_byte_sum(v.word[j]);
            }
        } else {
            const unsigned* words = (const unsigned*)x;
            for (long long w = part; w < k / 4; w += parts) total += ia_byte_sum(words[w]);
        }
        ((unsigned*)a.out)[i] = total;
    }
}
"""
ROW_SUMS_FINISH = """\
extern "C" __global__ void ia_int8_row_sums_finish(const __grid_constant__ IaArgs a) {
    const long long parts = a.scalars[0];
    const unsigned c0 = (unsigned)a.scalars[1], c1 = (unsigned)a.scalars[2];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
        const unsigned* part = (const unsigned*)a.in[0] + i * parts;
        unsigned total = 0u;
        for (long long p = 0; p < parts; ++p) total += part[p];
        ((unsigned*)a.out)[i] = c0 + c1 * total;
    }
}
"""
# The product's int32 results plus the row term (per batch and row) and the column term (per batch and
# column), four results per thread with 16-byte accesses where n allows; scalars: m, n, width (4 or 1).
ADD_TERMS = """\
extern "C" __global__ void ia_matmul_add_terms_int32(const __grid_constant__ IaArgs a) {
    const long long m = a.scalars[0], n = a.scalars[1], width = a.scalars[2], groups = n / width;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
        const long long group = i % groups, row = i / groups, batch = row / m;
        const unsigned r = ((const unsigned*)a.in[1])[row];
        const unsigned* c = (const unsigned*)a.in[2] + batch * n + group * width;
        unsigned* d = (unsigned*)a.out + row * n + group * width;
        if (width == 4) {
            IaWords4 v = *(const IaWords4*)d;
            const IaWords4 t = *(const IaWords4*)c;
            for (int j = 0; j < 4; ++j) v.word[j] += r + t.word[j];
            *(IaWords4*)d = v;
        } else {
            d[0] += r + c[0];
        }
    }
}
"""
# Shared by the kernels above: four 32-bit words moved as one 16-byte access, and the sum of a word's
# four signed bytes.
WORDS = """\
struct alignas(16) IaWords4 {
    unsigned word[4];
};

IA_FN unsigned ia_byte_sum(unsigned w) {
    return (unsigned)((int)(signed char)(w & 0xFFu) + (int)(signed char)((w >> 8) & 0xFFu)
                      + (int)(signed char)((w >> 16) & 0xFFu) + (int)(signed char)(w >> 24));
}
"""


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
    """B (of a one-byte type) as ``Bt[batch, n, k]``: a constant transposed once at load, otherwise copied
    transposed into the operator's scratch by every run (by 64 x 64-byte tiles where the extents are multiples
    of 16)."""
    b = ctx.inputs[1]
    weights = ctx.constant(1)
    if weights is not None:
        data = np.asarray(weights)
        raw = data.view(np.uint8) if data.dtype.itemsize == 1 else data.astype(np.int8).view(np.uint8)
        transposed = raw.reshape(batch, k, n).transpose(0, 2, 1)
        return ctx.upload(f"{b.name}:transposed", np.ascontiguousarray(transposed)), []
    bt = ctx.scratch(batch * n * k)
    if n % 16 == 0 and k % 16 == 0:
        tiles = Kernel("ia_transpose_int8_tiles", PRELUDE + "\n" + TRANSPOSE_TILES)
        count = batch * -(-k // 64) * -(-n // 64) * BLOCK  # a block per 64 x 64 tile
        return bt, [Launch(tiles, (ctx.place(b),), bt, count, (count,), ((1,),), (k, n, batch))]
    copy = kernel("ia_copy_int8", (DType.INT8,), DType.INT8, "x0")
    return bt, [Launch(copy, (ctx.place(b),), bt, batch * n * k, (batch, n, k), ((k * n, 1, n),))]


def fp8_steps(ctx: LoweringContext) -> list[Step]:
    """fp8 operands to fp16: cuBLASLt's fp8 kernels where the device has them, the operands are E4M3 (the
    library has no E5M2 x E5M2 product) and the extents keep every row 16-byte aligned; otherwise both
    operands are widened to fp16 (exactly: every fp8 value is an fp16 value) and multiplied as fp16."""
    a, b, out = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    batch, m, n, k = _shape(ctx)
    if batch * m * n == 0:
        return []
    if k == 0:
        zeros = kernel("ia_fill_zero_fp16", (), DType.FP16, "0")
        return [Launch(zeros, (), ctx.place(out), batch * m * n, (batch * m * n,), ())]
    place = ctx.place(out)
    if ctx.native_fp8 and a.dtype is DType.FP8E4M3 and k % 16 == 0 and n % 16 == 0:
        bt, steps = _transposed(ctx, batch, n, k)
        return [*steps, Gemm(ctx.place(a), bt, place, batch, m, n, k, a.dtype, DType.FP16, b_transposed=True)]
    steps: list[Step] = []
    wide: list[Place] = []
    for index, tensor in enumerate((a, b)):
        count = int(np.prod(tensor.shape, dtype=np.int64))
        value = ctx.constant(index)
        if value is not None:  # a constant is widened once, at load
            wide.append(ctx.upload(f"{tensor.name}:fp16", np.asarray(value).astype(np.float16)))
            continue
        widen = kernel(f"ia_widen_{tensor.dtype.name.lower()}_fp16", (tensor.dtype,), DType.FP16, "x0")
        wide.append(ctx.scratch(2 * count))
        steps.append(Launch(widen, (ctx.place(tensor),), wide[-1], count, (count,), ((1,),)))
    return [*steps, Gemm(wide[0], wide[1], place, batch, m, n, k, DType.FP16, DType.FP16)]


def int16_steps(ctx: LoweringContext) -> list[Step]:
    """int16 -> int48: the exact sum of the zero-point-corrected products, by one kernel of ours."""
    a, b, out = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    batch, m, n, k = _shape(ctx)
    count = batch * m * n
    if count == 0:
        return []
    za, zb = _zero_point(ctx, 2), _zero_point(ctx, 3)
    direct = Kernel("ia_matmul_int16_direct", PRELUDE + "\n" + DIRECT_INT16)
    reads = (ctx.place(a), ctx.place(b))
    return [Launch(direct, reads, ctx.place(out), count, (count,), ((1,), (1,)), (m, n, k, za, zb))]


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
    return [*steps, *_zero_point_terms(ctx, place, bt, (batch, m, n, k), za, zb)]


def _wrapped(value: int) -> int:
    return value & 0xFFFFFFFF


def _row_terms(ctx: LoweringContext, rows: Place, count: int, k: int, c0: int, c1: int) -> tuple[Place, list[Step]]:
    """``c0 + c1 * (sum of each of the count rows of k int8 values at rows)`` as int32 (wrapping), and the
    two launches that compute it into the operator's scratch."""
    parts_place, terms = ctx.scratch(4 * count * PARTS), ctx.scratch(4 * count)
    partial = Kernel("ia_int8_row_sums_partial", PRELUDE + "\n" + WORDS + ROW_SUMS_PARTIAL)
    finish = Kernel("ia_int8_row_sums_finish", PRELUDE + "\n" + ROW_SUMS_FINISH)
    wide = int(k % 16 == 0)
    return terms, [
        Launch(partial, (rows,), parts_place, count * PARTS, (count * PARTS,), ((1,),), (k, PARTS, wide)),
        Launch(finish, (parts_place,), terms, count, (count,), ((1,),), (PARTS, _wrapped(c0), _wrapped(c1))),
    ]


def _zero_point_terms(
    ctx: LoweringContext, out: Place, bt: Place, shape: tuple[int, int, int, int], za: int, zb: int
) -> list[Step]:
    """``D += -zb * rowsum(A) (per row) + k za zb - za * colsum(B) (per column)``: the zero points'
    correction of the exact product D, in 32-bit wrapping arithmetic like the product's own. A constant B's
    column term is computed once at load."""
    batch, m, n, k = shape
    steps: list[Step] = []
    if zb:
        rows, more = _row_terms(ctx, ctx.place(ctx.inputs[0]), batch * m, k, 0, -zb)
        steps += more
    else:
        rows = ctx.upload(f"zeros:int32:{batch * m}", np.zeros(batch * m, np.int32))
    weights = ctx.constant(1)
    if not za:
        cols = ctx.upload(f"zeros:int32:{batch * n}", np.zeros(batch * n, np.int32))
    elif weights is not None:
        sums = np.asarray(weights).astype(np.int64).reshape(batch, k, n).sum(axis=1)
        terms = (k * za * zb - za * sums).reshape(-1)
        cols = ctx.upload(f"{ctx.inputs[1].name}:zero-point-terms:{za}:{zb}", _as_int32(terms))
    else:
        cols, more = _row_terms(ctx, bt, batch * n, k, k * za * zb, -za)
        steps += more
    width = 4 if n % 4 == 0 else 1
    count = batch * m * (n // width)
    add = Kernel("ia_matmul_add_terms_int32", PRELUDE + "\n" + WORDS + ADD_TERMS)
    steps.append(Launch(add, (out, rows, cols), out, count, (count,), ((1,), (1,), (1,)), (m, n, width)))
    return steps


def _as_int32(values: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int32, as the device's 32-bit arithmetic wraps them."""
    return ((values + 2**31) % 2**32 - 2**31).astype(np.int32)


__all__ = ["float_steps", "fp8_steps", "int8_steps", "int16_steps"]
