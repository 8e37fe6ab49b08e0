"""Direct runs: a loaded program run on the caller's arrays, outside every queue (ADR 0029).

A backend that can run a program without the queue (the CPU backend, on the caller's thread; the virtio
guest, in two round trips to its device) offers a function from its ``_direct`` hook when the program is
loaded; the runtime keeps it with the program as a :class:`DirectOffer`, which also checks the arrays of
every run. The user API takes this path for ``exe(x)`` and, where runs can be started now and finished
later, for ``exe.submit(x)``: no queue hand-off, no event, no buffers and no copies.

Only programs whose runs cannot observe each other (no state carried from run to run) are offered:
a direct run is ordered against nothing on any queue, and direct runs from several threads may overlap.
The program is pinned while a run holds it, so an unload meanwhile is refused as Busy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.errors import DeadlineExpired, InvalidArgument, Unsupported
from .handles import Program
from .hooks import DirectFunction
from .records import Book, Record
from .spec import TensorSpec


class DirectRuns(Book):
    """``runs_direct``, ``run_direct``, ``starts_direct`` and ``start_direct`` (a base of Accelerator)."""

    def runs_direct(self, program: Program) -> bool:
        """Whether :meth:`run_direct` can run ``program`` (fixed when it was loaded)."""
        with self._lock:
            return self._record(program, Program).extra is not None

    def starts_direct(self, program: Program) -> bool:
        """Whether :meth:`start_direct` can start ``program`` (fixed when it was loaded)."""
        with self._lock:
            offer: DirectOffer | None = self._record(program, Program).extra
            return offer is not None and offer.start is not None

    def run_direct(self, program: Program, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """Run ``program`` to completion on the calling thread, reading ``inputs`` and writing ``outputs``
        (numpy arrays: the declared dtypes and shapes, C-contiguous; outputs writable, overlapping neither
        each other nor an input). Unsupported where :meth:`runs_direct` is False.

        Ownership: nothing is created or retained; the program is pinned for the call (an unload meanwhile
        is refused as Busy). Blocking: the whole run. Failure: the program's error is raised; outputs may be
        partly written. Copies: none; the program works on the arrays in place. Not ordered against work
        submitted to any queue."""
        with self._lock:
            self._check_alive()
            rec = self._record(program, Program)
            if self._resetting:
                self._refuse(program.context)
            offer: DirectOffer | None = rec.extra
            if offer is None:
                raise Unsupported(f"{program!r} cannot run directly on this backend; submit it")
            rec.pins += 1
        try:
            offer.check(inputs, outputs)
            offer.run(inputs, outputs)
        finally:
            with self._lock:
                rec.pins -= 1

    def start_direct(self, program: Program, inputs: Sequence[Any]) -> DirectRun:
        """Begin a direct run of ``program`` on ``inputs`` and return without waiting for it: the inputs
        are consumed before this returns (the caller may reuse them); :meth:`DirectRun.finish` waits and
        fills the outputs. Unsupported where :meth:`starts_direct` is False.

        Ownership: the program is pinned until the run is finished. Not ordered against work submitted to
        any queue; started runs of one program complete in the order started."""
        with self._lock:
            self._check_alive()
            rec = self._record(program, Program)
            if self._resetting:
                self._refuse(program.context)
            offer: DirectOffer | None = rec.extra
            if offer is None or offer.start is None:
                raise Unsupported(f"{program!r} cannot start a direct run on this backend; submit it")
            rec.pins += 1
        try:
            offer.check_inputs(inputs)
            pending = self._guard(offer.start, inputs)
        except BaseException:
            with self._lock:
                rec.pins -= 1
            raise
        return DirectRun(self, rec, offer, pending)


class DirectRun:
    """A run begun by :meth:`DirectRuns.start_direct`. ``finish(outputs, timeout)`` waits for it and fills
    ``outputs`` (arrays as ``run_direct`` takes them); the first call that ends the run (with its outputs
    or its error) releases the program's pin. Not thread-safe: one thread finishes a run."""

    __slots__ = ("_acc", "_offer", "_pending", "_rec")

    def __init__(self, acc: Book, rec: Record, offer: DirectOffer, pending: Any) -> None:
        self._acc, self._rec, self._offer, self._pending = acc, rec, offer, pending

    @property
    def done(self) -> bool:
        """Whether the run has ended (never blocks; a backend may ask its device)."""
        return self._pending is None or bool(self._acc._guard(self._pending.done))

    def finish(self, outputs: Sequence[Any], timeout: float | None = None) -> None:
        if self._pending is None:
            raise InvalidArgument("this direct run was finished already")
        self._offer.check_outputs(outputs)
        try:
            self._acc._guard(self._pending.finish, outputs, timeout)
        except DeadlineExpired:
            raise  # still running: may be finished later
        except BaseException:
            self._release()
            raise
        self._release()

    def _release(self) -> None:
        self._pending = None
        with self._acc._lock:
            self._rec.pins -= 1


