#version 460
// Data movement by output element, for elements of 1, 2 or 4 bytes (ES, specialization constant 1):
// SLICE, PAD, TILE, REVERSE and TRANSPOSE are all "output coordinate -> source coordinate":
//   s[d] = extent[d] - 1 - c[d]        where bit d of flip is set (REVERSE)
//   s[d] = c[d] % extent[d]            when TILE (specialization constant 2) is set
//   s[d] = c[d] - lo[d]                otherwise (SLICE: lo = -start; PAD: lo = the leading pad)
// A source coordinate outside [0, extent) reads the pad value's bits; otherwise the source element
// is sum s[d] * stride[d] (TRANSPOSE: the input's strides taken in the output's dimension order).
// Each invocation writes whole 32-bit words (4 / ES elements), so no two invocations share a word.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ES = 4u;
layout(constant_id = 2) const uint TILE = 0u;

layout(set = 0, binding = 0, std430) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Dst { uint dst[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint rank;
    uint pad_bits;
    uint flip;
    uint shape[MAX_RANK];
    uint extent[MAX_RANK];
    uint stride[MAX_RANK];
    int lo[MAX_RANK];
} p;

uint element(uint i) {
    uint offset = 0u;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint q = i / p.shape[d];
        uint c = i - q * p.shape[d];
        i = q;
        int s;
        if ((p.flip & (1u << uint(d))) != 0u) {
            s = int(p.extent[d]) - 1 - int(c);
        } else if (TILE != 0u) {
            s = int(c % p.extent[d]);
        } else {
            s = int(c) - p.lo[d];
        }
        if (s < 0 || s >= int(p.extent[d])) {
            return p.pad_bits;
        }
        offset += uint(s) * p.stride[d];
    }
    return ELEM_GET(src[ELEM_WORD(offset, ES)], offset, ES);
}

void main() {
    uint per = ELEM_PER_WORD(ES);
    uint words = (p.n + per - 1u) / per;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        uint word = 0u;
        for (uint j = 0u; j < per; ++j) {
            uint i = w * per + j;
            if (i < p.n) {
                word |= element(i) << (j * 8u * ES);
            }
        }
        dst[w] = word;
    }
}
