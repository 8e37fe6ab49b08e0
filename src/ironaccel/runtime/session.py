"""The API a user touches: ``open`` a device, ``compile`` a program, call it.

    dev = ironaccel.open("cpu")          # "vulkan", "vulkan:1", "auto"
    exe = dev.compile("model.tosa")      # a path, bytes or a tosa.Program: validated, admitted, loaded
    y, = exe(x)                          # numpy (or any DLPack array) in, numpy out
    run = exe.submit(x, out=y); run.wait()   # asynchronous, results into the caller's arrays

Each Device owns one context and one queue on its Accelerator; an Executable owns a loaded program.
Device and Executable are safe to use from several threads (submitted calls run in submission order on
the device's one queue); ``close`` belongs after the other threads' calls. A Run is for one thread.

A call ``exe(x)`` of a program the backend can run on the caller's thread (``Accelerator.run_direct``:
programs that keep no state between runs) runs there, on the caller's arrays, with no queue hand-off:
no other call can observe the difference, except that such calls from several threads may overlap.
``submit`` goes through the queue, except where the backend can start such a run and finish it later
(``Accelerator.start_direct``: a virtio device, where it saves round trips); those runs of one
executable still complete in the order submitted. Where the backend launches prepared submissions
natively (Vulkan, ADR 0016), each of an executable's buffer sets is prepared once and a call through
the queue is then one launch.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.descriptor import DeviceDescriptor
from ..core.errors import InvalidArgument, IronAccelError, Unsupported
from ..tosa.errors import FormatError, LoweringError
from ..tosa.target import Target
from ..tosa.working_set import NO_BOUND
from . import reclaim
from .accelerator import Accelerator, DirectRun
from .backends import AUTO, AUTO_ORDER, Resolved, open_resolved, resolve
from .errors import ReleaseRejected
from .event import EventState
from .handles import Buffer, Context, Event, Prepared, Program, Queue
from .metadata import Metadata, read_sidecar
from .spec import TensorSpec
from .types import NVFP4_FORMAT, TOSA_FORMAT, ArtifactRef, Binding, BufferDesc, BufferUsage, MemoryDomain

log = logging.getLogger("ironaccel.runtime")

_IO_USAGE = (
    BufferUsage.PROGRAM_INPUT
    | BufferUsage.PROGRAM_OUTPUT
    | BufferUsage.TRANSFER_SOURCE
    | BufferUsage.TRANSFER_DESTINATION
)


SPARE_SETS = 2  # buffer sets an executable keeps between calls (one per call in flight is made as needed)
SMALL_OUTPUT_BYTES = 64 << 10  # outputs up to this size live in HOST memory where the device offers it


def _as_array(value: Any, spec: TensorSpec, index: int) -> np.ndarray:
    if type(value) is np.ndarray:  # the common case first: small programs run in tens of microseconds
        arr = value
    else:
        if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray):
            value = np.from_dlpack(value)
        arr = np.asarray(value) if isinstance(value, np.ndarray) else np.asarray(value, dtype=spec.numpy_dtype)
    if arr.dtype != spec.numpy_dtype:
        raise InvalidArgument(f"input {index} ({spec}): expected {spec.numpy_dtype}, got {arr.dtype}")
    if arr.shape != spec.shape:
        raise InvalidArgument(f"input {index} ({spec}): expected shape {spec.shape}, got {arr.shape}")
    # np.ascontiguousarray would make a rank-0 array rank 1
    return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays may share memory (two arrays owning their memory never do: a quick answer)."""
    if a.base is None and b.base is None:
        return a is b
    return bool(np.may_share_memory(a, b))


class _CallSet:
    """The buffers of one call (one per input and output slot) and, where the backend launches prepared
    submissions natively, the submission prepared on them at their first use."""

    __slots__ = ("buffers", "prepared")

    def __init__(self, buffers: list[Buffer]) -> None:
        self.buffers = buffers
        self.prepared: Prepared | None = None


