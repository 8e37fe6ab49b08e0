"""NVFP4 projections on CUDA: a projection (ADR 0012) planned directly as a :class:`~.plan.Plan` (ADR 0040).

A projection has no graph, so it skips TOSA planning: its operands and result get places in one arena in
slot order (x, then each matrix's packed, scales and tensor_scale, then y), exactly the places a loaded
program copies its bound ranges into, or binds them in place of (:mod:`.binding`). Two ways to compute
``y = act(x @ w_hat.T)``, chosen at load from the shape:

* **Decode shapes** (m below :data:`GEMM_FROM_M`, every batched form, and any shape whose decoded weights
  would pass the program's resident bound): one GEMV kernel reads the packed weights once per
  :data:`GEMV_X_ROWS` rows of x with 16-byte loads (8-byte ones where k is an odd multiple of 16,
  narrower ones where a plane's offset allows no wider), decodes them in registers and sums in fp32. A
  team of up to 32 threads splits one weight row's k, each thread holding :data:`GEMV_ROWS` rows'
  words, so neighbouring threads read neighbouring words; the team's partial sums meet by warp shuffles
  in a fixed tree. These shapes are bound by the weights' bytes, which NVFP4 makes a quarter of fp16's.
* **Larger m**: each matrix is decoded exactly (the CPU backend's bits: ``(e2m1 * scale) * ts``) into fp32
  scratch as [n, k], a cuBLASLt fp32 product (``COMPUTE_32F``, never TF32) takes it transposed with the
  expert form's matrices as its batches, and the activation runs in place on y.

The mixture-of-experts form (:class:`~ironaccel.nvfp4.MoEProjection`, ADR 0042) is two passes of GEMV
launches (:func:`moe_steps`): the up projections with the squared ReLU into scratch, then the down
projections from it, each over planes inside an expert's binding.

The GEMV reads five operands where a launch's argument block holds four addresses, so the tensor scale's
address rides in a scalar word (:class:`WideLaunch`, resolved where the program packs its launches).
Activations are evaluated in double and rounded once, as the CPU backend does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ...nvfp4.bounds import ACTIVATIONS, Form
from ...nvfp4.moe import MoEProjection
from ...nvfp4.projection import ProjectionArtifact
from ...tosa.dtypes import DType
from .ops.common import BLOCK, MAX_BLOCKS, Gemm, Kernel, Launch, Place, Step
from .plan import ALIGNMENT, Plan
from .prelude import PRELUDE

GEMV_TEAM = 32  # threads splitting one weight row's k, at most (one warp: the partial sums meet by shuffles)
GEMV_X_ROWS = 8  # rows of x per pass over the weights, at most
# Rows of x from which the decode + fp32 product path is taken: the GEMV passes over the weights once per
# GEMV_X_ROWS rows of x, so its time grows with m, while the product's decode happens once (ADR 0040).
GEMM_FROM_M = 64
TENSOR_SCALE_WORD = 0  # the scalar word holding the GEMV's tensor-scale address


@dataclasses.dataclass(frozen=True)
class WideLaunch(Launch):
    """A launch whose kernel reads more operands than the argument block's ``in`` holds: each
    ``(word, place)`` of ``scalar_places`` puts ``place``'s address in scalar word ``word`` at load."""

    scalar_places: tuple[tuple[int, Place], ...] = ()


