// The bindings, push constants and shape of the cooperative-matrix MATMUL kernels (matmul_coop.comp, and
// candidate forms of it built for benchmarks/vulkan/probe_matmul.py). Include after BM, BN and BK are defined.
//
// Specialization constants 1-3 are H, C and W where the planner compiles the shape in (ops/matmul.py,
// large products only; 0: read from the push constants, ADR 0022).
#ifndef COOP_OPERANDS
#define COOP_OPERANDS readonly
#endif

layout(set = 0, binding = 0, std430) COOP_OPERANDS buffer A { uvec4 a[]; };
layout(set = 0, binding = 1, std430) COOP_OPERANDS buffer B { uvec4 b[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint batch_base;
    uint H;
    uint C;
    uint W;
} p;

layout(constant_id = 1) const uint FIXED_H = 0u;
layout(constant_id = 2) const uint FIXED_C = 0u;
layout(constant_id = 3) const uint FIXED_W = 0u;

uint dim_h() { return FIXED_H != 0u ? FIXED_H : p.H; }
uint dim_c() { return FIXED_C != 0u ? FIXED_C : p.C; }
uint dim_w() { return FIXED_W != 0u ? FIXED_W : p.W; }

// The shape is compiled in and divides into whole tiles and steps, so no load or store needs a bound
// check. A function of constants, folded by the driver's compiler (glslang emits && between
// specialization constants as code, so it cannot be a const).
bool whole() {
    return FIXED_H != 0u && FIXED_C != 0u && FIXED_W != 0u && FIXED_H % BM == 0u && FIXED_W % BN == 0u &&
           FIXED_C % BK == 0u;
}
