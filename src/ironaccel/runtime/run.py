"""A submitted call of an Executable (:class:`Run`), and what it gives back when dropped unwaited.

A Run is one of three kinds, by how its call was started: a queue submission (an event and a buffer set),
a launch of a prepared submission (a ticket on the buffer set's prepared submission), or a direct run the
backend started and finishes later (``Accelerator.start_direct``). ``wait`` reads the outputs once and
then holds them; ``close`` (or dropping the Run) gives back what the call holds without reading them.
A call binding DeviceArrays is a queue submission whose Run keeps its input arrays until ``wait``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import InvalidArgument, IronAccelError
from . import reclaim
from .accelerator import DirectRun
from .handles import Event
from .holdings import CallSet

if TYPE_CHECKING:
    from .executable import Executable


class _RunRelease:
    """The release job of a Run dropped before ``wait``: once its work ended, what the call held goes
    back (its outputs are never read)."""

    __slots__ = ("calls", "event", "held", "started", "ticket")

    def __init__(self, run: Run) -> None:
        self.held, self.calls, self.event, self.ticket, self.started = (
            run._held,
            run._calls,
            run.event,
            run._ticket,
            run._started,
        )

    def __call__(self) -> bool:
        held, acc = self.held, self.held.acc
        if self.started is not None:
            if not self.started.done:
                return False
            outs = [np.empty(spec.shape, spec.numpy_dtype) for spec in self.held.program.outputs]
            try:
                self.started.finish(outs, 1.0)
            except IronAccelError:
                pass  # the run failed: nobody is left to tell
            return True
        assert self.calls is not None
        if self.ticket is not None:
            if not held.launch_over(self.calls, self.ticket):
                return False
        else:
            assert self.event is not None
            try:
                if not acc.poll_event(self.event).terminal:
                    return False
                acc.destroy_event(self.event)
            except IronAccelError:
                pass  # lost with the device: nothing left to release
        held.give_back(self.calls)
        return True


class Run:
    """A submitted call: ``done``, ``wait(timeout) -> outputs`` (the caller's ``out`` arrays, when given;
    DeviceArrays where the call made its outputs on the device).

    Not thread-safe: use a Run from one thread at a time (its first ``wait`` releases the event and
    buffers). Other Runs of the same Executable may be waited on from other threads meanwhile.

    A Run dropped (or ``close``d) before ``wait`` gives back what its call holds once the work ends; its
    outputs are then never read, so ``out`` arrays it was given are left as they were."""

    def __init__(
        self,
        exe: Executable,
        event: Event | None,
        calls: CallSet | None,
        out: list[Any] | None,
        started: DirectRun | None = None,
        ticket: int | None = None,
        resident: Sequence[Any] = (),
    ) -> None:
        self._exe = exe
        self._held = exe._held
        self.event = event  # None for a launch of a prepared submission, or a started direct run
        self._calls = calls
        self._out = out
        self._started = started
        self._ticket = ticket
        # The DeviceArrays the call reads: kept from collection while it may run (their buffers are pinned
        # then anyway, so a free would only be retried until it ends).
        self._resident = resident
        self._outputs: list[Any] | None = None
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "done" if self._outputs is not None else "submitted"
        return f"<Run of {self._exe!r}: {state}>"

    @property
    def done(self) -> bool:
        # After wait() the event is released and the outputs are held here.
        if self._outputs is not None:
            return True
        if self._closed:
            raise InvalidArgument(f"{self!r}: the run was closed")
        if self._started is not None:
            return self._started.done
        acc = self._held.acc
        if self._ticket is not None:
            assert self._calls is not None and self._calls.prepared is not None
            return acc.poll_launch(self._calls.prepared, self._ticket)
        assert self.event is not None
        return acc.poll_event(self.event).terminal

    def wait(self, timeout: float | None = None) -> list[Any]:
        if self._outputs is None:
            if self._closed:
                raise InvalidArgument(f"{self!r}: the run was closed before its outputs were read")
            if self._started is not None:
                exe = self._exe
                outs = self._out or [np.empty(spec.shape, spec.numpy_dtype) for spec in exe.outputs]
                self._out = outs  # a wait that timed out fills the same arrays next time
                self._started.finish(outs, timeout)
                self._outputs = outs
            else:
                assert self._calls is not None
                self._outputs = self._exe._finish(self.event, self._ticket, self._calls, timeout, self._out)
                self._resident = ()
        return self._outputs

    def close(self) -> None:
        """Give back what the call holds without reading its outputs: now if its work has ended, else as
        soon as it does. Idempotent; nothing to do after ``wait``."""
        if self._outputs is None and not self._closed:
            self._closed = True
            reclaim.release(_RunRelease(self))

    def __del__(self) -> None:
        if getattr(self, "_outputs", True) is None and not self._closed:
            self.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
