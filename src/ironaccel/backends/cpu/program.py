"""Programs: an admitted program made ready to run, and run directly on the caller's thread.

A TOSA program runs as native code where :mod:`.native` can compile it, else on the numpy interpreter
(:mod:`.interpreter`); NVFP4 projections (ADR 0012) run on numpy in :mod:`.nvfp4`. What stays resident is
counted here against the limit the runtime checked the program's working set against (ADR 0024).
Programs without variables also run directly (``Accelerator.run_direct``): on the caller's thread, on the
caller's arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...nvfp4.bounds import Form
from ...runtime.accelerator import Accelerator
from ...runtime.types import NVFP4_FORMAT, TOSA_FORMAT


class LoadedProgram:
    """A loaded program: its runner, how many of its bound slots are inputs, and whether runs may skip the
    queue (no variables to share)."""

    __slots__ = ("compiled", "n_inputs", "stateless", "why")

    def __init__(self, compiled: Any, n_inputs: int, stateless: bool, why: str = "") -> None:
        # A native.NativeProgram, the interpreter's CompiledProgram, or an NVFP4 ProjectionRunner.
        self.compiled = compiled
        self.n_inputs = n_inputs
        self.stateless = stateless
        self.why = why  # why the program is not native ("" when it is)

    def release(self) -> None:
        """Give back what the runner holds beyond its Python objects: a native program's compiled library
        (the other runners hold only memory, freed with them). Idempotent."""
        from .native.program import NativeProgram

        if isinstance(self.compiled, NativeProgram):
            self.compiled.release()


class CpuPrograms(Accelerator):
    """The program hooks of the CPU accelerator (one of its bases)."""

    artifact_formats = frozenset({TOSA_FORMAT, NVFP4_FORMAT})
    nvfp4_forms = frozenset(Form)  # the mixture of experts too (ADR 0042)

    def _load(self, context: Any, program: Any, limit: int) -> tuple[Any, int]:
        # The runtime refused the program before this if its working set exceeds ``limit`` (ADR 0024);
        # what is built here stays within that estimate.
        from ...nvfp4.projection import ProjectionArtifact

        if isinstance(program, ProjectionArtifact):
            from .nvfp4 import RESIDENT_BYTES, ProjectionRunner

            loaded = LoadedProgram(ProjectionRunner(program), len(program.inputs), True, "NVFP4 projection")
            return loaded, RESIDENT_BYTES
        from ...tosa.analysis import storage_size
        from ...tosa.working_set import NUMPY_SHARING, estimate
        from . import native
        from .interpreter import load

        compiled = load(program)
        # Constants are kept once; the IR and plan cost about a small record per tensor and operator.
        blocks = list(program.blocks())
        records = sum(len(b.tensors) + len(b.operators) for b in blocks)
        resident = sum(t.data.nbytes for b in blocks for t in b.tensors if t.data is not None) + 256 * records
        # Folded results stay with the program; a run may copy each output once more (out of a view, or into
        # a fresh array where no bound buffer takes it).
        static = [t for t in program.main.output_tensors if not t.unranked and all(d >= 0 for d in t.shape)]
        resident += compiled.folded_bytes + sum(storage_size(t) for t in static)
        runner, why = native.load(compiled)
        if runner is not None:
            resident += runner.resident_bytes  # the constants it packed and one arena of intermediates
        else:
            # The interpreter's kernels are numpy's and return views (of SLICE, TRANSPOSE, ...): a run holds
            # at most this peak of intermediates, besides the variables' store.
            working = estimate(program, sharing=NUMPY_SHARING)
            resident += working.peak_bytes + working.variable_bytes
        loaded = LoadedProgram(runner or compiled, len(program.main.inputs), not compiled.has_variables, why)
        return loaded, resident

    def _unload(self, native: LoadedProgram) -> None:
        # The runtime unloads only programs no pending or direct run holds, so this frees at once.
        native.release()

    def _direct(self, program: LoadedProgram) -> Any:
        if not program.stateless:
            return None  # runs share the variables: they stay in queue order
        runner = program.compiled
        run_into = getattr(runner, "run_into", None)
        if run_into is not None:
            return run_into

        def run(inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
            results = runner.run(inputs, destinations=outputs)
            for result, out in zip(results, outputs, strict=True):
                if result is not out:
                    out[...] = result

        return run