# Shared by the kernels: an E4M3 block scale, an E2M1 word's eight values and the activations.
COMMON = r"""
struct alignas(16) IaNvfp4X4 {
    float v[4];
};

/* An E4M3 code's value: sign, 4 exponent bits (bias 7), 3 mantissa bits; 0x7F and 0xFF are NaN. Normal
   codes are rebiased into fp32's exponent, subnormal ones are mantissa * 2^-9; no denormal arithmetic. */
IA_FN float ia_nvfp4_scale(unsigned code) {
    const unsigned magnitude = code & 0x7Fu, exponent = magnitude >> 3, mantissa = code & 7u;
    float value = exponent ? ia_float(((exponent + 120u) << 23) | (mantissa << 20))
                           : (float)mantissa * 0.001953125f;
    if (magnitude == 0x7Fu) value = ia_float(0x7FC00000u);
    return (code & 0x80u) ? -value : value;
}

/* The eight E2M1 values of a packed word, element 2j in the low nibble of byte j. Each value's fp32 bits
   are a table look-up: the sign-stripped nibbles select the upper and lower byte of the value's top half
   (bytes of two words, four values per __byte_perm), and each nibble's top bit is shifted into bit 7 of
   its value's byte. __byte_perm reads three bits of each selector nibble (its sign-replicating mode is not
   part of the intrinsic), so the sign cannot come from the selector. */
IA_FN void ia_nvfp4_word(unsigned w, float out[8]) {
    const unsigned magnitudes = w & 0x77777777u;
    for (int half = 0; half < 2; ++half) {
        const unsigned sel = half ? magnitudes >> 16 : magnitudes, codes = half ? w >> 16 : w;
        const unsigned hi_bytes = __byte_perm(0x3F3F3F00u, 0x40404040u, sel);
        const unsigned lo_bytes = __byte_perm(0xC0800000u, 0xC0804000u, sel);
        const unsigned signs = ((codes & 0x8u) << 4) | ((codes & 0x80u) << 8) | ((codes & 0x800u) << 12)
                             | ((codes & 0x8000u) << 16);
        const unsigned hi = hi_bytes | signs;
        const unsigned p01 = __byte_perm(lo_bytes, hi, 0x5140u), p23 = __byte_perm(lo_bytes, hi, 0x7362u);
        out[4 * half + 0] = ia_float(p01 << 16);
        out[4 * half + 1] = ia_float(p01 & 0xFFFF0000u);
        out[4 * half + 2] = ia_float(p23 << 16);
        out[4 * half + 3] = ia_float(p23 & 0xFFFF0000u);
    }
}

/* The projection's activation of a float32 result, evaluated in double and rounded once (the CPU
   backend's definition). */
IA_FN float ia_nvfp4_activate(float value) {
    const double v = (double)value;
    if (NV_ACT == 1) return (float)(v * (1.0 / (1.0 + exp(-v))));
    if (NV_ACT == 2) return (float)(1.0 / (1.0 + exp(-v)));
    if (NV_ACT == 3) {
        const double r = value < 0.0f ? 0.0 : v; /* NaN stays NaN */
        return (float)(r * r);
    }
    return value;
}
"""

