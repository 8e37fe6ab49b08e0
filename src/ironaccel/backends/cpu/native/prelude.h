/* Support code at the top of every program the CPU backend's native path generates (see codegen.py).
 *
 * Everything here is static and inline: a program uses what it needs and the compiler drops the rest.
 * The generator defines IA_ISA_AVX512 or IA_ISA_AVX2 (or neither) from the compiler's own macros, so the
 * vector width below is the one it shaped the kernels for. The whole program is built with
 * -ffp-contract=off: a multiply and an add are two IEEE operations, as numpy does them; the
 * convolution and matrix kernels fuse them on purpose, through ia_vfma.
 *
 * The scalar functions mirror ironaccel/backends/cpu/numerics.py, the CPU backend's definition of each
 * operator: where that module rounds once from float64, so does the code here.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#if defined(IA_VECTORS) && (defined(IA_ISA_AVX512) || defined(IA_ISA_AVX2))
#include <immintrin.h> /* only where kernels use vectors: the header is most of a small program's build time */
#endif

#define IA_EXPORT __attribute__((visibility("default")))
#define IA_INLINE static inline __attribute__((always_inline))

/* A numpy array's data pointer: the first field after the object header (PyArrayObject_fields). The
 * generator defines IA_ARRAY_DATA_OFFSET after checking it on a live array. */
#define IA_ARRAY_DATA(obj) (*(void **)((char *)(obj) + IA_ARRAY_DATA_OFFSET))

/* -- stopping a run (control.py, polls.py) ------------------------------------------------------------
 * A queued run passes ``ctl``, its control block: two int64 words, 8-aligned. Word 0 is 0 while the run
 * may go on; another thread sets it to IA_STOP_REQUESTED to cancel the run, and the first poll that reads
 * the clock past word 1, the deadline in CLOCK_MONOTONIC nanoseconds (0: none), sets it to
 * IA_STOP_DEADLINE. A direct run passes NULL, and a poll then costs a test of a register. Functions
 * that poll take ``int64_t *ctl`` and return as soon as a poll sees a stop, leaving their results partly
 * written; ia_run then returns word 0. The generator sets how often loops poll (polls.py): often enough
 * to stop within a fraction of a millisecond of work, rarely enough that the clock costs nothing. */
#define IA_STOP_REQUESTED 2
#define IA_STOP_DEADLINE 3
/* ia_run returns IA_FAILED + k where the k-th rule the code checks on data fails (codegen.py: a GATHER
 * index outside its axis), so that the run raises what the interpreter raises. */
#define IA_FAILED 16

/* Out of line: the clock is read only every so much work, and inlined it would crowd the loops. */
static __attribute__((noinline, unused)) int64_t ia_poll_clock(int64_t *ctl)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec < ctl[1])
        return 0;
    int64_t none = 0; /* a cancellation that came first keeps its word */
    __atomic_compare_exchange_n(ctl, &none, IA_STOP_DEADLINE, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return __atomic_load_n(ctl, __ATOMIC_RELAXED);
}

/* The stop word (nonzero: stop), reading the clock too where the run has a deadline. */
IA_INLINE int64_t ia_poll(int64_t *ctl)
{
    if (!ctl)
        return 0;
    const int64_t stop = __atomic_load_n(ctl, __ATOMIC_RELAXED);
    return stop || !ctl[1] ? stop : ia_poll_clock(ctl);
}

/* The stop word alone, without the clock (between operators too small to be worth a clock read). */
IA_INLINE int64_t ia_stopped(const int64_t *ctl) { return ctl ? __atomic_load_n(ctl, __ATOMIC_RELAXED) : 0; }

/* In a void function with ``ctl`` in scope: return when the run must stop. IA_POLL_EVERY polls on one
 * call in ``n``, counting down ``left`` (a ptrdiff_t the caller starts at 1, so the first call polls). */
#define IA_POLL()                \
    do {                         \
        if (ia_poll(ctl))        \
            return;              \
    } while (0)
#define IA_POLL_EVERY(left, n)   \
    do {                         \
        if (--(left) == 0) {     \
            (left) = (n);        \
            IA_POLL();           \
        }                        \
    } while (0)

/* memcpy of n bytes in pieces of ``chunk``, polling before each: 0, or the stop word a poll saw. */
static __attribute__((unused)) int64_t ia_copy(void *dst, const void *src, size_t n, size_t chunk, int64_t *ctl)
{
    for (size_t done = 0; done < n; done += chunk) {
        const int64_t stop = ia_poll(ctl);
        if (stop)
            return stop;
        memcpy((unsigned char *)dst + done, (const unsigned char *)src + done, n - done < chunk ? n - done : chunk);
    }
    return 0;
}

