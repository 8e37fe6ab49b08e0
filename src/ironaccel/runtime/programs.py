"""Programs: an artifact read as hostile input, validated and admitted, charged against its bounds, loaded.

``load_program`` parses a TOSA artifact (or an NVFP4 projection's header, ADR 0012, ours or upstream's
with its target words compared with what the backend advertises, ADR 0042) outside the lock,
validates it against its target, admits it against the backend's capabilities, and refuses it on its
working set before the backend builds anything (ADR 0024); then the backend's ``_load`` makes it
resident, and what it reports is checked again. A program the backend can run outside the queue gets its
:class:`~.direct.DirectOffer` here, once (ADR 0029).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import Busy, Incompatible, InvalidArgument, ResourceLimit
from .direct import DirectOffer
from .errors import ReleaseRejected
from .handles import Context, Program
from .records import Book, Record
from .spec import TensorSpec
from .types import NVFP4_FORMAT, TOSA_FORMAT, VKNVFP4_FORMAT, VKNVFP4_TARGET, ArtifactRef, Quota


class Programs(Book):
    """``load_program`` and ``unload_program`` (a base of Accelerator)."""

    def load_program(self, ctx: Context, artifact: ArtifactRef) -> Program:
        """Ownership: a resident program in ``ctx`` (the payload is not retained). Failure: FormatError,
        ValidationError or LoweringError, nothing retained; ResourceLimit, before the backend builds
        anything, when the program's working set (constants, variables and its peak of intermediates:
        :func:`~ironaccel.tosa.working_set.estimate`) exceeds the artifact's resident bound or what the
        context's quota has left, or has no bound while the artifact sets one; and after the backend
        built it, when what the backend reports as resident does. Blocking: parses and plans synchronously."""
        from ..tosa.capability import admit
        from ..tosa.codec import read
        from ..tosa.validate import validate
        from ..tosa.working_set import NO_BOUND, WorkingSet, estimate

        with self._lock:
            self._check_alive()
            crec = self._record(ctx, Context)
            if self._resetting:
                self._refuse(ctx)
            limits = self.device_info().limits
            self._limit(ctx, Program, limits.max_programs_per_context)
        if artifact.format not in (TOSA_FORMAT, NVFP4_FORMAT, VKNVFP4_FORMAT):
            raise Incompatible(
                f"artifact format {artifact.format:#x} is not TOSA ({TOSA_FORMAT:#x}), NVF4 ({NVFP4_FORMAT:#x}) or"
                f" VKNVFP4 ({VKNVFP4_FORMAT:#x})"
            )
        if len(artifact.payload) > limits.max_artifact_bytes:
            raise ResourceLimit(f"artifact of {len(artifact.payload)} bytes exceeds {limits.max_artifact_bytes}")
        needs: WorkingSet | None = None  # an NVFP4 projection has its own resident figure
        if artifact.format in (NVFP4_FORMAT, VKNVFP4_FORMAT):
            program, inputs, outputs = self._read_nvfp4(artifact)
        else:
            target = _decode_target(artifact.target)
            program = read(bytes(artifact.payload))
            validate(program, target)
            admit(program, self._capabilities())
            needs = estimate(program)
            if not needs.bounded and artifact.resident_bytes < NO_BOUND:
                raise ResourceLimit(
                    f"the program's working set has no bound ({needs.unbounded_reason}); the artifact's resident"
                    f" bound is {artifact.resident_bytes} bytes"
                )
            block = program.main
            inputs = tuple(TensorSpec.of(t) for t in block.input_tensors)
            outputs = tuple(TensorSpec.of(t) for t in block.output_tensors)
        with self._lock:
            self._check_alive()
            # The lock was let go while the artifact was parsed: the context may be gone by now, and other
            # loads may have filled it, so both are checked again before anything is made resident.
            crec = self._record(ctx, Context)
            if self._resetting:
                self._refuse(ctx)
            self._limit(ctx, Program, limits.max_programs_per_context)
            quota: Quota = crec.extra
            used = self._quota_use(ctx, Program)
            # Refused on the shapes alone, before the backend allocates anything (constant folding included).
            if needs is not None and (
                needs.total_bytes > artifact.resident_bytes or used + needs.total_bytes > quota.program_bytes
            ):
                raise ResourceLimit(
                    f"the program needs {needs.total_bytes} bytes ({needs.describe()}); the artifact's resident"
                    f" bound is {artifact.resident_bytes} bytes and the context quota has {quota.program_bytes - used}"
                    " left"
                )
            allowed = min(artifact.resident_bytes, quota.program_bytes - used)
            native, resident = self._guard(self._load, crec.native, program, allowed)
            if resident > artifact.resident_bytes or used + resident > quota.program_bytes:
                self._unload(native)
                raise ResourceLimit(
                    f"program keeps {resident} bytes resident; allowed {artifact.resident_bytes} by the artifact"
                    f" and {quota.program_bytes - used} by the context quota"
                )
            handle = Program(self, self._ids.new(), ctx, inputs, outputs)
            run = self._direct(native)
            offer = None if run is None else DirectOffer(run, handle)
            self._add(Record(handle, native, ctx, bytes=resident, extra=offer))
            return handle

    def _read_nvfp4(self, artifact: ArtifactRef) -> tuple[Any, tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
        """An NVFP4 projection's header (ours, or upstream's with its target words: ADR 0042) read as hostile
        input, then refused unless the backend runs it: its format, its target words and its form."""
        from ..nvfp4 import upstream
        from ..nvfp4.format import read as read_projection
        from ..tosa.errors import LoweringError

        name = self.device_info().name
        if artifact.format == VKNVFP4_FORMAT:
            projection = upstream.read(artifact.payload)
        else:
            if artifact.target:
                raise InvalidArgument("a TOSA target applies to TOSA programs, not to an NVFP4 projection")
            projection = read_projection(artifact.payload)
        if NVFP4_FORMAT not in self.artifact_formats:
            raise LoweringError(f"{name} does not run NVFP4 projections: cannot load {projection}")
        if artifact.format == VKNVFP4_FORMAT:
            _check_target(tuple(artifact.target), self.nvfp4_targets, name)
        if projection.form not in self.nvfp4_forms:
            form = projection.form.name
            raise LoweringError(f"{name} does not run the {form} form of NVFP4: cannot load {projection}")
        inputs = tuple(TensorSpec(o.name, o.shape, o.dtype) for o in projection.inputs)
        outputs = tuple(TensorSpec(o.name, o.shape, o.dtype) for o in projection.outputs)
        return projection, inputs, outputs

    def unload_program(self, program: Program) -> None:
        """Ownership: consumes ``program``. Failure: ReleaseRejected(Busy) while pending work, a direct run or
        a prepared submission references it."""
        self._observe_all()
        with self._lock:
            rec = self._record(program, Program)
            if rec.pins or rec.holders:
                raise ReleaseRejected(Busy(f"{program!r} is referenced by pending work or prepared"), program)
            self._release(rec, self._unload)


def _check_target(words: tuple[int, ...], advertised: frozenset[tuple[int, ...]], name: str) -> None:
    """Incompatible naming the first of ``words`` (an upstream artifact's target identity) that no target the
    backend advertises has in its place, unless one matches all 12."""
    if words in advertised:
        return
    if len(words) != len(VKNVFP4_TARGET):
        raise Incompatible(
            f"an upstream NVFP4 artifact declares {len(VKNVFP4_TARGET)} target words, got {len(words)}: {name}"
            " compares them with the targets it advertises"
        )
    if not advertised:
        raise Incompatible(f"{name} advertises no target for upstream NVFP4 artifacts")

    def agreeing(target: tuple[int, ...]) -> int:
        return next((i for i, (a, b) in enumerate(zip(target, words, strict=True)) if a != b), len(words))

    closest = max(sorted(advertised), key=agreeing)
    i = agreeing(closest)
    raise Incompatible(
        f"target word {i} of the artifact ({words[i]:#010x}) is not advertised by {name}, which advertises"
        f" {closest[i]:#010x} there (target {' '.join(f'{w:#x}' for w in closest)})"
    )


def _decode_target(words: Sequence[int]) -> Any:
    if not words:
        return None
    from ..tosa.target import Target

    try:
        return Target.decode(tuple(words))
    except (ValueError, InvalidArgument) as exc:
        raise Incompatible(f"artifact target: {exc}") from exc


__all__ = ["Programs"]
