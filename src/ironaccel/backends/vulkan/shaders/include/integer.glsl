// Exact integer helpers of the integer tier: element reads of any width, saturation, and 64-bit
// arithmetic carried in two 32-bit words (hi signed, lo unsigned), so no kernel needs shaderInt64.
// Requires include/elementwise.glsl.

// Element i of a tensor of ES-byte elements in `word`, read as signed, or as unsigned when `uns`.
int read_int(uint word, uint i, uint es, bool uns) {
    uint bits = ELEM_GET(word, i, es);
    return uns ? int(bits) : sign_extend(bits, es);
}

// Clip v to [lo, hi] (inclusive); the bounds of an ES-byte type, signed or unsigned.
int type_min(uint es, bool uns) {
    return uns ? 0 : (es == 4u ? int(0x80000000u) : -(1 << (8u * es - 1u)));
}

int type_max(uint es, bool uns) {
    return es == 4u ? (uns ? -1 : 0x7fffffff) : (uns ? (1 << (8u * es)) - 1 : (1 << (8u * es - 1u)) - 1);
}

// A 64-bit two's complement value as (hi, lo).
struct I64 {
    int hi;
    uint lo;
};

I64 i64_mul(int a, int b) {
    I64 r;
    int lo;
    imulExtended(a, b, r.hi, lo);
    r.lo = uint(lo);
    return r;
}

I64 i64_from(int v) {
    I64 r;
    r.hi = v < 0 ? -1 : 0;
    r.lo = uint(v);
    return r;
}

I64 i64_add(I64 a, I64 b) {
    I64 r;
    uint carry;
    r.lo = uaddCarry(a.lo, b.lo, carry);
    r.hi = a.hi + b.hi + int(carry);
    return r;
}

// 2^s for 0 <= s <= 62.
I64 i64_pow2(uint s) {
    I64 r;
    r.hi = s >= 32u ? 1 << (s - 32u) : 0;
    r.lo = s >= 32u ? 0u : 1u << s;
    return r;
}

// floor(v / 2^s) for 0 <= s <= 63: an arithmetic right shift, low 32 bits kept.
int i64_shift_low(I64 v, uint s) {
    if (s == 0u) {
        return int(v.lo);
    }
    if (s < 32u) {
        return int((v.lo >> s) | (uint(v.hi) << (32u - s)));
    }
    return v.hi >> (s - 32u);
}

// floor(v / 2^s) for 0 <= s <= 63, all 64 bits.
I64 i64_shift(I64 v, uint s) {
    I64 r;
    if (s == 0u) {
        return v;
    }
    if (s < 32u) {
        r.lo = (v.lo >> s) | (uint(v.hi) << (32u - s));
        r.hi = v.hi >> s;
    } else {
        r.lo = uint(v.hi >> (s - 32u));
        r.hi = v.hi >> 31;
    }
    return r;
}

// TOSA's apply_scale_32 / apply_scale_16 on a 32-bit value: (v * m + 2^(s-1) [+-2^30 when double
// rounding and s > 31]) >> s, exact in 64 bits, narrowed to int32. s is clipped to [0, 63] as the
// CPU backend clips it. |v * m| <= 2^62 and the rounding terms stay below 2^63, so nothing wraps.
int apply_scale(int v, int m, int s_raw, bool double_round) {
    uint s = uint(clamp(s_raw, 0, 63));
    I64 acc = i64_mul(v, m);
    if (s > 0u) {
        acc = i64_add(acc, i64_pow2(min(s - 1u, 62u)));
    }
    if (double_round && s > 31u) {
        acc = i64_add(acc, i64_from(v >= 0 ? (1 << 30) : -(1 << 30)));
    }
    return i64_shift_low(acc, s);
}

bool i64_less(I64 a, I64 b) {
    return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
}

// v clipped to [lo, hi].
int saturate64(I64 sum, int lo, int hi) {
    if (i64_less(sum, i64_from(lo))) {
        return lo;
    }
    if (i64_less(i64_from(hi), sum)) {
        return hi;
    }
    return int(sum.lo);
}

// a + b clipped to [lo, hi], exact (the sum is formed in 64 bits).
int add_saturate(int a, int b, int lo, int hi) {
    return saturate64(i64_add(i64_from(a), i64_from(b)), lo, hi);
}

// -v in 64 bits (exact for the most negative int32 too).
I64 i64_negated(int v) {
    I64 r;
    r.lo = uint(-v);
    r.hi = v == int(0x80000000u) ? 0 : (v > 0 ? -1 : 0);
    return r;
}
