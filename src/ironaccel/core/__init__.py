"""Discovery core: families, device descriptors, capability flags, the registry, errors.

Standard library only, so ``import ironaccel`` costs milliseconds and works everywhere.
"""

from .backend import Backend, ProbedBackend, Unavailable
from .descriptor import (
    Capability,
    DeviceDescriptor,
    DeviceId,
    PciAddress,
    Vendor,
    software_name,
)
from .errors import (
    Busy,
    DeadlineExpired,
    DeviceLost,
    Incompatible,
    InternalError,
    InvalidArgument,
    IronAccelError,
    NativeError,
    OutOfBounds,
    OutOfMemory,
    PermissionDenied,
    ResourceLimit,
    Unsupported,
)
from .flags import CapabilityFlags, Tier
from .kinds import BackendKind
from .registry import BackendRegistry, BackendReport
from .settings import Settings, settings

__all__ = [
    "Backend",
    "BackendKind",
    "BackendRegistry",
    "BackendReport",
    "Busy",
    "Capability",
    "CapabilityFlags",
    "DeadlineExpired",
    "DeviceDescriptor",
    "DeviceId",
    "DeviceLost",
    "Incompatible",
    "InternalError",
    "InvalidArgument",
    "IronAccelError",
    "NativeError",
    "OutOfBounds",
    "OutOfMemory",
    "PciAddress",
    "PermissionDenied",
    "ProbedBackend",
    "ResourceLimit",
    "Settings",
    "Tier",
    "Unavailable",
    "Unsupported",
    "Vendor",
    "settings",
    "software_name",
]
