#version 460
// Variant of matmul_int_coop.comp (probe only, not shipped): int8 x int8 -> int32 MATMUL with zero points
// on workgroup-scope matrices, loaded and stored through tensor layouts as in include/matmul_wg.glsl:
// one 128 x 128 int32 accumulator per workgroup of 256 invocations, 64-deep steps, the staging left to
// the driver. The zero points as matmul_int_coop.comp applies them,
//   sum_c (a - za)(b - zb) = sum_c ab - zb * rowsum(a) - za * colsum(b) + C * za * zb,
// in int32 arithmetic modulo 2^32, the row and column sums being products with matrices of ones, taken
// only where the other zero point is not 0. Entries beyond an edge read as 0, so they add nothing to
// any sum. Same bindings and push constants as matmul_int_coop.comp.
// compiler: slang-glslang
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

#define TILE_M 128
#define TILE_N 128
#define TILE_K 64

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(set = 0, binding = 0, std430) readonly buffer A { int8_t a[]; };
layout(set = 0, binding = 1, std430) readonly buffer B { int8_t b[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { int outv[]; };

layout(push_constant, std430) uniform Params {
    uint batch_base;
    uint H;
    uint C;
    uint W;
    int za;  // zero points, sign-extended
    int zb;
} p;

#define SliceA coopmat<int8_t, gl_ScopeWorkgroup, TILE_M, TILE_K, gl_MatrixUseA>
#define SliceB coopmat<int8_t, gl_ScopeWorkgroup, TILE_K, TILE_N, gl_MatrixUseB>
#define Tile coopmat<int, gl_ScopeWorkgroup, TILE_M, TILE_N, gl_MatrixUseAccumulator>
#define Layout tensorLayoutNV<3, gl_CooperativeMatrixClampModeConstantNV>

void main() {
    uint n = p.batch_base + gl_WorkGroupID.z;
    uint row0 = gl_WorkGroupID.y * TILE_M;
    uint col0 = gl_WorkGroupID.x * TILE_N;
    Layout la = setTensorLayoutDimensionNV(createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV), n + 1u, p.H, p.C);
    Layout lb = setTensorLayoutDimensionNV(createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV), n + 1u, p.C, p.W);
    Layout lo = setTensorLayoutDimensionNV(createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV), n + 1u, p.H, p.W);
    SliceA ones_a = SliceA(int8_t(1));
    SliceB ones_b = SliceB(int8_t(1));
    Tile acc = Tile(0);
    Tile row_sums = Tile(0);
    Tile col_sums = Tile(0);
    for (uint k0 = 0u; k0 < p.C; k0 += TILE_K) {
        SliceA sa;
        SliceB sb;
        coopMatLoadTensorNV(sa, a, 0u, sliceTensorLayoutNV(la, n, 1u, row0, TILE_M, k0, TILE_K));
        coopMatLoadTensorNV(sb, b, 0u, sliceTensorLayoutNV(lb, n, 1u, k0, TILE_K, col0, TILE_N));
        acc = coopMatMulAdd(sa, sb, acc);
        if (p.zb != 0) {
            row_sums = coopMatMulAdd(sa, ones_b, row_sums);
        }
        if (p.za != 0) {
            col_sums = coopMatMulAdd(ones_a, sb, col_sums);
        }
    }
    acc = acc - row_sums * p.zb - col_sums * p.za + Tile(int(p.C) * p.za * p.zb);
    coopMatStoreTensorNV(acc, outv, 0u, sliceTensorLayoutNV(lo, n, 1u, row0, TILE_M, col0, TILE_N));
}
