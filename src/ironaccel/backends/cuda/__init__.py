"""The CUDA backend: TOSA programs as CUDA C kernels compiled by NVRTC, run through the CUDA driver API
(``cuda.bindings``, the ``[cuda]`` extra), registered as ``cuda`` (``ironaccel.open("cuda")``, ``"cuda:1"``,
``"cuda:<uuid>"``, ``"cuda:<part of the name>"``); ``auto`` tries it before Vulkan.

The roles, one module each, named as in every bundled backend:

- :mod:`.registration`: the registration (plain data, the entry point) and why no device can open here;
- :mod:`.device`: choosing and opening a device (its primary context), its identity, limits and domains,
  and tearing down what the backend made on it;
- :mod:`.accelerator`: the Accelerator joining the roles below, and the factory the registration names;
- :mod:`.memory`: buffers (device memory, pinned mapped host memory), write, read and free;
- :mod:`.program`: loading: plan, kernels, arena and constants, launches packed once;
- :mod:`.submit`: a stream and a worker thread per queue; runs end their events once the device is done;
- :mod:`.capability`: what ``load_program`` admits, derived from the operator table;
- ``ops/``: the lowerings, one module per TOSA operator group, in one table (``ops/registry.py``).

Beside them: :mod:`.driver` (the binding, imported on first use, and the one CUresult check),
:mod:`.plan` (the pure-Python lowering and memory plan), :mod:`.kernels` (NVRTC and module loading) and
:mod:`.prelude` (the CUDA C every kernel starts with: the fp16 / bf16 conversions and TOSA's arithmetic rules).

This first step runs elementwise operators (ADD, SUB, MUL, MAXIMUM, MINIMUM, ABS, NEGATE, EXP, LOG,
RECIPROCAL, RSQRT, TANH, SIGMOID, CLAMP, CAST) and the data nodes (CONST, CONST_SHAPE, IDENTITY, RESHAPE)
over fp32, fp16, bf16 and int32 (ADR 0034). Everything else is refused at load.

Design notes:

1. The runtime checks every public call before a hook runs (``runtime/hooks.py``); hooks trust their input
   and raise the errors of ``core/errors.py`` (``.driver.check`` maps every CUresult).
2. A program is refused when it is loaded, never when it is submitted: the descriptor is the operator
   table, and the plan refuses what the table cannot lower.
3. ``_submit`` never waits: the queue's worker runs the work and ends its event.
4. The only copies the contract sees are ``write_buffer`` and ``read_buffer``; a run copies the bound
   ranges into its arena and out of it on the device, so every launch is packed once, at load.

This package imports nothing itself: ``NAME``, ``REGISTRATION``, ``CudaAccelerator`` and ``open_accelerator``
are read from their modules when first asked for.
"""

from __future__ import annotations

from ...core.lazy import lazy_names

# Where each name the package offers lives; imported on first use, so importing the package stays cheap.
_LAZY = {
    "NAME": "registration",
    "REGISTRATION": "registration",
    "CudaAccelerator": "accelerator",
    "open_accelerator": "accelerator",
}
__getattr__, __dir__ = lazy_names(__name__, _LAZY)


__all__ = ["NAME", "REGISTRATION", "CudaAccelerator", "open_accelerator"]
