"""A program compiled to native code, run through ctypes.

A run is one foreign call, ``ia_main(inputs..., outputs..., arena, blob, control)``, which ctypes makes
with the GIL released. The numpy arrays themselves are passed and the generated code reads their data
pointers (cheaper than asking numpy for them: about 0.1 us against 1 us per array). That reads the field
after the object header, where numpy keeps the data pointer; :func:`array_data_offset` checks the offset
on a live array first, and without it the pointers are taken through ``__array_interface__`` and passed
to ``ia_run`` instead.

Arenas for intermediates are made on first need and reused: a run takes one from a free list and puts it
back, so concurrent runs of one program use different arenas and a steady caller allocates nothing.
Programs with operators large enough to split share their units among the process's helper threads
from inside that one call (:mod:`.pool`); how many threads may join is updated before each run from
the machine's idle CPUs.

The shared object comes from the process's table of open libraries (:mod:`.library`), shared with
every other program of the same source. :meth:`NativeProgram.release` gives it back (a program that is
collected unreleased gives it back then); a run in flight on another thread keeps it until that run
returns, and a run asked for after the release is refused.

A run that is given a control block (:mod:`.control`: :meth:`NativeProgram.run` with ``control`` or a
``deadline``) can be stopped while it runs: the code polls the block between operators and inside long
loops (:mod:`.polls`) and returns early, and the run raises what the interpreter raises at its
checkpoints. The direct path (:meth:`NativeProgram.run_into`, called by ``Accelerator.run_direct``) passes
none, and nothing stops it.
"""

from __future__ import annotations

import ctypes
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ....core.errors import DeadlineExpired, InvalidArgument
from ....tosa.ir import Program, Tensor
from . import library as libraries
from . import pool
from .codegen import Generated
from .control import RunControl, raise_status
from .toolchain import Toolchain

_ALIGN = 64


def array_data_offset() -> int | None:
    """Where an ndarray object keeps its data pointer (bytes from the object's start), if that is the
    field after the object header on this interpreter; None otherwise."""
    offset = object.__basicsize__
    for dtype in (np.int32, np.float32):
        probe = np.arange(7, dtype=dtype)[2:]  # a view: its pointer differs from its base's
        try:
            if ctypes.c_void_p.from_address(id(probe) + offset).value != probe.__array_interface__["data"][0]:
                return None
        except (OSError, ValueError):
            return None
    return offset


