"""The resident bound a guest declares for a program when its caller set none.

The device charges the declared bound to the guest's budget and the daemon's, and refuses a program whose
working set is larger; so "no bound" cannot be sent as it is, and an honest figure is sent instead: twice the
program's backend-neutral working set (:func:`ironaccel.tosa.working_set.estimate`), plus the artifact and
RESIDENT_SLACK. Twice, because a backend keeps more than the backend-neutral count and the guest cannot see
which backend serves it.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import IronAccelError

UNBOUNDED = 1 << 62  # what runtime.Device.compile passes when its caller sets no resident bound
DEFAULT_RESIDENT_BOUND = 64 << 20  # a program whose working set is unknown (not TOSA, or no static shapes)
RESIDENT_FACTOR = 2  # times the backend-neutral working set
RESIDENT_SLACK = 1 << 20


def declared_bound(program: Any, artifact_bytes: int) -> int:
    """The resident bound a guest declares for ``program`` (parsed) when its caller gave none: twice its
    working set plus the artifact and RESIDENT_SLACK; DEFAULT_RESIDENT_BOUND or four times the artifact,
    whichever is more, where the working set has no bound or the program is not TOSA."""
    from ..tosa.ir import Program
    from ..tosa.working_set import estimate

    if isinstance(program, Program):
        try:
            need = estimate(program)
        except IronAccelError:
            need = None
        if need is not None and need.bounded:
            return RESIDENT_FACTOR * need.total_bytes + artifact_bytes + RESIDENT_SLACK
    return max(DEFAULT_RESIDENT_BOUND, 4 * artifact_bytes)


__all__ = ["DEFAULT_RESIDENT_BOUND", "RESIDENT_FACTOR", "RESIDENT_SLACK", "UNBOUNDED", "declared_bound"]
