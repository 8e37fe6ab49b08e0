// fp32 elementary functions for TOSA's float operators, written out rather than taken from GLSL.
// Vulkan lets the built-ins be loose: division 2.5 ulp, exp 3 + 2|x| ulp, log 3 ulp (absolute 2^-21
// near 1), sin/cos only 2^-11 absolute on [-pi, pi], tanh and pow inherited from those. TOSA 1.0 asks
// for 1 ulp (RECIPROCAL), 2 (RSQRT), 5 (ERF) and tight absolute bounds for EXP, LOG, SIN, COS, TANH.
// Every function here uses only +, -, *, comparisons, bit casts and (refined) division, which Vulkan
// specifies exactly or to a known bound. fma() is used only where a fused or an unfused evaluation are
// equally fine (polynomials): Vulkan lets fma round twice, and lavapipe does. Exact products come from
// Veltkamp splitting instead (ia_two_prod). `precise` forbids contraction and reassociation where an
// error-free transformation depends on the exact operation order. Measured errors against the CPU
// oracle are in tests/backends/vulkan/test_vulkan_ops.py. Subnormal results may be flushed by the device.

const float LN2_HI = 6.931457520e-01;  // 0x3F317200: ln 2 to 15 significant bits, so k * LN2_HI is exact
const float LN2_LO = 1.428606765e-06;  // ln 2 - LN2_HI
const float LOG2E = 1.442695022e+00;
// pi/2 = PIO2_1 + ... + PIO2_4 to about 2^-63; the first three have at most 12 significant bits, so
// k * PIO2_i is exact for |k| < 2^12 even without a fused multiply-add.
const float PIO2_1 = 1.570312500e+00;
const float PIO2_2 = 4.837512970e-04;
const float PIO2_3 = 7.549533620e-08;
const float PIO2_4 = 2.563344068e-12;
const float TWO_OVER_PI = 6.366197467e-01;
const float SQRT2 = 1.414213538e+00;

float ia_inf() { return uintBitsToFloat(0x7f800000u); }
float ia_nan() { return uintBitsToFloat(0x7fc00000u); }
float ia_copysign(float magnitude, float sign_of) {
    return uintBitsToFloat((floatBitsToUint(magnitude) & 0x7fffffffu) | (floatBitsToUint(sign_of) & 0x80000000u));
}
// 2^k for k in [-126, 127], built from the exponent bits.
float ia_pow2i(int k) { return uintBitsToFloat(uint(k + 127) << 23); }

// a * b = p + e exactly (Dekker's product with Veltkamp's split into 12-bit halves), for
// |a|, |b| < 2^115 (the split multiplies by 4097).
float ia_two_prod(float a, float b, out float e) {
    precise float ca = 4097.0 * a;
    precise float ah = ca - (ca - a);
    precise float al = a - ah;
    precise float cb = 4097.0 * b;
    precise float bh = cb - (cb - b);
    precise float bl = b - bh;
    precise float p = a * b;
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    return p;
}

// a / b within 1 ulp: the driver's quotient (2.5 ulp) plus one correction from the exact remainder
// a - q b. Operands beyond 2^100 (where the split would overflow) keep the driver's quotient.
float ia_div(float a, float b) {
    precise float q = a / b;
    if (isinf(q) || isnan(q) || q == 0.0 || isinf(b) || b == 0.0 || abs(q) > 1e30 || abs(b) > 1e30) {
        return q;
    }
    float e;
    precise float p = ia_two_prod(q, b, e);
    precise float r = (a - p) - e;
    return q + r / b;
}

// e^x. x = k ln2 + r with |r| <= ln2/2 (Cody-Waite, k ln2 split so k * LN2_HI is exact); e^r - 1 by
// its Taylor series to r^9 (truncation below 1e-10 relative); then 2^k in two factors so that k outside
// the normal exponent range still scales correctly (into subnormals or to infinity).
float ia_exp(float x) {
    if (isnan(x)) {
        return x;
    }
    if (x > 88.8) {
        return ia_inf();
    }
    if (x < -104.0) {
        return 0.0;
    }
    precise float k = roundEven(x * LOG2E);
    precise float r = x - k * LN2_HI;  // exact: the product fits 24 bits and the difference is Sterbenz's
    r = r - k * LN2_LO;
    precise float q = fma(r, 2.755731884e-06, 2.480158764e-05);
    q = fma(r, q, 1.984127011e-04);
    q = fma(r, q, 1.388888923e-03);
    q = fma(r, q, 8.333333768e-03);
    q = fma(r, q, 4.166666791e-02);
    q = fma(r, q, 1.666666716e-01);
    q = fma(r, q, 0.5);
    precise float em1 = fma(r * r, q, r);
    precise float e = 1.0 + em1;
    int ki = int(k);
    int k1 = ki / 2;
    return e * ia_pow2i(k1) * ia_pow2i(ki - k1);
}

