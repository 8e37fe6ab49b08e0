"""What the CPU backend admits: the whole of TOSA 1.0 (every operator and element type, every profile and
extension, no limits), since it is the reference the other backends are checked against. NVFP4 projections
are not TOSA programs: the accelerator admits them by their artifact format (``artifact_formats``).
"""

from __future__ import annotations

from ...tosa.capability import CapabilityDescriptor, descriptor_for_all_of_tosa_1_0


def descriptor() -> CapabilityDescriptor:
    """The descriptor ``_capabilities`` returns (the same for every CPU accelerator)."""
    return descriptor_for_all_of_tosa_1_0()
