"""The Vulkan backend: TOSA 1.0 programs as compute dispatches on any Vulkan 1.3 device.

Design (ADR 0008 gives the reasons and the alternatives):

1. **Availability is a reason, never an ImportError.** No `vulkan` package, no loader, no usable
   Vulkan 1.3 device, or ``IRONACCEL_VULKAN=0``: :func:`open_accelerator` raises
   :class:`~ironaccel.core.errors.Unsupported` saying which.
2. **Software devices only on request.** lavapipe / SwiftShader are chosen when the selector names
   them (``"llvmpipe"``, ``"lavapipe"``, an index, a UUID) or when nothing else exists, and are marked
   ``software`` so ``ironaccel.open("auto")`` still prefers the CPU backend to them.
3. **Buffers are dedicated allocations, Host and Shared persistently mapped** (write/read are a memcpy);
   Device memory is mapped where the device has host-visible device-local memory and staged otherwise.
4. **A program is planned once**: one arena laid out by the shared liveness analysis (RESHAPE /
   IDENTITY as views), constants uploaded once, and the whole graph recorded ONCE into one command
   buffer, with buffer barriers only where a step reads or overwrites what an earlier one touched.
5. **Submission is one vkQueueSubmit2 into a bounded ring** (copy-in, the program, copy-out, a fence);
   a full ring is Busy. Buffers bound again and again replay a recording whose kernels use them
   directly (:mod:`.direct`: no copies). No worker thread: completion is observed through the fences
   when the runtime polls or waits.
6. **Shaders are GLSL written here, compiled to SPIR-V that is checked in** (``scripts/build-shaders``);
   shapes reach kernels as push constants, operator codes as specialization constants. Nothing a user
   sends reaches a shader compiler.
7. **Numerics are the FP32 tier's, within TOSA's bounds**: the transcendental functions are written out
   (``shaders/include/math.glsl``) instead of trusting Vulkan's loose built-ins, and kernels keep NaN,
   infinities and signed zeros (SignedZeroInfNanPreserve). The CPU backend is the oracle in the tests.
8. **fp16 and bf16 are stored, not computed**: the FP16 and BF16 tiers widen operands exactly, run the
   fp32 kernels and round once, with integer conversion code (``shaders/include/fp16.glsl``,
   ``bf16.glsl``, ``ops/widening.py``), so every device gives the same bits without shaderFloat16.

Layout, by the roles every backend has:

- :mod:`.registration`: the entry point's registration, saying why Vulkan cannot be used without opening a device.
- :mod:`.device`: choosing the physical device and opening the VkDevice with its one compute queue.
- :mod:`.accelerator`: the Accelerator that joins the roles below behind the execution contract.
- :mod:`.memory`: buffers, one dedicated allocation each, mapped or staged by memory domain.
- :mod:`.program` (laid out by :mod:`.plan`): a loaded program's arena, constants and recorded graph.
- :mod:`.submit`: the submission ring of a contract queue: slots, fences, copies in and out.
- :mod:`.launcher`: prepared submissions, and the completion route each launch takes.
- :mod:`.recording`: recording command buffers, from one barrier or copy to a program's whole graph.
- :mod:`.direct`: recordings bound to the caller's buffers, replayed with no copies.
- :mod:`.kernels`: the checked-in SPIR-V and the compute pipelines made from it.
- :mod:`.capability`: the capability descriptor, derived from what :mod:`.ops` registers.
- :mod:`.ops`: the lowerings, one module per operator group of the specification.

Beside them: :mod:`.binding` (the `vulkan` package, and its results as errors), :mod:`.instance` (the
process's VkInstance), :mod:`.nvfp4` (NVFP4 projections) and :mod:`.statistics` (what each kernel
compiled into, on a device opened asking for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.errors import Unsupported
from ...core.settings import Settings

if TYPE_CHECKING:
    from .accelerator import VulkanAccelerator


def open_accelerator(
    selector: str | int | None = None,
    *,
    settings: Settings | None = None,
    staging: bool = False,
    pipeline_statistics: bool = False,
    **kwargs: Any,
) -> VulkanAccelerator:
    """An accelerator on the Vulkan device ``selector`` names (see :func:`.device.choose`): None for the
    best hardware device (a software one only if nothing else exists), an index, a UUID, ``"lavapipe"``
    / ``"llvmpipe"`` or part of a device name. ``staging`` routes Device-domain buffers through a staging
    copy even where they could be mapped (to exercise that path). ``pipeline_statistics`` has the driver
    keep what it compiled each kernel into, where it can (``pipeline_statistics()``, :mod:`.statistics`).
    Raises Unsupported with the reason when Vulkan cannot be used."""
    settings = settings if settings is not None else Settings.from_env()
    if "vulkan" in settings.disabled:
        raise Unsupported("the Vulkan backend is switched off (IRONACCEL_VULKAN=0)")
    from . import device as device_mod
    from .accelerator import VulkanAccelerator
    from .instance import instance

    inst = instance()
    physical = device_mod.choose(device_mod.describe_all(inst), selector)
    return VulkanAccelerator(
        inst,
        physical,
        staging=staging,
        pipeline_statistics=pipeline_statistics,
        **kwargs,
    )


def available(settings: Settings | None = None) -> str | None:
    """None when :func:`open_accelerator` could open some device, else the reason it could not."""
    settings = settings if settings is not None else Settings.from_env()
    if "vulkan" in settings.disabled:
        return "the Vulkan backend is switched off (IRONACCEL_VULKAN=0)"
    try:
        from . import device as device_mod
        from .instance import instance

        device_mod.choose(device_mod.describe_all(instance()), None)
    except Unsupported as exc:
        return str(exc)
    return None


__all__ = ["available", "open_accelerator"]
