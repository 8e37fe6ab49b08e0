"""The twelve accelerator families IronAccel knows how to discover."""

from __future__ import annotations

import enum

from .errors import InvalidArgument


class BackendKind(enum.Enum):
    """An accelerator family. The value is the family's name on the command line and in JSON."""

    CUDA = "cuda"
    ROCM = "rocm"
    METAL = "metal"
    QNN = "qnn"
    CPU = "cpu"
    VULKAN = "vulkan"
    OPENGL = "opengl"
    DX12 = "dx12"
    WEBGPU = "webgpu"
    TPU = "tpu"
    LEVEL_ZERO = "level-zero"
    NEURON = "neuron"

    @classmethod
    def parse(cls, name: str) -> BackendKind:
        """Accept the canonical name, any case, and `_` for `-` (``level_zero``); InvalidArgument (a
        ValueError) naming every family otherwise."""
        key = name.strip().lower().replace("_", "-")
        for kind in cls:
            if kind.value == key:
                return kind
        known = ", ".join(k.value for k in cls)
        shown = name if len(name) <= 80 else name[:80] + "..."  # names come from users and files
        raise InvalidArgument(f"unknown accelerator family {shown!r}; known: {known}")

    def __str__(self) -> str:
        return self.value