/* -- float vectors for the convolution and matrix kernels -------------------------------------------- */
#if !defined(IA_VECTORS)
/* none needed */
#elif defined(IA_ISA_AVX512)
#define IA_VL 16
typedef __m512 ia_vf;
#define ia_vload(p) _mm512_loadu_ps(p)
#define ia_vstore(p, v) _mm512_storeu_ps((p), (v))
#define ia_vset1(x) _mm512_set1_ps(x)
#define ia_vfma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define ia_vadd(a, b) _mm512_add_ps((a), (b))
#define ia_vzero() _mm512_setzero_ps()
IA_INLINE void ia_vstore_n(float *p, ia_vf v, int n) { _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), v); }
IA_INLINE ia_vf ia_vload_n(const float *p, int n) { return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p); }
#elif defined(IA_ISA_AVX2)
#define IA_VL 8
typedef __m256 ia_vf;
#define ia_vload(p) _mm256_loadu_ps(p)
#define ia_vstore(p, v) _mm256_storeu_ps((p), (v))
#define ia_vset1(x) _mm256_set1_ps(x)
#define ia_vfma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define ia_vadd(a, b) _mm256_add_ps((a), (b))
#define ia_vzero() _mm256_setzero_ps()
#else
#define IA_VL 4
typedef float ia_vf __attribute__((vector_size(16)));
IA_INLINE ia_vf ia_vload(const float *p) { ia_vf v; memcpy(&v, p, sizeof v); return v; }
IA_INLINE void ia_vstore(float *p, ia_vf v) { memcpy(p, &v, sizeof v); }
IA_INLINE ia_vf ia_vset1(float x) { return (ia_vf){x, x, x, x}; }
IA_INLINE ia_vf ia_vfma(ia_vf a, ia_vf b, ia_vf c) { return a * b + c; } /* no fused form: two roundings */
IA_INLINE ia_vf ia_vadd(ia_vf a, ia_vf b) { return a + b; }
IA_INLINE ia_vf ia_vzero(void) { return (ia_vf){0, 0, 0, 0}; }
#endif
#if defined(IA_VECTORS) && !defined(IA_ISA_AVX512)
IA_INLINE void ia_vstore_n(float *p, ia_vf v, int n) { float t[IA_VL]; ia_vstore(t, v); memcpy(p, t, (size_t)n * sizeof(float)); }
IA_INLINE ia_vf ia_vload_n(const float *p, int n) { float t[IA_VL] = {0}; memcpy(t, p, (size_t)n * sizeof(float)); return ia_vload(t); }
#endif

#if defined(IA_VECTORS) && defined(IA_ISA_AVX512)
/* ia_min_p(ia_max_p(v, lo), hi) on 16 lanes, for lo and hi that are not NaN: max_ps(lo, v) is
 * lo > v ? lo : v and min_ps(t, hi) is t < hi ? t : hi, the scalar functions' choices (signed zeros
 * included) wherever v is a number; lanes where v is NaN get ``nan`` (the plain NaN for PROPAGATE, the
 * constant ia_min_i(lo, hi) for IGNORE). Four instructions where the compiler makes a dozen of the
 * scalar form. */
IA_INLINE ia_vf ia_vclamp(ia_vf v, float lo, float hi, float nan)
{
    ia_vf r = _mm512_min_ps(_mm512_max_ps(_mm512_set1_ps(lo), v), _mm512_set1_ps(hi));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), r, _mm512_set1_ps(nan));
}
#endif

/* -- int32 vectors for int8 products on AVX-512 VNNI (gemm.py's dot4 kernels) ------------------------ */
#if defined(IA_VECTORS) && defined(IA_ISA_AVX512) && defined(__AVX512VNNI__)
typedef __m512i ia_vi;
#define ia_viload(p) _mm512_loadu_si512((const void *)(p))
#define ia_vistore(p, v) _mm512_storeu_si512((void *)(p), (v))
#define ia_vdot4(acc, x, w) _mm512_dpbusd_epi32((acc), (x), (w)) /* acc + four u8 x s8 products per lane */
IA_INLINE void ia_vistore_n(int32_t *p, ia_vi v, int n) { _mm512_mask_storeu_epi32(p, (__mmask16)((1u << n) - 1u), v); }
/* Four bytes at p (any alignment) in every lane. */
IA_INLINE ia_vi ia_vset4(const uint8_t *p) { int32_t x; memcpy(&x, p, 4); return _mm512_set1_epi32(x); }
#endif

