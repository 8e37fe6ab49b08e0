"""Buffers: allocation, write and read (the only copies the contract makes).

* DEVICE: ``cuMemAlloc``, device memory the host reaches only through ``write_buffer`` / ``read_buffer``.
* HOST and SHARED: ``cuMemHostAlloc`` with ``DEVICEMAP | PORTABLE``: pinned host memory mapped into the
  device's address space. The host reads and writes it in place; the device reaches it over the bus.
  SHARED is pinned mapped memory rather than managed memory (``cuMemAllocManaged``) because a program's
  run copies its bound ranges into and out of its arena once: pinned memory makes those copies plain DMA
  with no page migration, and the host may touch it while other work runs on the device, which managed
  memory forbids on devices without concurrent managed access.

Every buffer starts zeroed, so nothing of a past owner shows through. ``write_buffer`` and
``read_buffer`` of DEVICE memory copy on the device's transfer stream and wait for the copy to finish
before returning (synchronous, as the contract's transfers are); they never use the legacy default stream,
whose implicit synchronisation would order them against every queue's work. A run copies a bound range on
its queue's stream, by its device address, whatever the domain.
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any

import numpy as np

from ...runtime.accelerator import Accelerator
from ...runtime.types import BufferDesc, BufferInfo, MemoryDomain
from .device import CudaDevice
from .driver import check

DEVICE_ALIGNMENT = 256  # what cuMemAlloc guarantees
HOST_ALIGNMENT = 4096  # what cuMemHostAlloc gives (whole pages)


@dataclasses.dataclass(eq=False)
class CudaBuffer:
    """One allocation: ``base`` is what the driver returned (and frees); ``device`` the aligned address
    the device uses, ``host`` the aligned host address (0 for DEVICE memory)."""

    device_ref: CudaDevice
    domain: MemoryDomain
    base: int
    device: int
    host: int
    size: int
    allocation_bytes: int

    def destroy(self) -> None:
        driver = self.device_ref.api
        if self.domain is MemoryDomain.DEVICE:
            driver.cuMemFree(self.base)
        else:
            driver.cuMemFreeHost(self.base)


def _address(view: memoryview) -> int:
    """The address of a contiguous buffer's first byte (read-only ones too)."""
    return int(np.frombuffer(view, dtype=np.uint8).ctypes.data)


def allocate(device: CudaDevice, desc: BufferDesc) -> CudaBuffer:
    """A zeroed buffer of ``desc`` on ``device`` (in use by the caller)."""
    driver = device.api
    domain = MemoryDomain(desc.domain)
    guaranteed = DEVICE_ALIGNMENT if domain is MemoryDomain.DEVICE else HOST_ALIGNMENT
    extra = desc.alignment if desc.alignment > guaranteed else 0
    total = desc.size + extra
    if domain is MemoryDomain.DEVICE:
        base = int(check(driver.cuMemAlloc(total), f"cuMemAlloc({total})"))
        device_address, host = base, 0
        try:
            check(driver.cuMemsetD8Async(base, 0, total, device.transfer_stream), "cuMemsetD8Async")
            device.synchronize("zeroing a new buffer")
        except BaseException:
            driver.cuMemFree(base)
            raise
    else:
        flags = int(driver.CU_MEMHOSTALLOC_DEVICEMAP) | int(driver.CU_MEMHOSTALLOC_PORTABLE)
        base = int(check(driver.cuMemHostAlloc(total, flags), f"cuMemHostAlloc({total})"))
        try:
            ctypes.memset(base, 0, total)
            device_address = int(check(driver.cuMemHostGetDevicePointer(base, 0), "cuMemHostGetDevicePointer"))
        except BaseException:
            driver.cuMemFreeHost(base)
            raise
        host = base
    shift = -base % desc.alignment if extra else 0
    return CudaBuffer(device, domain, base, device_address + shift, host + shift if host else 0, desc.size, total)


class CudaMemory(Accelerator):
    """The buffer hooks of the CUDA accelerator (one of its bases)."""

    device: CudaDevice

    def _allocate(self, context: Any, desc: BufferDesc) -> tuple[CudaBuffer, BufferInfo]:
        with self.device.use():
            buffer = allocate(self.device, desc)
        try:
            self.device.adopt("buffer", buffer)
        except BaseException:
            buffer.destroy()
            raise
        alignment = max(desc.alignment, DEVICE_ALIGNMENT)
        visible = buffer.domain is not MemoryDomain.DEVICE
        return buffer, BufferInfo(desc.size, buffer.allocation_bytes, alignment, buffer.domain, visible, False)

    def _write(self, native: CudaBuffer, offset: int, data: memoryview) -> None:
        if not data.nbytes:
            return
        if native.host:
            ctypes.memmove(native.host + offset, _address(data), data.nbytes)
            return
        with self.device.use() as driver:
            stream = self.device.transfer_stream
            check(driver.cuMemcpyHtoDAsync(native.device + offset, _address(data), data.nbytes, stream), "write")
            self.device.synchronize("write_buffer")

    def _read(self, native: CudaBuffer, offset: int, out: memoryview) -> None:
        if not out.nbytes:
            return
        if native.host:
            ctypes.memmove(_address(out), native.host + offset, out.nbytes)
            return
        with self.device.use() as driver:
            stream = self.device.transfer_stream
            check(driver.cuMemcpyDtoHAsync(_address(out), native.device + offset, out.nbytes, stream), "read")
            self.device.synchronize("read_buffer")

    def _free(self, native: CudaBuffer) -> None:
        self.device.release("buffer", native)
