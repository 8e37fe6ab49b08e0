#version 460
// MATMUL: [N, H, C] x [N, C, W] -> [N, H, W] with fp32 accumulation (fma, one chain per output).
//
// Register-blocked: a workgroup of TX x TY invocations computes a BM x BN tile (BM = TY * TM,
// BN = TX * TN) and each invocation TM x TN outputs of it, held in registers. Each subgroup of 32 covers
// one block of the tile, LN invocations wide and LM high (8 x 4 on large tiles: a 32 x 64 block); inside
// it an invocation's rows are TM / 4 runs of 4 spaced LM * 4 apart and its columns TN / 4 runs of 4
// spaced LN * 4 apart, so a subgroup's shared reads per k touch LM vec4s of A and LN of B (16 vec4s
// of B when subgroups spanned the tile's width), and neighbouring invocations write neighbouring vec4s of
// the output. Each output is still one fma chain in k order: the placement changes no bit. (Fewer
// wavefronts per read were not the bound: the placement alone was slightly slower than subgroups spanning
// the tile's width, and it is the shared reads one k ahead below that make it faster; ADR 0008.)
// The reduction runs in steps of BK: the A slice (BM x BK, stored transposed so a column of it is
// contiguous) and the B slice (BK x BN) sit in shared memory as vec4s, so an invocation reads TM / 4 +
// TN / 4 vectors per k for TM * TN fmas. Two shared buffers alternate: the next slice is read from global memory into
// registers before the current one is multiplied and stored after it, so one barrier per step
// suffices and the loads' latency hides behind the arithmetic.
//
// Entries outside the matrices (partial tiles, the end of C) are staged as zeros: a zero product only
// meets another zero, and adding +0 to an accumulator that starts at +0 changes nothing.
//
// Split-k: the workgroup's z index is (batch, slice); slice s reduces C over [s KS, (s + 1) KS) and
// writes its partial sums to slice s of the output binding (then [S, N, H, W]); matmul_reduce.comp
// adds the slices in order.
//
// Specialization constants: 0 TX, 1 TY, 2 TM, 3 TN (4 or 8), 4 BK (multiple of 4), 5 IN_FP16 (the
// inputs are fp16 halves, widened exactly with include/fp16.glsl), 6 VEC (C and W are multiples of 4:
// global loads and stores move vec4s), 7-10 H, C, W and KS where the planner compiles the shape in
// (ops/matmul.py, large products only; 0: read from the push constants). With the shape compiled in,
// addresses fold into constant offsets, and where it divides into whole tiles every bound
// check folds away too.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/fp16.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z = 1) in;
layout(constant_id = 2) const uint TM = 8u;
layout(constant_id = 3) const uint TN = 8u;
layout(constant_id = 4) const uint BK = 8u;
layout(constant_id = 5) const uint IN_FP16 = 0u;
layout(constant_id = 6) const uint VEC = 0u;
layout(constant_id = 7) const uint FIXED_H = 0u;
layout(constant_id = 8) const uint FIXED_C = 0u;
layout(constant_id = 9) const uint FIXED_W = 0u;
layout(constant_id = 10) const uint FIXED_KS = 0u;

const uint TX = gl_WorkGroupSize.x;
const uint TY = gl_WorkGroupSize.y;
const uint THREADS = TX * TY;
const uint BM = TY * TM;
const uint BN = TX * TN;
const uint AQ = BM * BK / 4u;  // vec4s per A slice
const uint BQ = BN * BK / 4u;
const uint A_LOADS = (AQ + THREADS - 1u) / THREADS;  // vec4s each invocation stages per step
const uint B_LOADS = (BQ + THREADS - 1u) / THREADS;
const uint GROUP = 8u;  // row tiles walked down before the next column (see main)
const uint LN = TX < 8u ? TX : 8u;  // a subgroup's invocations along the columns
const uint LM = (32u / LN) < TY ? (32u / LN) : TY;  // and along the rows (LN | TX, LM | TY: both are 4 or 16)

