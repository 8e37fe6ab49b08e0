#version 460
// REDUCE_ALL / REDUCE_ANY of BOOL along one axis ([outer, axis, inner] view), one output word (four
// results) per invocation. OP (specialization constant 1): 0 ALL, 1 ANY.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inw[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint outer;
    uint axis;
    uint inner;
} p;

void main() {
    uint n = p.outer * p.inner;
    uint words = (n + 3u) / 4u;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        uint word = 0u;
        for (uint jj = 0u; jj < 4u; ++jj) {
            uint i = w * 4u + jj;
            if (i >= n) {
                break;
            }
            uint o = i / p.inner;
            uint base = o * p.axis * p.inner + (i - o * p.inner);
            bool acc = OP == 0u;
            for (uint k = 0u; k < p.axis; ++k) {
                uint e = base + k * p.inner;
                bool x = read_bool(inw[e >> 2], e);
                acc = OP == 0u ? acc && x : acc || x;
            }
            word |= uint(acc) << (8u * jj);
        }
        outw[w] = word;
    }
}
