"""The CUDA C every kernel source starts with (the backend's one header, kept as Python strings): the
fp16 / bf16 / fp8 conversions, the arithmetic TOSA's rules need, and the argument block of the elementwise
kernels. NVRTC compiles each kernel with no include path, so nothing here includes a header.

Conversions (:data:`CONVERSIONS`) work on bit patterns with integer code, so they give the same bits under
any floating-point mode and on any compiler:

* fp16 and bf16 -> fp32 are exact (subnormal fp16 values normalised by shifting; NaN keeps sign and payload);
* fp32 -> fp16 and fp32 -> bf16 round to nearest, ties to even, as TOSA's CAST and every narrow result ask;
  magnitudes at or past the halfway point above the largest finite value become infinities; a NaN becomes
  the quiet NaN of its sign (0x7E00 / 0x7FC0), as the CPU backend's rounding gives;
* fp8e4m3 and fp8e5m2 -> fp32 are exact (fp8e5m2 is the upper byte of an fp16);
* fp32 -> fp8e4m3 and fp32 -> fp8e5m2 round to nearest even, keeping subnormals, with the CPU backend's
  overflow rules: fp8e4m3 has no infinity, so a rounded magnitude past 448 and an infinity give its NaN
  (0x7F with the sign); fp8e5m2 overflows to its infinity (0x7C). A NaN becomes the NaN ml_dtypes stores
  for it, with its sign (0x7F for fp8e4m3, 0x7E for fp8e5m2). fp16 and bf16 reach fp8 through fp32, which
  holds them exactly, so CAST rounds once from the source value.

:data:`CONVERSIONS` is plain C under :data:`HOST_HEADER` too, which is how the tests compare it with numpy
and ml_dtypes over every 16-bit (and 8-bit) pattern without a GPU (tests/backends/cuda).

The argument block (:data:`ARGS`) is one struct of 64-bit words passed by value as a ``__grid_constant__``
parameter (read where the driver placed it, never copied per thread): operand and result addresses, the
element count, the result's extents (outermost first) and each operand's element strides over them (0 where
it broadcasts), and sixteen scalar words (shifts, bounds as fp32 bits, NaN modes, the extents and strides of a
reduced axis or a window: each lowering says what it puts there).
:mod:`.ops.common` packs it with the same layout (:data:`ARG_WORDS`).
"""

from __future__ import annotations

MAX_OPERANDS = 3
MAX_RANK = 6
SCALARS = 16
# The argument block's 64-bit words: in[3], out, count, rank, dims[6], strides[3][6], scalars[16].
ARG_WORDS = MAX_OPERANDS + 1 + 2 + MAX_RANK + MAX_OPERANDS * MAX_RANK + SCALARS

DEVICE_HEADER = """\
#define IA_FN static __device__ __forceinline__
#define ia_bits(x) __float_as_uint(x)
#define ia_float(x) __uint_as_float(x)
"""

# The same bit casts for a host C compiler (the conversion tests build CONVERSIONS with it).
HOST_HEADER = """\
#define IA_FN static inline
typedef union { float f; unsigned u; } ia_word;
static inline unsigned ia_bits(float f) { ia_word w; w.f = f; return w.u; }
static inline float ia_float(unsigned u) { ia_word w; w.u = u; return w.f; }
"""

