"""Programs: an admitted TOSA program lowered into what the device runs.

``load_program`` (runtime/programs.py) parses the artifact, validates it and admits it against
:mod:`.capability`'s descriptor before ``_load`` runs, so ``_load`` sees only programs whose every operator,
type and limit the descriptor allows. The template admits nothing: ``_load`` is never reached through the
contract, and the refusal names the template.

A loaded program here is a list of steps, one per operator of the entry block, each a host function over
the program's values by tensor name; a real backend's is device code (kernels, pipelines, a recorded
command stream) and the plan of its memory. ``_lower`` is where each operator becomes a step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...runtime.accelerator import Accelerator
from ...runtime.handles import Context, Program
from ...runtime.types import ArtifactRef
from ...tosa.errors import LoweringError
from ...tosa.ir import Block, Operator

# One operator's work: reads its operands from the values by tensor name and stores its results there.
Step = Callable[[dict[str, np.ndarray]], None]
# What the template counts as resident per step (its closure); a real backend counts its device objects.
_STEP_BYTES = 256


@dataclasses.dataclass(frozen=True)
class LoadedProgram:
    """A program ready to run: the entry block's input and output tensor names and its steps in order."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    steps: tuple[Step, ...]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], checkpoint: Callable[[], None]) -> None:
        """Run every step on ``inputs`` and write the results into ``outputs`` (views of the bound buffers,
        written only after the last step, so an output that overlaps an input changes nothing a step reads).
        ``checkpoint`` runs before each step: it raises when the run is cancelled or past its deadline."""
        values = dict(zip(self.inputs, inputs, strict=True))
        for step in self.steps:
            checkpoint()
            step(values)
        for name, out in zip(self.outputs, outputs, strict=True):
            out[...] = values[name]


class TemplatePrograms(Accelerator):
    """The program hooks of the template's accelerator (one of its bases)."""

    def load_program(self, ctx: Context, artifact: ArtifactRef) -> Program:
        """The runtime's ``load_program``; while the descriptor admits no operator, its refusal says so."""
        # TODO(backend): delete this method once capability.py admits an operator.
        try:
            return super().load_program(ctx, artifact)
        except LoweringError as exc:
            if self.capabilities().operators:
                raise
            raise LoweringError(f"the template backend runs no operator (capability.py admits none): {exc}") from exc

    def _load(self, context: Any, program: Any, limit: int) -> tuple[LoadedProgram, int]:
        # TODO(backend): lower the program as a whole where the device wants that (one pipeline per kernel,
        # constants uploaded once, intermediates planned into one arena, the commands recorded once) and
        # count what stays resident against ``limit`` before allocating (ResourceLimit above it).
        block = program.main
        steps = tuple(self._lower(block, index, operator) for index, operator in enumerate(block.operators))
        loaded = LoadedProgram(tuple(block.inputs), tuple(block.outputs), steps)
        return loaded, _STEP_BYTES * len(steps)

    def _lower(self, block: Block, index: int, operator: Operator) -> Step:
        """The step that runs ``operator`` (the ``index``-th of ``block``), or LoweringError naming it."""
        # TODO(backend): return the device code of each admitted operator: read its operands' shapes and types
        # from ``block.tensor_map``, its attributes from ``operator.attribute``. The CPU backend's ops/ (one
        # module per operator group, registered by operator) show how an operator is read and computed.
        raise LoweringError(
            f"the template backend runs no operator: no lowering for operator #{index} {operator.op.name}"
        )

    def _unload(self, native: LoadedProgram) -> None:
        # TODO(backend): destroy the program's device objects (no pending work or prepared launch holds it).
        pass
