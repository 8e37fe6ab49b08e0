"""The device: the host itself, its identity and limits, and the one process-wide setting a CPU device needs
(the allocator's, :func:`tune_allocator`).

There is one CPU device and nothing to open: every memory domain is host memory and there are no limits
beyond the host's.
"""

from __future__ import annotations

import ctypes
import os
import platform

from ...runtime.types import DeviceInfo, Limits

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_allocator_tuned = False


def device_info() -> DeviceInfo:
    """The host as a device: its architecture and thread count, no limits of its own."""
    return DeviceInfo(
        name=f"CPU ({platform.machine()}, {os.cpu_count()} threads)",
        kind="cpu",
        vendor="host",
        cancellation=True,
        limits=Limits(),
    )


def tune_allocator() -> None:
    """Keep freed blocks of up to 32 MiB in the heap for reuse (glibc only; once per process).

    Every call through the user API allocates fresh host arrays for its outputs (the read-back bytearray
    and the returned numpy array). glibc serves blocks above its mmap threshold with new mappings and
    unmaps them on free, so each call faulted in every page again: about 3000 page faults, 6 ms, for a
    12.8 MB output whose computation takes 2 ms. A fixed 32 MiB threshold (glibc's largest) and a
    trim threshold above it let the same blocks be reused. The cost is that up to that much freed memory
    stays with the process. Set IRONACCEL_CPU_MALLOC=default to leave the allocator alone.
    """
    global _allocator_tuned
    if _allocator_tuned or os.environ.get("IRONACCEL_CPU_MALLOC", "") == "default":
        return
    _allocator_tuned = True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 128 << 20)