/* -- float special values ---------------------------------------------------------------------------- */
/* Any NaN becomes the plain quiet NaN of the same sign (numerics.canonical_nans). */
IA_INLINE float ia_canon(float v) { return v != v ? __builtin_copysignf(__builtin_nanf(""), v) : v; }
IA_INLINE float ia_round_f(double v) { return ia_canon((float)v); } /* numerics.round_to_float for FP32 */

/* apply_max_s / apply_min_s (numerics.maximum / minimum): a >= b keeps a; PROPAGATE gives the plain NaN
 * when either side is NaN, IGNORE the other side. */
IA_INLINE float ia_max_p(float a, float b) { return (a != a || b != b) ? __builtin_nanf("") : (a >= b ? a : b); }
IA_INLINE float ia_min_p(float a, float b) { return (a != a || b != b) ? __builtin_nanf("") : (a < b ? a : b); }
IA_INLINE float ia_max_i(float a, float b) { return a != a ? b : (b != b ? a : (a >= b ? a : b)); }
IA_INLINE float ia_min_i(float a, float b) { return a != a ? b : (b != b ? a : (a < b ? a : b)); }

/* -- float64 functions, rounded once to float by the caller ----------------------------------------- */
IA_INLINE double ia_bits_to_d(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }
IA_INLINE uint64_t ia_d_to_bits(double d) { uint64_t u; memcpy(&u, &d, sizeof u); return u; }

/* e**x over the whole double range, relative error about 1e-16: x = k ln2 + r with |r| <= ln2 / 2, the
 * Taylor series of e**r to r**13, and 2**k applied as two factors so that results down in the subnormal
 * range and up to overflow come out right. Branch-free, so loops over it vectorise. */
IA_INLINE double ia_exp_d(double x)
{
    const double shifter = 0x1.8p52;
    double c = x < -746.0 ? -746.0 : (x > 710.0 ? 710.0 : x); /* NaN passes through */
    double kd = c * 1.4426950408889634 + shifter;
    uint64_t kbits = ia_d_to_bits(kd) - ia_d_to_bits(shifter);
    kd -= shifter;
    double r = (c - kd * 0x1.62e42fefa3800p-1) - kd * 0x1.ef35793c76730p-45;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int64_t k = (int64_t)kbits;
    int64_t k1 = k >> 1, k2 = k - k1; /* both in [-539, 513]: each 2**ki is a normal double */
    double s1 = ia_bits_to_d((uint64_t)(k1 + 1023) << 52);
    double s2 = ia_bits_to_d((uint64_t)(k2 + 1023) << 52);
    return p * s1 * s2;
}

/* erf: x * P1(2x^2 - 1) below 1, P2((2|x| - 4.92) / 2.92) with x's sign up to 3.92, +-1 beyond (where the
 * float result is 1 exactly). Both polynomials are least-squares fits on Chebyshev nodes (absolute error
 * below 1.2e-11), evaluated with fused multiply-adds. */
IA_INLINE double ia_erf_d(double x)
{
    double ax = fabs(x);
    double t = 2.0 * x * x - 1.0;
    double p1 = 9.211637879343195e-12;
    p1 = fma(p1, t, -2.045640545534336e-10);
    p1 = fma(p1, t, 4.115747558284252e-09);
    p1 = fma(p1, t, -7.511465874630373e-08);
    p1 = fma(p1, t, 1.2233827710954787e-06);
    p1 = fma(p1, t, -1.7537169890156866e-05);
    p1 = fma(p1, t, 0.00021751715603067728);
    p1 = fma(p1, t, -0.002285485561064295);
    p1 = fma(p1, t, 0.01985249668898554);
    p1 = fma(p1, t, -0.14053608902272124);
    p1 = fma(p1, t, 0.965468738669867);
    double s = (2.0 * ax - 4.92) / 2.92;
    double p2 = -9.435186023634275e-06;
    p2 = fma(p2, s, 2.5497570552449087e-05);
    p2 = fma(p2, s, 3.88679766045259e-05);
    p2 = fma(p2, s, -0.00021551974670668404);
    p2 = fma(p2, s, 0.00015359394129584063);
    p2 = fma(p2, s, 0.0006044556707464818);
    p2 = fma(p2, s, -0.001568709407523967);
    p2 = fma(p2, s, 0.0008085687072788864);
    p2 = fma(p2, s, 0.0033093303749205426);
    p2 = fma(p2, s, -0.008477566085669113);
    p2 = fma(p2, s, 0.0073547982721368955);
    p2 = fma(p2, s, 0.006278955204627054);
    p2 = fma(p2, s, -0.028448483537173823);
    p2 = fma(p2, s, 0.045151023013930716);
    p2 = fma(p2, s, -0.045047245622287985);
    p2 = fma(p2, s, 0.0305959635442931);
    p2 = fma(p2, s, -0.013928981502139452);
    p2 = fma(p2, s, 0.00387821084683522);
    p2 = fma(p2, s, 0.9994966463547095);
    double r = ax < 1.0 ? x * p1 : __builtin_copysign(ax < 3.92 ? p2 : 1.0, x);
    return x != x ? x : r;
}

