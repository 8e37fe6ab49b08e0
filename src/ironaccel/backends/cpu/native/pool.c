/* Helper threads for native programs: one pool per process, shared by every program it loads.
 *
 * A generated program runs whole inside one foreign call. An operator worth splitting calls
 * ia_pool_for(unit, ...) from there: the calling thread and up to ia_pool_limit() - 1 helpers claim
 * chunks of the operator's units (see drain) until none is left, and the call returns when every
 * helper that joined has finished. Units write disjoint outputs, so the split never changes a bit
 * of the result.
 *
 * Why in C: a hand-off through Python threads costs tens of microseconds (a condition variable, the
 * GIL), more than the small convolutions of a real network take. Here a helper that finished a job
 * spins for IA_SPIN_NS before it sleeps, so the operators of one run, and back-to-back runs, reach it
 * through atomics alone; a helper that already sleeps is woken, and the caller does not wait for
 * it (it joins late, or finds nothing left).
 *
 * The caller never waits for a helper that has not joined: a job is open while its generation number
 * is odd; a helper joins by counting itself active and then checking the job is still open, and the
 * caller closes the job (generation + 1) before waiting for the active count to reach zero. A job
 * posted while another caller holds the pool runs on the calling thread alone.
 *
 * A run that is told to stop (its control block, see prelude.h) stops sharing: every thread looks at
 * the stop word before it claims a chunk and claims none once it is set, and the units themselves poll
 * it while they run. The caller still waits for every helper that joined, so when ia_pool_for returns
 * no thread is left writing into the run's memory.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define IA_EXPORT __attribute__((visibility("default")))
#define IA_SPIN_NS 50000L /* 50 us: longer than the gap between two split operators of a run, short
                             * enough not to hold a CPU other work wants */
#define IA_MAX_HELPERS 64

typedef void (*ia_unit_fn)(void *const *, unsigned char *, const unsigned char *, int64_t *, ptrdiff_t, ptrdiff_t);

static struct {
    ia_unit_fn fn;
    void *const *io;
    unsigned char *A;
    const unsigned char *K;
    int64_t *ctl; /* the run's control block, or NULL */
    ptrdiff_t units, chunk;
    int helpers; /* helpers 0..helpers-1 may join */
} job;

