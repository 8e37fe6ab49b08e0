// NVFP4 weights in a shader (ironaccel.nvfp4, ADR 0012): E2M1 nibbles, low nibble first, and E4M3
// block scales (decoded by include/fp8.glsl), plus the projections' activation functions.
#ifndef IRONACCEL_NVFP4_GLSL
#define IRONACCEL_NVFP4_GLSL

#include "math.glsl"

// The two E2M1 values in bits 0..7 of b (bits 0..3 first), each times 2^-14. A nibble's sign,
// exponent and mantissa bits are moved to those of a binary16 (bits 15, 11..10 and 9): with the
// binary16 bias of 15 in place of E2M1's 1 that is the value times 2^-14, and E2M1's subnormals (0 and
// 0.5) land on binary16's. Widening binary16 is exact, so four integer operations and one unpack
// decode two weights, with no table.
vec2 ia_e2m1_pair_scaled(uint b) {
    return unpackHalf2x16(((b & 0x7u) << 9) | ((b & 0x8u) << 12) | ((b & 0x70u) << 21) | ((b & 0x80u) << 24));
}

// The sixteen weights of 8 packed bytes (one scale block), each times 2^-14, in element order.
void ia_e2m1_block_scaled(uvec2 q, out vec4 w0, out vec4 w1, out vec4 w2, out vec4 w3) {
    w0 = vec4(ia_e2m1_pair_scaled(q.x), ia_e2m1_pair_scaled(q.x >> 8));
    w1 = vec4(ia_e2m1_pair_scaled(q.x >> 16), ia_e2m1_pair_scaled(q.x >> 24));
    w2 = vec4(ia_e2m1_pair_scaled(q.y), ia_e2m1_pair_scaled(q.y >> 8));
    w3 = vec4(ia_e2m1_pair_scaled(q.y >> 16), ia_e2m1_pair_scaled(q.y >> 24));
}

// A block scale code as a float times 2^14, undoing ia_e2m1_pair_scaled's 2^-14: the product of a
// scaled weight and this is the exact E2M1 x E4M3 product (at most 6 significant bits, within 2^-10
// and 2688, so no rounding, underflow or overflow). E4M3's sign, exponent and mantissa bits moved to
// binary16's (bits 15, 13..10 and 9..7) are its value times 2^-8, subnormals included, so one unpack
// and one exact multiply decode it; the NaN codes 0x7F and 0xFF would read as finite and are mapped.
float ia_e4m3_scale_unscaled(uint code) {
    float v = unpackHalf2x16(((code & 0x7fu) << 7) | ((code & 0x80u) << 8)).x * 4194304.0;  // 2^8 * 2^14
    return (code & 0x7fu) == 0x7fu ? ia_nan() : v;
}

// Activation codes of the projections: 0 none, 1 silu (v * sigmoid(v)), 2 sigmoid, 3 squared_relu.
float ia_nvfp4_activate(float v, uint mode) {
    if (mode == 1u) {
        return v * ia_sigmoid(v);
    }
    if (mode == 2u) {
        return ia_sigmoid(v);
    }
    if (mode == 3u) {
        float r = v < 0.0 ? 0.0 : v;  // NaN stays NaN
        return r * r;
    }
    return v;
}

#endif
