"""The CPU backend's registration: the entry point ``cpu`` of the group ``ironaccel.backends`` names it.

Plain data (ADR 0030): reading it imports nothing of the backend. ``auto`` tries the CPU last, and takes it
whatever the other backends said: it always opens.
"""

from __future__ import annotations

from ...runtime.registration import BackendRegistration

REGISTRATION = BackendRegistration(
    name="cpu",
    open="ironaccel.backends.cpu.accelerator:CpuAccelerator",
    family="cpu",
    auto_rank=100,
    one_device=True,
    summary="TOSA 1.0 on the host: native code where a C compiler is found, else numpy; the reference",
)