// ln x as hi + lo for finite x > 0. x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
// s = f / (2 + f); then ln(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)) with R(z) = 2z/3 + 2z^2/5 + ...
// (the atanh series). The leading f - f^2/2 is carried exactly as two floats; s only enters the small
// correction term, so the division's error hardly shows. hi alone is within about 1 ulp of ln x.
float ia_log_parts(float x, out float lo) {
    int e = 0;
    uint bits = floatBitsToUint(x);
    if (bits < 0x00800000u) {  // subnormal: scale into the normal range first
        x *= 8388608.0;
        e = -23;
        bits = floatBitsToUint(x);
    }
    e += int(bits >> 23) - 127;
    float m = uintBitsToFloat((bits & 0x007fffffu) | 0x3f800000u);
    if (m > SQRT2) {
        m *= 0.5;
        e += 1;
    }
    precise float f = m - 1.0;
    precise float s = ia_div(f, 2.0 + f);
    precise float z = s * s;
    precise float R = z * fma(z, fma(z, fma(z, fma(z, fma(z, 1.538461596e-01, 1.818181872e-01), 2.222222239e-01), 2.857142985e-01),
                                     4.000000060e-01), 6.666666865e-01);
    float ffe;
    precise float ff = ia_two_prod(f, f, ffe);
    precise float hf = 0.5 * ff;
    precise float corr = s * (hf + R);
    precise float th = f - hf;            // |f| >= |hf|: Fast2Sum, tl is th's rounding error
    precise float tl = ((f - th) - hf) - 0.5 * ffe + corr;
    precise float dk = float(e);
    precise float eh = dk * LN2_HI;        // exact
    precise float sh = eh + th;            // TwoSum of eh and th
    precise float bb = sh - eh;
    precise float sl = (eh - (sh - bb)) + (th - bb);
    precise float l = sl + tl + dk * LN2_LO;
    precise float hi = sh + l;
    lo = l - (hi - sh);
    return hi;
}

float ia_log(float x) {
    if (isnan(x) || x < 0.0) {
        return ia_nan();
    }
    if (x == 0.0) {
        return -ia_inf();
    }
    if (isinf(x)) {
        return x;
    }
    float lo;
    float hi = ia_log_parts(x, lo);
    return hi + lo;
}

// a^b = e^(b ln a) with ln a carried as two floats, so the error of b ln a stays near one rounding of
// the product even when |b ln a| is large. Negative a: defined only for integral b (sign from parity);
// TOSA leaves a < 0 unpredictable, the CPU oracle follows numpy.
float ia_pow(float a, float b) {
    if (b == 0.0 || a == 1.0) {
        return 1.0;
    }
    if (isnan(a) || isnan(b)) {
        return ia_nan();
    }
    float sign = 1.0;
    if (a < 0.0) {
        if (isinf(b)) {
            a = -a;  // |a| decides, as for a > 0
        } else if (floor(b) != b) {
            return ia_nan();
        } else {
            sign = (floor(b * 0.5) * 2.0 != b) ? -1.0 : 1.0;
            a = -a;
        }
    }
    if (a == 0.0) {  // +-0: the sign survives odd integral powers, as in numpy
        bool odd = !isinf(b) && floor(b) == b && floor(b * 0.5) * 2.0 != b;
        float r = b > 0.0 ? 0.0 : ia_inf();
        return odd ? ia_copysign(r, a) : r;
    }
    if (isinf(a)) {
        return sign * (b > 0.0 ? ia_inf() : 0.0);
    }
    if (isinf(b)) {
        return (a > 1.0) == (b > 0.0) ? ia_inf() : 0.0;
    }
    float llo;
    precise float lhi = ia_log_parts(a, llo);
    float ye = 0.0;
    precise float yh = abs(b) < 1e30 ? ia_two_prod(b, lhi, ye) : b * lhi;
    precise float yl = ye + b * llo;
    precise float e = ia_exp(yh);
    if (isinf(e) || e == 0.0) {
        return sign * e;
    }
    return sign * fma(e, yl, e);
}

// Argument reduction for sin/cos: x = k pi/2 + r, |r| <= pi/4 (Cody-Waite, four pieces of pi/2).
// q = k mod 4 picks the quadrant. The products are exact for |x| < 6434 (k < 2^12); beyond, each is
// off by at most half an ulp of x, which TOSA's bound for SIN / COS (proportional to |x|) allows.
// From 2^23 on, every float is an integer and that bound exceeds 1: r is only kept in range there
// (a Payne-Hanek reduction would make those results exact; nothing in TOSA asks for it). The kernels
// below are accurate (series truncation under 1e-9) for |r| up to 1.5.
float ia_reduce_pio2(float x, out uint q) {
    precise float k = roundEven(x * TWO_OVER_PI);
    precise float r = x - k * PIO2_1;
    r = r - k * PIO2_2;
    r = r - k * PIO2_3;
    r = r - k * PIO2_4;
    q = uint(k - 4.0 * floor(k * 0.25));
    return clamp(r, -1.5, 1.5);  // the kernels stay accurate to |r| = 1.5
}

// sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2) (Taylor to r^13 / r^14).
float ia_sin_kernel(float r) {
    precise float z = r * r;
    precise float p = fma(z, fma(z, fma(z, fma(z, fma(z, 1.605904437e-10, -2.505210794e-08), 2.755731884e-06),
                                     -1.984127011e-04), 8.333333768e-03), -1.666666716e-01);
    return fma(r * z, p, r);
}

float ia_cos_kernel(float r) {
    precise float z = r * r;
    precise float p = fma(z, fma(z, fma(z, fma(z, fma(z, -1.147074536e-11, 2.087675588e-09), -2.755731998e-07),
                                     2.480158764e-05), -1.388888923e-03), 4.166666791e-02);
    return fma(z * z, p, fma(-0.5, z, 1.0));
}

float ia_sin(float x) {
    if (isnan(x) || isinf(x)) {
        return ia_nan();
    }
    if (abs(x) < 2.44140625e-04) {  // 2^-12: sin x rounds to x (and -0 stays -0)
        return x;
    }
    uint q;
    float r = ia_reduce_pio2(x, q);
    float v = (q & 1u) == 0u ? ia_sin_kernel(r) : ia_cos_kernel(r);
    return (q & 2u) == 0u ? v : -v;
}

float ia_cos(float x) {
    if (isnan(x) || isinf(x)) {
        return ia_nan();
    }
    if (abs(x) < 2.44140625e-04) {
        return 1.0;
    }
    uint q;
    float r = ia_reduce_pio2(x, q);
    float v = (q & 1u) == 0u ? ia_cos_kernel(r) : ia_sin_kernel(r);
    return ((q + 1u) & 2u) == 0u ? v : -v;
}

// tanh: the odd Taylor series below |x| = 0.55 (to x^21; tanh's coefficients from Bernoulli numbers),
// 1 - 2 / (e^2|x| + 1) above it (no cancellation there: the result is at least 0.5), +-1 beyond 9.1.
float ia_tanh(float x) {
    if (isnan(x)) {
        return x;
    }
    float ax = abs(x);
    if (ax < 2.44140625e-04) {  // 2^-12: tanh x rounds to x (and -0 stays -0)
        return x;
    }
    if (ax < 0.55) {
        precise float z = x * x;
        precise float p = fma(z, 9.691537707e-05, -2.391291200e-04);
        p = fma(z, p, 5.900274264e-04);
        p = fma(z, p, -1.455834368e-03);
        p = fma(z, p, 3.592127934e-03);
        p = fma(z, p, -8.863235824e-03);
        p = fma(z, p, 2.186948806e-02);
        p = fma(z, p, -5.396825448e-02);
        p = fma(z, p, 1.333333403e-01);
        p = fma(z, p, -3.333333433e-01);
        return fma(x * z, p, x);
    }
    if (ax > 9.1) {
        return ia_copysign(1.0, x);
    }
    float t = 1.0 - ia_div(2.0, ia_exp(2.0 * ax) + 1.0);
    return ia_copysign(t, x);
}

// sigmoid: 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, so e^|x| never overflows and tiny
// results keep their precision (they are e^x itself, to a relative 2^-24, below x = -17).
float ia_sigmoid(float x) {
    if (isnan(x)) {
        return x;
    }
    if (x >= 0.0) {
        return ia_div(1.0, 1.0 + ia_exp(-x));
    }
    float e = ia_exp(x);
    return ia_div(e, 1.0 + e);
}

