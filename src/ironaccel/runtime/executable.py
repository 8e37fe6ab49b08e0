"""A program loaded on a device and callable with arrays (:class:`Executable`), the user API's hot path.

``exe(x)`` checks its inputs and, for a program the backend runs on the caller's thread
(``Accelerator.run_direct``), runs it there on the caller's arrays with no queue hand-off. Otherwise a call
is ``submit(...).wait()``: the inputs are copied into a buffer set kept between calls (a
:class:`~.holdings.CallSet`), and the program is submitted on the device's queue, or launched where the
backend prepares submissions natively (ADR 0016), or started as a direct run it finishes later
(``Accelerator.start_direct``). Which of these a call takes is decided once, at construction.

A call given a :class:`~.device_array.DeviceArray` binds that array's buffer in its slot, in place of the
buffer set's (no write of it, and, for an output, no read back); with DeviceArray inputs and no ``out``,
the outputs come back as new DeviceArrays, which a next call binds in turn, so a chain of calls keeps its
tensors on the device. A call on DeviceArrays alone runs directly on their own memory where the host
addresses it (the CPU backend) and no queued work binds them; where the backend launches natively, a call
with DeviceArrays launches a submission prepared on exactly its buffers and kept for the next call with
them (:mod:`.resident_calls`, ADR 0039); otherwise it is a submission on the queue. NVFP4 weights uploaded once
(:class:`~.device_array.DeviceQuantizedWeights`) stand for their three parts wherever a projection takes
them; being weights, they leave the outputs numpy unless an activation input is a DeviceArray.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import InvalidArgument, IronAccelError
from . import reclaim
from .device_array import DeviceArray, DeviceQuantizedWeights
from .event import EventState
from .handles import Buffer, Event, Program
from .holdings import CallSet, ExecutableHoldings
from .metadata import Metadata
from .resident_calls import ResidentLaunches, run_in_place
from .run import Run
from .spec import TensorSpec
from .types import Binding, BufferDesc, BufferUsage, MemoryDomain

if TYPE_CHECKING:
    from .device import Device

_IO_USAGE = (
    BufferUsage.PROGRAM_INPUT
    | BufferUsage.PROGRAM_OUTPUT
    | BufferUsage.TRANSFER_SOURCE
    | BufferUsage.TRANSFER_DESTINATION
)

SMALL_OUTPUT_BYTES = 64 << 10  # outputs up to this size live in HOST memory where the device offers it
_PARTS = DeviceQuantizedWeights.PARTS


def _as_array(value: Any, spec: TensorSpec, index: int) -> Any:
    """``value`` as a C-contiguous numpy array of ``spec``, or the DeviceArray it is (its device is checked
    where it is bound)."""
    if type(value) is np.ndarray:  # the common case first: small programs run in tens of microseconds
        arr = value
    else:
        if type(value) is DeviceArray:
            if value.dtype != spec.numpy_dtype or value.shape != spec.shape:
                _refuse(value, spec, index)
            return value
        if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray):
            value = np.from_dlpack(value)
        arr = np.asarray(value) if isinstance(value, np.ndarray) else np.asarray(value, dtype=spec.numpy_dtype)
    if arr.dtype != spec.numpy_dtype or arr.shape != spec.shape:
        _refuse(arr, spec, index)
    # np.ascontiguousarray would make a rank-0 array rank 1
    return arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)


def _refuse(arr: Any, spec: TensorSpec, index: int) -> None:
    if arr.dtype != spec.numpy_dtype:
        raise InvalidArgument(f"input {index} ({spec}): expected {spec.numpy_dtype}, got {arr.dtype}")
    raise InvalidArgument(f"input {index} ({spec}): expected shape {spec.shape}, got {arr.shape}")


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays may share memory (two arrays owning their memory never do: a quick answer)."""
    if a.base is None and b.base is None:
        return a is b
    return bool(np.may_share_memory(a, b))


