#version 460
// Elementwise binary fp32 operators with TOSA broadcasting: out = OP(in1, in2).
// OP (specialization constant 1): 0 ADD, 1 SUB, 2 MUL, 3 MAXIMUM, 4 MINIMUM, 5 POW.
// NAN_MODE (constant 2): 1 propagate, 2 ignore (MAXIMUM / MINIMUM only).
// VEC4 (constant 3): every operand has the output's shape and n is a multiple of 4, so each invocation
// moves whole vec4s (a quarter of the invocations, full 16-byte memory transactions).
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/math.glsl"
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;
layout(constant_id = 2) const uint NAN_MODE = 1u;
layout(constant_id = 3) const uint VEC4 = 0u;

layout(set = 0, binding = 0, std430) readonly buffer In1 { float in1[]; };
layout(set = 0, binding = 1, std430) readonly buffer In2 { float in2[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { float outv[]; };
layout(set = 0, binding = 0, std430) readonly buffer In1V { vec4 in1v[]; };
layout(set = 0, binding = 1, std430) readonly buffer In2V { vec4 in2v[]; };
layout(set = 0, binding = 2, std430) writeonly buffer OutV { vec4 outv4[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint rank;
    uint shape[MAX_RANK];
    uint stride1[MAX_RANK];
    uint stride2[MAX_RANK];
} p;

float apply(float a, float b) {
    switch (OP) {
        case 0u: return a + b;
        case 1u: return a - b;
        case 2u: return a * b;
        case 3u: return ia_max(a, b, NAN_MODE);
        case 4u: return ia_min(a, b, NAN_MODE);
        default: return ia_pow(a, b);
    }
}

void main() {
    if (VEC4 != 0u) {
        for (uint q = gl_GlobalInvocationID.x; q < p.n / 4u; q += GRID_STRIDE) {
            vec4 a = in1v[q];
            vec4 b = in2v[q];
            outv4[q] = vec4(apply(a.x, b.x), apply(a.y, b.y), apply(a.z, b.z), apply(a.w, b.w));
        }
        return;
    }
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        uint i1 = i;
        uint i2 = i;
        if (p.rank > 0u) {
            i1 = broadcast_index(i, p.rank, p.shape, p.stride1);
            i2 = broadcast_index(i, p.rank, p.shape, p.stride2);
        }
        outv[i] = apply(in1[i1], in2[i2]);
    }
}
