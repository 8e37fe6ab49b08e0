"""The registration: the entry point ``null`` of the group ``ironaccel.backends`` names :data:`REGISTRATION`.

Plain data (ADR 0030): the runtime reads it to list and open backends, so this module imports only the
runtime's registration type, never the device code; ``open`` names the factory in :mod:`.accelerator`.
"""

from __future__ import annotations

from ...runtime.registration import BackendRegistration

# The name users open it by, and its device's kind in DeviceInfo.
NAME = "null"

REGISTRATION = BackendRegistration(
    name=NAME,
    open="ironaccel.backends._template.accelerator:open_accelerator",
    # TODO(backend): the discovery family whose devices this backend runs ("cuda"): a descriptor of that
    # family from ironaccel.devices() then opens here.
    family=None,
    # TODO(backend): where "auto" tries it (the Vulkan backend has 10, the CPU 100), once it runs programs.
    auto_rank=None,
    # TODO(backend): "ironaccel.backends.<name>.registration:why_not" once a driver can be missing: a function
    # (in this module, importing the driver only when called) saying why no device can open here, without
    # opening one.
    why_not=None,
    # TODO(backend): False once the driver has several devices for a selector to choose from.
    one_device=True,
    # TODO(backend): drop (True) once capability.py admits an operator.
    runs_programs=False,
    # TODO(backend): one line on what the backend runs, for `ironaccel devices`.
    summary="the backend kit's null device: the whole execution contract over host memory, and no operator",
)

__all__ = ["NAME", "REGISTRATION"]