static unsigned long generation; /* odd: a job is open */
static int active;               /* helpers inside the open job */
static int sleepers;
static int busy; /* a caller owns the pool */
static int limit = 1;
static int started;
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wakeup = PTHREAD_COND_INITIALIZER;

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Units are shared out in parts, one per thread of the job: part i covers [i * units / n, (i + 1) *
 * units / n) and its word holds (front << 32) | back. A thread claims chunks from the front of its own
 * part, then steals from the back of the others'. Operators split one after another thus give each
 * thread the same stretch of rows every time, so it mostly reads what it wrote itself (rows that went
 * back and forth between two cores' caches made a small CNN 10% slower), while a helper that is late or
 * descheduled only delays the chunk it holds: the rest of its part is stolen. */
static uint64_t parts[IA_MAX_HELPERS + 1];

static int claim(int part, int from_back, ptrdiff_t *lo, ptrdiff_t *hi)
{
    uint64_t old = __atomic_load_n(&parts[part], __ATOMIC_RELAXED);
    for (;;) {
        const uint64_t front = old >> 32, back = old & 0xFFFFFFFFu;
        if (front >= back)
            return 0;
        const uint64_t take = back - front < (uint64_t)job.chunk ? back - front : (uint64_t)job.chunk;
        const uint64_t next = from_back ? (front << 32) | (back - take) : ((front + take) << 32) | back;
        if (__atomic_compare_exchange_n(&parts[part], &old, next, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            *lo = (ptrdiff_t)(from_back ? back - take : front);
            *hi = *lo + (ptrdiff_t)take;
            return 1;
        }
    }
}

static inline int stopped(void)
{
    return job.ctl && __atomic_load_n(job.ctl, __ATOMIC_RELAXED);
}

static void drain(int self)
{
    const int n = job.helpers + 1;
    ptrdiff_t lo, hi;
    while (!stopped() && claim(self, 0, &lo, &hi))
        job.fn(job.io, job.A, job.K, job.ctl, lo, hi);
    for (int k = 1; k < n; k++)
        while (!stopped() && claim((self + k) % n, 1, &lo, &hi))
            job.fn(job.io, job.A, job.K, job.ctl, lo, hi);
}

static void *helper_main(void *arg)
{
    const int index = (int)(intptr_t)arg;
    unsigned long seen = 0;
    long idle_since = now_ns();
    unsigned spins = 0;
    for (;;) {
        unsigned long g = __atomic_load_n(&generation, __ATOMIC_SEQ_CST);
        if ((g & 1) && g != seen) {
            seen = g;
            __atomic_add_fetch(&active, 1, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(&generation, __ATOMIC_SEQ_CST) == g && index < job.helpers)
                drain(index + 1);
            __atomic_sub_fetch(&active, 1, __ATOMIC_SEQ_CST);
            idle_since = now_ns();
            continue;
        }
        relax();
        if (++spins % 64 || now_ns() - idle_since < IA_SPIN_NS)
            continue;
        pthread_mutex_lock(&mutex);
        __atomic_add_fetch(&sleepers, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&generation, __ATOMIC_SEQ_CST) == g)
            pthread_cond_wait(&wakeup, &mutex);
        __atomic_sub_fetch(&sleepers, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&mutex);
        idle_since = now_ns();
    }
    return NULL;
}

static void forget_helpers(void)
{
    /* In a forked child the helpers do not exist: run everything on the calling thread. */
    started = 0;
    busy = 0;
    active = 0;
    sleepers = 0;
    limit = 1;
    pthread_mutex_init(&mutex, NULL);
    pthread_cond_init(&wakeup, NULL);
}

/* Start ``helpers`` threads (once; later calls return the number running). */
IA_EXPORT int ia_pool_start(int helpers)
{
    pthread_mutex_lock(&mutex);
    if (!started) {
        if (helpers > IA_MAX_HELPERS)
            helpers = IA_MAX_HELPERS;
        pthread_atfork(NULL, NULL, forget_helpers);
        int made = 0;
        for (; made < helpers; made++) {
            pthread_t thread;
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            int failed = pthread_create(&thread, &attr, helper_main, (void *)(intptr_t)made);
            pthread_attr_destroy(&attr);
            if (failed)
                break;
        }
        started = made;
    }
    int running = started;
    pthread_mutex_unlock(&mutex);
    return running;
}

/* How many threads, the caller included, a split may use from now on (the backend lowers it while the
 * machine's CPUs are busy: waiting for a descheduled helper costs more than it saves). */
IA_EXPORT void ia_pool_limit(int threads)
{
    __atomic_store_n(&limit, threads < 1 ? 1 : threads, __ATOMIC_RELAXED);
}

IA_EXPORT void ia_pool_for(ia_unit_fn fn, void *const *io, unsigned char *A, const unsigned char *K,
                           int64_t *ctl, ptrdiff_t units)
{
    ptrdiff_t threads = __atomic_load_n(&limit, __ATOMIC_RELAXED);
    if (threads > units)
        threads = units;
    int helpers = (int)threads - 1;
    if (helpers > started)
        helpers = started;
    /* (units beyond 2**31 would not fit a part's word; no operator has that many.) */
    if (helpers <= 0 || units >= ((ptrdiff_t)1 << 31) || __atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE)) {
        fn(io, A, K, ctl, 0, units);
        return;
    }
    const ptrdiff_t n = helpers + 1;
    const ptrdiff_t chunk = units / (4 * n); /* a quarter of a part: what a late helper can delay */
    job.fn = fn;
    job.io = io;
    job.A = A;
    job.K = K;
    job.ctl = ctl;
    job.units = units;
    job.chunk = chunk > 0 ? chunk : 1;
    job.helpers = helpers;
    for (ptrdiff_t i = 0; i < n; i++) {
        const uint64_t front = (uint64_t)(i * units / n), back = (uint64_t)((i + 1) * units / n);
        __atomic_store_n(&parts[i], (front << 32) | back, __ATOMIC_RELAXED);
    }
    const unsigned long g = __atomic_load_n(&generation, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&generation, g, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&mutex);
        pthread_cond_broadcast(&wakeup);
        pthread_mutex_unlock(&mutex);
    }
    drain(0);
    __atomic_store_n(&generation, g + 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&active, __ATOMIC_SEQ_CST))
        relax();
    __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
}
