"""The CPU backend: TOSA 1.0 on the host with numpy, and the oracle every other backend is checked against.

Every operator has a numpy kernel (``ops/``, one module per specification group) that computes what the
specification's pseudocode computes: bit-exact where the specification is exact, within its error bounds
elsewhere. Integer arithmetic is exact (int64, or float64 where the sums provably fit in 53 bits so that
BLAS can do the work); convolutions and matrix products are one large BLAS product over an im2col view
rather than loops over elements. The interpreter (:mod:`.interpreter`) prepares a program once (kernel
lookup, constant folding, liveness) and then runs it as often as asked. Values are numpy arrays in the
storage form of :attr:`~ironaccel.tosa.dtypes.DType.numpy`.

``run(program, inputs)`` is the direct entry for tests and tools; ``load(program)`` returns a
:class:`~.interpreter.CompiledProgram` to run repeatedly. Both are the interpreter: the oracle other
backends are checked against. The execution-contract accelerator (:mod:`.accelerator`) runs a program
as generated native code instead where a C compiler is found and the program's operators allow it
(:mod:`.native`), with the same results (bit for bit for integers).

The roles, one module each, named as in every backend (docs/adding-a-backend.md):

- :mod:`.registration`: the registration (plain data, the entry point ``cpu``: reading it imports nothing else);
- :mod:`.device`: the host as a device (identity, limits) and the allocator's tuning;
- :mod:`.accelerator`: ``CpuAccelerator``, joining the roles below, which the registration opens;
- :mod:`.memory`: buffers: host byte arrays in every memory domain, allocation, write and read;
- :mod:`.program`: loading a program as native code or for the interpreter, unloading, direct runs;
- :mod:`.submit`: a worker thread per queue, running submissions in order and ending their events;
- :mod:`.capability`: the capability descriptor: all of TOSA 1.0;
- :mod:`.ops`: the numpy kernels, one module per operator group of the specification.

The interpreter and what it runs on:

- :mod:`.interpreter`: loads a program once and runs it, block by block, operator by operator;
- :mod:`.block_plan`: a block's plan at load: tensor slots, kernels found, liveness, kernel contexts;
- :mod:`.folding`: constant folding at load, held to the program's working-set estimate;
- :mod:`.run_arguments`: the arrays a run takes and gives back, checked, and its stop hook;
- :mod:`.kernel`: the interface between the interpreter and its kernels, and their registry;
- :mod:`.numerics`: exact integer and floating-point helpers, the specification's pseudocode in numpy;
- :mod:`.parallel`: the small thread pool the big kernels split their work across;
- :mod:`.nvfp4`: NVFP4 projections (ADR 0012), the oracle of other backends' NVFP4 kernels;
- :mod:`.native`: a whole program as one generated C function, compiled once per machine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...core.lazy import lazy_names
from ...tosa.ir import Program

if TYPE_CHECKING:
    import numpy as np

    from .interpreter import CompiledProgram

ProgramSource = Program | bytes | bytearray | memoryview | str | os.PathLike


def _program(source: ProgramSource) -> Program:
    if isinstance(source, Program):
        return source
    from ...tosa.codec import read  # the codec is only needed for serialized programs

    return read(source)


def load(program: ProgramSource) -> CompiledProgram:
    """Prepare a program (a :class:`Program`, ``.tosa`` bytes or a path) for repeated runs."""
    # The interpreter is imported here, not with the package: reading the backend's registration imports
    # this package, and must not load the interpreter and its kernels (ADR 0030).
    from .interpreter import load as load_program

    return load_program(_program(program))


def run(program: ProgramSource, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Load ``program`` and run it once on ``inputs`` (storage form); returns its outputs."""
    return load(program).run(inputs)


# ``CompiledProgram`` comes from the interpreter when first asked for.
__getattr__, __dir__ = lazy_names(__name__, {"CompiledProgram": "interpreter"})


__all__ = ["CompiledProgram", "load", "run"]
