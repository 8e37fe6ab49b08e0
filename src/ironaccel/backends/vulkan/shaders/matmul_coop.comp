#version 460
// MATMUL fp16 x fp16 with fp32 accumulation on cooperative matrices (VK_KHR_cooperative_matrix,
// 16 x 16 x 16 fp16 A / B, fp32 C, subgroup scope; chosen at load where the device lists that
// configuration with 32-wide subgroups, for C and W multiples of 8).
//
// A workgroup of 2 x COLUMN_GROUPS subgroups computes a 128 x (64 COLUMN_GROUPS) output tile (the
// planner uses 2: 128 x 128), each subgroup a 64 x 64 block as 4 x 4 accumulator matrices: per 16-deep
// step a subgroup loads 4 A and 4 B matrices from shared memory for 16 multiply-adds (with 8 subgroups
// of 32 x 64 it was 6 loads for 8, and the kernel half again as slow: shared reads per multiply-add
// bound it; ADR 0008). C advances in steps
// of 32: the A slice (128 x 32) and the B slice (32 x BN) are read from global memory as 8 halves at a
// time (uvec4: the fp16 bits are never converted on the way) into one of two shared buffers whose rows
// are padded by 8 halves against bank conflicts; the next slice is read into registers before the
// current one is multiplied, so one barrier per step suffices. Rows beyond H and columns beyond W are
// staged as zeros. Full 16 x 16 result blocks are stored straight to the output, partial ones through
// shared memory with bounds.
//
// Specialization constants: 0 the workgroup's invocations (64 per column group), 1-3 H, C and W where
// the planner compiles the shape in (ops/matmul.py, large products only; 0: read from the push
// constants). With the shape compiled in, addresses fold into constant offsets, and where it divides
// into whole tiles every bound check folds away too.
//
// Every fixed-count loop is marked [[unroll]]: a driver that leaves such a loop rolled keeps the arrays of
// matrices it indexes in local memory, and the kernel then runs several times slower (ADR 0008).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "include/float_controls.glsl"

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

const uint THREADS = gl_WorkGroupSize.x;
const uint COLUMN_GROUPS = THREADS / 64u;
const uint BM = 128u;
const uint BN = 64u * COLUMN_GROUPS;
const uint BK = 32u;
const uint SA = (BK + 8u) / 8u;  // uvec4s per staged A row (40 halves)
const uint SB = (BN + 8u) / 8u;  // uvec4s per staged B row (136 halves at BN 128)
const uint A_LOADS = BM * BK / 8u / THREADS;  // uvec4s each invocation stages per step (4 at BN 128)
const uint B_LOADS = BK * BN / 8u / THREADS;  // (4)

#include "include/coop_io.glsl"

shared uvec4 sa[2][BM * SA];
shared uvec4 sb[2][BK * SB];
shared float stage_out[2u * COLUMN_GROUPS][16 * 16];

// Indices are in uvec4s (8 halves): C and W are multiples of 8, so a row never starts mid-vector.
void fetch(uint k0, uint n, uint row0, uint col0, uint tid, out uvec4 ra[A_LOADS], out uvec4 rb[B_LOADS]) {
    uint c8 = dim_c() / 8u;
    uint w8 = dim_w() / 8u;
    [[unroll]] for (uint i = 0u; i < A_LOADS; ++i) {
        uint q = tid + i * THREADS;
        uint m = q / (BK / 8u);
        uint k = k0 + 8u * (q % (BK / 8u));
        uint row = row0 + m;
        ra[i] = (whole() || (row < dim_h() && k < dim_c())) ? a[(n * dim_h() + row) * c8 + k / 8u] : uvec4(0u);
    }
    [[unroll]] for (uint i = 0u; i < B_LOADS; ++i) {
        uint q = tid + i * THREADS;
        uint k = k0 + q / (BN / 8u);
        uint col = col0 + 8u * (q % (BN / 8u));
        rb[i] = (whole() || (k < dim_c() && col < dim_w())) ? b[(n * dim_c() + k) * w8 + col / 8u] : uvec4(0u);
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
    uvec4 ra[A_LOADS];
    uvec4 rb[B_LOADS];
    fetch(0u, n, row0, col0, tid, ra, rb);
    stage(0u, tid, ra, rb);
    barrier();

    uint buf = 0u;
    for (uint k0 = 0u; k0 < dim_c(); k0 += BK) {
        bool more = k0 + BK < dim_c();
        if (more) {
            fetch(k0 + BK, n, row0, col0, tid, ra, rb);
        }
        [[unroll]] for (uint kk = 0u; kk < BK / 16u; ++kk) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[4];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[4];
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                coopMatLoad(fa[i], sa[buf], (wm * 64u + 16u * i) * SA + 2u * kk, SA, gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint j = 0u; j < 4u; ++j) {
                coopMatLoad(fb[j], sb[buf], (16u * kk) * SB + (wn * 64u + 16u * j) / 8u, SB,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                [[unroll]] for (uint j = 0u; j < 4u; ++j) {
                    acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
                }
            }
        }
        if (more) {
            stage(buf ^ 1u, tid, ra, rb);
        }
        barrier();
        buf ^= 1u;
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
                coopMatStore(acc[i][j], outv, (n * dim_h() + row) * dim_w() + col, dim_w(),
                             gl_CooperativeMatrixLayoutRowMajor);
                continue;
            }
            coopMatStore(acc[i][j], stage_out[sg], 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
                uint r = row + e / 16u;
                uint c = col + e % 16u;
                if (r < dim_h() && c < dim_w()) {
                    outv[(n * dim_h() + r) * dim_w() + c] = stage_out[sg][e];
                }
            }
            subgroupBarrier();
        }
    }
}
