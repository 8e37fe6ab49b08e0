"""Host policy of the device engine: per-guest quotas, what the device advertises, how errors map to statuses.

A guest's limits are the smaller of the backend's own limits and the host's :class:`GuestQuota`; the
per-context ones are advertised in WireDeviceInfo, the guest-wide totals (counts, bytes, the run time of
one submission) are private host policy. What all guests hold together is capped by the engine's
:class:`~.engine_account.HostAccount`.
Runtime errors keep their meaning on the wire: each error class of the contract has its status.
"""

from __future__ import annotations

import dataclasses

from ..core.errors import (
    Busy,
    DeadlineExpired,
    DeviceLost,
    Incompatible,
    InvalidArgument,
    IronAccelError,
    OutOfBounds,
    OutOfMemory,
    PermissionDenied,
    ResourceLimit,
    Unsupported,
)
from ..runtime import Accelerator, MemoryDomain, Quota
from ..runtime.errors import ReleaseIndeterminate, ReleaseRejected, SubmitIndeterminate, SubmitRejected
from .wire_constants import HARD_MAX_BINDINGS, HEADER_BYTES, AcceleratorClass, Capability, Status
from .wire_structs import LoadProgramRequest, WireConfig, WireDeviceInfo

U32_MAX = 0xFFFFFFFF

# Largest buffer alignment a guest may ask for. Backends over-allocate by the alignment (the CPU
# backend allocates size + alignment), so an unbounded value would let a one-byte buffer reserve
# terabytes before any quota could see the cost.
MAX_ALIGNMENT = 1 << 16


class Refused(IronAccelError):
    """A command the engine answers with ``status`` (and an empty payload) without changing anything."""

    def __init__(self, status: Status, message: str) -> None:
        self.status = status
        super().__init__(message)


@dataclasses.dataclass(frozen=True)
class GuestQuota:
    """What one guest connection may hold at once. Per-context counts are advertised to the guest;
    the totals across its contexts and the byte budgets are enforced before the backend is called."""

    max_contexts: int = 16
    max_buffers_per_context: int = 1024
    max_programs_per_context: int = 64
    max_queues_per_context: int = 16
    max_events_per_context: int = 1024
    max_buffers: int = 4096
    max_programs: int = 256
    max_queues: int = 64
    max_events: int = 4096
    max_buffer_bytes: int = 4 << 30  # one buffer
    max_total_buffer_bytes: int = 8 << 30  # backing of all the guest's buffers (what the backend really took)
    max_total_program_bytes: int = 2 << 30  # resident bytes all the guest's programs declared
    # The compute budget of one submission: its deadline is never later than this after admission (a
    # SUBMIT without a timeout, or with a longer one, gets this one).
    max_run_seconds: float = 60.0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "max_run_seconds":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                    raise InvalidArgument(f"GuestQuota.max_run_seconds must be a positive number, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"GuestQuota.{field.name} must be a positive integer, got {value!r}")

    def total(self, kind: int) -> int:
        """Guest-wide limit for an ObjectKind value (1 context ... 5 event)."""
        return (self.max_contexts, self.max_buffers, self.max_programs, self.max_queues, self.max_events)[kind - 1]

    def context_quota(self) -> Quota:
        """The runtime quota each of the guest's contexts is created with."""
        return Quota(buffer_bytes=self.max_total_buffer_bytes, program_bytes=self.max_total_program_bytes)


_CLASSES = {
    "vulkan": AcceleratorClass.GPU,
    "cuda": AcceleratorClass.GPU,
    "rocm": AcceleratorClass.GPU,
    "metal": AcceleratorClass.GPU,
    "opengl": AcceleratorClass.GPU,
    "webgpu": AcceleratorClass.GPU,
    "dx12": AcceleratorClass.GPU,
    "tpu": AcceleratorClass.NPU,
    "neuron": AcceleratorClass.NPU,
    "qnn": AcceleratorClass.NPU,
}


def advertised_info(accelerator: Accelerator, quota: GuestQuota, config: WireConfig) -> WireDeviceInfo:
    """WireDeviceInfo for ``accelerator`` as one guest sees it: the backend's identity, capabilities
    from its memory domains and cancellation, limits clipped by the quota and the frame bounds."""
    info = accelerator.device_info()
    lim = info.limits
    caps = Capability.NONE
    if MemoryDomain.HOST in info.domains:
        caps |= Capability.HOST_VISIBLE_MEMORY
    if MemoryDomain.DEVICE in info.domains:
        caps |= Capability.DEVICE_LOCAL_MEMORY
    if MemoryDomain.SHARED in info.domains:
        caps |= Capability.SHARED_MEMORY
    if accelerator.supports_cancellation:
        caps |= Capability.EVENT_CANCELLATION
    frame_artifact = config.max_request_bytes - HEADER_BYTES - LoadProgramRequest.SIZE
    return WireDeviceInfo(
        uuid=bytes(info.uuid)[:16].ljust(16, b"\0"),
        accelerator_class=int(_CLASSES.get(info.kind, AcceleratorClass.OTHER)),
        vendor_id=info.vendor_id & U32_MAX,
        device_id=info.device_id & U32_MAX,
        capabilities=int(caps),
        max_contexts=_u32(quota.max_contexts, lim.max_contexts),
        max_buffers_per_context=_u32(quota.max_buffers_per_context, lim.max_buffers_per_context),
        max_programs_per_context=_u32(quota.max_programs_per_context, lim.max_programs_per_context),
        max_queues_per_context=_u32(quota.max_queues_per_context, lim.max_queues_per_context),
        max_events_per_context=_u32(quota.max_events_per_context, lim.max_events_per_context),
        max_bindings_per_submission=min(lim.max_bindings_per_submission, HARD_MAX_BINDINGS),
        max_buffer_bytes=min(quota.max_buffer_bytes, quota.max_total_buffer_bytes, lim.max_buffer_bytes),
        max_artifact_bytes=min(lim.max_artifact_bytes, frame_artifact),
    )


def _u32(*values: int) -> int:
    return min(U32_MAX, *values)


# Order matters where an error is two kinds at once (a NotTosa10Error is a format error and an
# incompatibility): the more specific meaning is tried first.
_STATUS_OF: tuple[tuple[type[IronAccelError], Status], ...] = (
    (DeviceLost, Status.DEVICE_LOST),
    (Incompatible, Status.INCOMPATIBLE),
    (Unsupported, Status.UNSUPPORTED),
    (OutOfBounds, Status.OUT_OF_BOUNDS),
    (Busy, Status.BUSY),
    (OutOfMemory, Status.OUT_OF_MEMORY),
    (ResourceLimit, Status.RESOURCE_LIMIT),
    (DeadlineExpired, Status.DEADLINE_EXPIRED),
    (PermissionDenied, Status.PERMISSION_DENIED),
    (InvalidArgument, Status.INVALID_ARGUMENT),
)


def status_for(error: BaseException | None) -> Status:
    """The wire status of a runtime error. Native and internal errors have no portable meaning:
    INTERNAL_ERROR. Ownership wrappers (SubmitRejected, ReleaseRejected...) map by their cause."""
    if isinstance(error, (SubmitRejected, SubmitIndeterminate, ReleaseRejected, ReleaseIndeterminate)):
        error = error.error
    if isinstance(error, Refused):
        return error.status
    for cls, status in _STATUS_OF:
        if isinstance(error, cls):
            return status
    return Status.INTERNAL_ERROR


__all__ = ["MAX_ALIGNMENT", "GuestQuota", "Refused", "advertised_info", "status_for"]
