#version 460
// MATMUL of int8: [N, H, C] x [N, C, W] -> int32 [N, H, W], out = sum_c (A - a_zp) (B - b_zp), one
// invocation per output walking C in order. int32 products and sums wrap (an int32 accumulator that
// overflows is a REQUIRE violation, and the low 32 bits of a sum do not depend on its order), so the
// result is the CPU backend's exact sum narrowed to int32.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0, std430) readonly buffer A { uint aw[]; };
layout(set = 0, binding = 1, std430) readonly buffer B { uint bw[]; };
layout(set = 0, binding = 2, std430) readonly buffer AZp { uint azp[]; };
layout(set = 0, binding = 3, std430) readonly buffer BZp { uint bzp[]; };
layout(set = 0, binding = 4, std430) writeonly buffer Out { int outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;  // N * H * W
    uint H;
    uint C;
    uint W;
} p;

int at(uint word, uint i) {
    return sign_extend(ELEM_GET(word, i, 1u), 1u);
}

void main() {
    int za = at(azp[0], 0u);
    int zb = at(bzp[0], 0u);
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += GRID_STRIDE) {
        uint w = i % p.W;
        uint nh = i / p.W;
        uint batch = nh / p.H;
        uint a0 = nh * p.C;
        uint b0 = batch * p.C * p.W + w;
        int acc = 0;
        for (uint c = 0u; c < p.C; ++c) {
            uint ia = a0 + c;
            uint ib = b0 + c * p.W;
            acc += (at(aw[ia >> 2u], ia) - za) * (at(bw[ib >> 2u], ib) - zb);
        }
        outv[i] = acc;
    }
}
