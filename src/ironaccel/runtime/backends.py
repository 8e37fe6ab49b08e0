"""Where each execution backend lives: one static table, imported only when that backend is opened."""

from __future__ import annotations

import importlib
from typing import Any

from ..core.errors import InvalidArgument

# name -> "module:factory"; the factory takes the device selector (or None) and returns an Accelerator.
EXECUTION_BACKENDS: dict[str, str] = {
    "cpu": "ironaccel.backends.cpu.accelerator:CpuAccelerator",
    "vulkan": "ironaccel.backends.vulkan:open_accelerator",
    "virtio": "ironaccel.virtio.guest:open_accelerator",  # "virtio:PATH": a daemon's socket
}

# The order "auto" tries them in: hardware GPUs first, the CPU last.
AUTO_ORDER = ("vulkan", "cpu")


def factory(name: str) -> Any:
    try:
        target = EXECUTION_BACKENDS[name]
    except KeyError:
        known = ", ".join(sorted(EXECUTION_BACKENDS))
        raise InvalidArgument(f"no execution backend {name!r}; known: {known}, or 'auto'") from None
    module_name, attr = target.split(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr)