class _Held:
    """What one Executable holds on its device: the loaded program and the buffer sets kept for calls.

    Kept apart from the Executable so that the job releasing it (:mod:`.reclaim`) refers to this and
    never to the Executable: an Executable that its user drops is collected, then this is released."""

    __slots__ = ("acc", "device", "lock", "open", "program", "spare", "unloaded")

    def __init__(self, device: _DeviceHeld, program: Program) -> None:
        self.acc = device.acc
        self.device = device
        self.program = program
        self.spare: list[_CallSet] = []
        # Reentrant: a Run of this program dropped (and released) while this thread holds the lock.
        self.lock = threading.RLock()
        self.open = True
        self.unloaded = False

    def take(self) -> _CallSet | None:
        with self.lock:
            return self.spare.pop() if self.spare else None

    def give_back(self, calls: _CallSet) -> None:
        """A finished call's buffer set: kept for the next call, or freed."""
        with self.lock:
            if len(self.spare) < SPARE_SETS and self.open:
                self.spare.append(calls)
                return
        self.discard(calls)

    def discard(self, calls: _CallSet) -> None:
        acc = self.acc
        if calls.prepared is not None:
            acc.release_prepared(calls.prepared)
            calls.prepared = None
        buffers, calls.buffers = calls.buffers, []
        for buf in buffers:
            acc.free_buffer(buf)

    def launch_over(self, calls: _CallSet, ticket: int) -> bool:
        """Whether the launch of ``ticket`` no longer runs (finished, or failed)."""
        assert calls.prepared is not None
        try:
            return self.acc.poll_launch(calls.prepared, ticket)
        except IronAccelError:
            return True

    def close(self) -> bool:
        """Free the kept buffer sets and unload the program. False while work of this program still
        runs (a dropped Run's): the program stays loaded and ``close`` is tried again later."""
        with self.lock:
            self.open = False
            spare, self.spare = self.spare, []
        for calls in spare:
            self.discard(calls)
        if self.unloaded:
            return True
        try:
            self.acc.unload_program(self.program)
        except ReleaseRejected:
            return False
        except IronAccelError as exc:  # the device is gone: nothing of it is left to release
            log.debug("unloading %r: %s", self.program, exc)
        self.unloaded = True
        self.device.forget(self)
        return True


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
    """A submitted call: ``done``, ``wait(timeout) -> outputs`` (the caller's ``out`` arrays, when given).

    Not thread-safe: use a Run from one thread at a time (its first ``wait`` releases the event and
    buffers). Other Runs of the same Executable may be waited on from other threads meanwhile.

    A Run dropped (or ``close``d) before ``wait`` gives back what its call holds once the work ends; its
    outputs are then never read, so ``out`` arrays it was given are left as they were."""

    def __init__(
        self,
        exe: Executable,
        event: Event | None,
        calls: _CallSet | None,
        out: list[np.ndarray] | None,
        started: DirectRun | None = None,
        ticket: int | None = None,
    ) -> None:
        self._exe = exe
        self._held = exe._held
        self.event = event  # None for a launch of a prepared submission, or a started direct run
        self._calls = calls
        self._out = out
        self._started = started
        self._ticket = ticket
        self._outputs: list[np.ndarray] | None = None
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

    def wait(self, timeout: float | None = None) -> list[np.ndarray]:
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


