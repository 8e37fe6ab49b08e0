#version 460
// REDUCE_SUM (int32, wrapping like the int32 accumulator), REDUCE_MAX, REDUCE_MIN and ARGMAX (int32
// index of the first largest) of int8 / int16 / int32 along one axis of [outer, axis, inner], one
// output word (4 / OUT_ES results) per invocation, each walking its axis in order. Exact.
// OP (constant 1): 0 SUM, 1 MAX, 2 MIN, 4 ARGMAX. ES (constant 2): input element bytes.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"
#include "include/integer.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;
layout(constant_id = 2) const uint ES = 4u;
const uint OUT_ES = OP == 4u ? 4u : ES;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inw[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint outer;
    uint len;
    uint inner;
} p;

int fold(uint o) {
    uint base = (o / p.inner) * p.len * p.inner + o % p.inner;
    int best = OP == 1u || OP == 4u ? type_min(ES, false) : (OP == 2u ? type_max(ES, false) : 0);
    int index = 0;
    for (uint k = 0u; k < p.len; ++k) {
        uint e = base + k * p.inner;
        int x = sign_extend(ELEM_GET(inw[ELEM_WORD(e, ES)], e, ES), ES);
        if (OP == 0u) {
            best += x;
        } else if (OP == 2u) {
            best = min(best, x);
        } else if (x > best || (OP == 4u && k == 0u)) {
            best = x;
            index = int(k);
        }
    }
    return OP == 4u ? index : best;
}

void main() {
    uint n = p.outer * p.inner;
    uint per = ELEM_PER_WORD(OUT_ES);
    uint words = (n + per - 1u) / per;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        uint word = 0u;
        for (uint j = 0u; j < per; ++j) {
            uint o = w * per + j;
            if (o >= n) {
                break;
            }
            word |= (uint(fold(o)) & ELEM_MASK(OUT_ES)) << (j * 8u * OUT_ES);
        }
        outw[w] = word;
    }
}
