"""The Vulkan backend's registration (the entry point ``vulkan`` of the group ``ironaccel.backends``), and
its answer to "why not here", given without opening a device.

The module imports only the runtime's registration type: the check imports the backend when it runs.
"""

from __future__ import annotations

from ...runtime.registration import BackendRegistration

REGISTRATION = BackendRegistration(
    name="vulkan",
    open="ironaccel.backends.vulkan:open_accelerator",
    family="vulkan",
    auto_rank=10,
    why_not="ironaccel.backends.vulkan.registration:why_not",
    summary="TOSA 1.0 as compute dispatches on any Vulkan 1.3 device",
)


def why_not() -> str | None:
    """Why the Vulkan backend cannot open a device here (switched off, no `vulkan` package or loader, no
    device it runs), or None when it has one to open. Creates the shared Vulkan instance."""
    from ...core.errors import IronAccelError
    from ...core.settings import Settings

    if "vulkan" in Settings.from_env().disabled:
        return "the Vulkan backend is switched off (IRONACCEL_VULKAN=0)"
    try:
        from . import device
        from .instance import instance

        found = device.describe_all(instance())
    except (IronAccelError, OSError) as exc:
        return str(exc)
    refusals = [f"{pd.name}: {why}" for pd in found if (why := device.shortfall(pd)) is not None]
    if len(refusals) < len(found):
        return None
    return "; ".join(refusals) if refusals else "the Vulkan loader lists no device"
