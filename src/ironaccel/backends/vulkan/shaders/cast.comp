#version 460
// CAST between fp32, fp16, bf16 and the integer types, one output word (4 / OUT_ES elements) per
// invocation. FROM / TO (specialization constants 1, 2): 0 fp32, 1 int8, 2 int16, 3 int32, 4 fp16, 5 bf16,
// 6 fp8e4m3, 7 fp8e5m2 (fp8 to and from fp32, fp16 and bf16 only, as the specification's CASTs).
// int -> fp32: rounded once to nearest even (exact halves summed: one correctly rounded addition).
// int -> fp16: through fp32, which is exact below 2^24, and every int of 2^24 or more is an fp16
// infinity either way, so it is one rounding too.
// float -> int: round to nearest, ties to even, saturated to the type; NaN (unpredictable) gives 0.
// int -> bf16: int8 / int16 through fp32 (exact there), int32 rounded once on the bits.
// fp16 / bf16 / fp8 <-> fp32: include/fp16.glsl, bf16.glsl and fp8.glsl, on the bits (exact widening,
// one rounding narrowing); fp8 <-> fp16 / bf16 through fp32 (exact widening both ways, so one rounding).
#extension GL_GOOGLE_include_directive : require
#include "include/float_controls.glsl"
#include "include/elementwise.glsl"
#include "include/fp16.glsl"
#include "include/bf16.glsl"
#include "include/fp8.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint FROM = 0u;
layout(constant_id = 2) const uint TO = 3u;

layout(set = 0, binding = 0, std430) readonly buffer In { uint inv[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Out { uint outw[]; };

layout(push_constant, std430) uniform Params {
    uint n;
} p;

const uint IN_ES = FROM == 1u || FROM >= 6u ? 1u : (FROM == 2u || FROM == 4u || FROM == 5u ? 2u : 4u);
const uint OUT_ES = TO == 1u || TO >= 6u ? 1u : (TO == 2u || TO == 4u || TO == 5u ? 2u : 4u);

uint fp8_to_f32_bits(uint bits) {
    return FROM == 6u ? ia_e4m3_bits_to_f32_bits(bits) : ia_e5m2_bits_to_f32_bits(bits);
}

uint f32_bits_to_fp8(uint f) {
    return TO == 6u ? ia_f32_bits_to_e4m3_bits(f) : ia_f32_bits_to_e5m2_bits(f);
}

float int_to_float(int v) {
    // Both halves convert exactly; their sum is rounded once, as IEEE addition is.
    precise float hi = float(v >> 16) * 65536.0;
    precise float lo = float(v & 0xffff);
    return hi + lo;
}

int float_to_int(float x, int lo, int hi) {
    if (isnan(x)) {
        return 0;
    }
    float r = roundEven(x);
    if (r >= float(hi)) {  // float(INT32_MAX) is 2^31, beyond the type: saturate before converting
        return hi;
    }
    if (r <= float(lo)) {
        return lo;
    }
    return int(r);
}

uint convert(uint bits) {
    if (FROM >= 6u) {  // to fp32, fp16 or bf16
        uint f = fp8_to_f32_bits(bits);
        return TO == 0u ? f : (TO == 5u ? ia_f32_bits_to_bf16_bits(f) : ia_f32_bits_to_f16_bits(f));
    }
    if (TO >= 6u) {  // from fp32, fp16 or bf16
        uint f = FROM == 4u ? ia_f16_bits_to_f32_bits(bits) : (FROM == 5u ? ia_bf16_bits_to_f32_bits(bits) : bits);
        return f32_bits_to_fp8(f);
    }
    if (FROM == 4u && TO == 0u) {
        return ia_f16_bits_to_f32_bits(bits);
    }
    if (FROM == 0u && TO == 4u) {
        return ia_f32_bits_to_f16_bits(bits);
    }
    if (FROM == 5u && TO == 0u) {
        return ia_bf16_bits_to_f32_bits(bits);
    }
    if (FROM == 0u && TO == 5u) {
        return ia_f32_bits_to_bf16_bits(bits);
    }
    if (TO == 5u) {
        return ia_int_to_bf16_bits(sign_extend(bits, IN_ES));
    }
    if (TO == 0u || TO == 4u) {
        float v = int_to_float(sign_extend(bits, IN_ES));
        return TO == 0u ? floatBitsToUint(v) : ia_float_to_half(v);
    }
    float x = FROM == 4u ? ia_half_to_float(bits)
                         : uintBitsToFloat(FROM == 5u ? ia_bf16_bits_to_f32_bits(bits) : bits);
    int v;
    if (TO == 1u) {
        v = float_to_int(x, -128, 127);
    } else if (TO == 2u) {
        v = float_to_int(x, -32768, 32767);
    } else {
        v = float_to_int(x, int(0x80000000u), 0x7fffffff);
    }
    return uint(v) & ELEM_MASK(OUT_ES);
}

void main() {
    uint per = ELEM_PER_WORD(OUT_ES);
    uint words = (p.n + per - 1u) / per;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += GRID_STRIDE) {
        uint word = 0u;
        for (uint j = 0u; j < per; ++j) {
            uint i = w * per + j;
            if (i < p.n) {
                word |= convert(ELEM_GET(inv[ELEM_WORD(i, IN_ES)], i, IN_ES)) << (j * 8u * OUT_ES);
            }
        }
        outw[w] = word;
    }
}
