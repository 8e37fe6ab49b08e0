"""A program compiled to native code, run through ctypes.

A run is one foreign call, ``ia_main(inputs..., outputs..., arena, blob)``, which ctypes makes with the
GIL released. The numpy arrays themselves are passed and the generated code reads their data pointers
(cheaper than asking numpy for them: about 0.1 us against 1 us per array). That reads the field after
the object header, where numpy keeps the data pointer; :func:`array_data_offset` checks the offset on a
live array first, and without it the pointers are taken through ``__array_interface__`` and passed to
``ia_run`` instead.

Arenas for intermediates are made on first need and reused: a run takes one from a free list and puts it
back, so concurrent runs of one program use different arenas and a steady caller allocates nothing.
Programs with operators large enough to split share their units among the process's helper threads
from inside that one call (:mod:`.pool`); how many threads may join is updated before each run from
the machine's idle CPUs.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ....core.errors import DeadlineExpired, InternalError, InvalidArgument
from ....tosa.ir import Program, Tensor
from . import pool
from .codegen import Generated
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
        self._lib = ctypes.CDLL(str(library))
        n_io = generated.n_inputs + generated.n_outputs
        self._n_inputs = generated.n_inputs
        self._pass_arrays = pass_arrays
        self._main = self._lib.ia_main
        self._main.argtypes = [ctypes.py_object] * n_io + [ctypes.c_void_p, ctypes.c_void_p]
        self._main.restype = ctypes.c_int
        self._run = self._lib.ia_run
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self._run.restype = ctypes.c_int
        self._io_type = ctypes.c_void_p * n_io
        # Without the pool (it failed to build) split operators run on the calling thread.
        self._splits = bool(generated.splits) and pool.attach(self._lib, tools)
        self._blob = generated.plan.blob
        self._blob_address = self._blob.__array_interface__["data"][0]
        self.arena_bytes = generated.arena_bytes
        self._arenas: list[tuple[np.ndarray, int]] = []
        self._input_types = [(t.dtype.numpy, tuple(t.shape)) for t in self.main.input_tensors]
        self._output_types = [(t.dtype.numpy, tuple(t.shape)) for t in self.main.output_tensors]

    @property
    def resident_bytes(self) -> int:
        """The blob of constants and one arena."""
        return self._blob.nbytes + self.arena_bytes

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
    ) -> list[np.ndarray]:
        """As :meth:`CompiledProgram.run`: ``check`` and ``deadline`` are looked at once, before the run
        (a native run is not interrupted); outputs go into ``destinations`` where one is given."""
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
        if check is not None:
            check()
        if deadline is not None and time.monotonic() > deadline:
            raise DeadlineExpired("the program ran past its deadline")
        self.run_into(args, outputs)
        return outputs

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

    def run_into(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        """Run once. The caller has checked the arrays: declared dtypes and shapes, C-contiguous, outputs
        writable and overlapping neither each other nor an input."""
        arenas = self._arenas
        try:
            arena, address = arenas.pop()
        except IndexError:
            arena, address = self._new_arena()
        try:
            if self._splits:
                pool.update_limit()
            if self._pass_arrays:
                status = self._main(*inputs, *outputs, address, self._blob_address)
            else:
                status = self._run(self._io(inputs, outputs), address, self._blob_address)
        finally:
            arenas.append((arena, address))
        if status:
            raise InternalError(f"native program failed with status {status}")

    def _io(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> ctypes.Array:
        return self._io_type(*(a.__array_interface__["data"][0] for a in (*inputs, *outputs)))

    def _new_arena(self) -> tuple[np.ndarray, int]:
        raw = np.empty(self.arena_bytes + _ALIGN, np.uint8)
        address = raw.__array_interface__["data"][0]
        skip = (-address) % _ALIGN
        return raw, address + skip
