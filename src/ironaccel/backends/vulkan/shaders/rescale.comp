#version 460
// RESCALE of int8 / int16 / int32 (signed or unsigned views) to int8 / int16 / int32, per tensor or per
// channel (the last axis), exactly as TOSA's pseudocode: v = x - input_zp (exact in 32 bits for every
// type the tier takes), r = apply_scale_32 / apply_scale_16 (v, multiplier, shift) with the product and
// rounding carried in two 32-bit words (include/integer.glsl: no shaderInt64), r + output_zp saturated
// to the output's range (the sum formed in 64 bits). One output word (4 / OUT_ES elements) per invocation.
// Constants: 1 IN_ES, 2 OUT_ES, 3 M_ES (multiplier bytes: 4 scale32, 2 scale16), 4 FLAGS: bit 0
// input_unsigned, 1 output_unsigned, 2 double rounding, 3 per channel.
#extension GL_GOOGLE_include_directive : require
#include "include/elementwise.glsl"
#include "include/integer.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint IN_ES = 4u;
layout(constant_id = 2) const uint OUT_ES = 1u;
layout(constant_id = 3) const uint M_ES = 4u;
layout(constant_id = 4) const uint FLAGS = 0u;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inw[]; };
layout(set = 0, binding = 1, std430) readonly buffer Mul { uint mulw[]; };
layout(set = 0, binding = 2, std430) readonly buffer Shift { uint shiftw[]; };
layout(set = 0, binding = 3, std430) readonly buffer InZp { uint inzp[]; };
layout(set = 0, binding = 4, std430) readonly buffer OutZp { uint outzp[]; };
layout(set = 0, binding = 5, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint n;
    uint channels;  // the last axis's extent (per channel), else 1
} p;

const bool IN_UNSIGNED = (FLAGS & 1u) != 0u;
const bool OUT_UNSIGNED = (FLAGS & 2u) != 0u;
const bool DOUBLE_ROUND = (FLAGS & 4u) != 0u;
const bool PER_CHANNEL = (FLAGS & 8u) != 0u;

void main() {
    uint per = ELEM_PER_WORD(OUT_ES);
    uint words = (p.n + per - 1u) / per;
    int zp_in = read_int(inzp[0], 0u, IN_ES, IN_UNSIGNED);
    int zp_out = read_int(outzp[0], 0u, OUT_ES, OUT_UNSIGNED);
    int lo = type_min(OUT_ES, OUT_UNSIGNED);
    int hi = type_max(OUT_ES, OUT_UNSIGNED);
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        uint word = 0u;
        for (uint j = 0u; j < per; ++j) {
            uint i = w * per + j;
            if (i >= p.n) {
                break;
            }
            uint c = PER_CHANNEL ? i % p.channels : 0u;
            int m = sign_extend(ELEM_GET(mulw[ELEM_WORD(c, M_ES)], c, M_ES), M_ES);
            int s = sign_extend(ELEM_GET(shiftw[ELEM_WORD(c, 1u)], c, 1u), 1u);
            int v = read_int(inw[ELEM_WORD(i, IN_ES)], i, IN_ES, IN_UNSIGNED) - zp_in;
            int r = add_saturate(apply_scale(v, m, s, DOUBLE_ROUND), zp_out, lo, hi);
            word |= (uint(r) & ELEM_MASK(OUT_ES)) << (j * 8u * OUT_ES);
        }
        outw[w] = word;
    }
}
