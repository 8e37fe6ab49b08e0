// Variant of matmul_coop.comp (probe only, not shipped): two slices in flight instead of one.
//
// The shipped kernel reads slice s + 1 from global memory while it multiplies slice s, so each load has
// one slice's multiply-adds (about 860 cycles per multiprocessor on the H200) to arrive, and the kernel
// runs at ~2250 cycles per slice: the loads' latency shows. Here two register sets alternate: slice
// s + 3 is read right after slice s + 1 is staged (at the end of step s) and staged at the end of step
// s + 2, so each load has two slices' work to arrive. The extra set costs 32 registers per invocation;
// B fragments are loaded one at a time (12 fewer) to pay for part of it. Same tiles, same shared
// layout, same multiply order per output as the shipped kernel: results are bit-identical.
//
// COLUMN_GROUPS (defined by the including .comp, default 2) sets the workgroup: 2 x COLUMN_GROUPS
// subgroups of 64 x 64, so 2 gives the shipped 128 x 128 tile and 4 a 128 x 256 one (on the H200 the
// one-slice kernel gained 4% from it, NOTES v4).
//
// The shape reaches it as it reaches matmul_coop.comp (compiled in for large products, ADR 0022).
//
// Build: benchmarks/vulkan/variants/build (glslang 13); time with probe_matmul.py --fp16-spirv.
#ifndef COLUMN_GROUPS
#define COLUMN_GROUPS 2
#endif
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "include/float_controls.glsl"

layout(local_size_x = 64 * COLUMN_GROUPS, local_size_y = 1, local_size_z = 1) in;

const uint BM = 128u;
const uint BN = 64u * COLUMN_GROUPS;
const uint BK = 32u;
const uint SA = (BK + 8u) / 8u;  // uvec4s per staged A row (40 halves)
const uint SB = (BN + 8u) / 8u;  // uvec4s per staged B row (136 halves)
const uint THREADS = 64u * COLUMN_GROUPS;
const uint A_LOADS = BM * BK / 8u / THREADS;  // uvec4s each invocation stages per step
const uint B_LOADS = BK * BN / 8u / THREADS;

#include "include/coop_io.glsl"

shared uvec4 sa[2][BM * SA];
shared uvec4 sb[2][BK * SB];
shared float stage_out[2 * COLUMN_GROUPS][16 * 16];

void fetch(uint k0, uint n, uint row0, uint col0, uint tid, out uvec4 ra[A_LOADS], out uvec4 rb[B_LOADS]) {
    [[unroll]] for (uint i = 0u; i < A_LOADS; ++i) {
        uint q = tid + i * THREADS;
        uint m = q / (BK / 8u);
        uint k = k0 + 8u * (q % (BK / 8u));
        uint row = row0 + m;
        ra[i] = (whole() || (row < dim_h() && k < dim_c())) ? a[(n * dim_h() + row) * (dim_c() / 8u) + k / 8u] : uvec4(0u);
    }
    [[unroll]] for (uint i = 0u; i < B_LOADS; ++i) {
        uint q = tid + i * THREADS;
        uint k = k0 + q / (BN / 8u);
        uint col = col0 + 8u * (q % (BN / 8u));
        rb[i] = (whole() || (k < dim_c() && col < dim_w())) ? b[(n * dim_c() + k) * (dim_w() / 8u) + col / 8u] : uvec4(0u);
    }
}

void stage(uint buf, uint tid, uvec4 ra[A_LOADS], uvec4 rb[B_LOADS]) {
    [[unroll]] for (uint i = 0u; i < A_LOADS; ++i) {
        uint q = tid + i * THREADS;
        sa[buf][(q / (BK / 8u)) * SA + q % (BK / 8u)] = ra[i];
    }
    [[unroll]] for (uint i = 0u; i < B_LOADS; ++i) {
        uint q = tid + i * THREADS;
        sb[buf][(q / (BN / 8u)) * SB + q % (BN / 8u)] = rb[i];
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint wm = sg / COLUMN_GROUPS;  // this subgroup's 64 x 64 block
    uint wn = sg % COLUMN_GROUPS;
    uint n = p.batch_base + gl_WorkGroupID.z;
    uint row0 = gl_WorkGroupID.y * BM;
    uint col0 = gl_WorkGroupID.x * BN;

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[4][4];
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
        }
    }
    uint steps = (dim_c() + BK - 1u) / BK;
    uvec4 ra0[A_LOADS];
    uvec4 rb0[B_LOADS];
    uvec4 ra1[A_LOADS];
    uvec4 rb1[B_LOADS];
    fetch(0u, n, row0, col0, tid, ra0, rb0);
    stage(0u, tid, ra0, rb0);
    if (steps > 1u) {
        fetch(BK, n, row0, col0, tid, ra1, rb1);
    }
    if (steps > 2u) {
        fetch(2u * BK, n, row0, col0, tid, ra0, rb0);
    }
    barrier();

    // Step t multiplies shared buffer t % 2, then stages slice t + 1 (held in register set (t + 1) % 2)
    // into the other buffer and reads slice t + 3 into the set just freed. Unrolled by two so that
    // every buffer and register set index is a constant.
    for (uint s = 0u; s < steps; s += 2u) {
        [[unroll]] for (uint side = 0u; side < 2u; ++side) {
            uint t = s + side;
            if (t >= steps) {
                break;
            }
            [[unroll]] for (uint kk = 0u; kk < BK / 16u; ++kk) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[4];
                [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                    coopMatLoad(fa[i], sa[side], (wm * 64u + 16u * i) * SA + 2u * kk, SA, gl_CooperativeMatrixLayoutRowMajor);
                }
                [[unroll]] for (uint j = 0u; j < 4u; ++j) {
                    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb;
                    coopMatLoad(fb, sb[side], (16u * kk) * SB + (wn * 64u + 16u * j) / 8u, SB,
                                gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                        acc[i][j] = coopMatMulAdd(fa[i], fb, acc[i][j]);
                    }
                }
            }
            if (t + 1u < steps) {
                if (side == 0u) {
                    stage(1u, tid, ra1, rb1);
                    if (t + 3u < steps) {
                        fetch((t + 3u) * BK, n, row0, col0, tid, ra1, rb1);
                    }
                } else {
                    stage(0u, tid, ra0, rb0);
                    if (t + 3u < steps) {
                        fetch((t + 3u) * BK, n, row0, col0, tid, ra0, rb0);
                    }
                }
            }
            barrier();
        }
    }

    uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        [[unroll]] for (uint j = 0u; j < 4u; ++j) {
            uint row = row0 + wm * 64u + 16u * i;
            uint col = col0 + wn * 64u + 16u * j;
            if (!whole() && (row >= dim_h() || col >= dim_w())) {
                continue;
            }
            if (whole() || (row + 16u <= dim_h() && col + 16u <= dim_w())) {
                coopMatStore(acc[i][j], outv, n * dim_h() * dim_w() + row * dim_w() + col, dim_w(), gl_CooperativeMatrixLayoutRowMajor);
                continue;
            }
            coopMatStore(acc[i][j], stage_out[sg], 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
                uint r = row + e / 16u;
                uint c = col + e % 16u;
                if (r < dim_h() && c < dim_w()) {
                    outv[n * dim_h() * dim_w() + r * dim_w() + c] = stage_out[sg][e];
                }
            }
            subgroupBarrier();
        }
    }
}
