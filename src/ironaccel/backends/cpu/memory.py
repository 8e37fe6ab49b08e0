"""Buffers: allocation, write and read.

Every memory domain is host memory here, so each buffer is one zeroed numpy byte array: Host, Device and
Shared are all host-visible and directly bindable, and binding never copies. Freeing is dropping the array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import OutOfMemory
from ...runtime.accelerator import Accelerator
from ...runtime.types import BufferDesc, BufferInfo, MemoryDomain


class CpuMemory(Accelerator):
    """The buffer hooks of the CPU accelerator (one of its bases)."""

    def _allocate(self, context: Any, desc: BufferDesc) -> tuple[Any, BufferInfo]:
        try:
            backing = np.zeros(desc.size + desc.alignment, dtype=np.uint8)
        except MemoryError as exc:
            raise OutOfMemory(f"cannot allocate {desc.size} bytes of host memory") from exc
        # Align the start so views of any dtype are aligned as the caller asked.
        skip = (-backing.ctypes.data) % desc.alignment
        data = backing[skip : skip + desc.size]
        info = BufferInfo(desc.size, backing.nbytes, desc.alignment, MemoryDomain(desc.domain), True, True)
        return data, info

    def _write(self, native: np.ndarray, offset: int, data: memoryview) -> None:
        native[offset : offset + data.nbytes] = np.frombuffer(data, dtype=np.uint8)

    def _read(self, native: np.ndarray, offset: int, out: memoryview) -> None:
        np.frombuffer(out, dtype=np.uint8)[:] = native[offset : offset + out.nbytes]

    def _host_view(self, native: np.ndarray) -> memoryview:
        return memoryview(native)