# y[z, m0 + i, row] = act(ts[z] * sum_c scale[row, c / 16] * sum x[z, m0 + i, c] * e2m1[row, c]): a team per
# NV_ROWS weight rows, threads striding over k's chunks of 8 * NV_VEC weights; a block takes its teams' rows
# of one matrix and NV_XROWS rows of x at a time (a job), blocks striding over jobs. A tensor scale that is
# infinite or NaN takes the definition literally: each weight (e2m1 * scale) * ts, zero ones becoming NaN.
GEMV = r"""
struct alignas(4 * NV_VEC) IaNvfp4Chunk {
    unsigned w[NV_VEC];
};

extern "C" __global__ void NV_NAME(const __grid_constant__ IaArgs a) {
    const float* x = (const float*)a.in[0];
    const IaNvfp4Chunk* packed = (const IaNvfp4Chunk*)a.in[1];
    const unsigned char* scales = (const unsigned char*)a.in[2];
    const float* tensor_scale = (const float*)a.scalars[0];
    float* y = (float*)a.out;
    const long long m = a.scalars[1], n = a.scalars[2], k = a.scalars[3];
    const long long x_base = a.scalars[4], y_base = a.scalars[5], matrices = a.scalars[6];
    /* Teams, lanes and shuffle steps are bounded by the block: one thread alone is a whole team. */
    const unsigned team = blockDim.x < NV_TEAM ? blockDim.x : NV_TEAM;
    const unsigned lane = threadIdx.x % team, teams = blockDim.x / team, t = threadIdx.x / team;
    const long long chunks = k / (8 * NV_VEC), blocks = k / 16, rows_per_job = (long long)teams * NV_ROWS;
    const long long bundles = (n + rows_per_job - 1) / rows_per_job, passes = (m + NV_XROWS - 1) / NV_XROWS;
    for (long long job = blockIdx.x; job < matrices * passes * bundles; job += gridDim.x) {
        const long long z = job / (passes * bundles), rest = job % (passes * bundles);
        const long long m0 = rest / bundles * NV_XROWS, r0 = rest % bundles * rows_per_job + (long long)t * NV_ROWS;
        const float ts = tensor_scale[z];
        const bool finite = fabsf(ts) <= 3.40282347e38f;
        const IaNvfp4Chunk* wrow[NV_ROWS];
        const unsigned char* srow[NV_ROWS];
        for (int r = 0; r < NV_ROWS; ++r) { /* rows past n are computed but not written */
            const long long row = z * n + (r0 + r < n ? r0 + r : n - 1);
            wrow[r] = packed + row * chunks;
            srow[r] = scales + row * blocks;
        }
        const float* xrow[NV_XROWS];
        for (int i = 0; i < NV_XROWS; ++i) xrow[i] = x + x_base + (z * m + (m0 + i < m ? m0 + i : m - 1)) * k;
        float acc[NV_ROWS][NV_XROWS];
        for (int r = 0; r < NV_ROWS; ++r)
            for (int i = 0; i < NV_XROWS; ++i) acc[r][i] = 0.0f;
        /* The next chunk's words are loaded before this chunk's arithmetic: two chunks in flight. */
        IaNvfp4Chunk next[NV_ROWS];
        if (lane < chunks)
            for (int r = 0; r < NV_ROWS; ++r) next[r] = wrow[r][lane];
        for (long long c = lane; c < chunks; c += team) {
            IaNvfp4Chunk words[NV_ROWS];
            for (int r = 0; r < NV_ROWS; ++r) words[r] = next[r];
            if (c + team < chunks)
                for (int r = 0; r < NV_ROWS; ++r) next[r] = wrow[r][c + team];
            for (int v = 0; v < NV_VEC; ++v) {
                float w[NV_ROWS][8], s[NV_ROWS];
                for (int r = 0; r < NV_ROWS; ++r) {
                    ia_nvfp4_word(words[r].w[v], w[r]);
                    s[r] = ia_nvfp4_scale(srow[r][(c * NV_VEC + v) / 2]);
                    if (!finite)
                        for (int e = 0; e < 8; ++e) w[r][e] = (w[r][e] * s[r]) * ts;
                }
                for (int i = 0; i < NV_XROWS; ++i) {
                    const IaNvfp4X4* xs = (const IaNvfp4X4*)(xrow[i] + (c * NV_VEC + v) * 8);
                    const IaNvfp4X4 x0 = xs[0], x1 = xs[1];
                    for (int r = 0; r < NV_ROWS; ++r) {
                        float d = x0.v[0] * w[r][0];
                        d += x0.v[1] * w[r][1];
                        d += x0.v[2] * w[r][2];
                        d += x0.v[3] * w[r][3];
                        d += x1.v[0] * w[r][4];
                        d += x1.v[1] * w[r][5];
                        d += x1.v[2] * w[r][6];
                        d += x1.v[3] * w[r][7];
                        acc[r][i] += finite ? d * s[r] : d;
                    }
                }
            }
        }
        for (int r = 0; r < NV_ROWS; ++r)
            for (int i = 0; i < NV_XROWS; ++i)
                for (unsigned offset = team / 2; offset > 0; offset /= 2)
                    acc[r][i] += __shfl_xor_sync(0xFFFFFFFFu, acc[r][i], offset);
        if (lane == 0)
            for (int r = 0; r < NV_ROWS; ++r)
                for (int i = 0; i < NV_XROWS; ++i)
                    if (r0 + r < n && m0 + i < m) {
                        const float v = finite ? acc[r][i] * ts : acc[r][i];
                        y[y_base + (z * m + m0 + i) * n + r0 + r] = ia_nvfp4_activate(v);
                    }
    }
}
"""

# One matrix decoded exactly to fp32 [n, k] (the CPU backend's bits): a thread per block of 16 weights.
DECODE = r"""
extern "C" __global__ void ia_nvfp4_decode(const __grid_constant__ IaArgs a) {
    const unsigned* packed = (const unsigned*)a.in[0];
    const unsigned char* scales = (const unsigned char*)a.in[1];
    const float ts = ((const float*)a.in[2])[0];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
        const float s = ia_nvfp4_scale(scales[i]);
        IaNvfp4X4* out = (IaNvfp4X4*)((float*)a.out + 16 * i);
        for (int half = 0; half < 2; ++half) {
            float w[8];
            ia_nvfp4_word(packed[2 * i + half], w);
            IaNvfp4X4 lo, hi;
            for (int e = 0; e < 4; ++e) {
                lo.v[e] = (w[e] * s) * ts;
                hi.v[e] = (w[4 + e] * s) * ts;
            }
            out[2 * half] = lo;
            out[2 * half + 1] = hi;
        }
    }
}
"""

ACTIVATE = r"""
extern "C" __global__ void NV_NAME(const __grid_constant__ IaArgs a) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {
        ((float*)a.out)[i] = ia_nvfp4_activate(((const float*)a.in[0])[i]);
    }
}
"""


