// MATMUL fp16 x fp16 -> fp32 on workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2):
// the body of matmul_wg_coop.comp, and of candidate forms of it built for benchmarks/vulkan/probe_matmul.py.
//
// matmul_coop.comp holds 16 x 16 fragments per subgroup and writes the staging through shared memory
// itself. Here a workgroup owns one TILE_M x TILE_N fp32 accumulator and, per TILE_K step, loads a
// TILE_M x TILE_K slice of A and a TILE_K x TILE_N slice of B straight from the buffers, then
// multiply-adds: the GEMM as its definition, with the staging and the pipelining of the loads left to
// the driver's compiler. Which of the two is faster on a device is measured, not assumed (ADR 0020).
//
// TENSOR 1 (the shipped form) loads and stores through tensor layouts (batch, rows, columns) that read
// zeros beyond each edge and drop stores beyond it, so any shape works. A zero product only meets
// another zero, so the padding changes no sum. TENSOR 0 uses plain pitched loads and needs H, W and C
// to be multiples of TILE_M, TILE_N and TILE_K (a workgroup whose tile crosses an edge writes nothing):
// probe material only. TENSOR 2 keeps the clamped layouts for workgroups whose tile crosses an edge and
// gives the others layouts without clamping, which the driver need not bounds-check (probe material).
// AHEAD 1 issues the next step's loads before the multiply-add, in case the
// compiler does not overlap them by itself. INLOOP 1 declares the slices inside the loop and loads them
// just before their multiply-add, so no matrix is carried from one step to the next. PLANES 1 gives the
// tensor layouts two dimensions and reaches batch n by an element offset.
//
// The including .comp defines WG_INVOCATIONS (the workgroup size the driver lists the configuration
// for), TILE_M, TILE_N, TILE_K, TENSOR, AHEAD, INLOOP and PLANES. glslang 13 has no GL_NV_cooperative_matrix2: every
// including .comp carries the line "// compiler: slang-glslang" (scripts/slang-glslang).
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "float_controls.glsl"

#ifndef WG_INVOCATIONS
#define WG_INVOCATIONS 256
#endif
#ifndef TILE_M
#define TILE_M 128
#endif
#ifndef TILE_N
#define TILE_N 128
#endif
#ifndef TILE_K
#define TILE_K 32
#endif
#ifndef TENSOR
#define TENSOR 1
#endif
#ifndef AHEAD
#define AHEAD 0
#endif
#ifndef INLOOP
#define INLOOP 0
#endif
#ifndef PLANES
#define PLANES 0
#endif

layout(local_size_x = WG_INVOCATIONS, local_size_y = 1, local_size_z = 1) in;

layout(set = 0, binding = 0, std430) readonly buffer A { float16_t a[]; };
layout(set = 0, binding = 1, std430) readonly buffer B { float16_t b[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint batch_base;
    uint H;
    uint C;
    uint W;
} p;

#define SliceA coopmat<float16_t, gl_ScopeWorkgroup, TILE_M, TILE_K, gl_MatrixUseA>
#define SliceB coopmat<float16_t, gl_ScopeWorkgroup, TILE_K, TILE_N, gl_MatrixUseB>
#define Tile coopmat<float, gl_ScopeWorkgroup, TILE_M, TILE_N, gl_MatrixUseAccumulator>
#if PLANES
#define Layout tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV>
#else
#define Layout tensorLayoutNV<3, gl_CooperativeMatrixClampModeConstantNV>
#endif
#if PLANES
#define Unclamped tensorLayoutNV<2>
#else
#define Unclamped tensorLayoutNV<3>
#endif

// One workgroup's tile: LOAD_A / LOAD_B / STORE name the addressing.
#if AHEAD
#define STEP(k0) \
        SliceA na = sa; \
        SliceB nb = sb; \
        if (k0 < p.C) { LOAD_A(na, k0); LOAD_B(nb, k0); } \
        acc = coopMatMulAdd(sa, sb, acc); \
        sa = na; \
        sb = nb;
#else
#define STEP(k0) \
        acc = coopMatMulAdd(sa, sb, acc); \
        if (k0 < p.C) { LOAD_A(sa, k0); LOAD_B(sb, k0); }
#endif
#if INLOOP
#define TILE_LOOP() { \
    Tile acc = Tile(0.0); \
    for (uint k0 = 0u; k0 < p.C; k0 += TILE_K) { \
        SliceA sa; \
        SliceB sb; \
        LOAD_A(sa, k0); \
        LOAD_B(sb, k0); \
        acc = coopMatMulAdd(sa, sb, acc); \
    } \
    STORE(acc); \
}
#else
#define TILE_LOOP() { \
    Tile acc = Tile(0.0); \
    SliceA sa; \
    SliceB sb; \
    LOAD_A(sa, 0u); \
    LOAD_B(sb, 0u); \
    for (uint k0 = TILE_K; k0 < p.C + TILE_K; k0 += TILE_K) { STEP(k0) } \
    STORE(acc); \
}
#endif

