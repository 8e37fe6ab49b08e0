"""Queues and submission: a loaded program run on bound buffers, in submission order, ending its event.

Each queue is one worker thread running its submissions in order (an
:class:`~ironaccel.runtime.worker.OrderedWorker`: started on demand, gone when idle); ``_submit`` only
enqueues. Runs stop at checkpoints (before every operator and loop iteration on the interpreter; between
operators and inside long loops of native code, ADR 0028): a cancellation wins until the run ends, and a
deadline ends the run where it is (runtime/event.py). A program's last operator may
write its result straight into the bound output buffer (see ``_destinations``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.errors import InternalError, IronAccelError
from ...runtime.accelerator import Accelerator, BoundRange
from ...runtime.event import EventCore
from ...runtime.worker import OrderedWorker
from .program import LoadedProgram


class CpuSubmission(Accelerator):
    """The queue and submission hooks of the CPU accelerator (one of its bases)."""

    supports_cancellation = True

    def _create_queue(self, context: Any) -> OrderedWorker:
        return OrderedWorker("ironaccel-cpu-queue")

    def _destroy_queue(self, native: OrderedWorker) -> None:
        native.close()

    def _submit(
        self, queue: OrderedWorker, program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore
    ) -> None:
        queue.put(lambda: _execute(program, ranges, event))


def _view(r: BoundRange) -> np.ndarray:
    raw = r.native[r.offset : r.offset + r.length]
    return raw.view(r.spec.numpy_dtype).reshape(r.spec.shape)


def _overlaps(a: BoundRange, b: BoundRange) -> bool:
    # Distinct buffers are distinct allocations: only ranges of one buffer can overlap.
    return a.native is b.native and a.offset < b.offset + b.length and b.offset < a.offset + a.length


def _destinations(ranges: Sequence[BoundRange], out_ranges: Sequence[BoundRange]) -> list[np.ndarray | None]:
    """Output buffers the kernels may write into directly: those that share no byte with any other bound
    range (an input still being read, or another output), so writing early changes nothing observable."""
    return [
        None if any(o is not r and _overlaps(o, r) for r in ranges) or not o.length else _view(o) for o in out_ranges
    ]


def _execute(program: LoadedProgram, ranges: Sequence[BoundRange], event: EventCore) -> None:
    # Stoppable: the interpreter looks at the event before every operator (and every loop iteration), and
    # native code polls a control block between operators and inside long loops, so a cancellation or the
    # deadline ends the run there, not only before it starts.
    if not event.try_start(stoppable=True):
        return
    try:
        inputs = [_view(r) for r in ranges if r.slot < program.n_inputs]
        out_ranges = [r for r in ranges if r.slot >= program.n_inputs]
        # The last operator of a program often writes its result straight into the output buffer (no copy).
        destinations = _destinations(ranges, out_ranges)
        runner = program.compiled
        control_block = getattr(runner, "control_block", None)  # native programs: they cannot call checkpoint
        if control_block is not None:
            # The code polls the block; a winning cancel sets its stop word, and the deadline is in it.
            control = control_block(event.deadline)
            event.on_stop(control.stop)
            outputs = runner.run(inputs, destinations=destinations, check=event.checkpoint, control=control)
        else:
            outputs = runner.run(inputs, destinations=destinations, check=event.checkpoint)
        if len(outputs) != len(out_ranges):
            raise InternalError(f"program produced {len(outputs)} outputs for {len(out_ranges)} slots")
        for r, value, dest in zip(out_ranges, outputs, destinations, strict=True):
            if value is not dest:
                _view(r)[...] = value
    except IronAccelError as exc:
        event.fail(exc)
    except Exception as exc:  # noqa: BLE001 - a kernel defect fails the event, never the worker thread
        event.fail(InternalError(f"CPU kernel failed: {type(exc).__name__}: {exc}"))
    else:
        event.complete()
