"""The execution contract and the user API.

Design choices:
1. One contract for every backend (CPU, Vulkan, the virtio guest...): contexts, buffers, programs,
   queues, events, host gates — the object model of virtio-accel, so the virtio device can expose any
   backend to guests unchanged.
2. Validation happens once, here: :class:`Accelerator`'s public methods check arguments, ownership,
   usage flags, bounds and quotas before a backend hook runs. Hooks trust their input.
3. Programs are validated and admitted at load: an unsupported program fails with LoweringError at
   ``load_program``, never at submit, and never falls back to another backend.
4. ``submit`` admits and returns an event; it never waits. ``poll_event`` never blocks. Terminal
   event states never change.
5. Failures say who owns what: SubmitRejected / SubmitIndeterminate, ReleaseRejected /
   ReleaseIndeterminate (which poisons the instance).
6. The only copies are ``write_buffer`` and ``read_buffer``; bindings use buffers in place.
7. ``reset_context`` ends a context's work and releases all it holds in a bounded time; what running work
   still pins is quarantined (stale, counted) until that work ends. A run that ends past its deadline
   ends FAILED with DeadlineExpired on every backend.
"""

from .accelerator import Accelerator, BoundRange
from .device_array import DeviceArray, DeviceQuantizedWeights
from .errors import ReleaseIndeterminate, ReleaseRejected, SubmitIndeterminate, SubmitRejected
from .event import EventCore, EventState
from .gate import HostGate
from .handles import Buffer, Context, Event, Prepared, Program, Queue
from .reset import ContextReset
from .session import Device, Executable, Run, compile_and_run, open_device
from .spec import TensorSpec
from .types import (
    TOSA_FORMAT,
    Access,
    ArtifactRef,
    Binding,
    BufferDesc,
    BufferInfo,
    BufferUsage,
    DeviceInfo,
    Limits,
    MemoryDomain,
    Quota,
)

__all__ = [
    "TOSA_FORMAT",
    "Accelerator",
    "Access",
    "ArtifactRef",
    "Binding",
    "BoundRange",
    "Buffer",
    "BufferDesc",
    "BufferInfo",
    "BufferUsage",
    "Context",
    "ContextReset",
    "Device",
    "DeviceArray",
    "DeviceQuantizedWeights",
    "DeviceInfo",
    "Event",
    "Prepared",
    "EventCore",
    "EventState",
    "Executable",
    "HostGate",
    "Limits",
    "MemoryDomain",
    "Program",
    "Queue",
    "Quota",
    "ReleaseIndeterminate",
    "ReleaseRejected",
    "Run",
    "SubmitIndeterminate",
    "SubmitRejected",
    "TensorSpec",
    "compile_and_run",
    "open_device",
]
