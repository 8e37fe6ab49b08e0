#version 460
// One input of CONCAT placed into its slab of the output, for elements of ES bytes (1, 2, 4). Seen
// as [outer, chunk] (input) inside [outer, row] (output) at column offset: input element i goes to
// (i / chunk) * row + offset + i % chunk. Narrow elements share words with other inputs' elements,
// so they are merged in with atomics (each byte has one writer; the word does not).
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ES = 4u;

layout(set = 0, binding = 0, std430) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1, std430) buffer Dst { uint dst[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint chunk;
    uint row;
    uint offset;
} p;

void main() {
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        uint q = i / p.chunk;
        uint o = q * p.row + p.offset + (i - q * p.chunk);
        uint bits = ELEM_GET(src[ELEM_WORD(i, ES)], i, ES);
        if (ES == 4u) {
            dst[o] = bits;
        } else {
            uint shift = ELEM_SHIFT(o, ES);
            atomicAnd(dst[ELEM_WORD(o, ES)], ~(ELEM_MASK(ES) << shift));
            atomicOr(dst[ELEM_WORD(o, ES)], bits << shift);
        }
    }
}