/* tanh: (e^2|x| - 1) / (e^2|x| + 1) with x's sign; x - x^3/3 below 1e-4, where that difference cancels
 * (the next term is 2e-17 of the value there); |x| > 20 gives +-1 exactly in double. */
IA_INLINE double ia_tanh_d(double x)
{
    double ax = fabs(x);
    double e = ia_exp_d(2.0 * (ax > 20.0 ? 20.0 : ax));
    double big = (e - 1.0) / (e + 1.0);
    double r = ax < 1e-4 ? x - x * x * x / 3.0 : __builtin_copysign(big, x);
    return x != x ? x : r;
}

IA_INLINE double ia_sigmoid_d(double x) { return 1.0 / (1.0 + ia_exp_d(-x)); }

/* -- integers ---------------------------------------------------------------------------------------- */
/* floor((v * m + r) / 2**s) exactly, for 0 <= s <= 63 (numerics.multiply_round_shift, the same steps and
 * the same wrapping of out-of-range intermediates): v = hi * 2**24 + lo keeps every product in 64 bits. */
IA_INLINE int64_t ia_mul_round_shift(int64_t v, int64_t m, int64_t s, int64_t r)
{
    int64_t hi = v >> 24;
    int64_t lo = v & 0xFFFFFF;
    uint64_t a = (uint64_t)hi * (uint64_t)m;
    uint64_t b = (uint64_t)lo * (uint64_t)m + (uint64_t)r;
    int64_t big = s >= 24;
    int64_t high = (int64_t)(a + (uint64_t)((int64_t)b >> 24)) >> (big ? s - 24 : 0);
    int64_t low = (int64_t)((a << (big ? 0 : 24 - s)) + (uint64_t)((int64_t)b >> (big ? 0 : s)));
    return big ? high : low;
}

IA_INLINE int64_t ia_wrap32(int64_t v) { return (int64_t)(int32_t)(uint32_t)(uint64_t)v; }
IA_INLINE int64_t ia_clip64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
IA_INLINE int32_t ia_clip32(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* (value + 2**(s-1)) >> s for s > 0, exact for any int64 value (numerics.rounding_shift_right). */
IA_INLINE int64_t ia_round_shift(int64_t v, int64_t s)
{
    int64_t q = v >> s;
    int64_t rem = (int64_t)((uint64_t)v - ((uint64_t)q << s));
    int64_t half = s > 0 ? ((int64_t)1 << (s - 1)) : 0;
    return q + (s > 0 && rem >= half);
}

/* -- sharing an operator's units among threads ------------------------------------------------------- */
#if defined(IA_SPLIT)
typedef void (*ia_unit_fn)(void *const *, unsigned char *, const unsigned char *, int64_t *, ptrdiff_t, ptrdiff_t);
typedef void (*ia_pool_fn)(ia_unit_fn, void *const *, unsigned char *, const unsigned char *, int64_t *, ptrdiff_t);

/* The process's helper pool (pool.c), set once after loading; until then every unit runs here. */
static ia_pool_fn ia_pool;

IA_EXPORT void ia_set_pool(void *pool)
{
    ia_pool = (ia_pool_fn)pool;
}

static void ia_parallel(ia_unit_fn fn, void *const *io, unsigned char *A, const unsigned char *K, int64_t *ctl,
                        ptrdiff_t units)
{
    if (ia_pool)
        ia_pool(fn, io, A, K, ctl, units);
    else
        fn(io, A, K, ctl, 0, units);
}
#endif
