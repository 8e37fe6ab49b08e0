"""Which device of its node a replica opens, decided on the node itself.

Ray's custom resources are counts without identities: two replicas each granted ``ironaccel_vulkan: 1`` on
a node with two GPUs are not told which GPU is theirs. Each replica therefore claims a *slot* on its node:
an exclusive ``flock`` on a file named after the node, the backend, the device and the slot. The kernel
drops the lock when the process ends, however it ends (``ray.kill``, a crash), so a slot is free again
exactly when its holder is gone, with nothing to clean up. Slots go round the devices first, so replicas
spread over a node's devices before any two share one.

CPU replicas claim cores the same way and are pinned to theirs (``sched_setaffinity``): the CPU backend
splits large kernels over the cores its process may run on, so one core each makes N replicas N
independent single-threaded workers instead of N processes fighting over the same cores.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

from ..core.errors import ResourceLimit


class Claim:
    """A held slot: the open, locked file. ``release`` (or the end of the process) frees it."""

    def __init__(self, fd: int | None, path: Path | None, index: int) -> None:
        self._fd = fd
        self.path = path
        self.index = index  # the device (or core) of the node's list this slot belongs to

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None


def _directory(node: str) -> Path:
    # One directory per Ray node: several nodes of one host (a test cluster) keep separate slots.
    path = Path(tempfile.gettempdir()) / f"ironaccel-cluster-{os.getuid()}" / node
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _try(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def claim(node: str, backend: str, devices: int, per_device: int = 1) -> Claim:
    """A free slot of ``backend`` on ``node``: ``devices`` devices with ``per_device`` slots each, device-major
    so replicas spread first. ResourceLimit when every slot is held (more replicas here than Ray was told
    the node has room for)."""
    directory = _directory(node)
    for slot in range(max(1, per_device)):
        for index in range(max(1, devices)):
            path = directory / f"{backend}-{index}-{slot}.lock"
            fd = _try(path)
            if fd is not None:
                return Claim(fd, path, index)
    raise ResourceLimit(
        f"every {backend} slot of node {node} is held ({devices} device(s) x {per_device} replica(s) each):"
        f" the node's ironaccel_{backend} resource is larger than its devices allow"
    )


def claim_core(node: str) -> tuple[Claim, int]:
    """A core of this process's affinity set for a one-thread CPU replica, and the core. When every core is
    held (a node advertising more CPU replicas than cores), the replica shares one and holds no lock."""
    cores = sorted(os.sched_getaffinity(0))
    directory = _directory(node)
    for index, core in enumerate(cores):
        fd = _try(directory / f"cpu-core-{core}.lock")
        if fd is not None:
            return Claim(fd, directory / f"cpu-core-{core}.lock", index), core
    index = os.getpid() % len(cores)
    return Claim(None, None, index), cores[index]


def pin(core: int) -> None:
    """Run the calling thread, and every thread it starts from now on, on ``core`` alone. Called before the
    device opens: the CPU backend's queue worker and kernel helpers are started from this thread, and Ray's
    own threads keep the node's other cores."""
    os.sched_setaffinity(0, {core})
