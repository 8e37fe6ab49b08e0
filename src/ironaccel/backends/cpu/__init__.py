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
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    """``CompiledProgram``, imported from the interpreter when first asked for."""
    if name != "CompiledProgram":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(f"{__name__}.interpreter").CompiledProgram
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), "CompiledProgram"})


__all__ = ["CompiledProgram", "load", "run"]