layout(set = 0, binding = 0, std430) readonly buffer A { float a[]; };
layout(set = 0, binding = 0, std430) readonly buffer A4 { vec4 a4[]; };
layout(set = 0, binding = 0, std430) readonly buffer AH { uint ah[]; };
layout(set = 0, binding = 1, std430) readonly buffer B { float b[]; };
layout(set = 0, binding = 1, std430) readonly buffer B4 { vec4 b4[]; };
layout(set = 0, binding = 1, std430) readonly buffer BH { uint bh[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { float outv[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out4 { vec4 outv4[]; };

layout(push_constant, std430) uniform Params {
    uint batch_base;  // first batch of this dispatch (batches beyond the z group limit)
    uint H;
    uint C;
    uint W;
    uint slices;  // split-k slices (1: no split)
    uint KS;      // C per slice, a multiple of BK
} p;

uint dim_h() { return FIXED_H != 0u ? FIXED_H : p.H; }
uint dim_c() { return FIXED_C != 0u ? FIXED_C : p.C; }
uint dim_w() { return FIXED_W != 0u ? FIXED_W : p.W; }
uint slice_c() { return FIXED_KS != 0u ? FIXED_KS : p.KS; }
// The shape is compiled in and divides into whole tiles and steps (every slice starts on a step), so
// no load or store needs a bound check. A function of constants, folded by the driver's compiler
// (glslang emits && between specialization constants as code, so it cannot be a const).
bool whole() {
    return VEC != 0u && FIXED_H != 0u && FIXED_C != 0u && FIXED_W != 0u && FIXED_KS != 0u && FIXED_H % BM == 0u &&
           FIXED_W % BN == 0u && FIXED_KS % BK == 0u && FIXED_C % BK == 0u;
}

shared vec4 sa[2][AQ];  // [k][m / 4]: the A slice transposed
shared vec4 sb[2][BQ];  // [k][n / 4]

float load_a(uint index) {
    if (IN_FP16 != 0u) {
        uint bits = (ah[index >> 1] >> ((index & 1u) << 4)) & 0xffffu;
        return uintBitsToFloat(ia_f16_bits_to_f32_bits(bits));
    }
    return a[index];
}

float load_b(uint index) {
    if (IN_FP16 != 0u) {
        uint bits = (bh[index >> 1] >> ((index & 1u) << 4)) & 0xffffu;
        return uintBitsToFloat(ia_f16_bits_to_f32_bits(bits));
    }
    return b[index];
}

// vec4 q of the A slice starting at k0: rows m = q / (BK / 4), columns k0 + 4 (q % (BK / 4)) + 0..3.
vec4 fetch_a(uint q, uint a_base, uint row0, uint k0, uint k_end) {
    uint m = q / (BK / 4u);
    uint k = k0 + 4u * (q % (BK / 4u));
    uint row = row0 + m;
    if (!whole() && (row >= dim_h() || k >= k_end)) {
        return vec4(0.0);
    }
    if (VEC != 0u) {  // C % 4 == 0 and k_end a multiple of 4: the vector is whole
        return a4[(a_base >> 2) + row * (dim_c() >> 2) + (k >> 2)];
    }
    uint at = a_base + row * dim_c() + k;
    vec4 v;
    for (uint i = 0u; i < 4u; ++i) {
        v[i] = k + i < k_end ? load_a(at + i) : 0.0;
    }
    return v;
}

// vec4 q of the B slice: row k0 + q / (BN / 4), columns col0 + 4 (q % (BN / 4)) + 0..3.
vec4 fetch_b(uint q, uint b_base, uint col0, uint k0, uint k_end) {
    uint k = k0 + q / (BN / 4u);
    uint col = col0 + 4u * (q % (BN / 4u));
    if (!whole() && (k >= k_end || col >= dim_w())) {
        return vec4(0.0);
    }
    if (VEC != 0u) {
        return b4[(b_base >> 2) + k * (dim_w() >> 2) + (col >> 2)];
    }
    uint at = b_base + k * dim_w() + col;
    vec4 v;
    for (uint i = 0u; i < 4u; ++i) {
        v[i] = col + i < dim_w() ? load_b(at + i) : 0.0;
    }
    return v;
}

void stage(uint buf, vec4 ra[A_LOADS], vec4 rb[B_LOADS], uint tid) {
    for (uint i = 0u; i < A_LOADS; ++i) {
        uint q = tid + i * THREADS;
        if (q < AQ) {
            uint m = q / (BK / 4u);
            uint k = 4u * (q % (BK / 4u));
            // transposed: element (m, k + j) goes to sa[k + j][m]
            for (uint j = 0u; j < 4u; ++j) {
                sa[buf][(k + j) * (BM / 4u) + (m >> 2)][m & 3u] = ra[i][j];
            }
        }
    }
    for (uint i = 0u; i < B_LOADS; ++i) {
        uint q = tid + i * THREADS;
        if (q < BQ) {
            sb[buf][q] = rb[i];
        }
    }
}

void main() {
    uint tid = gl_LocalInvocationID.y * TX + gl_LocalInvocationID.x;
    uint lane = tid % (LN * LM);
    uint block = tid / (LN * LM);
    // vec4 offsets of this invocation's first run in a row of the A and B slices
    uint a_off = (block / (TX / LN)) * (LM * TM / 4u) + lane / LN;
    uint b_off = (block % (TX / LN)) * (LN * TN / 4u) + lane % LN;
    uint n = p.batch_base + gl_WorkGroupID.z / p.slices;
    uint slice = gl_WorkGroupID.z % p.slices;
    // Tiles in bands of GROUP rows: workgroups launched together share GROUP panels of A and a
    // narrower band of B, so more of their global loads hit in L2. The mapping is one-to-one and changes no
    // output's arithmetic. Large products gain a few percent (ADR 0008); matmul_coop, bound inside the
    // workgroup rather than in L2, does not.
    uint nx = gl_NumWorkGroups.x;
    uint pid = gl_WorkGroupID.y * nx + gl_WorkGroupID.x;
    uint first = (pid / (GROUP * nx)) * GROUP;
    uint rows = min(gl_NumWorkGroups.y - first, GROUP);
    uint local = pid % (GROUP * nx);
    uint row0 = (first + local % rows) * BM;
    uint col0 = (local / rows) * BN;
    uint a_base = n * dim_h() * dim_c();
    uint b_base = n * dim_c() * dim_w();
    uint k_begin = slice * slice_c();
    uint k_end = min(dim_c(), k_begin + slice_c());

    float acc[TM][TN];
    for (uint i = 0u; i < TM; ++i) {
        for (uint j = 0u; j < TN; ++j) {
            acc[i][j] = 0.0;
        }
    }
    vec4 ra[A_LOADS];
    vec4 rb[B_LOADS];
    for (uint i = 0u; i < A_LOADS; ++i) {
        ra[i] = fetch_a(tid + i * THREADS, a_base, row0, k_begin, k_end);
    }
    for (uint i = 0u; i < B_LOADS; ++i) {
        rb[i] = fetch_b(tid + i * THREADS, b_base, col0, k_begin, k_end);
    }
    stage(0u, ra, rb, tid);
    barrier();

    uint buf = 0u;
    for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
        uint next = k0 + BK;
        if (next < k_end) {  // read the next slice now; it is stored once this one is used
            for (uint i = 0u; i < A_LOADS; ++i) {
                ra[i] = fetch_a(tid + i * THREADS, a_base, row0, next, k_end);
            }
            for (uint i = 0u; i < B_LOADS; ++i) {
                rb[i] = fetch_b(tid + i * THREADS, b_base, col0, next, k_end);
            }
        }
        // The vectors of k + 1 are read from shared memory before the products of k, so their latency
        // hides behind them (figures in the header). Arrays sized by specialization constants cannot be
        // assigned whole, hence the element loops.
        vec4 fa[TM / 4u];
        vec4 fb[TN / 4u];
        for (uint i = 0u; i < TM / 4u; ++i) {
            fa[i] = sa[buf][a_off + i * LM];
        }
        for (uint j = 0u; j < TN / 4u; ++j) {
            fb[j] = sb[buf][b_off + j * LN];
        }
        for (uint k = 0u; k < BK; ++k) {
            uint k1 = k + 1u < BK ? k + 1u : k;  // the last step reads its own vectors again, unused
            vec4 na[TM / 4u];
            vec4 nb[TN / 4u];
            for (uint i = 0u; i < TM / 4u; ++i) {
                na[i] = sa[buf][k1 * (BM / 4u) + a_off + i * LM];
            }
            for (uint j = 0u; j < TN / 4u; ++j) {
                nb[j] = sb[buf][k1 * (BN / 4u) + b_off + j * LN];
            }
            for (uint i = 0u; i < TM; ++i) {
                for (uint j = 0u; j < TN; ++j) {
                    acc[i][j] = fma(fa[i / 4u][i & 3u], fb[j / 4u][j & 3u], acc[i][j]);
                }
            }
            for (uint i = 0u; i < TM / 4u; ++i) {
                fa[i] = na[i];
            }
            for (uint j = 0u; j < TN / 4u; ++j) {
                fb[j] = nb[j];
            }
        }
        if (next < k_end) {
            stage(buf ^ 1u, ra, rb, tid);
        }
        barrier();  // the next slice is visible, and every read of this one is done before it is overwritten
        buf ^= 1u;
    }

    // split dispatches start at batch 0 and cover every batch, so N = groups in z / slices there
    uint out_base = (slice * (gl_NumWorkGroups.z / p.slices) + n) * dim_h() * dim_w();
    for (uint i = 0u; i < TM; ++i) {
        uint row = row0 + 4u * (a_off + (i / 4u) * LM) + (i & 3u);
        if (!whole() && row >= dim_h()) {
            continue;
        }
        for (uint g = 0u; g < TN / 4u; ++g) {
            uint col = col0 + 4u * (b_off + g * LN);
            if (VEC != 0u && (whole() || col + 4u <= dim_w())) {
                outv4[(out_base >> 2) + row * (dim_w() >> 2) + (col >> 2)] =
                    vec4(acc[i][4u * g], acc[i][4u * g + 1u], acc[i][4u * g + 2u], acc[i][4u * g + 3u]);
            } else {
                uint at = out_base + row * dim_w() + col;
                for (uint j = 0u; j < 4u; ++j) {
                    if (col + j < dim_w()) {
                        outv[at + j] = acc[i][4u * g + j];
                    }
                }
            }
        }
    }
}