void main() {
    uint n = p.batch_base + gl_WorkGroupID.z;
    uint row0 = gl_WorkGroupID.y * TILE_M;
    uint col0 = gl_WorkGroupID.x * TILE_N;
#if TENSOR && PLANES
    // Two-dimensional layouts over batch n's planes, reached by element offsets.
    Layout la = setTensorLayoutDimensionNV(createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV), p.H, p.C);
    Layout lb = setTensorLayoutDimensionNV(createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV), p.C, p.W);
    Layout lo = setTensorLayoutDimensionNV(createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV), p.H, p.W);
#define LOAD_A(m, k) coopMatLoadTensorNV(m, a, n * p.H * p.C, sliceTensorLayoutNV(la, row0, TILE_M, k, TILE_K))
#define LOAD_B(m, k) coopMatLoadTensorNV(m, b, n * p.C * p.W, sliceTensorLayoutNV(lb, k, TILE_K, col0, TILE_N))
#define STORE(m) coopMatStoreTensorNV(m, outv, n * p.H * p.W, sliceTensorLayoutNV(lo, row0, TILE_M, col0, TILE_N))
#if TENSOR == 2
    if (row0 + TILE_M <= p.H && col0 + TILE_N <= p.W && p.C % TILE_K == 0u) {
        // As below for three dimensions: interior tiles through layouts that do not clamp.
        Unclamped la = setTensorLayoutDimensionNV(createTensorLayoutNV(2), p.H, p.C);
        Unclamped lb = setTensorLayoutDimensionNV(createTensorLayoutNV(2), p.C, p.W);
        Unclamped lo = setTensorLayoutDimensionNV(createTensorLayoutNV(2), p.H, p.W);
        TILE_LOOP()
        return;
    }
#endif
    TILE_LOOP()
#elif TENSOR
    // Only batch n is addressed, so n + 1 batches suffice as the outer dimension.
    Layout la = setTensorLayoutDimensionNV(createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV), n + 1u, p.H, p.C);
    Layout lb = setTensorLayoutDimensionNV(createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV), n + 1u, p.C, p.W);
    Layout lo = setTensorLayoutDimensionNV(createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV), n + 1u, p.H, p.W);
#define LOAD_A(m, k) coopMatLoadTensorNV(m, a, 0u, sliceTensorLayoutNV(la, n, 1u, row0, TILE_M, k, TILE_K))
#define LOAD_B(m, k) coopMatLoadTensorNV(m, b, 0u, sliceTensorLayoutNV(lb, n, 1u, k, TILE_K, col0, TILE_N))
#define STORE(m) coopMatStoreTensorNV(m, outv, 0u, sliceTensorLayoutNV(lo, n, 1u, row0, TILE_M, col0, TILE_N))
#if TENSOR == 2
    if (row0 + TILE_M <= p.H && col0 + TILE_N <= p.W && p.C % TILE_K == 0u) {
        // Every load and store of this tile is in bounds (uniform across the workgroup): the same loop
        // through layouts of the same names that do not clamp.
        Unclamped la = setTensorLayoutDimensionNV(createTensorLayoutNV(3), n + 1u, p.H, p.C);
        Unclamped lb = setTensorLayoutDimensionNV(createTensorLayoutNV(3), n + 1u, p.C, p.W);
        Unclamped lo = setTensorLayoutDimensionNV(createTensorLayoutNV(3), n + 1u, p.H, p.W);
        TILE_LOOP()
        return;
    }
#endif
    TILE_LOOP()
#else
    if (row0 + TILE_M > p.H || col0 + TILE_N > p.W || p.C % TILE_K != 0u) {
        return;  // uniform across the workgroup: see the limits above
    }
    uint a0 = n * p.H * p.C + row0 * p.C;
    uint b0 = n * p.C * p.W + col0;
#define LOAD_A(m, k) coopMatLoad(m, a, a0 + (k), p.C, gl_CooperativeMatrixLayoutRowMajor)
#define LOAD_B(m, k) coopMatLoad(m, b, b0 + (k) * p.W, p.W, gl_CooperativeMatrixLayoutRowMajor)
#define STORE(m) coopMatStore(m, outv, n * p.H * p.W + row0 * p.W + col0, p.W, gl_CooperativeMatrixLayoutRowMajor)
    TILE_LOOP()
#endif
}
