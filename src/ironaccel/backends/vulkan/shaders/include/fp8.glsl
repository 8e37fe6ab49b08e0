// FP8 (OCP E4M3 and E5M2) <-> binary32 conversion on the bit patterns, in integer arithmetic only.
//
// fp8 tensors are bytes of 32-bit words (numpy's layout, like int8). Widening is exact (every fp8
// value is a normal fp32; NaNs stay NaNs). Narrowing rounds the fp32 value once to nearest, ties to
// even, into the subnormal range, and then applies CAST's overflow rule as the CPU backend does: E5M2
// gives the infinity of the sign above its largest finite value (57344), E4M3, which has no
// infinity, gives NaN above 448 and for infinities. NaNs become the plain NaN pattern of their sign
// (E4M3 S.1111.111, E5M2 S.11111.10). No float register is touched, so devices that flush fp32
// subnormals cannot change a conversion.
#ifndef IRONACCEL_FP8_GLSL
#define IRONACCEL_FP8_GLSL

#include "fp16.glsl"

uint ia_e4m3_bits_to_f32_bits(uint b) {
    uint sign = (b & 0x80u) << 24;
    uint e = (b >> 3) & 0xfu;
    uint m = b & 0x7u;
    if (e == 15u && m == 7u) {
        return sign | 0x7fc00000u;
    }
    if (e != 0u) {
        return sign | ((e + 120u) << 23) | (m << 20);  // rebias 7 -> 127
    }
    if (m == 0u) {
        return sign;
    }
    int msb = findMSB(m);  // subnormal m * 2^-9 = 1.f * 2^(msb - 9)
    return sign | (uint(msb + 118) << 23) | ((m << uint(23 - msb)) & 0x7fffffu);
}

uint ia_e5m2_bits_to_f32_bits(uint b) {
    return ia_f16_bits_to_f32_bits((b & 0xffu) << 8);  // E5M2 is the top byte of a binary16
}

// The magnitude of finite fp32 bits rounded to a format with MBITS fraction bits, smallest normal
// exponent EMIN and exponent bias BIAS, as (field << MBITS) | fraction before any overflow rule: the
// exponent field may lie past the format's largest (the caller compares with its largest finite).
uint ia_f32_bits_round_small(uint f, int mbits, int emin, int bias) {
    uint e32 = (f >> 23) & 0xffu;
    if (e32 == 0u) {
        return 0u;  // fp32 zeros and subnormals are far below half the smallest fp8 subnormal
    }
    uint significand = (f & 0x7fffffu) | 0x800000u;  // value = significand * 2^(e32 - 150)
    int exponent = max(int(e32) - 127, emin);  // the binade whose quantum applies
    int shift = exponent - mbits - (int(e32) - 150);  // low bits of the significand to drop (> 20)
    if (shift > 25) {
        return 0u;  // below a quarter of the quantum: rounds to zero
    }
    uint k = significand >> uint(shift);
    uint rest = significand & ((1u << uint(shift)) - 1u);
    uint half_q = 1u << uint(shift - 1);
    if (rest > half_q || (rest == half_q && (k & 1u) != 0u)) {
        k += 1u;
    }
    uint one = 1u << uint(mbits);
    if (k >= 2u * one) {  // rounding carried into the next binade
        k >>= 1;
        exponent += 1;
    }
    if (k < one) {
        return k;  // subnormal (or zero): exponent field 0
    }
    return (uint(exponent + bias) << uint(mbits)) | (k - one);
}

uint ia_f32_bits_to_e4m3_bits(uint f) {
    uint sign = (f >> 24) & 0x80u;
    if ((f & 0x7fffffffu) >= 0x7f800000u) {
        return sign | 0x7fu;  // NaN, and infinities (E4M3 has none)
    }
    uint r = ia_f32_bits_round_small(f, 3, -6, 7);
    return sign | (r > 0x7eu ? 0x7fu : r);  // above 448: NaN
}

uint ia_f32_bits_to_e5m2_bits(uint f) {
    uint sign = (f >> 24) & 0x80u;
    uint a = f & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7eu;
    }
    if (a == 0x7f800000u) {
        return sign | 0x7cu;
    }
    uint r = ia_f32_bits_round_small(f, 2, -14, 15);
    return sign | (r > 0x7bu ? 0x7cu : r);  // above 57344: infinity
}

#endif
