"""The `vulkan` cffi package (1.3.275), imported on first use, and the one place Vulkan results become errors.

The package dlopens the loader (libvulkan.so.1) when it is imported, so a missing package and a missing
loader both surface here, as :class:`~ironaccel.core.errors.Unsupported` with the reason; an ImportError
never reaches a user. Result codes map to the contract's closed vocabulary: device loss is DeviceLost
(the runtime then poisons the instance), exhausted memory or pools are OutOfMemory, everything else is a
NativeError that keeps the Vulkan code.
"""

from __future__ import annotations

import threading
from typing import Any

from ...core.errors import DeviceLost, IronAccelError, NativeError, OutOfMemory, Unsupported

_lock = threading.Lock()
_module: Any = None

VK_SUCCESS = 0
VK_NOT_READY = 1
VK_TIMEOUT = 2
_OUT_OF_MEMORY = {
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -12: "VK_ERROR_FRAGMENTED_POOL",
    -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY",
    -1000161000: "VK_ERROR_FRAGMENTATION",
}
_DEVICE_LOST = -4


def load() -> Any:
    """The imported ``vulkan`` module; Unsupported (with the reason) when it or the loader is missing."""
    global _module
    with _lock:
        if _module is None:
            try:
                import vulkan
            except ImportError:
                raise Unsupported(
                    "the `vulkan` Python package is not installed (pip install 'ironaccel[vulkan]')"
                ) from None
            except OSError as exc:  # raised by the package's dlopen of libvulkan.so.1
                raise Unsupported(f"Vulkan loader (libvulkan.so.1) not found: {exc}") from None
            _module = vulkan
        return _module


def result_error(code: int, what: str) -> IronAccelError:
    """The contract error for a failed Vulkan result ``code`` of the call ``what``."""
    if code == _DEVICE_LOST:
        return DeviceLost(f"{what}: VK_ERROR_DEVICE_LOST")
    if code in _OUT_OF_MEMORY:
        return OutOfMemory(f"{what}: {_OUT_OF_MEMORY[code]}")
    return NativeError("vulkan", code, what)


def check(code: int, what: str) -> None:
    """Raise the contract error for a Vulkan result other than VK_SUCCESS (for direct ``lib`` calls)."""
    if code != VK_SUCCESS:
        raise result_error(code, what)


def translate(exc: BaseException, what: str) -> IronAccelError:
    """The contract error for an exception the package raised (it raises one class per result code)."""
    vk = _module
    code = 0
    if vk is not None:
        for value, cls in vk.exception_codes.items():
            if type(exc) is cls:
                code = value
                break
    if code == 0:
        return NativeError("vulkan", -1, f"{what}: {type(exc).__name__}: {exc}")
    return result_error(code, f"{what} ({type(exc).__name__})")


def call(fn: Any, *args: Any, what: str = "") -> Any:
    """``fn(*args)`` from the package, with its exceptions turned into contract errors."""
    vk = load()
    try:
        return fn(*args)
    except (vk.VkError, vk.VkException) as exc:
        raise translate(exc, what or getattr(fn, "__name__", "vulkan call")) from None