CONVERSIONS = """\
IA_FN float ia_f16_to_f32(unsigned short h) {
    unsigned sign = ((unsigned)h & 0x8000u) << 16;
    unsigned exponent = ((unsigned)h >> 10) & 0x1Fu;
    unsigned mantissa = (unsigned)h & 0x3FFu;
    if (exponent == 0x1Fu) return ia_float(sign | 0x7F800000u | (mantissa << 13));
    if (exponent != 0u) return ia_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    if (mantissa == 0u) return ia_float(sign);
    exponent = 113u; /* a subnormal is mantissa * 2^-24: shift its leading one up to the implicit bit */
    while ((mantissa & 0x400u) == 0u) {
        mantissa <<= 1;
        exponent -= 1u;
    }
    return ia_float(sign | (exponent << 23) | ((mantissa & 0x3FFu) << 13));
}

IA_FN unsigned short ia_f32_to_f16(float value) {
    unsigned x = ia_bits(value);
    unsigned sign = (x >> 16) & 0x8000u;
    unsigned magnitude = x & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return (unsigned short)(sign | 0x7E00u);
    if (magnitude >= 0x477FF000u) return (unsigned short)(sign | 0x7C00u); /* 65520 and up round to infinity */
    if (magnitude >= 0x38800000u) { /* normal in fp16: rebias the exponent, round at bit 13 */
        unsigned r = magnitude - 0x38000000u;
        r += 0x0FFFu + ((r >> 13) & 1u);
        return (unsigned short)(sign | (r >> 13));
    }
    if (magnitude <= 0x33000000u) return (unsigned short)sign; /* at most 2^-25, half the least subnormal */
    {
        unsigned shift = 126u - (magnitude >> 23); /* 14 to 24: the bits below fp16's 2^-24 unit */
        unsigned significand = (magnitude & 0x7FFFFFu) | 0x800000u;
        unsigned quotient = significand >> shift;
        unsigned rest = significand & ((1u << shift) - 1u);
        unsigned half = 1u << (shift - 1u);
        if (rest > half || (rest == half && (quotient & 1u))) quotient += 1u;
        return (unsigned short)(sign | quotient);
    }
}

IA_FN float ia_bf16_to_f32(unsigned short b) {
    return ia_float((unsigned)b << 16);
}

IA_FN unsigned short ia_f32_to_bf16(float value) {
    unsigned x = ia_bits(value);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (unsigned short)(((x >> 16) & 0x8000u) | 0x7FC0u);
    x += 0x7FFFu + ((x >> 16) & 1u); /* a carry out of the exponent's top gives the infinity, as it should */
    return (unsigned short)(x >> 16);
}

/* fp8e4m3 (bias 7, no infinity, 0x7F / 0xFF the only NaNs) -> fp32, exact. */
IA_FN float ia_e4m3_to_f32(unsigned char b) {
    unsigned sign = ((unsigned)b & 0x80u) << 24;
    unsigned exponent = ((unsigned)b >> 3) & 0xFu;
    unsigned mantissa = (unsigned)b & 0x7u;
    if (exponent == 0xFu && mantissa == 0x7u) return ia_float(sign | 0x7FC00000u);
    if (exponent != 0u) return ia_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
    if (mantissa == 0u) return ia_float(sign);
    exponent = 121u; /* a subnormal is mantissa * 2^-9: shift its leading one up to the implicit bit */
    while ((mantissa & 0x8u) == 0u) {
        mantissa <<= 1;
        exponent -= 1u;
    }
    return ia_float(sign | (exponent << 23) | ((mantissa & 0x7u) << 20));
}

/* fp8e5m2 is the upper byte of an fp16 (same exponent, two mantissa bits): exact. */
IA_FN float ia_e5m2_to_f32(unsigned char b) {
    return ia_f16_to_f32((unsigned short)((unsigned)b << 8));
}

/* fp32 -> an fp8 format of m mantissa bits and exponent bias `bias`, round to nearest even, subnormals
   kept: the code (exponent and mantissa bits) is computed as an integer, so a rounding carry moves into the
   exponent as it should. Codes past `largest` (the largest finite one) and infinities give `overflow`; a
   NaN gives `nan`; the sign is kept throughout. */
IA_FN unsigned char ia_f32_to_f8(float value, unsigned m, unsigned bias, unsigned largest, unsigned overflow,
                                 unsigned nan) {
    unsigned x = ia_bits(value);
    unsigned sign = (x >> 24) & 0x80u;
    unsigned magnitude = x & 0x7FFFFFFFu;
    unsigned code;
    if (magnitude > 0x7F800000u) return (unsigned char)(sign | nan);
    if (magnitude == 0x7F800000u) return (unsigned char)(sign | overflow);
    if ((magnitude >> 23) >= 128u - bias) { /* normal in fp8: rebias the exponent, round at bit 23 - m */
        unsigned r = magnitude - ((127u - bias) << 23);
        r += (1u << (22u - m)) - 1u + ((r >> (23u - m)) & 1u);
        code = r >> (23u - m);
    } else {
        /* the bits below fp8's least subnormal 2^(1 - bias - m) */
        unsigned shift = 151u - bias - m - (magnitude >> 23);
        if (shift > 24u) return (unsigned char)sign; /* below half the least subnormal */
        {
            unsigned significand = (magnitude & 0x7FFFFFu) | 0x800000u;
            unsigned rest = significand & ((1u << shift) - 1u);
            unsigned half = 1u << (shift - 1u);
            code = significand >> shift;
            if (rest > half || (rest == half && (code & 1u))) code += 1u;
        }
    }
    if (code > largest) return (unsigned char)(sign | overflow);
    return (unsigned char)(sign | code);
}

/* fp8e4m3 has no infinity: overflow and infinities give its NaN (OCP's non-saturating mode). */
IA_FN unsigned char ia_f32_to_e4m3(float value) {
    return ia_f32_to_f8(value, 3u, 7u, 0x7Eu, 0x7Fu, 0x7Fu);
}

IA_FN unsigned char ia_f32_to_e5m2(float value) {
    return ia_f32_to_f8(value, 2u, 15u, 0x7Bu, 0x7Cu, 0x7Eu);
}
"""

