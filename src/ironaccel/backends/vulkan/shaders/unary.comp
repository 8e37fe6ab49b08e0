#version 460
// Elementwise unary fp32 operators and activations, same shape in and out.
// OP (specialization constant 1): 0 ABS, 1 NEGATE, 2 FLOOR, 3 CEIL, 4 EXP, 5 LOG, 6 RECIPROCAL,
// 7 RSQRT, 8 SIN, 9 COS, 10 TANH, 11 SIGMOID, 12 ERF, 13 CLAMP (bounds in the push constants).
// NAN_MODE (constant 2): CLAMP's, 1 propagate, 2 ignore.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/math.glsl"
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;
layout(constant_id = 2) const uint NAN_MODE = 1u;

layout(set = 0, binding = 0, std430) readonly buffer In { float inv[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { float outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    float lo;
    float hi;
} p;

float apply(float x) {
    switch (OP) {
        case 0u: return abs(x);
        case 1u: return -x;
        case 2u: return floor(x);
        case 3u: return ceil(x);
        case 4u: return ia_exp(x);
        case 5u: return ia_log(x);
        case 6u: return ia_reciprocal(x);
        case 7u: return ia_rsqrt(x);
        case 8u: return ia_sin(x);
        case 9u: return ia_cos(x);
        case 10u: return ia_tanh(x);
        case 11u: return ia_sigmoid(x);
        case 12u: return ia_erf(x);
        default: return ia_min(ia_max(x, p.lo, NAN_MODE), p.hi, NAN_MODE);
    }
}

void main() {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        outv[i] = apply(inv[i]);
    }
}
