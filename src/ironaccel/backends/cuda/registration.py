"""The CUDA backend's registration (the entry point ``cuda`` of the group ``ironaccel.backends``), and its
answer to "why not here", given without opening a device.

Plain data (ADR 0030): the module imports only the runtime's registration type; :func:`why_not` imports
what it checks when it runs, and creates no CUDA context.
"""

from __future__ import annotations

from ...runtime.registration import BackendRegistration

# The name users open it by, and its devices' kind in DeviceInfo.
NAME = "cuda"
LIBRARY = "libcuda.so.1"  # the driver library the binding loads

REGISTRATION = BackendRegistration(
    name=NAME,
    open="ironaccel.backends.cuda.accelerator:open_accelerator",
    family="cuda",
    # Before Vulkan's 10: on NVIDIA hardware the vendor's own path runs the same programs (the bundled
    # models included) with NVIDIA's libraries, where Vulkan reaches the device through a general API.
    auto_rank=5,
    why_not="ironaccel.backends.cuda.registration:why_not",
    one_device=False,
    summary="TOSA 1.0 as CUDA C kernels compiled by NVRTC and cuBLASLt products, through the CUDA driver API",
)


def why_not() -> str | None:
    """Why no CUDA device can open here (switched off, cuda-bindings missing, the driver library not
    loadable, the driver failing or listing no device), or None when one can. Initialises the driver
    (cuInit) but creates no context."""
    import ctypes
    import importlib.util

    from ...core.settings import Settings

    if NAME in Settings.from_env().disabled:
        return "the CUDA family is switched off (IRONACCEL_<FAMILY>=0 with FAMILY CUDA)"
    try:
        found = importlib.util.find_spec("cuda.bindings") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return "cuda-bindings is not installed (pip install 'ironaccel[cuda]')"
    try:
        ctypes.CDLL(LIBRARY)
    except OSError as exc:
        return f"the CUDA driver library {LIBRARY} cannot be loaded: {exc}"
    from ...core.errors import IronAccelError
    from .device import device_count

    try:
        count = device_count()
    except IronAccelError as exc:
        return str(exc)
    return None if count else "the CUDA driver lists no device"


__all__ = ["LIBRARY", "NAME", "REGISTRATION", "why_not"]