ARITHMETIC = """\
/* TOSA's apply_max_s / apply_min_s: mode 2 ignores a NaN operand, any other mode propagates it. */
IA_FN float ia_max_f32(float x, float y, long long mode) {
    if (x != x || y != y) {
        if (mode == 2) return (x != x) ? y : x;
        return ia_float(0x7FC00000u);
    }
    return x >= y ? x : y;
}

IA_FN float ia_min_f32(float x, float y, long long mode) {
    if (x != x || y != y) {
        if (mode == 2) return (x != x) ? y : x;
        return ia_float(0x7FC00000u);
    }
    return x < y ? x : y;
}

/* MUL of int32 with TOSA's shift: the exact 64-bit product rounded half up at the shift, computed as a
   floor quotient and remainder so that adding the rounding term cannot overflow; the low 32 bits result. */
IA_FN int ia_mul_i32(int x, int y, long long shift) {
    long long product = (long long)x * (long long)y;
    if (shift <= 0) return (int)(unsigned)(unsigned long long)product;
    long long quotient = product >> shift;
    unsigned long long rest = (unsigned long long)product & ((1ull << shift) - 1ull);
    if (rest >= (1ull << (shift - 1))) quotient += 1;
    return (int)(unsigned)(unsigned long long)quotient;
}

/* CAST fp32 -> int32: round to nearest, ties to even, saturating; NaN gives 0 (as the CPU backend). */
IA_FN int ia_f32_to_i32(float x) {
    if (x != x) return 0;
    if (x >= 2147483648.0f) return 2147483647;
    if (x <= -2147483648.0f) return -2147483647 - 1;
    return __float2int_rn(x);
}
"""

ARGS = f"""\
#define IA_MAX_OPERANDS {MAX_OPERANDS}
#define IA_MAX_RANK {MAX_RANK}
#define IA_SCALARS {SCALARS}

struct IaArgs {{
    unsigned long long in[IA_MAX_OPERANDS];
    unsigned long long out;
    long long count;
    long long rank;
    long long dims[IA_MAX_RANK];
    long long strides[IA_MAX_OPERANDS][IA_MAX_RANK];
    long long scalars[IA_SCALARS];
}};

/* The element of operand k that result element i reads (broadcast operands have stride 0). */
IA_FN long long ia_offset(const IaArgs& a, int k, long long i) {{
    if (a.rank == 1) return i * a.strides[k][0];
    long long offset = 0;
    for (int d = (int)a.rank - 1; d >= 0; --d) {{
        const long long extent = a.dims[d];
        offset += (i % extent) * a.strides[k][d];
        i /= extent;
    }}
    return offset;
}}
"""

PRELUDE = DEVICE_HEADER + CONVERSIONS + ARITHMETIC + ARGS

__all__ = ["ARGS", "ARG_WORDS", "CONVERSIONS", "HOST_HEADER", "MAX_OPERANDS", "MAX_RANK", "PRELUDE", "SCALARS"]
