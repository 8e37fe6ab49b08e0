"""cuBLASLt through ctypes: the matrix products of MATMUL.

cuBLASLt is NVIDIA's own GEMM library, and the only one here that takes every type TOSA's MATMUL needs:
nvmath-python (which wraps it) refuses int8 operands, and a kernel of ours would not reach its speed. It
is bound the way the discovery probes bind drivers, with ctypes over the shared library, so the binding
costs no dependency beyond the library itself (the ``nvidia-cublas`` wheel, or a CUDA toolkit's copy).

A product is planned once, at program load (:class:`MatmulPlan`): its descriptor, the three matrix layouts
and the algorithm cuBLASLt's heuristic picks for them within the workspace the program owns. A run only
calls ``cublasLtMatmul`` on the stream, which a CUDA graph may capture (no allocation happens inside it).

Layouts: TOSA's operands are row-major (``A[batch, m, k]``, ``B[batch, k, n]``, ``D[batch, m, n]``). A
row-major matrix read as column-major is its transpose, so ``D = A B`` is computed as the column-major
``D^T = B^T A^T``. int8 and fp8 products run only with the first operand transposed (cuBLASLt's "TN"
form): for those the lowering hands over ``B`` already transposed (``Bt[batch, n, k]``), see
:mod:`.ops.matmul`.

fp32 products use ``CUBLAS_COMPUTE_32F``, never a TF32 compute type: TOSA's fp32 MATMUL needs fp32's
precision. Integer products accumulate in int32 (``CUBLAS_COMPUTE_32I``).
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import os
import sys
import threading
from typing import Any

from ...core.errors import InternalError, OutOfMemory, Unsupported

# cudaDataType_t
R_32F, R_16F, R_8I, R_32I, R_16BF, R_8F_E4M3 = 0, 2, 3, 10, 14, 28
# cublasComputeType_t
COMPUTE_32F, COMPUTE_32I = 68, 72
# cublasLtMatmulDescAttributes_t, cublasLtMatrixLayoutAttribute_t, cublasLtMatmulPreferenceAttributes_t
DESC_TRANSA, DESC_TRANSB = 3, 4
LAYOUT_BATCH_COUNT, LAYOUT_STRIDED_BATCH_OFFSET = 5, 6
PREF_MAX_WORKSPACE_BYTES = 1
OP_N, OP_T = 0, 1

WORKSPACE_BYTES = 32 << 20  # what a program with products keeps for cuBLASLt (Hopper's kernels ask up to this)

_STATUS = {
    0: "CUBLAS_STATUS_SUCCESS",
    1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}


class _HeuristicResult(ctypes.Structure):
    _fields_ = [
        ("algo", ctypes.c_uint64 * 8),
        ("workspace_size", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("waves_count", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


def _candidates() -> list[str]:
    """Where libcublasLt may be: IRONACCEL_CUBLASLT, the nvidia-cublas wheel's folders on sys.path, then the
    loader's own search (a CUDA toolkit's lib64 on LD_LIBRARY_PATH or in ld.so.cache)."""
    found = [os.environ["IRONACCEL_CUBLASLT"]] if os.environ.get("IRONACCEL_CUBLASLT") else []
    for entry in sys.path:
        for pattern in ("nvidia/cu13/lib/libcublasLt.so*", "nvidia/cublas/lib/libcublasLt.so*"):
            found += sorted(glob.glob(os.path.join(entry, pattern)), reverse=True)
    return [*found, "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"]


_lock = threading.Lock()
_library: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """libcublasLt, loaded once; Unsupported naming what was tried when no copy loads."""
    global _library
    with _lock:
        if _library is None:
            errors = []
            for path in _candidates():
                try:
                    _library = ctypes.CDLL(path)
                    break
                except OSError as exc:
                    errors.append(str(exc))
            else:
                raise Unsupported(
                    "cuBLASLt (libcublasLt), which runs MATMUL on CUDA devices, cannot be loaded: "
                    + "; ".join(errors[-2:])
                    + " (pip install nvidia-cublas, or set IRONACCEL_CUBLASLT to the library's path)"
                )
        return _library


def check(status: int, what: str) -> None:
    if status == 0:
        return
    name = _STATUS.get(status, f"status {status}")
    if status == 3:
        raise OutOfMemory(f"{what}: {name}")
    if status in (8, 15):
        raise Unsupported(f"{what}: {name}")
    raise InternalError(f"cuBLASLt {what} failed: {name}")


class Handle:
    """One cuBLASLt handle (a device's: made with its context current, destroyed with it)."""

    def __init__(self) -> None:
        self.lib = library()
        handle = ctypes.c_void_p()
        check(self.lib.cublasLtCreate(ctypes.byref(handle)), "cublasLtCreate")
        self.value = handle

    def destroy(self) -> None:
        if self.value:
            self.lib.cublasLtDestroy(self.value)
            self.value = ctypes.c_void_p()


@dataclasses.dataclass(frozen=True)
class Types:
    """The cudaDataType of A/B and of D, the compute type and the scale (alpha, beta) type."""

    operands: int
    result: int
    compute: int
    scale: int


class MatmulPlan:
    """One product ``D[batch, m, n] = A[batch, m, k] B[batch, k, n]`` (row-major; ``b_transposed``: B held
    as ``[batch, n, k]``): descriptor, layouts and algorithm, chosen for ``workspace_bytes``."""

    def __init__(
        self,
        handle: Handle,
        types: Types,
        batch: int,
        m: int,
        n: int,
        k: int,
        b_transposed: bool,
        workspace_bytes: int,
    ) -> None:
        self.lib = lib = handle.lib
        self.handle = handle
        self._made: list[tuple[Any, ctypes.c_void_p]] = []
        try:
            self.desc = self._make(
                lib.cublasLtMatmulDescCreate, lib.cublasLtMatmulDescDestroy, types.compute, types.scale
            )
            # Column-major D^T (n x m) = op(X) (n x k) times Y (k x m), X being B's bytes and Y A's.
            if b_transposed:  # B's bytes are Bt[n, k] row-major = column-major k x n: op T gives n x k
                self._set(lib.cublasLtMatmulDescSetAttribute, self.desc, DESC_TRANSA, OP_T)
                x = self._layout(types.operands, k, n, k, batch, n * k)
            else:  # B's bytes row-major [k, n] = column-major n x k
                x = self._layout(types.operands, n, k, n, batch, n * k)
            y = self._layout(types.operands, k, m, k, batch, m * k)
            d = self._layout(types.result, n, m, n, batch, m * n)
            self.layouts = (x, y, d)
            pref = self._make(lib.cublasLtMatmulPreferenceCreate, lib.cublasLtMatmulPreferenceDestroy)
            size = ctypes.c_uint64(workspace_bytes)
            check(
                lib.cublasLtMatmulPreferenceSetAttribute(
                    pref, PREF_MAX_WORKSPACE_BYTES, ctypes.byref(size), ctypes.sizeof(size)
                ),
                "cublasLtMatmulPreferenceSetAttribute",
            )
            result, count = _HeuristicResult(), ctypes.c_int(0)
            status = lib.cublasLtMatmulAlgoGetHeuristic(
                handle.value, self.desc, x, y, d, d, pref, 1, ctypes.byref(result), ctypes.byref(count)
            )
            if status != 0 or count.value == 0:
                raise Unsupported(
                    f"cuBLASLt has no algorithm for this product ({batch} x {m}x{k} by {k}x{n},"
                    f" types {types}): {_STATUS.get(status, status)}"
                )
            self.algo = result.algo
            self.workspace_bytes = int(result.workspace_size)
        except BaseException:
            self.destroy()
            raise
        one = (ctypes.c_int32 if types.scale == R_32I else ctypes.c_float)(1)
        zero = (ctypes.c_int32 if types.scale == R_32I else ctypes.c_float)(0)
        self.alpha, self.beta = one, zero

    def _make(self, create: Any, destroy: Any, *args: int) -> ctypes.c_void_p:
        out = ctypes.c_void_p()
        check(create(ctypes.byref(out), *[ctypes.c_int(a) for a in args]), create.__name__)
        self._made.append((destroy, out))
        return out

    def _set(self, setter: Any, obj: ctypes.c_void_p, attribute: int, value: int, kind: Any = ctypes.c_int32) -> None:
        v = kind(value)
        check(setter(obj, attribute, ctypes.byref(v), ctypes.sizeof(v)), setter.__name__)

    def _layout(self, dtype: int, rows: int, cols: int, ld: int, batch: int, stride: int) -> ctypes.c_void_p:
        lib = self.lib
        out = ctypes.c_void_p()
        status = lib.cublasLtMatrixLayoutCreate(
            ctypes.byref(out), ctypes.c_int(dtype), ctypes.c_uint64(rows), ctypes.c_uint64(cols), ctypes.c_int64(ld)
        )
        check(status, "cublasLtMatrixLayoutCreate")
        self._made.append((lib.cublasLtMatrixLayoutDestroy, out))
        if batch > 1:
            self._set(lib.cublasLtMatrixLayoutSetAttribute, out, LAYOUT_BATCH_COUNT, batch)
            self._set(lib.cublasLtMatrixLayoutSetAttribute, out, LAYOUT_STRIDED_BATCH_OFFSET, stride, ctypes.c_int64)
        return out

    def enqueue(self, a: int, b: int, d: int, workspace: int, stream: int) -> None:
        """``D = A B`` on ``stream`` (device addresses)."""
        x, y, dl = self.layouts
        status = self.lib.cublasLtMatmul(
            self.handle.value,
            self.desc,
            ctypes.byref(self.alpha),
            ctypes.c_void_p(b),
            x,
            ctypes.c_void_p(a),
            y,
            ctypes.byref(self.beta),
            ctypes.c_void_p(d),
            dl,
            ctypes.c_void_p(d),
            dl,
            ctypes.byref(self.algo),
            ctypes.c_void_p(workspace),
            ctypes.c_size_t(self.workspace_bytes),
            ctypes.c_void_p(stream),
        )
        check(status, "cublasLtMatmul")

    def destroy(self) -> None:
        while self._made:
            destroy, obj = self._made.pop()
            destroy(obj)


__all__ = ["WORKSPACE_BYTES", "Handle", "MatmulPlan", "Types", "check", "library"]
