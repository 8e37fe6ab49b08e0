#version 460
// MATMUL int8 x int8 -> int32 with zero points on cooperative matrices (VK_KHR_cooperative_matrix,
// 16 x 16 x 32 int8 A / B, int32 C, subgroup scope; chosen at load where the device lists that
// configuration with 32-wide subgroups and 8-bit shader arithmetic, for C and W multiples of 16).
//
// The same tiling as matmul_coop.comp: 4 subgroups per 128 x 128 output tile, each 64 x 64 as 4 x 4
// accumulators; C advances in steps of 64, the A and B slices staged through two shared buffers (rows
// padded by 16 bytes) with the next slice read into registers while the current one is multiplied.
//
// The tensor cores multiply the raw int8 values; the zero points are applied after, from
//   sum_c (a - za)(b - zb) = sum_c ab - zb * rowsum(a) - za * colsum(b) + C * za * zb
// which holds in int32 arithmetic modulo 2^32 like the direct sum (products and sums wrap, TOSA
// REQUIREs the accumulator not to overflow), so results equal the CPU backend's bit for bit. The row
// sums are products with a matrix of ones (every column of the result is the row's sum), the column
// sums likewise; they are computed only where the other zero point is not 0. Results that need a zero
// point, or lie on a partial tile, go through shared memory (the A buffers, free after the last step).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

layout(local_size_x = 128, local_size_y = 1, local_size_z = 1) in;

const uint BM = 128u;
const uint BN = 128u;
const uint BK = 64u;
const uint SA = (BK + 16u) / 16u;  // uvec4s per staged A row (80 bytes)
const uint SB = (BN + 16u) / 16u;  // uvec4s per staged B row (144 bytes)
const uint THREADS = 128u;
const uint A_LOADS = BM * BK / 16u / THREADS;  // uvec4s each invocation stages per step (4)
const uint B_LOADS = BK * BN / 16u / THREADS;  // (4)
const uint STAGE = 3u * 16u * 16u / 4u;  // uvec4s of one subgroup's staged result, row and column sums

