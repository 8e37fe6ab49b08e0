"""The twelve accelerator families IronAccel knows how to discover."""

from __future__ import annotations

import enum


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
        """Accept the canonical name, any case, and `_` for `-` (``level_zero``)."""
        key = name.strip().lower().replace("_", "-")
        for kind in cls:
            if kind.value == key:
                return kind
        known = ", ".join(k.value for k in cls)
        raise ValueError(f"unknown accelerator family {name!r}; known: {known}")

    def __str__(self) -> str:
        return self.value