class Executable:
    """A program loaded on a device, callable with arrays.

    Thread safety: calls and ``submit`` may come from any threads at once (each call gets its own
    buffers; concurrent calls must not share ``out`` arrays); ``close`` only once no call is in flight.

    Lifetime: ``close()`` (or leaving a ``with`` block) unloads the program and frees the buffers kept
    for calls; an Executable that is dropped without it does the same when it is collected. Runs keep
    their Executable alive until they are waited for or dropped."""

    def __init__(self, device: Device, program: Program, metadata: Metadata | None = None) -> None:
        self.device = device
        self.program = program
        self.inputs: tuple[TensorSpec, ...] = program.inputs
        self.outputs: tuple[TensorSpec, ...] = program.outputs
        self.metadata = metadata or Metadata.of(program.inputs, program.outputs)
        self._input_index = {spec.name: i for i, spec in enumerate(self.inputs)}
        acc = device.accelerator
        self._held = _Held(device._held, program)
        self._direct = acc.runs_direct(program)
        self._starts = acc.starts_direct(program)
        self._launches = acc.launches_natively
        # Small outputs in host memory: the host reads them at memory speed (mapped device memory can be
        # read uncached, which makes even a kilobyte slow).
        host = MemoryDomain.HOST in acc.device_info().domains
        self._domains = [MemoryDomain.SHARED] * len(self.inputs) + [
            MemoryDomain.HOST if host and 0 < spec.nbytes <= SMALL_OUTPUT_BYTES else MemoryDomain.SHARED
            for spec in self.outputs
        ]

    def __repr__(self) -> str:
        ins = ", ".join(str(s) for s in self.inputs)
        outs = ", ".join(str(s) for s in self.outputs)
        state = "" if self._held.open else " closed"
        return f"<Executable on {self.device.name}{state}: ({ins}) -> ({outs})>"

    def __call__(self, *arrays: Any, out: Any = None, **named: Any) -> list[np.ndarray]:
        """Run the program and return its outputs in order. Inputs by position, ``exe(a, b)``; by name,
        ``exe(x=a, y=b)``; or as one mapping, ``exe({"x": a, "y": b})`` (for names that are not Python
        identifiers, or an input called ``out``). ``out``: arrays to write the outputs into."""
        if named or (len(arrays) == 1 and isinstance(arrays[0], Mapping)):
            arrays = self._by_name(arrays, named)
        if not self._direct:
            return self.submit(*arrays, out=out).wait()
        values = self._values(arrays)
        if out is None:
            targets = [np.empty(spec.shape, spec.numpy_dtype) for spec in self.outputs]
        else:
            targets = self._targets(out)
            others = [*values, *targets]
            if any(_overlap(t, o) for i, t in enumerate(targets) for o in others[: len(values) + i]):
                return self.submit(*arrays, out=out).wait()  # in place: the queue path copies the inputs first
        self._held.acc.run_direct(self.program, values, targets)
        return targets

    def submit(self, *arrays: Any, out: Any = None, timeout: float | None = None, **named: Any) -> Run:
        """Start a call (inputs as for a call). ``out``: arrays to receive the outputs (one array, or one
        per output, each of the output's shape and storage dtype, writable and C-contiguous); otherwise new
        arrays are made."""
        if named or (len(arrays) == 1 and isinstance(arrays[0], Mapping)):
            arrays = self._by_name(arrays, named)
        values = self._values(arrays)
        targets = self._targets(out)
        held = self._held
        acc, ctx = held.acc, self.device.context
        if self._starts and timeout is None:  # the inputs are consumed here, so ``out`` may be one of them
            return Run(self, None, None, targets, acc.start_direct(self.program, values))
        calls = held.take() or _CallSet([])
        try:
            if not calls.buffers:
                for spec, domain in zip((*self.inputs, *self.outputs), self._domains, strict=True):
                    calls.buffers.append(acc.allocate_buffer(ctx, BufferDesc(max(spec.nbytes, 1), domain, _IO_USAGE)))
            for buf, value in zip(calls.buffers, values, strict=False):
                acc.write_buffer(buf, 0, value.reshape(-1).view(np.uint8) if value.size else b"")
            if self._launches and timeout is None:
                # Checked once per buffer set; each call is then one launch (Accelerator.prepare).
                if calls.prepared is None:
                    calls.prepared = acc.prepare(self.device.queue, self.program, self._bindings(calls.buffers))
                return Run(self, None, calls, targets, ticket=acc.launch(calls.prepared))
            event = acc.submit(self.device.queue, self.program, self._bindings(calls.buffers), timeout=timeout)
        except BaseException:
            held.discard(calls)
            raise
        return Run(self, event, calls, targets)

    def run(self, output_names: Sequence[str] | None, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """onnxruntime's form: the outputs named in ``output_names`` (None: all, in order), for inputs
        given by name in ``feeds``."""
        outputs = self(feeds)
        if output_names is None:
            return outputs
        index = {spec.name: i for i, spec in enumerate(self.outputs)}
        unknown = [n for n in output_names if n not in index]
        if unknown:
            raise InvalidArgument(f"no output named {', '.join(map(repr, unknown))}; outputs: {', '.join(index)}")
        return [outputs[index[n]] for n in output_names]

    def run_named(self, *arrays: Any, **named: Any) -> dict[str, np.ndarray]:
        """The outputs as ``{name: array}`` (inputs as for a call)."""
        outputs = self(*arrays, **named)
        return {spec.name: value for spec, value in zip(self.outputs, outputs, strict=True)}

    def _by_name(self, arrays: Sequence[Any], named: Mapping[str, Any]) -> list[Any]:
        if arrays and named:
            raise InvalidArgument("give the inputs by position or by name, not both")
        feeds = named or arrays[0]
        unknown = [n for n in feeds if n not in self._input_index]
        if unknown:
            known = ", ".join(repr(s.name) for s in self.inputs)
            raise InvalidArgument(f"no input named {', '.join(map(repr, unknown))}; the inputs are {known}")
        missing = [s.name for s in self.inputs if s.name not in feeds]
        if missing:
            raise InvalidArgument(f"input {', '.join(map(repr, missing))} not given")
        return [feeds[s.name] for s in self.inputs]

    def _values(self, arrays: Sequence[Any]) -> list[np.ndarray]:
        if len(arrays) != len(self.inputs):
            names = ", ".join(repr(s.name) for s in self.inputs)
            raise InvalidArgument(f"program takes {len(self.inputs)} input(s) ({names}), got {len(arrays)}")
        return [_as_array(a, s, i) for i, (a, s) in enumerate(zip(arrays, self.inputs, strict=True))]

    def _bindings(self, buffers: list[Buffer]) -> list[Binding]:
        specs = (*self.inputs, *self.outputs)
        return [Binding(slot, buf, 0, spec.nbytes) for slot, (buf, spec) in enumerate(zip(buffers, specs, strict=True))]

    def _targets(self, out: Any) -> list[np.ndarray] | None:
        if out is None:
            return None
        if isinstance(out, np.ndarray):
            out = [out]
        out = list(out)
        if len(out) != len(self.outputs):
            raise InvalidArgument(f"program has {len(self.outputs)} output(s), out= gives {len(out)}")
        for i, (array, spec) in enumerate(zip(out, self.outputs, strict=True)):
            ok = (
                isinstance(array, np.ndarray)
                and array.dtype == spec.numpy_dtype
                and array.shape == spec.shape
                and array.flags.writeable
                and array.flags.c_contiguous
            )
            if not ok:
                raise InvalidArgument(
                    f"out[{i}] must be a writable C-contiguous {spec.numpy_dtype} array of shape {spec.shape}"
                    f" ({spec}), got {getattr(array, 'dtype', type(array).__name__)}{getattr(array, 'shape', '')}"
                )
        return out

    def _finish(
        self,
        event: Event | None,
        ticket: int | None,
        calls: _CallSet,
        timeout: float | None,
        out: list[np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        held = self._held
        acc = held.acc
        try:
            if ticket is not None:
                assert calls.prepared is not None
                acc.wait_launch(calls.prepared, ticket, timeout)  # spins briefly first, on Vulkan
            else:
                assert event is not None
                state = acc.wait(event, timeout)
                if state is not EventState.COMPLETE:
                    error = acc.event_error(event)
                    if error is not None:
                        raise error
                    raise IronAccelError(f"execution ended {state.value}")
            outs = []
            for i, (buf, spec) in enumerate(zip(calls.buffers[len(self.inputs) :], self.outputs, strict=True)):
                value = out[i] if out is not None else np.empty(spec.shape, spec.numpy_dtype)
                if spec.nbytes:  # one copy, straight into the array handed back
                    acc.read_buffer(buf, 0, spec.nbytes, out=value.reshape(-1).view(np.uint8))
                outs.append(value)
            return outs
        finally:
            if ticket is not None:
                if held.launch_over(calls, ticket):
                    held.give_back(calls)
            elif event is not None and acc.poll_event(event).terminal:
                acc.destroy_event(event)
                held.give_back(calls)

    def close(self) -> None:
        """Unload the program and free the buffers kept for calls. Idempotent. Work still running (of a
        Run dropped unwaited) keeps the program loaded until it ends, then it is unloaded."""
        if self._held.open or not self._held.unloaded:
            reclaim.release(self._held.close)

    def __del__(self) -> None:
        held = getattr(self, "_held", None)
        if held is not None and not held.unloaded:
            reclaim.release(held.close)

    def __enter__(self) -> Executable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _DeviceHeld:
    """What a Device holds on its accelerator: a context, a queue, and its executables' holdings (kept
    apart from the Device so that releasing them refers to this, as for :class:`_Held`)."""

    __slots__ = ("acc", "closed", "context", "executables", "lock", "queue")

    def __init__(self, acc: Accelerator) -> None:
        self.acc = acc
        self.context = acc.create_context()
        try:
            self.queue = acc.create_queue(self.context)
        except BaseException:
            acc.destroy_context(self.context)
            raise
        self.executables: set[_Held] = set()
        self.lock = threading.Lock()
        self.closed = False

    def add(self, held: _Held) -> None:
        with self.lock:
            if self.closed:
                raise InvalidArgument("the device was closed")
            self.executables.add(held)

    def forget(self, held: _Held) -> None:
        with self.lock:
            self.executables.discard(held)

    def close(self) -> bool:
        """Close every executable, then the queue and the context; False while work still runs."""
        with self.lock:
            self.closed = True
            executables = list(self.executables)
        if not all([held.close() for held in executables]):
            return False
        acc = self.acc
        try:
            if self.queue is not None:
                acc.destroy_queue(self.queue)
                self.queue = None
            if self.context is not None:
                acc.destroy_context(self.context)
                self.context = None
        except ReleaseRejected:
            return False
        except IronAccelError as exc:  # the device is gone: nothing of it is left to release
            log.debug("closing a device: %s", exc)
        return True


class Device:
    """One accelerator opened for use: a context and a queue on it.

    Thread safety: ``compile`` and the executables it returns may be used from any threads at once;
    ``close`` only after the other threads are done with the device.

    Lifetime: ``close()`` (or leaving a ``with`` block) closes its executables and releases the context
    and queue; a Device dropped without it does the same once it and its executables are collected."""

    def __init__(self, accelerator: Accelerator, name: str, why: str = "") -> None:
        self.accelerator = accelerator
        self.name = name
        self.why = why
        self.info = accelerator.device_info()
        self._held = _DeviceHeld(accelerator)

    @property
    def context(self) -> Context:
        return self._held.context

    @property
    def queue(self) -> Queue:
        return self._held.queue

    def __repr__(self) -> str:
        return f"<Device {self.name}: {self.info.name}>"

    def empty(self, shape: Sequence[int], dtype: Any) -> np.ndarray:
        """An uninitialised array in the host memory this device moves data from and to fastest: inputs
        and ``out=`` arrays made here skip a copy where the backend can (``virtio:``: the guest memory the
        device reads and writes in place); elsewhere an ordinary numpy array."""
        return self.accelerator.host_array(shape, dtype)

    def compile(
        self,
        source: Any,
        resident_bytes: int | None = None,
        target: Target | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Executable:
        """Validate, admit and load ``source``: a path, the bytes of a .tosa file, or a tosa.Program; or an
        NVFP4 projection (an ``ironaccel.nvfp4`` projection, its bytes or a path to them).

        ``target`` (profiles, extensions, level) restricts what a TOSA program may use; None checks it
        against all of TOSA 1.0 with no level limits. ``metadata``: the program's description and
        quantization (:mod:`.metadata`); for a path, ``<program>.json`` beside it when it exists."""
        if self._held.closed:
            raise InvalidArgument(f"{self!r} was closed")
        payload, artifact_format = _artifact(source)
        # No bound of the caller's: what the program keeps resident (constants, a GPU backend's arena of
        # intermediates) is limited by the context's quota alone, which load_program enforces.
        bound = resident_bytes if resident_bytes is not None else NO_BOUND
        words = target.encode() if target is not None else ()
        source_name = None
        if isinstance(source, str | os.PathLike) and metadata is None:
            metadata, source_name = read_sidecar(Path(source))
        try:
            program = self.accelerator.load_program(self.context, ArtifactRef(payload, bound, words, artifact_format))
        except LoweringError as exc:  # which device refused it matters when several are in use
            raise LoweringError(f"{self.name} ({self.info.name}): {exc}") from exc
        except FormatError as exc:
            if type(exc) is FormatError and isinstance(source, str | os.PathLike):  # the message names no file
                raise FormatError(str(exc).removeprefix("file: "), os.fspath(source)) from exc
            raise
        try:
            exe = Executable(self, program, Metadata.of(program.inputs, program.outputs, metadata, source_name))
            self._held.add(exe._held)
        except BaseException:
            self.accelerator.unload_program(program)
            raise
        return exe

    def close(self) -> None:
        """Close every executable, then release the context and queue. Idempotent. Work still running (of
        a Run dropped unwaited) delays the release until it ends."""
        reclaim.release(self._held.close)

    def __del__(self) -> None:
        held = getattr(self, "_held", None)
        if held is not None and not (held.closed and held.context is None):
            reclaim.release(held.close)

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _artifact(source: Any) -> tuple[bytes, int]:
    """The payload and artifact format of ``source``: NVFP4 projections by type or by magic, else TOSA."""
    from ..nvfp4.format import MAGIC
    from ..nvfp4.projection import ProjectionArtifact

    if isinstance(source, ProjectionArtifact):
        return source.to_bytes(), NVFP4_FORMAT
    payload = _payload(source)
    return payload, NVFP4_FORMAT if payload[: len(MAGIC)] == MAGIC else TOSA_FORMAT


def _payload(source: Any) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if isinstance(source, (str, os.PathLike)):
        from ..core.files import read_limited
        from ..tosa.codec.limits import DEFAULT_LIMITS

        # The kind is known only from the first bytes, so one bound serves both: a TOSA program's, which
        # is far above an NVFP4 artifact's (a 64-byte header and a name of at most 256 bytes), whose
        # reader then refuses any length but the one its header states.
        return read_limited(source, DEFAULT_LIMITS.max_file_bytes, "program file")
    from ..tosa.codec import write
    from ..tosa.ir import Program as TosaProgram

    if isinstance(source, TosaProgram):
        return write(source)
    raise InvalidArgument(
        f"cannot compile a {type(source).__name__}: give a path, bytes, a tosa Program or an nvfp4 projection"
    )


def open_device(spec: str | DeviceDescriptor = "auto") -> Device:
    """Open an execution device: ``"auto"``, ``"cpu"`` (or ``"cpu:0"``), ``"vulkan"``, ``"vulkan:N"`` (an
    index, UUID or part of the name after the colon), ``"virtio:PATH"``, or a DeviceDescriptor from
    ``ironaccel.devices()``. A device that discovery lists but no execution backend runs (``"cuda:0"``) is
    refused with the execution device that runs the same hardware, where there is one.

    "auto" takes the first backend of AUTO_ORDER that opens a non-software device, else the CPU; the
    returned Device's ``why`` says what was picked and why.
    """
    resolved = resolve(spec)
    if resolved.backend != AUTO:
        return Device(open_resolved(resolved), resolved.label, f"asked for {resolved.label}")
    skipped: list[str] = []
    for candidate in AUTO_ORDER:
        try:
            acc = open_resolved(Resolved(candidate, None, candidate))
        except ImportError:
            skipped.append(f"{candidate}: not part of this installation")
            continue
        except (IronAccelError, OSError) as exc:
            skipped.append(f"{candidate}: {exc}")
            continue
        info = acc.device_info()
        if info.software and candidate != "cpu":
            skipped.append(f"{candidate}: only a software device ({info.software})")
            close = getattr(acc, "close", None)
            if close is not None:  # not kept: release the device it opened now, not at collection
                close()
            continue
        why = f"picked {candidate} ({info.name})" + (f"; skipped {'; '.join(skipped)}" if skipped else "")
        return Device(acc, candidate, why)
    raise Unsupported("no execution backend could be opened: " + "; ".join(skipped))


def compile_and_run(program: Any, inputs: Sequence[Any], device: str = "cpu") -> list[np.ndarray]:
    """One-shot helper: open, compile, run, close."""
    with open_device(device) as dev:
        return dev.compile(program)(*inputs)