layout(set = 0, binding = 0, std430) readonly buffer A { uvec4 a[]; };
layout(set = 0, binding = 1, std430) readonly buffer B { uvec4 b[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { int outv[]; };

layout(push_constant, std430) uniform Params {
    uint batch_base;
    uint H;
    uint C;
    uint W;
    int za;  // zero points, sign-extended
    int zb;
} p;

shared uvec4 sa[2][BM * SA];
shared uvec4 sb[2][BK * SB];

void fetch(uint k0, uint n, uint row0, uint col0, uint tid, out uvec4 ra[A_LOADS], out uvec4 rb[B_LOADS]) {
    [[unroll]] for (uint i = 0u; i < A_LOADS; ++i) {
        uint q = tid + i * THREADS;
        uint m = q / (BK / 16u);
        uint k = k0 + 16u * (q % (BK / 16u));
        uint row = row0 + m;
        ra[i] = (row < p.H && k < p.C) ? a[(n * p.H * p.C + row * p.C + k) >> 4] : uvec4(0u);
    }
    [[unroll]] for (uint i = 0u; i < B_LOADS; ++i) {
        uint q = tid + i * THREADS;
        uint k = k0 + q / (BN / 16u);
        uint col = col0 + 16u * (q % (BN / 16u));
        rb[i] = (k < p.C && col < p.W) ? b[(n * p.C * p.W + k * p.W + col) >> 4] : uvec4(0u);
    }
}

void stage(uint buf, uint tid, uvec4 ra[A_LOADS], uvec4 rb[B_LOADS]) {
    [[unroll]] for (uint i = 0u; i < A_LOADS; ++i) {
        uint q = tid + i * THREADS;
        sa[buf][(q / (BK / 16u)) * SA + q % (BK / 16u)] = ra[i];
    }
    [[unroll]] for (uint i = 0u; i < B_LOADS; ++i) {
        uint q = tid + i * THREADS;
        sb[buf][(q / (BN / 16u)) * SB + q % (BN / 16u)] = rb[i];
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint wm = sg >> 1;  // this subgroup's 64 x 64 quarter
    uint wn = sg & 1u;
    uint n = p.batch_base + gl_WorkGroupID.z;
    uint row0 = gl_WorkGroupID.y * BM;
    uint col0 = gl_WorkGroupID.x * BN;
    bool rows_needed = p.zb != 0;
    bool cols_needed = p.za != 0;

    coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[4][4];
    coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> rowsum[4];
    coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> colsum[4];
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        rowsum[i] = coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0);
        colsum[i] = coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0);
        [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            acc[i][j] = coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0);
        }
    }
    coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA> ones_a =
        coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA>(int8_t(1));
    coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB> ones_b =
        coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB>(int8_t(1));

    uvec4 ra[A_LOADS];
    uvec4 rb[B_LOADS];
    fetch(0u, n, row0, col0, tid, ra, rb);
    stage(0u, tid, ra, rb);
    barrier();

    uint buf = 0u;
    for (uint k0 = 0u; k0 < p.C; k0 += BK) {
        bool more = k0 + BK < p.C;
        if (more) {
            fetch(k0 + BK, n, row0, col0, tid, ra, rb);
        }
        [[unroll]] for (uint kk = 0u; kk < BK / 32u; ++kk) {
            coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA> fa[4];
            coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB> fb[4];
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                coopMatLoad(fa[i], sa[buf], (wm * 64u + 16u * i) * SA + 2u * kk, SA, gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint j = 0u; j < 4u; ++j) {
                coopMatLoad(fb[j], sb[buf], (32u * kk) * SB + (wn * 64u + 16u * j) / 16u, SB,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                [[unroll]] for (uint j = 0u; j < 4u; ++j) {
                    acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
                }
            }
            if (rows_needed) {
                [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                    rowsum[i] = coopMatMulAdd(fa[i], ones_b, rowsum[i]);
                }
            }
            if (cols_needed) {
                [[unroll]] for (uint j = 0u; j < 4u; ++j) {
                    colsum[j] = coopMatMulAdd(ones_a, fb[j], colsum[j]);
                }
            }
        }
        if (more) {
            stage(buf ^ 1u, tid, ra, rb);
        }
        barrier();
        buf ^= 1u;
    }

    // After the loop's last barrier no subgroup reads the A buffers: each subgroup stages its results
    // in its own STAGE uvec4s of them (two subgroups per buffer).
    uint base = (sg & 1u) * STAGE;
    uint at = sg >> 1;
    int correction = int(p.C) * p.za * p.zb;
    bool plain = !rows_needed && !cols_needed;
    uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            uint row = row0 + wm * 64u + 16u * i;
            uint col = col0 + wn * 64u + 16u * j;
            if (row >= p.H || col >= p.W) {
                continue;
            }
            if (plain && row + 16u <= p.H && col + 16u <= p.W) {
                coopMatStore(acc[i][j], outv, n * p.H * p.W + row * p.W + col, p.W, gl_CooperativeMatrixLayoutRowMajor);
                continue;
            }
            // 16 x 16 ints are 64 uvec4s: the result, then the row sums, then the column sums.
            coopMatStore(acc[i][j], sa[at], base, 4u, gl_CooperativeMatrixLayoutRowMajor);
            coopMatStore(rowsum[i], sa[at], base + 64u, 4u, gl_CooperativeMatrixLayoutRowMajor);
            coopMatStore(colsum[j], sa[at], base + 128u, 4u, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
                uint r = row + e / 16u;
                uint c = col + e % 16u;
                if (r < p.H && c < p.W) {
                    int v = int(sa[at][base + e / 4u][e % 4u]);
                    int rs = int(sa[at][base + 64u + e / 4u][e % 4u]);
                    int cs = int(sa[at][base + 128u + e / 4u][e % 4u]);
                    outv[n * p.H * p.W + r * p.W + c] = v - p.zb * rs - p.za * cs + correction;
                }
            }
            subgroupBarrier();
        }
    }
}
