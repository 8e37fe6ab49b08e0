"""Shared memory for the transport: a sealed memfd, mapped by the guest and by the daemon.

The guest creates the memfd, sizes it, and seals it against shrinking and growing before it hands the
descriptor over. The daemon maps only what it can trust not to vanish: it requires the shrink seal
(a guest that truncated a mapped file would kill the daemon with SIGBUS on its next access), checks
the file's size against the region before mapping it, and maps nothing beyond the host's bound.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import stat

from ..core.errors import OutOfBounds, ResourceLimit
from .transport import ProtocolError, RegionDesc

SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class SharedRegion:
    """One mapping of a memfd. ``view`` is the whole mapping; ``close`` unmaps and closes."""

    def __init__(self, fd: int, size: int, mapping: mmap.mmap) -> None:
        self.fd = fd
        self.size = size
        self.mapping = mapping
        self.view = memoryview(mapping)

    @classmethod
    def create(cls, size: int, name: str = "ironaccel-virtio") -> SharedRegion:
        """A new zeroed, sealed memfd of ``size`` bytes (a multiple of the page size), mapped here."""
        if size <= 0 or size % mmap.PAGESIZE:
            raise OutOfBounds(f"shared region size {size} must be a positive multiple of {mmap.PAGESIZE}")
        fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
            mapping = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, size, mapping)

    @classmethod
    def attach(cls, fd: int, region: RegionDesc, max_bytes: int) -> SharedRegion:
        """Map a region a guest sent. Takes ownership of ``fd`` (closed on failure too)."""
        try:
            if not 0 < region.size <= max_bytes:
                raise ResourceLimit(f"memory region of {region.size} bytes; this daemon maps 1 to {max_bytes}")
            if region.mmap_offset % mmap.ALLOCATIONGRANULARITY:
                raise ProtocolError(f"mmap offset {region.mmap_offset:#x} is not page aligned")
            if region.guest_addr + region.size > 1 << 64 or region.user_addr + region.size > 1 << 64:
                raise ProtocolError("memory region wraps the 64-bit address space")
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ProtocolError("memory region descriptor is not a memfd")
            try:
                seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            except OSError:
                seals = 0
            if not seals & fcntl.F_SEAL_SHRINK:
                raise ProtocolError("memory region memfd must be sealed against shrinking (F_SEAL_SHRINK)")
            if region.mmap_offset + region.size > info.st_size:
                end = region.mmap_offset + region.size
                raise ProtocolError(f"memory region ends at file offset {end:#x}; the file has {info.st_size} bytes")
            mapping = mmap.mmap(
                fd, region.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=region.mmap_offset
            )
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, region.size, mapping)

    def close(self) -> None:
        try:
            self.view.release()
            self.mapping.close()
        except BufferError:
            pass  # a slice is still referenced somewhere; the mapping goes when the last one does
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
