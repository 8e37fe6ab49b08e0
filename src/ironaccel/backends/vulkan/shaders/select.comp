#version 460
// SELECT with TOSA broadcasting: out = cond ? in2 : in3, cond BOOL (bytes), values of ES bytes
// (specialization constant 1: 4 for fp32, 1 for BOOL). Values are moved as bits, never computed
// on. Each invocation writes one whole 32-bit word (4 / ES results).
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ES = 4u;

layout(set = 0, binding = 0, std430) readonly buffer Cond { uint condw[]; };
layout(set = 0, binding = 1, std430) readonly buffer In2 { uint in2[]; };
layout(set = 0, binding = 2, std430) readonly buffer In3 { uint in3[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint rank;
    uint shape[MAX_RANK];
    uint stride1[MAX_RANK];
    uint stride2[MAX_RANK];
    uint stride3[MAX_RANK];
} p;

void main() {
    uint per = ELEM_PER_WORD(ES);
    uint words = (p.n + per - 1u) / per;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        uint word = 0u;
        for (uint j = 0u; j < per; ++j) {
            uint i = w * per + j;
            if (i >= p.n) {
                break;
            }
            uint i1 = i;
            uint i2 = i;
            uint i3 = i;
            if (p.rank > 0u) {
                i1 = broadcast_index(i, p.rank, p.shape, p.stride1);
                i2 = broadcast_index(i, p.rank, p.shape, p.stride2);
                i3 = broadcast_index(i, p.rank, p.shape, p.stride3);
            }
            uint bits = read_bool(condw[i1 >> 2], i1) ? ELEM_GET(in2[ELEM_WORD(i2, ES)], i2, ES)
                                                      : ELEM_GET(in3[ELEM_WORD(i3, ES)], i3, ES);
            word |= bits << (j * 8u * ES);
        }
        outw[w] = word;
    }
}