def _source(name: str, body: str, **defines: int) -> Kernel:
    lines = [f"#define NV_{key.upper()} {value}" for key, value in {"act": 0, **defines}.items()]
    return Kernel(name, PRELUDE + "\n" + "\n".join(lines) + "\n" + COMMON + body.replace("NV_NAME", name))


def gemv_kernel(vec: int, rows: int, x_rows: int, team: int, activation: str) -> Kernel:
    """The GEMV specialised for its tile: ``vec`` packed words per chunk (4, 2 or 1), ``rows`` weight rows per
    team, ``x_rows`` rows of x per pass, ``team`` threads per weight row."""
    name = f"ia_nvfp4_gemv_v{vec}_r{rows}_x{x_rows}_t{team}_{activation}"
    act = ACTIVATIONS.index(activation)
    return _source(name, GEMV, vec=vec, rows=rows, xrows=x_rows, team=team, act=act)


def decode_kernel() -> Kernel:
    return _source("ia_nvfp4_decode", DECODE)


def activate_kernel(activation: str) -> Kernel:
    return _source(f"ia_nvfp4_activate_{activation}", ACTIVATE, act=ACTIVATIONS.index(activation))


def kernels() -> tuple[Kernel, ...]:
    """A kernel of each kind a projection plans: every activation, both chunk widths, one to
    GEMV_X_ROWS rows of x, whole and short teams (what the NVRTC compile test builds)."""
    found = [decode_kernel(), *(activate_kernel(a) for a in ACTIVATIONS if a != "none")]
    found += [gemv_kernel(4, 2, 1, GEMV_TEAM, a) for a in ACTIVATIONS]
    for vec, x_rows, team in ((2, 1, 2), (4, 2, GEMV_TEAM), (4, 3, 4), (2, GEMV_X_ROWS, GEMV_TEAM)):
        found.append(gemv_kernel(vec, _rows(x_rows), x_rows, team, "silu"))
    found.append(gemv_kernel(1, _rows(1), 1, GEMV_TEAM, "squared_relu"))  # planes 4 bytes off (MoE)
    return tuple(found)


def _rows(x_rows: int) -> int:
    # Decoded words are reused across the rows of x, x values across the weight rows: more weight rows
    # where there are more rows of x keeps x's reloads in proportion.
    return 2 if x_rows <= 2 else 4


