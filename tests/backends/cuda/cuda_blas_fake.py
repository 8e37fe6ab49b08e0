"""A stand-in for cuBLASLt (``ironaccel.backends.cuda.blas``) beside the stand-in driver: products computed
with numpy on the fake's memory, so programs with MATMUL run through the backend without a GPU.

It keeps what the backend relies on: a plan is made at load for fixed shapes, types and operand forms (B
as stored, or transposed for the integer "TN" form) and refuses what cuBLASLt would (a zero extent); a run
reads A and B where the fake's allocations hold them (the driver's range checks) and writes D. Integer
products are exact in int64 and wrapped to int32; float ones accumulate in float64 and round once to D's
type, within the accumulated-sum tolerance the suites use for a library GEMM.
"""

from __future__ import annotations

import ctypes
from typing import Any

import ml_dtypes
import numpy as np

from ironaccel.backends.cuda import blas
from ironaccel.core.errors import Unsupported

NUMPY = {blas.R_32F: np.float32, blas.R_16F: np.float16, blas.R_16BF: ml_dtypes.bfloat16, blas.R_8I: np.int8,
         blas.R_32I: np.int32, blas.R_8F_E4M3: ml_dtypes.float8_e4m3fn}  # fmt: skip


class FakeHandle:
    def __init__(self, driver: Any) -> None:
        self.driver = driver

    def destroy(self) -> None:
        pass


class FakeMatmulPlan:
    def __init__(self, handle: FakeHandle, types: blas.Types, batch: int, m: int, n: int, k: int,
                 b_transposed: bool, workspace_bytes: int) -> None:  # fmt: skip
        if min(batch, m, n, k) <= 0:
            raise Unsupported(f"cuBLASLt has no algorithm for this product ({batch} x {m}x{k} by {k}x{n})")
        if types.operands == blas.R_8F_E4M3 and not b_transposed:
            raise Unsupported("cuBLASLt's fp8 products take only the TN form")
        self.driver, self.types = handle.driver, types
        self.shape, self.b_transposed = (batch, m, n, k), b_transposed
        self.workspace_bytes = 0

    def _read(self, address: int, count: int, dtype: Any) -> np.ndarray:
        size = count * np.dtype(dtype).itemsize
        self.driver._range(address, size, ("device", "host"))
        return np.frombuffer(ctypes.string_at(address, size), dtype).copy()

    def enqueue(self, a: int, b: int, d: int, workspace: int, stream: int) -> None:
        batch, m, n, k = self.shape
        operands = NUMPY[self.types.operands]
        x = self._read(a, batch * m * k, operands).reshape(batch, m, k)
        y = self._read(b, batch * n * k, operands).reshape((batch, n, k) if self.b_transposed else (batch, k, n))
        if self.b_transposed:
            y = y.transpose(0, 2, 1)
        if self.types.compute == blas.COMPUTE_32I:
            exact = np.matmul(x.astype(np.int64), y.astype(np.int64))
            result = ((exact + 2**31) % 2**32 - 2**31).astype(np.int32)
        else:
            result = np.matmul(x.astype(np.float64), y.astype(np.float64)).astype(NUMPY[self.types.result])
        raw = np.ascontiguousarray(result).reshape(-1).view(np.uint8)
        self.driver._range(d, raw.size, ("device", "host"))
        ctypes.memmove(d, raw.ctypes.data, raw.size)

    def destroy(self) -> None:
        pass


def install(monkeypatch: Any, driver: Any) -> None:
    """cuBLASLt's handle and plans replaced by the numpy stand-ins, on ``driver``'s memory."""
    monkeypatch.setattr(blas, "Handle", lambda: FakeHandle(driver))
    monkeypatch.setattr(blas, "MatmulPlan", FakeMatmulPlan)
