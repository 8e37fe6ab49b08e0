"""The CUDA backend's kernels run on the host: a kernel's CUDA C, exactly as the backend produces it
(``prelude.PRELUDE`` and the kernel text), compiled by the host's C++ compiler behind :data:`SHIM`, loaded
with ctypes and called with a pointer to a packed argument block.

The shim stands in for what CUDA C gives a kernel: the execution-space keywords vanish, ``blockIdx`` and
``threadIdx`` are 0 and ``blockDim`` and ``gridDim`` are 1, so that the kernels' grid-stride loop visits
every element in one call, one element after another; the intrinsics the kernels may use get their exact
CUDA meaning (bit casts, conversions with an explicit rounding that saturate and map NaN to 0, counts of
bits). The approximate ``__expf`` family is refused on purpose: the GPU's error for those cannot be
reproduced here, so a kernel using them fails to build rather than passing on the host's exact functions.
Anything a kernel needs that the shim lacks (shared memory, warp functions, atomics: what one host thread
cannot mean) fails to compile, with the compiler's message.

Floating point is IEEE single precision operation by operation (no fast math, no contraction into fused
multiply-adds), which is what the CPU reference is compared with; NVRTC, which contracts by default, may
differ from it by a rounding, within the operator suite's tolerances.

Each source is compiled once into ``<repo>/.cache/cuda-host-kernels/<hash>.so`` (the hash covers the shim,
the source, the compiler's identity and its flags), beside the ``.cu`` it was built from, so a later run,
or another pytest worker, loads it without compiling. :func:`build` compiles many at once on the
machine's cores; a lock file per source lets concurrent workers share the work instead of repeating it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

CACHE = Path(__file__).resolve().parents[3] / ".cache" / "cuda-host-kernels"
FLAGS = ("-std=c++17", "-O1", "-fno-fast-math", "-ffp-contract=off", "-shared", "-fPIC", "-x", "c++")
NO_COMPILER = "no host C++ compiler (g++) to build the CUDA kernels for the host"
ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+void\s+([A-Za-z_]\w*)\s*\(')
WRAPPER_PREFIX = "ia_host_entry_"

SHIM = r"""
#include <limits>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

/* CUDA's execution-space and parameter qualifiers mean nothing to one host thread. */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __grid_constant__
#define __shared__ static
#define __launch_bounds__(...)

/* One block of one thread: a grid-stride loop then steps by 1 over every element. */
struct ia_host_dim3 { unsigned x, y, z; };
static const ia_host_dim3 threadIdx = {0u, 0u, 0u};
static const ia_host_dim3 blockIdx = {0u, 0u, 0u};
static const ia_host_dim3 blockDim = {1u, 1u, 1u};
static const ia_host_dim3 gridDim = {1u, 1u, 1u};
static inline void __syncthreads() {}

/* CUDA's 16-byte vector types (aligned as on the GPU), which contiguous kernels load and store. */
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };

/* Bit casts. */
template <class To, class From> static inline To ia_host_cast(From x) {
    static_assert(sizeof(To) == sizeof(From), "a bit cast between sizes");
    To y;
    memcpy(&y, &x, sizeof y);
    return y;
}
static inline unsigned __float_as_uint(float x) { return ia_host_cast<unsigned>(x); }
static inline float __uint_as_float(unsigned x) { return ia_host_cast<float>(x); }
static inline int __float_as_int(float x) { return ia_host_cast<int>(x); }
static inline float __int_as_float(int x) { return ia_host_cast<float>(x); }
static inline long long __double_as_longlong(double x) { return ia_host_cast<long long>(x); }
static inline double __longlong_as_double(long long x) { return ia_host_cast<double>(x); }

/* float -> integer as the GPU converts: the value rounded as named (rn: nearest even, rz: toward zero,
   rd: down, ru: up), clamped to the type's range, NaN to 0. */
template <class I> static inline I ia_host_f2i(float r) {
    if (r != r) return 0;
    const float top = ldexpf(1.0f, std::numeric_limits<I>::digits);
    if (r >= top) return std::numeric_limits<I>::max();
    if (std::is_signed<I>::value ? r <= -top : r <= 0.0f) return std::numeric_limits<I>::min();
    return (I)r;
}
#define IA_HOST_F2I(type, name) \
    static inline type name##_rn(float x) { return ia_host_f2i<type>(nearbyintf(x)); } \
    static inline type name##_rz(float x) { return ia_host_f2i<type>(truncf(x)); } \
    static inline type name##_rd(float x) { return ia_host_f2i<type>(floorf(x)); } \
    static inline type name##_ru(float x) { return ia_host_f2i<type>(ceilf(x)); }