class DirectOffer:
    """What a backend's ``_direct`` offered for one program, and what the arrays of its runs must look
    like (checked on every run)."""

    __slots__ = ("inputs", "outputs", "program", "run", "start")

    def __init__(self, run: DirectFunction, program: Program) -> None:
        self.run = run
        self.start: Callable[[Sequence[Any]], Any] | None = getattr(run, "start", None)
        self.program = program
        # dtype, shape and C-contiguous strides per slot: the common case is checked by comparing them.
        self.inputs = [(s.numpy_dtype, s.shape, _c_strides(s)) for s in program.inputs]
        self.outputs = [(s.numpy_dtype, s.shape, _c_strides(s)) for s in program.outputs]

    def check(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """As many arrays as slots, of their dtypes and shapes, C-contiguous, outputs writable and sharing
        no memory with another array of the run."""
        self.check_inputs(inputs)
        self.check_outputs(outputs, inputs)

    def check_inputs(self, inputs: Sequence[Any]) -> None:
        if len(inputs) != len(self.inputs):
            raise InvalidArgument(f"program takes {len(self.inputs)} inputs, got {len(inputs)}")
        for index, (array, (dtype, shape, strides)) in enumerate(zip(inputs, self.inputs, strict=True)):
            if (
                type(array) is not np.ndarray
                or array.dtype != dtype
                or array.shape != shape
                or (array.strides != strides and not array.flags.c_contiguous)
            ):
                self._refuse("input", index, array)

    def check_outputs(self, outputs: Sequence[Any], inputs: Sequence[Any] = ()) -> None:
        if len(outputs) != len(self.outputs):
            raise InvalidArgument(f"program has {len(self.outputs)} outputs, got {len(outputs)}")
        for index, (array, (dtype, shape, strides)) in enumerate(zip(outputs, self.outputs, strict=True)):
            if (
                type(array) is not np.ndarray
                or array.dtype != dtype
                or array.shape != shape
                or (array.strides != strides and not array.flags.c_contiguous)
                or not array.flags.writeable
            ):
                self._refuse("output", index, array)
            # Arrays that own their memory (base None) are separate allocations; others are compared by bounds.
            owner = array.base is None
            for other in inputs:
                if not (owner and other.base is None and other is not array) and np.may_share_memory(array, other):
                    raise InvalidArgument(f"output {index} shares memory with an input of the run")
            for other in outputs[:index]:
                if not (owner and other.base is None and other is not array) and np.may_share_memory(array, other):
                    raise InvalidArgument(f"output {index} shares memory with another output of the run")

    def _refuse(self, role: str, index: int, array: Any) -> None:
        spec = (self.program.inputs if role == "input" else self.program.outputs)[index]
        got = f"{array.dtype}{list(array.shape)}" if isinstance(array, np.ndarray) else type(array).__name__
        raise InvalidArgument(
            f"{role} {index} ({spec}) must be a C-contiguous{' writable' if role == 'output' else ''}"
            f" {spec.numpy_dtype} array of shape {spec.shape}, got {got}"
        )


def _c_strides(spec: TensorSpec) -> tuple[int, ...]:
    strides, step = [], spec.numpy_dtype.itemsize
    for d in reversed(spec.shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


__all__ = ["DirectOffer", "DirectRun", "DirectRuns"]
