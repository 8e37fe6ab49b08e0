// binary16 <-> binary32 conversion on the bit patterns, in integer arithmetic only.
//
// fp16 tensors are 16-bit halves of 32-bit words (numpy's layout, element i in bits 16 (i % 2) of
// word i / 2). Kernels widen them to fp32, compute in fp32 and narrow the result once, so no device
// feature (shaderFloat16, 16-bit storage) is needed and every device yields the same bits: the
// conversions below never touch a float register, so a device that flushes fp32 subnormals or quiets
// NaNs in arithmetic cannot change them. They follow numpy's conversions bit for bit:
// * widening is exact: subnormal halves become normal floats, NaNs keep sign and payload (shifted up
//   13 bits, a signalling NaN stays signalling);
// * narrowing rounds to nearest, ties to even, into the subnormal range; magnitudes from 65520 up
//   become infinities; a NaN keeps its sign and the top ten payload bits, and one whose kept bits are
//   all zero gets payload 1 so it stays a NaN.
#ifndef IRONACCEL_FP16_GLSL
#define IRONACCEL_FP16_GLSL

uint ia_f16_bits_to_f32_bits(uint h) {
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint m = h & 0x3ffu;
    if (e == 31u) {
        return sign | 0x7f800000u | (m << 13);
    }
    if (e != 0u) {
        return sign | ((e + 112u) << 23) | (m << 13);  // rebias 15 -> 127
    }
    if (m == 0u) {
        return sign;
    }
    // subnormal m * 2^-24 = 1.f * 2^(msb - 24): normal in fp32
    int msb = findMSB(m);
    return sign | (uint(msb + 103) << 23) | ((m << uint(23 - msb)) & 0x7fffffu);
}

uint ia_f32_bits_to_f16_bits(uint f) {
    uint sign = (f >> 16) & 0x8000u;
    uint a = f & 0x7fffffffu;
    if (a > 0x7f800000u) {  // NaN
        uint h = 0x7c00u | ((a & 0x7fffffu) >> 13);
        return sign | (h == 0x7c00u ? 0x7c01u : h);
    }
    if (a >= 0x477ff000u) {  // 65520 (halfway past 65504, ties to the even infinity) and up, inf
        return sign | 0x7c00u;
    }
    uint e = a >> 23;
    if (e >= 113u) {  // normal in fp16 (2^-14 and up): drop 13 fraction bits, round to nearest even
        uint h = ((e - 112u) << 10) | ((a & 0x7fffffu) >> 13);
        uint rest = a & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) {
            h += 1u;  // a carry out of the fraction steps the exponent, as it should
        }
        return sign | h;
    }
    if (e < 101u) {  // below 2^-25: under half the smallest subnormal, rounds to zero
        return sign;
    }
    // subnormal in fp16: the significand (implicit bit included) in units of 2^-24 is sig / 2^shift
    uint sig = (a & 0x7fffffu) | 0x800000u;
    uint shift = 126u - e;  // 14 .. 25
    uint q = sig >> shift;
    uint rest = sig & ((1u << shift) - 1u);
    uint half_ = 1u << (shift - 1u);
    if (rest > half_ || (rest == half_ && (q & 1u) != 0u)) {
        q += 1u;  // may reach 0x400, the smallest normal, which is its own encoding
    }
    return sign | q;
}

float ia_half_to_float(uint h) {
    return uintBitsToFloat(ia_f16_bits_to_f32_bits(h));
}

uint ia_float_to_half(float x) {
    return ia_f32_bits_to_f16_bits(floatBitsToUint(x));
}

// x rounded to the nearest fp16 value, as an fp32 (for arithmetic that the specification rounds to
// fp16 after each step).
float ia_round_to_half(float x) {
    return ia_half_to_float(ia_float_to_half(x));
}

// Element i of an fp16 tensor held in 32-bit words, and a word of two fp16 results.
uint ia_half_at(uint word, uint i) {
    return (word >> ((i & 1u) * 16u)) & 0xffffu;
}

#endif