IA_HOST_F2I(int, __float2int)
IA_HOST_F2I(unsigned, __float2uint)
IA_HOST_F2I(long long, __float2ll)
IA_HOST_F2I(unsigned long long, __float2ull)
#undef IA_HOST_F2I

/* integer -> float, rounded to nearest even (the host's default rounding mode). */
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline float __ull2float_rn(unsigned long long x) { return (float)x; }

/* Single operations with their rounding named: IEEE's, rounded to nearest even. */
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fsub_rn(float x, float y) { return x - y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fdiv_rn(float x, float y) { return x / y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __saturatef(float x) { return fminf(fmaxf(x, 0.0f), 1.0f); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

/* Bits of integers (the GPU's __clz of 0 is 32, where the compiler's builtin is undefined). */
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
    unsigned r = 0u;
    for (int b = 0; b < 32; ++b) r |= ((x >> b) & 1u) << (31 - b);
    return r;
}
static inline int __mulhi(int x, int y) { return (int)(((long long)x * y) >> 32); }
static inline unsigned __umulhi(unsigned x, unsigned y) { return (unsigned)(((unsigned long long)x * y) >> 32); }
static inline long long __mul64hi(long long x, long long y) { return (long long)(((__int128)x * y) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
    return (unsigned long long)(((unsigned __int128)x * y) >> 64);
}
template <class T> static inline T __ldg(const T* p) { return *p; }

/* Byte permutation as CUDA documents __byte_perm: output byte i is byte (s >> 4i) & 7 of the pair (y:x);
   the selector nibble's bit 3 is ignored. */
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long pair = ((unsigned long long)y << 32) | x;
    unsigned r = 0u;
    for (int i = 0; i < 4; ++i) { /* CUDA's intrinsic reads 3 bits of each nibble: no sign replication */
        const unsigned selector = (s >> (4 * i)) & 7u;
        r |= ((unsigned)(pair >> (8 * selector)) & 0xFFu) << (8 * i);
    }
    return r;
}

/* A warp of one thread: every lane a shuffle can name is the caller itself, so it reads its own value
   (kernels bound their shuffle steps by blockDim.x, so one thread takes none). */
template <class T> static inline T __shfl_xor_sync(unsigned, T value, int, int = 32) { return value; }

/* CUDA's approximate intrinsics: their error on the GPU cannot be reproduced here, so a kernel using one
   fails to build (glibc declares exact functions of the same names, which would pass it silently). */
#define __expf ia_host_refuses_the_approximate_intrinsic
#define __exp10f ia_host_refuses_the_approximate_intrinsic
#define __logf ia_host_refuses_the_approximate_intrinsic
#define __log2f ia_host_refuses_the_approximate_intrinsic
#define __log10f ia_host_refuses_the_approximate_intrinsic
#define __sinf ia_host_refuses_the_approximate_intrinsic
#define __cosf ia_host_refuses_the_approximate_intrinsic
#define __sincosf ia_host_refuses_the_approximate_intrinsic
#define __tanf ia_host_refuses_the_approximate_intrinsic
#define __powf ia_host_refuses_the_approximate_intrinsic
#define __fdividef ia_host_refuses_the_approximate_intrinsic

/* CUDA's min and max: of floats they ignore a NaN operand (fminf / fmaxf), of integers they compare. */
template <class A, class B> static inline typename std::common_type<A, B>::type min(A x, B y) {
    typedef typename std::common_type<A, B>::type T;
    if constexpr (std::is_floating_point<T>::value) return fmin((T)x, (T)y);
    else return (T)y < (T)x ? (T)y : (T)x;
}
template <class A, class B> static inline typename std::common_type<A, B>::type max(A x, B y) {
    typedef typename std::common_type<A, B>::type T;
    if constexpr (std::is_floating_point<T>::value) return fmax((T)x, (T)y);
    else return (T)x < (T)y ? (T)y : (T)x;
}
"""


class HostCompileError(Exception):
    """A kernel's source that the host compiler refused (its message included)."""


@functools.cache
def compiler() -> str | None:
    """The host C++ compiler, None where there is none."""
    return shutil.which("g++") or shutil.which("c++")


@functools.cache
def _identity() -> str:
    found = compiler()
    if found is None:
        raise HostCompileError(NO_COMPILER)
    done = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    return found + "\n" + done.stdout.splitlines()[0]


def entries(source: str) -> tuple[str, ...]:
    """The kernels' entry points a source defines (its ``extern "C" __global__`` functions)."""
    return tuple(dict.fromkeys(ENTRY.findall(source)))


def translation_unit(source: str) -> str:
    """What the host compiler builds for ``source``: the shim, the source, and per entry point a C
    function taking the argument block by address (the kernel takes it by value)."""
    wrappers = "".join(
        f'extern "C" void {WRAPPER_PREFIX}{name}(const IaArgs* a) {{ {name}(*a); }}\n' for name in entries(source)
    )
    return SHIM + source + "\n" + wrappers


def _key(source: str) -> str:
    text = "\0".join([SHIM, source, _identity(), *FLAGS])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def library_path(source: str) -> Path:
    """Where ``source``'s host library is cached."""
    return CACHE / f"{_key(source)}.so"


@contextlib.contextmanager
def _locked(path: Path, wait: bool) -> Iterator[bool]:
    """Holds ``path``'s lock file while inside; yields False (without the lock) when ``wait`` is False
    and another process holds it."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _compile(source: str, library: Path) -> None:
    unit = library.with_suffix(".cu")
    temporary = library.with_name(f"{library.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    unit.write_text(translation_unit(source))
    command = [str(compiler()), *FLAGS, "-o", str(temporary), str(unit)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        temporary.unlink(missing_ok=True)
        names = ", ".join(entries(source)) or "no entry point"
        raise HostCompileError(f"the host compiler refused {names} ({unit}):\n{done.stderr.strip()}")
    os.replace(temporary, library)  # whole or absent: a reader never sees a half-written library


_FAILED: dict[str, str] = {}  # source -> the compiler's message, so a refused source is compiled once


def _build_one(source: str, wait: bool) -> bool:
    """Compile ``source`` unless it is cached; False when another process holds it (``wait`` False)."""
    if source in _FAILED:
        raise HostCompileError(_FAILED[source])
    library = library_path(source)
    if library.exists():
        return True
    with _locked(library, wait) as held:
        if not held:
            return False
        if not library.exists():
            try:
                _compile(source, library)
            except HostCompileError as exc:
                _FAILED[source] = str(exc)
                raise
    return True


def build(sources: Iterable[str], jobs: int | None = None) -> dict[str, str]:
    """Compile every source of ``sources`` not yet cached, ``jobs`` at a time (the machine's cores).
    Returns the refused ones, source -> the compiler's message; :func:`load` raises it again."""
    unique = list(dict.fromkeys(sources))
    failed = {s: _FAILED[s] for s in unique if s in _FAILED}
    pending = [s for s in unique if s not in failed and not library_path(s).exists()]

    def attempt(source: str, wait: bool) -> bool:
        try:
            return _build_one(source, wait)
        except HostCompileError as exc:
            failed[source] = str(exc)
            return True

    with concurrent.futures.ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
        # First what no other process is compiling, then wait for what they were.
        held = list(pool.map(lambda s: attempt(s, False), pending))
        list(pool.map(lambda s: attempt(s, True), [s for s, done in zip(pending, held, strict=True) if not done]))
    return failed


class HostKernel:
    """One entry point of a host library: called with the address of a packed ``IaArgs``."""

    def __init__(self, name: str, function: Any) -> None:
        self.name = name
        self._function = function

    def __call__(self, block: int) -> None:
        self._function(ctypes.c_void_p(block))


class HostModule:
    """One source's host library and its entry points."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.entries = entries(source)
        _build_one(source, wait=True)
        self.path = library_path(source)
        self._library = ctypes.CDLL(str(self.path))

    def function(self, name: str) -> HostKernel | None:
        """The entry point ``name``; None when the source defines no such kernel."""
        if name not in self.entries:
            return None
        function = getattr(self._library, WRAPPER_PREFIX + name)
        function.argtypes, function.restype = [ctypes.c_void_p], None
        return HostKernel(name, function)


_MODULES: dict[str, HostModule] = {}
_MODULES_LOCK = threading.Lock()


def load(source: str) -> HostModule:
    """``source``'s host module, compiled if need be (HostCompileError when the compiler refuses it),
    loaded once per process."""
    with _MODULES_LOCK:
        found = _MODULES.get(source)
    if found is None:
        found = HostModule(source)
        with _MODULES_LOCK:
            found = _MODULES.setdefault(source, found)
    return found


__all__ = [
    "CACHE",
    "FLAGS",
    "NO_COMPILER",
    "SHIM",
    "HostCompileError",
    "HostKernel",
    "HostModule",
    "build",
    "compiler",
    "entries",
    "library_path",
    "load",
    "translation_unit",
]
