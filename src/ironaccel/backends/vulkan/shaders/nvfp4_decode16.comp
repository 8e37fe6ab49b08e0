#version 460
// NVFP4 weights decoded to binary16 for the cooperative-matrix MATMUL, transposed and stacked twice per
// slice of KS columns: slice s is [w_s; w_s] with w_s[c, j] = e2m1[j, s KS + c] * scale[j, (s KS + c) / 16]
// for weight row j < n, a [2 KS, n] right operand for the slice's [x_hi | x_lo] (nvfp4_split.comp). The product of an
// E2M1 value and an E4M3 scale has at most 6 significant bits and lies within [2^-10, 2688], so binary16
// holds it exactly; the tensor scale is applied to the MATMUL's fp32 result (nvfp4_finish.comp).
// An infinite or NaN tensor scale is applied here instead, weight by weight as the definition says
// ((e2m1 * scale) * ts: zero weights become NaN), and the second copy is zeros, so x_lo (which may be 0)
// never multiplies an infinity.
//
// One invocation per (block, pair of rows): the two rows' weights of one column share a 32-bit word.
// Grid stride over the n / 2 * k / 16 (block, pair)s; n is even.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/nvfp4.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0, std430) readonly buffer Packed { uvec2 packed[]; };
layout(set = 0, binding = 1, std430) readonly buffer Scales { uint scales[]; };
layout(set = 0, binding = 2, std430) readonly buffer TensorScale { float tensor_scale[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Out { uint outv[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint k;
    uint ks;           // k per slice: slice s of this matrix is [w[s ks : (s + 1) ks]; the same] ([2 ks, n])
    uint out_base;     // word offset of this matrix's first slice in the output binding
    uint slice_words;  // words from one slice's matrices to the next
} p;

void decode_block(uint at, float ts, bool finite, out vec4 w[4]) {
    float s = ia_e4m3_scale_unscaled((scales[at >> 2] >> ((at & 3u) * 8u)) & 0xffu);
    ia_e2m1_block_scaled(packed[at], w[0], w[1], w[2], w[3]);
    for (uint i = 0u; i < 4u; ++i) {
        w[i] = finite ? w[i] * s : (w[i] * s) * ts;
    }
}

void main() {
    uint blocks = p.k / 16u;
    uint pairs = p.n / 2u;
    uint count = blocks * pairs;
    float ts = tensor_scale[0];
    bool finite = !isinf(ts) && !isnan(ts);
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint t = gl_GlobalInvocationID.x; t < count; t += stride) {
        uint b = t / pairs;
        uint j = 2u * (t - b * pairs);
        vec4 first[4], second[4];
        decode_block(j * blocks + b, ts, finite, first);
        decode_block((j + 1u) * blocks + b, ts, finite, second);
        for (uint i = 0u; i < 16u; ++i) {
            uint word = packHalf2x16(vec2(first[i / 4u][i % 4u], second[i / 4u][i % 4u]));
            uint c = 16u * b + i;
            uint slice = c / p.ks;
            uint at = p.out_base + slice * p.slice_words + ((c - slice * p.ks) * p.n + j) / 2u;
            outv[at] = word;
            outv[at + p.ks * p.n / 2u] = finite ? word : 0u;
        }
    }
}
