#version 460
// REDUCE_SUM / REDUCE_MAX of fp32 along one axis. The input is viewed as [outer, axis, inner] and
// each invocation produces one output element, walking the axis in order.
// OP (specialization constant 1): 0 SUM, 1 MAX. NAN_MODE (constant 2, MAX only): 1 propagate, 2 ignore.
// SUM accumulates in fp32 in index order; TOSA judges it as a dot product against an fp64 reference.
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
    uint outer;
    uint axis;
    uint inner;
} p;

void main() {
    uint n = p.outer * p.inner;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += GRID_STRIDE) {
        uint o = i / p.inner;
        uint j = i - o * p.inner;
        uint base = o * p.axis * p.inner + j;
        float acc = inv[base];
        for (uint k = 1u; k < p.axis; ++k) {
            float x = inv[base + k * p.inner];
            acc = OP == 0u ? acc + x : ia_max(acc, x, NAN_MODE);
        }
        outv[i] = acc;
    }
}
