#version 460
// fp32 comparisons with TOSA broadcasting, BOOL out (one byte per value, 0 or 1).
// OP (specialization constant 1): 0 EQUAL, 1 GREATER, 2 GREATER_EQUAL. Ordered comparisons: false
// when either side is NaN, and +0 == -0.
// Each invocation writes one whole 32-bit word (four results), so no two invocations share a word.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;

layout(set = 0, binding = 0, std430) readonly buffer In1 { float in1[]; };
layout(set = 0, binding = 1, std430) readonly buffer In2 { float in2[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint rank;
    uint shape[MAX_RANK];
    uint stride1[MAX_RANK];
    uint stride2[MAX_RANK];
} p;

bool apply(float a, float b) {
    switch (OP) {
        case 0u: return a == b;
        case 1u: return a > b;
        default: return a >= b;
    }
}

void main() {
    uint words = (p.n + 3u) / 4u;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        uint word = 0u;
        for (uint j = 0u; j < 4u; ++j) {
            uint i = w * 4u + j;
            if (i >= p.n) {
                break;
            }
            uint i1 = i;
            uint i2 = i;
            if (p.rank > 0u) {
                i1 = broadcast_index(i, p.rank, p.shape, p.stride1);
                i2 = broadcast_index(i, p.rank, p.shape, p.stride2);
            }
            if (apply(in1[i1], in2[i2])) {
                word |= 1u << (8u * j);
            }
        }
        outw[w] = word;
    }
}