# What a call binds in place instead of copying: one scan of the inputs' types finds either.
_ON_DEVICE = frozenset({DeviceArray, DeviceQuantizedWeights})


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
        self._held = ExecutableHoldings(device._held, program)
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
        if self._launches:
            specs = (*self.inputs, *self.outputs)
            descs = [BufferDesc(max(s.nbytes, 1), d, _IO_USAGE) for s, d in zip(specs, self._domains, strict=True)]
            self._held.resident = ResidentLaunches(
                acc, device.context, device.queue, program, descs, [s.nbytes for s in specs]
            )

    def __repr__(self) -> str:
        ins = ", ".join(str(s) for s in self.inputs)
        outs = ", ".join(str(s) for s in self.outputs)
        state = "" if self._held.open else " closed"
        return f"<Executable on {self.device.name}{state}: ({ins}) -> ({outs})>"

    def __call__(self, *arrays: Any, out: Any = None, **named: Any) -> list[Any]:
        """Run the program and return its outputs in order. Inputs by position, ``exe(a, b)``; by name,
        ``exe(x=a, y=b)``; or as one mapping, ``exe({"x": a, "y": b})`` (for names that are not Python
        identifiers, or an input called ``out``). ``out``: arrays (numpy or DeviceArrays) to write the
        outputs into. Outputs are numpy arrays, or new DeviceArrays when an input is one and ``out`` is
        not given (NVFP4 weights on the device do not count: see ``submit``)."""
        if named or (len(arrays) == 1 and isinstance(arrays[0], Mapping)):
            arrays = self._by_name(arrays, named)
        if not self._direct:
            return self.submit(*arrays, out=out).wait()
        if not _ON_DEVICE.isdisjoint(map(type, arrays)):
            return self._call_resident(*self._arguments(arrays, out))
        values = self._values(arrays)
        if out is None:
            targets = [np.empty(spec.shape, spec.numpy_dtype) for spec in self.outputs]
        else:
            targets = self._targets(out)
            if DeviceArray in map(type, targets):
                return self._call_resident(values, targets, frozenset())
            others = [*values, *targets]
            if any(_overlap(t, o) for i, t in enumerate(targets) for o in others[: len(values) + i]):
                return self.submit(*arrays, out=out).wait()  # in place: the queue path copies the inputs first
        self._held.acc.run_direct(self.program, values, targets)
        return targets

    def submit(self, *arrays: Any, out: Any = None, timeout: float | None = None, **named: Any) -> Run:
        """Start a call (inputs as for a call). ``out``: arrays to receive the outputs (one array, or one
        per output, each of the output's shape and storage dtype: numpy arrays writable and C-contiguous,
        or DeviceArrays of this device); otherwise new arrays are made (DeviceArrays when an input is one).

        A :class:`DeviceQuantizedWeights` stands for the three inputs its parts fill (``packed``,
        ``scales``, ``tensor_scale``, under a projection's prefix such as ``expert0.``), bound in place.
        Its parts count as weights, not as device inputs: the outputs are DeviceArrays only when another
        input is a DeviceArray, so a call on numpy activations gets numpy outputs."""
        if named or (len(arrays) == 1 and isinstance(arrays[0], Mapping)):
            arrays = self._by_name(arrays, named)
        values, targets, weights = self._arguments(arrays, out)
        if DeviceArray in map(type, values) or (targets is not None and DeviceArray in map(type, targets)):
            targets, made = self._resident_targets(values, targets, weights)
            return self._start_resident(values, targets, timeout, made)
        held = self._held
        acc = held.acc
        if self._starts and timeout is None:  # the inputs are consumed here, so ``out`` may be one of them
            return Run(self, None, None, targets, acc.start_direct(self.program, values))
        calls = held.take() or CallSet([])
        try:
            if not calls.buffers:
                self._allocate(calls)
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

    def _allocate(self, calls: CallSet) -> None:
        acc, ctx = self._held.acc, self.device.context
        for spec, domain in zip((*self.inputs, *self.outputs), self._domains, strict=True):
            calls.buffers.append(acc.allocate_buffer(ctx, BufferDesc(max(spec.nbytes, 1), domain, _IO_USAGE)))

    def _arguments(self, arrays: Sequence[Any], out: Any) -> tuple[list[Any], list[Any] | None, frozenset[int]]:
        """The checked inputs (NVFP4 weights expanded into their parts), the ``out`` arrays, and the input
        slots those parts fill."""
        weights: frozenset[int] = frozenset()
        if DeviceQuantizedWeights in map(type, arrays):
            arrays, weights = self._expand(arrays)
        return self._values(arrays), self._targets(out), weights

    def _resident_targets(
        self, values: list[Any], targets: list[Any] | None, weights: frozenset[int]
    ) -> tuple[list[Any] | None, bool]:
        """For a call binding DeviceArrays: its inputs checked as bindable here, its outputs (new
        DeviceArrays where an activation is one and ``out`` was not given: device in, device out), and
        whether they were made now. ``weights``: the input slots that parts of DeviceQuantizedWeights fill."""
        for i, value in enumerate(values):
            if type(value) is DeviceArray:
                self._own(value, f"input {i}")
        made = targets is None and any(type(v) is DeviceArray and i not in weights for i, v in enumerate(values))
        if made:
            targets = [DeviceArray(self.device, spec.shape, spec.numpy_dtype) for spec in self.outputs]
        for i, target in enumerate(targets or ()):
            if type(target) is DeviceArray and any(target is other for other in (*values, *targets[:i])):
                raise InvalidArgument(
                    f"out[{i}] ({target!r}) is also an input or another output of the call: the device would"
                    " write it while the program uses it; give a DeviceArray of its own"
                )
        return targets, made

    def _call_resident(self, values: list[Any], targets: list[Any] | None, weights: frozenset[int]) -> list[Any]:
        """A call (of a program the backend runs directly) binding DeviceArrays: run on the arrays' own
        memory where ``run_in_place`` can, else submitted and waited for."""
        targets, made = self._resident_targets(values, targets, weights)
        direct = targets if targets is not None else [np.empty(s.shape, s.numpy_dtype) for s in self.outputs]
        outs = run_in_place(self._held.acc, self.program, values, direct)
        if outs is not None:
            return outs
        return self._start_resident(values, targets, None, made).wait()

    def _start_resident(self, values: list[Any], targets: list[Any] | None, timeout: float | None, made: bool) -> Run:
        """Start a call binding DeviceArrays in the slots where they are given, and buffers of a buffer set
        in the others: a launch of the set prepared on exactly these buffers where the backend launches
        natively (none for outputs made by this call, which no later call binds again), else a submission
        of a kept buffer set with the arrays' buffers in place of its own for this call alone."""
        held = self._held
        acc = held.acc
        slots = (*values, *(targets or ()))
        arrays = tuple(v._held for v in slots if type(v) is DeviceArray)
        resident = [v for v in values if type(v) is DeviceArray]
        if held.resident is not None and timeout is None and not made:
            key = tuple(v.buffer if type(v) is DeviceArray else None for v in slots)
            if targets is None:  # numpy outputs, read from buffers of the set
                key += (None,) * len(self.outputs)
            launch = held.resident.take(key, arrays)
            if launch is not None:
                try:
                    for buf, value in zip(launch.buffers, values, strict=False):
                        if type(value) is not DeviceArray and value.size:
                            acc.write_buffer(buf, 0, value.reshape(-1).view(np.uint8))
                    ticket = acc.launch(launch.prepared)
                except BaseException:
                    held.discard(launch)
                    raise
                launch.started(arrays)
                return Run(self, None, launch, targets, ticket=ticket, resident=resident)
        calls = held.take() or CallSet([])
        try:
            if not calls.buffers:
                self._allocate(calls)
            bound = list(calls.buffers)
            for slot, value in enumerate(slots):
                if type(value) is DeviceArray:
                    bound[slot] = value.buffer
                elif slot < len(values) and value.size:
                    acc.write_buffer(bound[slot], 0, value.reshape(-1).view(np.uint8))
            event = acc.submit(self.device.queue, self.program, self._bindings(bound), timeout=timeout)
        except BaseException:
            held.discard(calls)
            raise
        calls.started(arrays)
        return Run(self, event, calls, targets, resident=resident)

    def _own(self, array: DeviceArray, what: str) -> None:
        """Refuse a DeviceArray this executable cannot bind: one of another device, or one closed."""
        if array.device is not self.device:
            raise InvalidArgument(
                f"{what} is a DeviceArray of {array.device!r}, but this executable runs on {self.device!r}:"
                " copy it across with this device's array(x.numpy())"
            )
        if array.closed:
            raise InvalidArgument(f"{what}: {array!r} was closed")

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
        feeds = dict(named or arrays[0])
        firsts = set()  # where a DeviceQuantizedWeights goes, once, for its three inputs
        for key, value in list(feeds.items()):
            if type(value) is DeviceQuantizedWeights:
                del feeds[key]
                names = self._part_names(key)
                firsts.add(self._input_index[names[0]])
                feeds.update(dict.fromkeys(names, value))
        unknown = [n for n in feeds if n not in self._input_index]
        if unknown:
            known = ", ".join(repr(s.name) for s in self.inputs)
            raise InvalidArgument(f"no input named {', '.join(map(repr, unknown))}; the inputs are {known}")
        missing = [s.name for s in self.inputs if s.name not in feeds]
        if missing:
            raise InvalidArgument(f"input {', '.join(map(repr, missing))} not given")
        return [
            feeds[s.name]
            for i, s in enumerate(self.inputs)
            if i in firsts or type(feeds[s.name]) is not DeviceQuantizedWeights
        ]

    def _part_names(self, key: str) -> list[str]:
        """The inputs NVFP4 weights given as ``key`` fill: ``weights`` names the unprefixed three, any other
        key the three under ``key.``; they must follow one another in the program's inputs."""
        prefix = "" if key == "weights" else f"{key}."
        names = [prefix + part for part in _PARTS]
        first = self._input_index.get(names[0])
        if first is None or [s.name for s in self.inputs[first : first + len(names)]] != names:
            known = ", ".join(repr(s.name) for s in self.inputs)
            raise InvalidArgument(
                f"{key!r} is NVFP4 weights, which fill the inputs {', '.join(map(repr, names))} in turn; the"
                f" inputs are {known}"
            )
        return names

    def _expand(self, arrays: Sequence[Any]) -> tuple[list[Any], frozenset[int]]:
        """``arrays`` with each DeviceQuantizedWeights replaced by its parts, checked against the inputs
        they fill, and the input slots those parts take."""
        flat: list[Any] = []
        weights: set[int] = set()
        for j, value in enumerate(arrays):
            if type(value) is not DeviceQuantizedWeights:
                flat.append(value)
                continue
            at = len(flat)
            specs = self.inputs[at : at + len(_PARTS)]
            names = [s.name for s in specs]
            prefix = names[0].removesuffix(_PARTS[0]) if names else ""
            if names != [prefix + part for part in _PARTS]:
                known = ", ".join(repr(s.name) for s in self.inputs)
                raise InvalidArgument(
                    f"argument {j} is NVFP4 weights ({value!r}), which fill three inputs named packed, scales"
                    f" and tensor_scale, but it lands on input {at} of ({known})"
                )
            if value.device is not self.device:
                raise InvalidArgument(
                    f"argument {j} is NVFP4 weights of {value.device!r}, but this executable runs on"
                    f" {self.device!r}: copy them across with this device's array(q.to_host())"
                )
            if value.closed:
                raise InvalidArgument(f"argument {j}: {value!r} was closed")
            for part, spec in zip(value.parts, specs, strict=True):
                if part.shape != spec.shape or part.dtype != spec.numpy_dtype:
                    raise InvalidArgument(
                        f"argument {j}: {value!r} does not fit this program: input {spec.name!r} must be"
                        f" {spec.numpy_dtype}{list(spec.shape)}, the weights hold {part.dtype}{list(part.shape)}"
                        " (the projection's n, k and batch must be those of the quantized weights)"
                    )
            flat.extend(value.parts)
            weights.update(range(at, at + len(_PARTS)))
        return flat, frozenset(weights)

    def _values(self, arrays: Sequence[Any]) -> list[Any]:
        if len(arrays) != len(self.inputs):
            names = ", ".join(repr(s.name) for s in self.inputs)
            raise InvalidArgument(f"program takes {len(self.inputs)} input(s) ({names}), got {len(arrays)}")
        return [_as_array(a, s, i) for i, (a, s) in enumerate(zip(arrays, self.inputs, strict=True))]

    def _bindings(self, buffers: list[Buffer]) -> list[Binding]:
        specs = (*self.inputs, *self.outputs)
        return [Binding(slot, buf, 0, spec.nbytes) for slot, (buf, spec) in enumerate(zip(buffers, specs, strict=True))]

    def _targets(self, out: Any) -> list[Any] | None:
        if out is None:
            return None
        if isinstance(out, (np.ndarray, DeviceArray)):
            out = [out]
        out = list(out)
        if len(out) != len(self.outputs):
            raise InvalidArgument(f"program has {len(self.outputs)} output(s), out= gives {len(out)}")
        for i, (array, spec) in enumerate(zip(out, self.outputs, strict=True)):
            if type(array) is DeviceArray:
                if array.dtype != spec.numpy_dtype or array.shape != spec.shape:
                    raise InvalidArgument(
                        f"out[{i}] must be a {spec.numpy_dtype} array of shape {spec.shape} ({spec}),"
                        f" got {array.dtype}{array.shape}"
                    )
                self._own(array, f"out[{i}]")
                continue
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
        calls: CallSet,
        timeout: float | None,
        out: list[Any] | None = None,
    ) -> list[Any]:
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
                if spec.nbytes and type(value) is not DeviceArray:  # one copy, into the array handed back
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
