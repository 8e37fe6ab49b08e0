"""The backend kit: a complete execution backend with no kernels, registered as ``null``.

Every part of the execution contract a backend provides works here over host memory: contexts, buffers in
the three memory domains, transfers, queues, events, host gates, prepared launches. Its capability
descriptor admits no operator, so every program is refused when it is loaded ("the template backend runs
no operator: ..."). Opened as ``ironaccel.open("null")`` it is a device for tests of the contract that need
no kernels (``auto`` never picks it); copied, it is where a new backend starts: docs/adding-a-backend.md
walks from the copy to a first operator.

The roles, one module each, as the bundled backends have them:

- this module: the registration (plain data: reading it imports nothing else) and the factory;
- :mod:`.device`: opening the device (identity, limits, memory domains) and the Accelerator joining the roles;
- :mod:`.memory`: buffers: allocation, write and read;
- :mod:`.program`: loading: lowering each operator of an admitted program into what the device runs;
- :mod:`.submit`: queues and submission: running a loaded program on bound buffers in order, ending events;
- :mod:`.capability`: what ``load_program`` admits (the capability descriptor).

Design notes (they hold for any backend built from this one):

1. The runtime checks every public call before a hook runs (``runtime/hooks.py`` says what each hook may
   assume and which lock it runs under); hooks trust their input and raise the errors of
   ``core/errors.py``.
2. A program is refused when it is loaded, never when it is submitted: capability.py says what is admitted,
   and program.py lowers everything admitted.
3. ``_submit`` never waits: the queue runs the work and ends its event (complete, failed, cancelled).
4. Cancellation and deadlines reach running work at checkpoints between steps (``event.checkpoint``).
5. The only copies are ``write_buffer`` and ``read_buffer``; a bound buffer is used in place.

``# TODO(backend):`` marks each place where a real backend replaces host memory and host code with its
device's calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...runtime.registration import BackendRegistration

if TYPE_CHECKING:
    from .device import TemplateAccelerator

# The name users open it by, and its device's kind in DeviceInfo.
NAME = "null"

REGISTRATION = BackendRegistration(
    name=NAME,
    open="ironaccel.backends._template:open_accelerator",
    # TODO(backend): the discovery family whose devices this backend runs ("cuda"): a descriptor of that
    # family from ironaccel.devices() then opens here.
    family=None,
    # TODO(backend): where "auto" tries it (the Vulkan backend has 10, the CPU 100), once it runs programs.
    auto_rank=None,
    # TODO(backend): "ironaccel.backends.<name>.registration:why_not" (or this module's) once a driver can be
    # missing: a function saying why no device can open here, without opening one.
    why_not=None,
    # TODO(backend): False once the driver has several devices for a selector to choose from.
    one_device=True,
    # TODO(backend): drop (True) once capability.py admits an operator.
    runs_programs=False,
    # TODO(backend): one line on what the backend runs, for `ironaccel devices`.
    summary="the backend kit's null device: the whole execution contract over host memory, and no operator",
)


def open_accelerator(selector: str | None = None, **kwargs: Any) -> TemplateAccelerator:
    """The accelerator on the device ``selector`` names (None: the default one); keyword arguments go to the
    accelerator (``quota``). Raises InvalidArgument for a selector that names no device."""
    from .device import TemplateAccelerator, open_device

    return TemplateAccelerator(open_device(selector), **kwargs)


__all__ = ["NAME", "REGISTRATION", "open_accelerator"]