def _align(size: int) -> int:
    return -(-max(size, 1) // ALIGNMENT) * ALIGNMENT


def _blocks_launch(kernel: Kernel, reads: tuple[Place, ...], write: Place, jobs: int, scalars, places) -> WideLaunch:
    count = min(jobs, MAX_BLOCKS) * BLOCK  # a block per job: the grid the launch takes from its count
    return WideLaunch(kernel, reads, write, count, (count,), (), tuple(scalars), places)


def _gemv(
    m: int,
    n: int,
    k: int,
    activation: str,
    matrices: int,
    reads: tuple[Place, Place, Place],
    tensor: Place,
    y: Place,
    bases: tuple[int, int] = (0, 0),
) -> WideLaunch:
    """One GEMV launch over ``matrices`` (n, k) matrices: ``reads`` are x, packed and scales, ``bases``
    the element offsets of the first matrix's x and y. Its chunks are the widest that divide k and that
    the packed place's offset keeps aligned (every place is that far from an allocation's start, which is
    256-byte aligned, whether the arena's or a bound range's)."""
    x_rows = min(m, GEMV_X_ROWS)
    alignment = reads[1].offset & -reads[1].offset or ALIGNMENT
    vec = next(v for v in (4, 2, 1) if k % (8 * v) == 0 and alignment % (4 * v) == 0)
    chunks = k // (8 * vec)
    team = GEMV_TEAM
    while team > 1 and team // 2 >= chunks:
        team //= 2  # no idle lanes where k is short
    rows = _rows(x_rows)
    kernel = gemv_kernel(vec, rows, x_rows, team, activation)
    bundles = -(-n // (BLOCK // team * rows))
    passes = -(-m // x_rows)
    scalars = (0, m, n, k, *bases, matrices)
    places = ((TENSOR_SCALE_WORD, tensor),)
    return _blocks_launch(kernel, reads, y, matrices * passes * bundles, scalars, places)


def gemv_steps(projection: ProjectionArtifact, inputs: Sequence[Place], y: Place) -> list[Step]:
    """One launch for the single and batched forms, one per expert (each expert's weights are bindings)."""
    p = projection
    x = inputs[0]
    if p.form is Form.EXPERTS:
        steps: list[Step] = []
        for e in range(p.count):
            packed, scales, tensor = inputs[1 + 3 * e : 4 + 3 * e]
            bases = (e * p.m * p.k, e * p.m * p.n)
            steps.append(_gemv(p.m, p.n, p.k, p.activation, 1, (x, packed, scales), tensor, y, bases))
        return steps
    packed, scales, tensor = inputs[1:4]
    return [_gemv(p.m, p.n, p.k, p.activation, p.count, (x, packed, scales), tensor, y)]


def moe_steps(p: MoEProjection, inputs: Sequence[Place], y: Place) -> tuple[list[Step], int]:
    """The mixture of experts as two passes of GEMV launches, one per expert each: the up projections with
    the squared ReLU into scratch h (experts, inner), then the down projections from h into y. Each reads
    its planes where the artifact's offsets put them inside the expert's binding; upstream aligns those to
    4 bytes only, so a launch takes the chunks its packed plane's offset allows (down to one word) rather
    than a copy of the plane each run. Returns the steps and the scratch bytes."""
    x, blobs = inputs[0], inputs[1 : 1 + p.experts]
    tensor_scales = inputs[1 + p.experts : 3 + p.experts]
    h = Place("scratch", 0, 4 * p.experts * p.inner)
    passes = ((x, h, p.inner, p.width, p.activation), (h, y, p.width, p.inner, "none"))
    steps: list[Step] = []
    for half, (src, out, n, k, activation) in enumerate(passes):
        for e, blob in enumerate(blobs):
            packed, scales = (
                Place(blob.buffer, blob.offset + p.offsets[e][plane], p.plane_bytes[plane])
                for plane in (2 * half, 2 * half + 1)
            )
            tensor = Place(tensor_scales[half].buffer, tensor_scales[half].offset + 4 * e, 4)
            steps.append(_gemv(1, n, k, activation, 1, (src, packed, scales), tensor, out, (e * k, e * n)))
    return steps, _align(h.size)


def gemm_steps(projection: ProjectionArtifact, inputs: Sequence[Place], y: Place) -> tuple[list[Step], int]:
    """Each matrix decoded into scratch as [n, k], one fp32 product taking it transposed (the experts as
    its batches), then the activation in place on y. Returns the steps and the scratch bytes."""
    p = projection
    matrix = 4 * p.n * p.k
    decoded = Place("scratch", 0, p.count * matrix)
    steps: list[Step] = []
    for e in range(p.count):
        weights = tuple(inputs[1 + 3 * e : 4 + 3 * e])
        out = Place("scratch", e * matrix, matrix)
        blocks = p.n * p.k // 16
        steps.append(Launch(decode_kernel(), weights, out, blocks, (blocks,), ((1,), (1,), (0,))))
    steps.append(Gemm(inputs[0], decoded, y, p.count, p.m, p.n, p.k, DType.FP32, DType.FP32, b_transposed=True))
    if p.activation != "none":
        count = p.count * p.m * p.n
        steps.append(Launch(activate_kernel(p.activation), (y,), y, count, (count,), ((1,),)))
    return steps, _align(decoded.size)


def build(projection: ProjectionArtifact, max_resident_bytes: int | None = None) -> Plan:
    """The plan of ``projection`` (checked when it was read). The decode + product path is taken from
    GEMM_FROM_M rows of x unless its scratch would take the plan past ``max_resident_bytes``."""
    from .program import resident_bytes

    top = 0
    places: list[Place] = []
    for operand in (*projection.inputs, *projection.outputs):
        places.append(Place("arena", top, operand.nbytes))
        top += _align(operand.nbytes)
    inputs, y = tuple(places[:-1]), places[-1]
    if isinstance(projection, MoEProjection):  # m = 1 per expert: the GEMV only
        steps, scratch = moe_steps(projection, inputs, y)
        return Plan(top, 0, scratch, (), tuple(steps), inputs, (y,))
    if projection.form is not Form.BATCHED and projection.m >= GEMM_FROM_M:
        steps, scratch = gemm_steps(projection, inputs, y)
        plan = Plan(top, 0, scratch, (), tuple(steps), inputs, (y,))
        if max_resident_bytes is None or resident_bytes(plan) <= max_resident_bytes:
            return plan
    return Plan(top, 0, 0, (), tuple(gemv_steps(projection, inputs, y)), inputs, (y,))


__all__ = ["GEMM_FROM_M", "GEMV_TEAM", "GEMV_X_ROWS", "WideLaunch", "build", "kernels", "moe_steps"]
