"""Compute pipelines: the checked-in SPIR-V, one shader module per shader and one pipeline per
(shader, specialization constants), created on first use and kept for the device's life.

Every pipeline layout is "N storage buffers in set 0 + 128 bytes of push constants" (128 is what every
Vulkan device guarantees); layouts are shared by binding count. Shapes and strides reach kernels as
push constants, so a pipeline serves every shape; specialization constants carry only the operator
code, the NaN mode and the workgroup size, a few dozen pipelines in all. The one exception is a large
MATMUL, which also compiles its shape in (ADR 0022). Nothing a user sends is ever
compiled: the SPIR-V comes from ``shaders/*.spv`` (``scripts/build-shaders``).
"""

from __future__ import annotations

import dataclasses
import struct
import threading
from importlib import resources
from typing import Any

from ...core.errors import InternalError, Unsupported
from . import binding, statistics
from .device import Device

PUSH_BYTES = 128
# Specialization constants that only compile a shape in (ADR 0022): each shader also reads its shape
# from push constants, where these are 0, with the same results. So past SHAPED_PIPELINES such
# pipelines per device, a request is served zeroed: programs with ever new large shapes (a hostile guest
# among them) cannot grow the cache, or the driver compiles, without bound.
SHAPE_CONSTANTS = {"matmul": range(7, 11), "matmul_coop": range(1, 4)}
SHAPED_PIPELINES = 64

_spirv_cache: dict[str, bytes] = {}
_spirv_lock = threading.Lock()


def spirv(name: str) -> bytes:
    """The compiled SPIR-V of ``shaders/<name>.spv`` (read once per process)."""
    with _spirv_lock:
        code = _spirv_cache.get(name)
        if code is None:
            path = resources.files(__package__).joinpath("shaders", f"{name}.spv")
            try:
                code = path.read_bytes()
            except FileNotFoundError:
                raise InternalError(
                    f"shader {name}.spv is missing from the package (run scripts/build-shaders)"
                ) from None
            if len(code) % 4 or code[:4] != b"\x03\x02\x23\x07":
                raise InternalError(f"shader {name}.spv is not SPIR-V")
            _spirv_cache[name] = code
        return code


@dataclasses.dataclass(frozen=True)
class Pipeline:
    handle: Any
    layout: Any
    set_layout: Any
    bindings: int


class Kernels:
    """The pipeline cache of one device (thread-safe)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.vk = device.vk
        self._lock = threading.Lock()
        self._modules: dict[str, Any] = {}
        self._layouts: dict[int, tuple[Any, Any]] = {}
        self._pipelines: dict[tuple[str, tuple[int, ...]], Pipeline] = {}
        self.shaped = 0  # pipelines made with a shape compiled in

    def pipeline(self, shader: str, spec: tuple[int, ...], bindings: int) -> Pipeline:
        with self._lock:
            shaped = [i for i in SHAPE_CONSTANTS.get(shader, ()) if i < len(spec) and spec[i]]
            if shaped and (shader, spec) not in self._pipelines and self.shaped >= SHAPED_PIPELINES:
                spec = tuple(0 if i in shaped else v for i, v in enumerate(spec))
                shaped = []
            key = (shader, spec)
            found = self._pipelines.get(key)
            if found is None:
                found = self._create(shader, spec, bindings)
                self._pipelines[key] = found
                self.shaped += bool(shaped)
            elif found.bindings != bindings:
                raise InternalError(f"shader {shader} used with {bindings} and {found.bindings} bindings")
            return found

    def _module(self, shader: str) -> Any:
        module = self._modules.get(shader)
        if module is None:
            vk = self.vk
            code = spirv(shader)
            info = vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code)
            module = binding.call(vk.vkCreateShaderModule, self.device.handle, info, None, what="vkCreateShaderModule")
            self._modules[shader] = module
        return module

    def _layout(self, bindings: int) -> tuple[Any, Any]:
        found = self._layouts.get(bindings)
        if found is None:
            vk, dev = self.vk, self.device.handle
            entries = [
                vk.VkDescriptorSetLayoutBinding(
                    binding=i,
                    descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                    descriptorCount=1,
                    stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                )
                for i in range(bindings)
            ]
            info = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=bindings, pBindings=entries)
            set_layout = binding.call(
                vk.vkCreateDescriptorSetLayout, dev, info, None, what="vkCreateDescriptorSetLayout"
            )
            push = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=PUSH_BYTES)
            layout_info = vk.VkPipelineLayoutCreateInfo(
                setLayoutCount=1, pSetLayouts=[set_layout], pushConstantRangeCount=1, pPushConstantRanges=[push]
            )
            layout = binding.call(vk.vkCreatePipelineLayout, dev, layout_info, None, what="vkCreatePipelineLayout")
            found = self._layouts[bindings] = (set_layout, layout)
        return found

    def _create(self, shader: str, spec: tuple[int, ...], bindings: int) -> Pipeline:
        vk, ffi = self.vk, self.vk.ffi
        set_layout, layout = self._layout(bindings)
        specialization = None
        if spec:
            data = ffi.new("char[]", struct.pack(f"<{len(spec)}I", *spec))
            entries = [vk.VkSpecializationMapEntry(constantID=i, offset=4 * i, size=4) for i in range(len(spec))]
            # dataSize in bytes: the package's default would count elements.
            specialization = vk.VkSpecializationInfo(
                mapEntryCount=len(spec), pMapEntries=entries, dataSize=4 * len(spec), pData=data
            )
        stage = vk.VkPipelineShaderStageCreateInfo(
            stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
            module=self._module(shader),
            pName="main",
            pSpecializationInfo=specialization,
        )
        flags = vk.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR if self.device.pipeline_statistics else 0
        info = vk.VkComputePipelineCreateInfo(flags=flags, stage=stage, layout=layout)
        handles = binding.call(
            vk.vkCreateComputePipelines, self.device.handle, None, 1, [info], None, what=f"pipeline {shader}{spec}"
        )
        return Pipeline(handles[0], layout, set_layout, bindings)

    def statistics(self) -> dict[str, list[statistics.Executable]]:
        """What the driver compiled each pipeline made so far into, keyed ``shader(spec, ...)``. Raises
        Unsupported unless the device was opened with ``pipeline_statistics`` and its driver can report."""
        if not self.device.pipeline_statistics:
            why = "it was opened without pipeline_statistics"
            if not self.device.physical.reports_pipelines:
                why = f"its driver lacks {statistics.EXTENSION}"
            raise Unsupported(f"{self.device.physical.name} does not report pipeline statistics: {why}")
        with self._lock:
            made = list(self._pipelines.items())
        return {f"{shader}{spec}": statistics.read(self.vk, self.device.handle, p.handle) for (shader, spec), p in made}

    def destroy(self) -> None:
        vk, dev = self.vk, self.device.handle
        with self._lock:
            for p in self._pipelines.values():
                vk.vkDestroyPipeline(dev, p.handle, None)
            for set_layout, layout in self._layouts.values():
                vk.vkDestroyPipelineLayout(dev, layout, None)
                vk.vkDestroyDescriptorSetLayout(dev, set_layout, None)
            for module in self._modules.values():
                vk.vkDestroyShaderModule(dev, module, None)
            self._pipelines.clear()
            self._layouts.clear()
            self._modules.clear()
