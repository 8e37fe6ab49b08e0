"""The CUDA driver API as the backend reaches it: ``cuda.bindings`` imported on first use, and :func:`check`,
the one place a ``CUresult`` becomes an error of ``core.errors``.

Every call of ``cuda.bindings.driver`` returns its ``CUresult`` first, followed by what it produces. The
backend hands that whole tuple to :func:`check`, which returns the produced values and raises on failure:

* out of memory -> OutOfMemory;
* an invalid value -> InvalidArgument;
* a fault that leaves the context unusable (a failed launch, an illegal address or instruction, an
  uncorrectable ECC error, a lost or deinitialised device) -> DeviceLost;
* no device, an unsupported operation, a stub library or a driver too old -> Unsupported;
* anything else -> NativeError of the domain ``cuda`` with its code and name.

Errors are classified by their ``CUresult`` names, so this table needs no import of the binding.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ...core.errors import DeviceLost, InvalidArgument, IronAccelError, NativeError, OutOfMemory, Unsupported

EXTRA = "pip install 'ironaccel[cuda]'"  # what installs cuda-bindings and NVRTC

_OUT_OF_MEMORY = frozenset({"CUDA_ERROR_OUT_OF_MEMORY"})
_INVALID = frozenset({"CUDA_ERROR_INVALID_VALUE"})
# After these the context is unusable: every later call returns the same error (a "sticky" fault).
_LOST = frozenset(
    {
        "CUDA_ERROR_LAUNCH_FAILED",
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        "CUDA_ERROR_INVALID_PC",
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "CUDA_ERROR_ASSERT",
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "CUDA_ERROR_CONTAINED",
        "CUDA_ERROR_DEINITIALIZED",
        "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        "CUDA_ERROR_DEVICE_UNAVAILABLE",
        "CUDA_ERROR_DEVICE_NOT_LICENSED",
    }
)
_UNSUPPORTED = frozenset(
    {
        "CUDA_ERROR_NO_DEVICE",
        "CUDA_ERROR_NOT_SUPPORTED",
        "CUDA_ERROR_STUB_LIBRARY",
        "CUDA_ERROR_INSUFFICIENT_DRIVER",
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        "CUDA_ERROR_NO_BINARY_FOR_GPU",
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    }
)


def api() -> ModuleType:
    """``cuda.bindings.driver``; Unsupported, naming the extra that installs it, where it is missing."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise Unsupported(f"the CUDA backend needs cuda-bindings ({EXTRA}): {exc}") from exc
    return driver


def nvrtc_api() -> ModuleType:
    """``cuda.bindings.nvrtc`` (the runtime compiler's binding); Unsupported where it is missing."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise Unsupported(f"the CUDA backend needs cuda-bindings and NVRTC ({EXTRA}): {exc}") from exc
    return nvrtc


def error(code: int, name: str, what: str) -> IronAccelError:
    """The error of ``core.errors`` for the CUresult ``code`` (``name``) returned by ``what``."""
    message = f"{what}: {name} ({code})"
    if name in _OUT_OF_MEMORY:
        return OutOfMemory(message)
    if name in _INVALID:
        return InvalidArgument(message)
    if name in _LOST:
        return DeviceLost(message)
    if name in _UNSUPPORTED:
        return Unsupported(message)
    return NativeError("cuda", code, f"{what}: {name}")


def check(result: Any, what: str) -> Any:
    """The values a driver call produced (None, one value, or a tuple of them), from ``result``: the call's
    return, a ``CUresult`` alone or followed by its values. Raises the error :func:`error` maps a failure
    to; ``what`` names the call in its message."""
    if isinstance(result, tuple):
        status, values = result[0], result[1:]
    else:
        status, values = result, ()
    code = int(status)
    if code:
        raise error(code, getattr(status, "name", f"CUresult {code}"), what)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def status_name(result: Any) -> str:
    """The name of the CUresult a call returned (its first element when it returned a tuple)."""
    status = result[0] if isinstance(result, tuple) else result
    return getattr(status, "name", f"CUresult {int(status)}")


__all__ = ["EXTRA", "api", "check", "error", "nvrtc_api", "status_name"]