// erf: below |x| = 0.875 x + x E(x^2), E the Maclaurin series of erf(x)/x - 1 (to x^26); from 0.875 to
// 4, 1 - e^(-x^2) R(x) where R(x) = erfc(x) e^(x^2) is a degree-14 Chebyshev fit (computed with
// Python's math.erfc, relative error 6e-10 in float64) in t = (x - 2.4375) / 1.5625; x^2 is carried
// exactly as two floats into the exponential. At |x| >= 4, erf rounds to +-1.
float ia_erf(float x) {
    if (isnan(x)) {
        return x;
    }
    float ax = abs(x);
    if (ax < 0.875) {
        precise float z = x * x;
        precise float p = fma(z, -6.711366705e-12, 9.422759101e-11);
        p = fma(z, p, -1.229055524e-09);
        p = fma(z, p, 1.480719281e-08);
        p = fma(z, p, -1.636584415e-07);
        p = fma(z, p, 1.646211444e-06);
        p = fma(z, p, -1.492565025e-05);
        p = fma(z, p, 1.205533263e-04);
        p = fma(z, p, -8.548327023e-04);
        p = fma(z, p, 5.223977845e-03);
        p = fma(z, p, -2.686617151e-02);
        p = fma(z, p, 1.128379181e-01);
        p = fma(z, p, -3.761263788e-01);
        p = fma(z, p, 1.283791661e-01);
        return fma(x, p, x);
    }
    if (ax >= 4.0) {
        return ia_copysign(1.0, x);
    }
    float l;
    precise float h = ia_two_prod(ax, ax, l);
    precise float e = ia_exp(-h);
    e = fma(-e, l, e);  // e^(-h - l) = e^(-h) (1 - l) to second order in l (|l| < 2^-20)
    precise float t = (ax - 2.4375) * 0.64;
    precise float R = fma(t, 4.213945886e-06, -1.115673331e-05);
    R = fma(t, R, 1.416455689e-05);
    R = fma(t, R, -3.700270827e-05);
    R = fma(t, R, 1.147980656e-04);
    R = fma(t, R, -2.810826409e-04);
    R = fma(t, R, 6.571390550e-04);
    R = fma(t, R, -1.531686052e-03);
    R = fma(t, R, 3.472593846e-03);
    R = fma(t, R, -7.616703399e-03);
    R = fma(t, R, 1.614786126e-02);
    R = fma(t, R, -3.298963234e-02);
    R = fma(t, R, 6.469227374e-02);
    R = fma(t, R, -1.211887971e-01);
    R = fma(t, R, 2.155524790e-01);
    return ia_copysign(fma(-e, R, 1.0), x);
}

// 1 / x within 1 ulp; +-0 -> +-inf, +-inf -> +-0. |x| beyond 2^100 or below 2^-100 is scaled by 2^-64
// or 2^64 into the range where the correction step works; results below the normal range come from
// one final scaling.
float ia_reciprocal(float x) {
    if (isnan(x)) {
        return x;
    }
    if (x == 0.0) {
        return ia_copysign(ia_inf(), x);
    }
    if (isinf(x)) {
        return ia_copysign(0.0, x);
    }
    if (abs(x) > 1.267650600e+30) {  // 2^100
        return ia_div(1.0, x * 5.421010862e-20) * 5.421010862e-20;  // 2^-64
    }
    if (abs(x) < 7.888609052e-31) {  // 2^-100
        return ia_div(1.0, x * 1.844674407e+19) * 1.844674407e+19;  // 2^64
    }
    return ia_div(1.0, x);
}

// 1 / sqrt(x) within 1 ulp: the driver's estimate (2 ulp) plus one Newton step on the residual
// 1 - x y^2, computed with two exact products. x is first scaled by an even power of two into
// [2^-100, 2^100] (subnormals included), and the result scaled back.
float ia_rsqrt(float x) {
    if (isnan(x) || x < 0.0) {
        return ia_nan();
    }
    if (x == 0.0) {
        return ia_copysign(ia_inf(), x);  // rsqrt(-0) = -inf, as TOSA's table says
    }
    if (isinf(x)) {
        return 0.0;
    }
    float scale = 1.0;
    if (x < 7.888609052e-31) {  // 2^-100
        x *= 1.844674407e+19;   // 2^64
        scale = 4294967296.0;   // 2^32
    } else if (x > 1.267650600e+30) {
        x *= 5.421010862e-20;
        scale = 2.328306437e-10;
    }
    precise float y = inversesqrt(x);
    float e1;
    float e2;
    precise float t = ia_two_prod(x, y, e1);      // x y = t + e1
    precise float u = ia_two_prod(t, y, e2);      // t y = u + e2
    precise float r = ((1.0 - u) - e2) - e1 * y;  // 1 - x y^2
    y = y + 0.5 * y * r;
    return y * scale;
}

// MAXIMUM / MINIMUM with TOSA's NaN modes (1 propagate, 2 ignore) and the oracle's choice between
// equal values (a >= b keeps a for max, a < b keeps a for min; so signed zeros follow the order).
float ia_max(float a, float b, uint nan_mode) {
    bool na = isnan(a);
    bool nb = isnan(b);
    if (na || nb) {
        if (nan_mode == 2u) {
            return na ? b : a;
        }
        return ia_nan();
    }
    return a >= b ? a : b;
}

float ia_min(float a, float b, uint nan_mode) {
    bool na = isnan(a);
    bool nb = isnan(b);
    if (na || nb) {
        if (nan_mode == 2u) {
            return na ? b : a;
        }
        return ia_nan();
    }
    return a < b ? a : b;
}
