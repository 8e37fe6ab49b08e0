#version 460
// MATMUL of int8: [N, H, C] x [N, C, W] -> int32 [N, H, W], out = sum_c (A - a_zp) (B - b_zp), one
// invocation per output walking C in order. int32 products and sums wrap (an int32 accumulator that
// overflows is a REQUIRE violation, and the low 32 bits of a sum do not depend on its order), so the
// result is the CPU backend's exact sum narrowed to int32.
//
// Split-k, where a driver caps the loop iterations of an invocation below C: invocation g computes slice
// s = g / (N * H * W) of output g mod (N * H * W), the sum over C in [s KS, (s + 1) KS), into slice s of
// the output binding ([S, N, H, W]); reduce_int.comp adds the slices (wrapping, so still exact).
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
    uint KS;      // C per slice (C itself without split-k)
    uint slices;
} p;

int at(uint word, uint i) {
    return sign_extend(ELEM_GET(word, i, 1u), 1u);
}

void main() {
    int za = at(azp[0], 0u);
    int zb = at(bzp[0], 0u);
    for (uint g = gl_GlobalInvocationID.x; g < p.n * p.slices; g += GRID_STRIDE) {
        uint slice = g / p.n;
        uint i = g - slice * p.n;
        uint w = i % p.W;
        uint nh = i / p.W;
        uint batch = nh / p.H;
        uint a0 = nh * p.C;
        uint b0 = batch * p.C * p.W + w;
        int acc = 0;
        uint end = min(p.C, (slice + 1u) * p.KS);
        for (uint c = slice * p.KS; c < end; ++c) {
            uint ia = a0 + c;
            uint ib = b0 + c * p.W;
            acc += (at(aw[ia >> 2u], ia) - za) * (at(bw[ib >> 2u], ib) - zb);
        }
        outv[g] = acc;
    }
}
