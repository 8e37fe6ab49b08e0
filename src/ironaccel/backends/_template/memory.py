"""Buffers: allocation, write and read (the only copies the contract makes).

Here every memory domain is host memory: a buffer is a zeroed numpy byte array, aligned as asked, that the
host reads and writes directly and a program binds in place. A device with memory of its own allocates each
domain where the contract says (DEVICE: device-local; HOST: host memory the device reaches; SHARED: one
allocation both see) and reports in BufferInfo what it really made.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import OutOfMemory
from ...runtime.accelerator import Accelerator
from ...runtime.types import BufferDesc, BufferInfo, MemoryDomain


class TemplateMemory(Accelerator):
    """The buffer hooks of the template's accelerator (one of its bases)."""

    def _allocate(self, context: Any, desc: BufferDesc) -> tuple[Any, BufferInfo]:
        # TODO(backend): allocate device memory of ``desc.domain`` (mapping HOST and SHARED allocations, and
        # DEVICE ones where the device has host-visible device-local memory); OutOfMemory when the driver
        # has none left. The BufferInfo says what was made: its real size (counted against quotas),
        # whether the host sees it (else write and read stage through a copy) and whether a program binds it
        # directly.
        try:
            backing = np.zeros(desc.size + desc.alignment, dtype=np.uint8)  # zeroed: nothing of a past owner
        except MemoryError as exc:
            raise OutOfMemory(f"cannot allocate {desc.size} bytes of host memory for a buffer") from exc
        start = -backing.ctypes.data % desc.alignment
        view = backing[start : start + desc.size]  # keeps ``backing`` alive
        info = BufferInfo(desc.size, backing.nbytes, desc.alignment, MemoryDomain(desc.domain), True, True)
        return view, info

    def _write(self, native: np.ndarray, offset: int, data: memoryview) -> None:
        # TODO(backend): a mapped buffer is a memcpy (and a flush where the memory is not coherent); an
        # unmapped one is written through a staging buffer and a copy command the call waits for.
        memoryview(native)[offset : offset + data.nbytes] = data

    def _read(self, native: np.ndarray, offset: int, out: memoryview) -> None:
        # TODO(backend): the reverse of _write (an invalidate before reading non-coherent mapped memory).
        out[:] = memoryview(native)[offset : offset + out.nbytes]

    def _free(self, native: np.ndarray) -> None:
        # TODO(backend): free the device memory (the runtime frees a buffer only when no work binds it).
        pass
