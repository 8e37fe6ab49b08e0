"""One discovery probe per accelerator family, loaded lazily.

``FAMILIES`` is the single static table of families and the module that probes each. Nothing is
imported until a family is asked about, so building the default registry costs nothing; every probe
module exposes ``probe(settings) -> list[DeviceDescriptor]`` and raises ``Unavailable(reason)`` when its
runtime is absent.
"""

from __future__ import annotations

import importlib

from ..core import BackendKind, BackendRegistry, ProbedBackend, Settings, Unavailable, settings

FAMILIES: dict[BackendKind, str] = {
    BackendKind.CUDA: "cuda",
    BackendKind.ROCM: "rocm",
    BackendKind.METAL: "metal",
    BackendKind.QNN: "qnn",
    BackendKind.CPU: "cpu",
    BackendKind.VULKAN: "vulkan",
    BackendKind.OPENGL: "opengl",
    BackendKind.DX12: "dx12",
    BackendKind.WEBGPU: "webgpu",
    BackendKind.TPU: "tpu",
    BackendKind.LEVEL_ZERO: "level_zero",
    BackendKind.NEURON: "neuron",
}


def probe_backend(kind: BackendKind, config: Settings | None = None) -> ProbedBackend:
    """The discovery backend of one family, configured by ``config`` (default: the environment)."""
    cfg = config or settings
    module_name = FAMILIES[kind]

    def run():
        if kind.value in cfg.disabled:
            name = kind.value.upper().replace("-", "_")
            raise Unavailable(f"disabled by IRONACCEL_{name}=0")
        module = importlib.import_module(f"{__name__}.{module_name}")
        return module.probe(cfg)

    return ProbedBackend(kind, run)


def default_registry(config: Settings | None = None) -> BackendRegistry:
    """A registry holding the probes of all twelve families."""
    registry = BackendRegistry()
    for kind in FAMILIES:
        registry.register(probe_backend(kind, config))
    return registry
