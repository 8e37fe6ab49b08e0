"""Failures of the contract that say who owns what afterwards.

A rejected submit retained nothing; an indeterminate one hands back the event that now owns the
resources. A rejected release hands the handle back for a retry; an indeterminate one poisons the
backend (the handle's state is unknown, so nothing on that instance can be trusted).
"""

from __future__ import annotations

from ..core.errors import IronAccelError


class SubmitRejected(IronAccelError):
    """The work was not accepted and nothing was retained. ``error`` is the cause (an IronAccelError)."""

    def __init__(self, error: IronAccelError) -> None:
        self.error = error
        super().__init__(f"submit rejected: {type(error).__name__}: {error}")


class SubmitIndeterminate(IronAccelError):
    """Acceptance is uncertain: ``event`` owns the bound resources until it reaches a terminal state."""

    def __init__(self, error: IronAccelError, event: object) -> None:
        self.error = error
        self.event = event
        super().__init__(f"submit indeterminate: {type(error).__name__}: {error}")


class ReleaseRejected(IronAccelError):
    """The release did not happen; ``handle`` is still live and the release may be retried."""

    def __init__(self, error: IronAccelError, handle: object) -> None:
        self.error = error
        self.handle = handle
        super().__init__(f"release rejected: {type(error).__name__}: {error}")


class ReleaseIndeterminate(IronAccelError):
    """The handle's state is unknown; it is invalid and the backend instance is poisoned."""

    def __init__(self, error: IronAccelError) -> None:
        self.error = error
        super().__init__(f"release indeterminate (backend poisoned): {type(error).__name__}: {error}")
