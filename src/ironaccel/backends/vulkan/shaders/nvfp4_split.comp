#version 460
// x in fp32 -> [x_hi | x_lo] in binary16 per row, for the cooperative-matrix MATMUL of NVFP4
// projections: row r of x, times a power of two 2^e_r that brings its largest finite magnitude into
// [2^14, 2^15), is x_hi + x_lo up to the rounding of x_lo (x_hi: x * 2^e_r rounded to binary16's 11
// bits, x_lo: binary16 of the exact remainder), so [x_hi | x_lo] @ [w; w] is x @ w * 2^e_r to about
// 2^-21 of each term, with products exact and sums in fp32. rowscale[r] = 2^-e_r undoes the scaling.
// Infinite and NaN elements keep their value in x_hi and get x_lo = 0; a row of zeros (or of
// non-finite values only) is not scaled.
//
// One workgroup per row (grid stride over the rows): the largest magnitude by a fixed tree in shared
// memory, then element pairs (k is even). The result is cut along k into slices of KS columns, each
// an [x_hi | x_lo] matrix of its own (nvfp4_finish.comp explains why). Specialization constant 0:
// workgroup size, a power of two.
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/math.glsl"

layout(local_size_x_id = 0) in;

const uint WG = gl_WorkGroupSize.x;

layout(set = 0, binding = 0, std430) readonly buffer X { float x[]; };
layout(set = 0, binding = 1, std430) writeonly buffer A { uint a[]; };  // per slice: rows of [hi | lo]
layout(set = 0, binding = 2, std430) writeonly buffer RowScale { float rowscale[]; };

layout(push_constant, std430) uniform Params {
    uint rows;
    uint k;
    uint ks;            // k per slice (even): slice s holds columns [s ks, (s + 1) ks) as [rows, 2 ks]
    uint slice_words;   // words from one slice's matrix to the next
} p;

shared float peak[WG];

// v rounded to 11 significant bits (binary16's precision), to nearest even, in integer arithmetic:
// the split must not depend on a compiler keeping a float -> binary16 -> float round trip (a driver may
// fold unpackHalf2x16(packHalf2x16(v)) back to v, and x_lo then comes out 0). Infinities and NaNs are
// returned as they are.
float high_part(float v) {
    uint b = floatBitsToUint(v);
    if ((b & 0x7f800000u) == 0x7f800000u) {
        return v;
    }
    return uintBitsToFloat((b + 0xfffu + ((b >> 13) & 1u)) & 0xffffe000u);
}

void main() {
    uint t = gl_LocalInvocationID.x;
    uint half_k = p.k / 2u;
    for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
        float top = 0.0;
        for (uint c = t; c < p.k; c += WG) {
            float v = abs(x[row * p.k + c]);
            if (!isinf(v) && !isnan(v)) {
                top = max(top, v);
            }
        }
        peak[t] = top;
        for (uint s = WG / 2u; s > 0u; s >>= 1u) {
            barrier();
            if (t < s) {
                peak[t] = max(peak[t], peak[t + s]);
            }
        }
        barrier();
        top = peak[0];
        int exponent;
        frexp(top, exponent);  // top = f * 2^exponent, f in [0.5, 1)
        float scale = top > 0.0 ? ia_pow2i(clamp(15 - exponent, -126, 126)) : 1.0;
        for (uint c = t; c < half_k; c += WG) {
            vec2 v = vec2(x[row * p.k + 2u * c], x[row * p.k + 2u * c + 1u]) * scale;
            vec2 hi = vec2(high_part(v.x), high_part(v.y));  // exact in binary16 (below 2^15)
            vec2 lo = v - hi;  // exact
            lo.x = isinf(hi.x) || isnan(hi.x) ? 0.0 : lo.x;
            lo.y = isinf(hi.y) || isnan(hi.y) ? 0.0 : lo.y;
            uint slice = 2u * c / p.ks;
            uint at = slice * p.slice_words + row * p.ks + (2u * c - slice * p.ks) / 2u;
            a[at] = packHalf2x16(hi);
            a[at + p.ks / 2u] = packHalf2x16(lo);
        }
        if (t == 0u) {
            rowscale[row] = 1.0 / scale;  // a power of two: exact
        }
        barrier();  // peak is reused by the next row
    }
}
