// bfloat16 <-> binary32 conversion on the bit patterns, in integer arithmetic only.
//
// bf16 tensors are 16-bit halves of 32-bit words, like fp16 ones (include/fp16.glsl). A bf16 is the
// top half of the fp32 with the same value, so widening is a shift (exact, NaNs and subnormals kept).
// Narrowing rounds to nearest, ties to even, on the bits: adding 0x7fff plus the kept part's lowest
// bit carries into the kept part exactly when the dropped half is above half an ulp, or equal with an
// odd kept part; a carry out of the largest finite value gives the infinity, as CAST's overflow rule
// asks, and subnormals round the same way. A NaN becomes the plain quiet NaN of its sign (0x7fc0), as
// the CPU backend makes of every NaN. No float register is touched, so devices that flush fp32
// subnormals or quiet NaNs in arithmetic narrow alike.
#ifndef IRONACCEL_BF16_GLSL
#define IRONACCEL_BF16_GLSL

uint ia_bf16_bits_to_f32_bits(uint h) {
    return (h & 0xffffu) << 16;
}

uint ia_f32_bits_to_bf16_bits(uint f) {
    if ((f & 0x7fffffffu) > 0x7f800000u) {
        return ((f >> 16) & 0x8000u) | 0x7fc0u;
    }
    return (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
}

// An int32 rounded once to bf16 (through fp32 would round twice for magnitudes from 2^24 up).
uint ia_int_to_bf16_bits(int v) {
    uint sign = v < 0 ? 0x8000u : 0u;
    uint u = v < 0 ? uint(-(v + 1)) + 1u : uint(v);  // |v|, also for the most negative int
    if (u == 0u) {
        return 0u;
    }
    int e = findMSB(u);  // 2^e <= u < 2^(e + 1)
    uint mant;
    if (e <= 7) {
        mant = u << uint(7 - e);
    } else {
        uint shift = uint(e - 7);
        mant = u >> shift;
        uint rest = u & ((1u << shift) - 1u);
        uint half_ulp = 1u << (shift - 1u);
        if (rest > half_ulp || (rest == half_ulp && (mant & 1u) != 0u)) {
            mant += 1u;
        }
        if (mant == 256u) {
            mant = 128u;
            e += 1;
        }
    }
    return sign | (uint(e + 127) << 7) | (mant & 0x7fu);
}

#endif
