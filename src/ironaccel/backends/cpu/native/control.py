"""The control block of one native run: how a cancellation and a deadline reach code that never returns
to Python until it ends.

Two int64 words that the generated code polls (:mod:`.polls`, and the "stopping a run" part of
:file:`prelude.h`): word 0 is the stop word, 0 while the run may go on; :meth:`RunControl.stop` sets it to
:data:`STOP_REQUESTED` from any thread, and the code sets it to :data:`STOP_DEADLINE` once it reads the
clock past word 1, the deadline in CLOCK_MONOTONIC nanoseconds (0: none). The run then returns the word,
which :func:`raise_status` turns into the exceptions the interpreter raises at its checkpoints.

The deadline is a :func:`time.monotonic` instant, the runtime's clock for deadlines. On Linux that is
``clock_gettime(CLOCK_MONOTONIC)``, the clock the code reads; where Python's monotonic clock is another
one (:data:`SAME_CLOCK` is False), the deadline is not passed down and is enforced before the run only,
while a stop request still works.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Sequence

from ....core.errors import DeadlineExpired, InternalError
from ....runtime.event import RunCancelled
from ....tosa.errors import ValidationError

STOP_REQUESTED = 2  # IA_STOP_REQUESTED in prelude.h
STOP_DEADLINE = 3  # IA_STOP_DEADLINE
FAILED = 16  # IA_FAILED: the status of the first rule the code checks on data (codegen.Generated.failures)

SAME_CLOCK = "CLOCK_MONOTONIC" in time.get_clock_info("monotonic").implementation

_Block = ctypes.c_int64 * 2


class RunControl:
    """One run's control block. ``address`` is what the run is passed (8-aligned, valid while this
    object lives: the caller keeps it for the whole run)."""

    __slots__ = ("_block", "address")

    def __init__(self, deadline: float | None = None) -> None:
        self._block = _Block()  # zeroed: go on, no deadline
        self.address = ctypes.addressof(self._block)
        if deadline is not None and SAME_CLOCK:
            self._block[1] = _nanoseconds(deadline)

    def stop(self) -> None:
        """Ask the run to stop (from any thread; an aligned 8-byte store, which the code reads whole)."""
        self._block[0] = STOP_REQUESTED

    def tighten(self, deadline: float) -> None:
        """Make the run stop at ``deadline`` (a time.monotonic() instant) if that is before its own.
        Call before the run starts."""
        if not SAME_CLOCK:
            return
        ns = _nanoseconds(deadline)
        if not self._block[1] or ns < self._block[1]:
            self._block[1] = ns

    @property
    def deadline_ns(self) -> int:
        """The deadline passed to the code, in CLOCK_MONOTONIC nanoseconds (0: none)."""
        return int(self._block[1])

    @property
    def status(self) -> int:
        """The stop word: 0, STOP_REQUESTED or STOP_DEADLINE."""
        return int(self._block[0])


def _nanoseconds(deadline: float) -> int:
    # 0 would mean no deadline; one in the past (or at the clock's start) stops the run at its first poll.
    return max(1, math.ceil(deadline * 1e9))


def raise_status(status: int, program: str, failures: Sequence[tuple[str, str]] = ()) -> None:
    """Raise what a nonzero status returned by the run of ``program`` (a library name) means;
    ``failures``: the (operator, rule) of each status from FAILED on."""
    if 0 <= status - FAILED < len(failures):
        op, rule = failures[status - FAILED]
        raise ValidationError(rule, op=op, unpredictable=True)
    if status == STOP_REQUESTED:
        raise RunCancelled(f"native program {program}: stopped inside the run, which was cancelled")
    if status == STOP_DEADLINE:
        raise DeadlineExpired(f"native program {program}: stopped inside the run at its deadline")
    raise InternalError(f"native program {program} failed with status {status}")