class NativeProgram:
    """Runs a program compiled by :func:`.compile`; the run interface of the interpreter's
    :class:`~..interpreter.CompiledProgram` for programs without state."""

    def __init__(
        self, program: Program, generated: Generated, library: Path, pass_arrays: bool, tools: Toolchain
    ) -> None:
        self.program = program
        self.main = program.main
        self.source = generated.source
        self.library = library
        n_io = generated.n_inputs + generated.n_outputs
        self._n_inputs = generated.n_inputs
        self._failures = generated.failures
        self._pass_arrays = pass_arrays
        # ctypes keeps every array type it makes for good: made only where the pointers are passed in one.
        self._io_type = None if pass_arrays else ctypes.c_void_p * n_io
        self._library = libraries.acquire(library)
        try:
            pointer, status = ctypes.c_void_p, ctypes.c_int
            arguments = [ctypes.py_object] * n_io + [pointer, pointer, pointer]
            self._main = self._library.function("ia_main", arguments, status)
            self._run = self._library.function("ia_run", [pointer, pointer, pointer, pointer], status)
            # Without the pool (it failed to build) split operators run on the calling thread.
            self._splits = bool(generated.splits) and self._library.attach_pool(tools)
        except BaseException:
            self._main = self._run = None
            libraries.release(self._library)
            raise
        # Gives the library back once, from release() or when the program is collected unreleased (no run
        # can be in flight then: a run holds the program). Not at exit, when a daemon thread may still run.
        self._give_back = weakref.finalize(self, libraries.release, self._library)
        self._give_back.atexit = False
        self._released = False
        self._closing = threading.Lock()  # taken only to make an arena, and to let go once
        self._arena_count = 0  # arenas made; those not in the free list belong to runs in flight
        self._gone = False  # the library and buffers were let go
        self._blob: np.ndarray | None = generated.plan.blob
        self._blob_bytes = self._blob.nbytes
        self._blob_address = self._blob.__array_interface__["data"][0]
        self.arena_bytes = generated.arena_bytes
        self._arenas: list[tuple[np.ndarray, int]] = []
        self._input_types = [(t.dtype.numpy, tuple(t.shape)) for t in self.main.input_tensors]
        self._output_types = [(t.dtype.numpy, tuple(t.shape)) for t in self.main.output_tensors]

    @property
    def resident_bytes(self) -> int:
        """The blob of constants and one arena."""
        return self._blob_bytes + self.arena_bytes

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        """Give back the compiled library and the memory of this program; idempotent. A run in flight on
        another thread keeps them until it returns; a run asked for afterwards raises InvalidArgument."""
        self._released = True
        self._let_go_if_idle()

    def _let_go_if_idle(self) -> None:
        """After the release: let go once no run is in flight. A run holds an arena from before it reads
        ``_released`` until after its foreign call, so every arena being home means no run is inside the
        library, and none can enter it (each checks ``_released`` after taking its arena). Whoever sees
        that last, release() or the last run, lets go; the lock makes it once."""
        with self._closing:
            if self._gone or len(self._arenas) != self._arena_count:
                return
            self._gone = True
            # Every function object taken from the library goes before the library does (library.py).
            self._main = self._run = None
            self._blob = None
            self._arenas = []
        self._give_back()

    @property
    def input_tensors(self) -> list[Tensor]:
        return self.main.input_tensors

    @property
    def output_tensors(self) -> list[Tensor]:
        return self.main.output_tensors

    def variables(self) -> dict[str, np.ndarray]:
        return {}

    def reset_variables(self) -> None:
        pass

    def run(
        self,
        inputs: Sequence[np.ndarray],
        *,
        check: Callable[[], None] | None = None,
        deadline: float | None = None,
        destinations: Sequence[np.ndarray | None] | None = None,
        control: RunControl | None = None,
    ) -> list[np.ndarray]:
        """As :meth:`CompiledProgram.run`; outputs go into ``destinations`` where one is given. ``check`` is
        called once, before the run (native code cannot call it). The run stops where it is when
        ``control`` is told to stop (RunCancelled) or at ``control``'s deadline or ``deadline``, whichever
        is first (DeadlineExpired); its outputs are then partly written."""
        args = self._checked_inputs(inputs)
        if destinations is not None and len(destinations) != len(self._output_types):
            raise InvalidArgument(f"{len(destinations)} destinations for {len(self._output_types)} outputs")
        outputs = []
        for index, (dtype, shape) in enumerate(self._output_types):
            dest = destinations[index] if destinations is not None else None
            usable = (
                dest is not None
                and dest.dtype == dtype
                and dest.shape == shape
                and dest.flags.c_contiguous
                and dest.flags.writeable
                and all(dest is not o for o in outputs)
            )
            outputs.append(dest if usable else np.empty(shape, dtype))
        if deadline is not None:
            control = control if control is not None else RunControl()
            control.tighten(deadline)
        if check is not None:
            check()
        if deadline is not None and time.monotonic() > deadline:
            raise DeadlineExpired("the program ran past its deadline")
        self.run_into(args, outputs, None if control is None else control.address)
        return outputs

    @staticmethod
    def control_block(deadline: float | None = None) -> RunControl:
        """A control block for one :meth:`run` (``control``): its stop() stops the run from any thread,
        and the run stops at ``deadline`` (a time.monotonic() instant) at the latest."""
        return RunControl(deadline)

    def _checked_inputs(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) != len(self._input_types):
            raise InvalidArgument(f"the program takes {len(self._input_types)} inputs, got {len(inputs)}")
        args = []
        for index, (value, (dtype, shape)) in enumerate(zip(inputs, self._input_types, strict=True)):
            if not isinstance(value, np.ndarray) or value.dtype != dtype or value.shape != shape:
                got = f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__
                raise InvalidArgument(f"input #{index}: expected {dtype}{list(shape)}, got {got}")
            args.append(value if value.flags.c_contiguous else np.ascontiguousarray(value))
        return args

    def run_into(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], control: int | None = None) -> None:
        """Run once. The caller has checked the arrays: declared dtypes and shapes, C-contiguous, outputs
        writable and overlapping neither each other nor an input. ``control``: the address of the run's
        control block (:attr:`RunControl.address`, kept alive by the caller), None for a run nothing
        stops; a run it stops raises RunCancelled or DeadlineExpired."""
        # No lock on this path (two would cost more than a small run): list.pop / append and attribute
        # reads are atomic under the GIL, which the arena free list relies on already. The arena taken
        # marks this run as in flight for release() (see _let_go_if_idle).
        arenas = self._arenas
        try:
            arena, address = arenas.pop()
        except IndexError:
            arena, address = self._new_arena()
        try:
            if self._released:
                raise InvalidArgument(f"the native program {self.library.name} was released: it cannot run")
            if self._splits:
                pool.update_limit()
            if self._pass_arrays:
                status = self._main(*inputs, *outputs, address, self._blob_address, control)
            else:
                status = self._run(self._io(inputs, outputs), address, self._blob_address, control)
        finally:
            arenas.append((arena, address))
            if self._released:  # released while in flight: the last run out lets go
                self._let_go_if_idle()
        if status:
            raise_status(status, self.library.name, self._failures)

    def _io(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> ctypes.Array:
        assert self._io_type is not None
        return self._io_type(*(a.__array_interface__["data"][0] for a in (*inputs, *outputs)))

    def _new_arena(self) -> tuple[np.ndarray, int]:
        raw = np.empty(self.arena_bytes + _ALIGN, np.uint8)
        address = raw.__array_interface__["data"][0]
        skip = (-address) % _ALIGN
        with self._closing:
            self._arena_count += 1
        return raw, address + skip
