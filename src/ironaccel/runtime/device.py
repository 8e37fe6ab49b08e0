"""One accelerator opened for use (:class:`Device`): it compiles programs into Executables.

``compile`` takes what a user has at hand (a path, the bytes of a .tosa file, a ``tosa.Program``, an
NVFP4 projection, or a ``torch.nn.Module`` that ``ironaccel.torch`` exports), tells a TOSA program from
an NVFP4 artifact by its first bytes, and loads it on the device's context; what refuses it (the
validator, the backend's admission) is named in the error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from ..core.errors import InvalidArgument
from ..nvfp4.quantize import QuantizedWeights
from ..tosa.errors import FormatError, LoweringError
from ..tosa.target import Target
from ..tosa.working_set import NO_BOUND
from . import reclaim
from .accelerator import Accelerator
from .device_array import DeviceArray, DeviceQuantizedWeights, storage_dtype
from .executable import Executable
from .handles import Context, Queue
from .holdings import DeviceHoldings
from .metadata import Metadata, read_sidecar
from .types import NVFP4_FORMAT, TOSA_FORMAT, VKNVFP4_FORMAT, VKNVFP4_TARGET, ArtifactRef


class Device:
    """One accelerator opened for use: a context and a queue on it.

    Thread safety: ``compile`` and the executables it returns may be used from any threads at once;
    ``close`` only after the other threads are done with the device.

    Lifetime: ``close()`` (or leaving a ``with`` block) closes its executables, frees its DeviceArrays and
    releases the context and queue; a Device dropped without it does the same once it, its executables
    and its arrays are collected."""

    def __init__(self, accelerator: Accelerator, name: str, why: str = "") -> None:
        self.accelerator = accelerator
        self.name = name
        self.why = why
        self.info = accelerator.device_info()
        self._held = DeviceHoldings(accelerator)

    @property
    def context(self) -> Context:
        return self._held.context

    @property
    def queue(self) -> Queue:
        return self._held.queue

    def __repr__(self) -> str:
        return f"<Device {self.name}: {self.info.name}>"

    @overload
    def array(self, source: QuantizedWeights, dtype: None = None) -> DeviceQuantizedWeights: ...

    @overload
    def array(self, source: Any, dtype: Any = None) -> DeviceArray: ...

    def array(self, source: Any, dtype: Any = None) -> DeviceArray | DeviceQuantizedWeights:
        """``source`` (a numpy array, anything ``np.asarray`` takes, or a DLPack array) copied onto the
        device once, as a :class:`DeviceArray` that calls bind in place; ``dtype`` converts it first.
        NVFP4 weights (``nvfp4.quantize(w)``) go up as a :class:`DeviceQuantizedWeights`, its three parts
        written once, which a projection's call takes where its weight inputs are."""
        if isinstance(source, QuantizedWeights):
            if dtype is not None:
                raise InvalidArgument("NVFP4 weights keep their own dtypes: give no dtype= with them")
            return DeviceQuantizedWeights(self, source)
        if hasattr(source, "__dlpack__") and not isinstance(source, np.ndarray | DeviceArray):
            source = np.from_dlpack(source)
        arr = np.asarray(source, dtype=None if dtype is None else storage_dtype(dtype))
        made = DeviceArray(self, arr.shape, arr.dtype)
        try:
            made.write(arr)
        except BaseException:
            made.close()
            raise
        return made

    def empty(self, shape: Sequence[int], dtype: Any) -> DeviceArray:
        """An uninitialised :class:`DeviceArray` (``dtype``: a numpy dtype or a ``tosa.DType``), to be
        filled by a call's ``out=``."""
        return DeviceArray(self, shape, dtype)

    def host_empty(self, shape: Sequence[int], dtype: Any) -> np.ndarray:
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
        *,
        example_inputs: Any = None,
        quantize: str | None = None,
    ) -> Executable:
        """Validate, admit and load ``source``: a path, the bytes of a .tosa file, or a tosa.Program; or an
        NVFP4 projection (an ``ironaccel.nvfp4`` projection, its bytes or a path to them); or a
        ``torch.nn.Module`` with ``example_inputs`` (and ``quantize=None | "int8"``), exported first by
        ``ironaccel.torch`` (kept in this process by graph and weights, so compiling it again skips the export).

        ``target`` (profiles, extensions, level) restricts what a TOSA program may use; None checks it
        against all of TOSA 1.0 with no level limits. ``metadata``: the program's description and
        quantization (:mod:`.metadata`); for a path, ``<program>.json`` beside it when it exists; for a
        module, what its export found."""
        if self._held.closed:
            raise InvalidArgument(f"{self!r} was closed")
        if _is_torch_module(source):
            if example_inputs is None:
                raise InvalidArgument("compiling a torch.nn.Module needs example_inputs= (a tensor or a tuple of them)")
            # The front door sits below the runtime (ADR 0035): reached here, only by callers with a module.
            from ..torch import cached_export

            exported = cached_export(source, example_inputs, quantize, device=self)
            source, metadata = exported.tosa, exported.metadata if metadata is None else metadata
        elif example_inputs is not None or quantize is not None:
            raise InvalidArgument("example_inputs= and quantize= apply to a torch.nn.Module only")
        payload, artifact_format = _artifact(source)
        # No bound of the caller's: what the program keeps resident (constants, a GPU backend's arena of
        # intermediates) is limited by the context's quota alone, which load_program enforces.
        bound = resident_bytes if resident_bytes is not None else NO_BOUND
        words = target.encode() if target is not None else ()
        if artifact_format == VKNVFP4_FORMAT:  # upstream's artifacts declare their target words (ADR 0042)
            if target is not None:
                raise InvalidArgument("a TOSA target applies to TOSA programs, not to an NVFP4 projection")
            words = VKNVFP4_TARGET
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
        """Close every executable and free every DeviceArray, then release the context and queue.
        Idempotent. Work still running (of a Run dropped unwaited) delays the release until it ends."""
        reclaim.release(self._held.close)

    def __del__(self) -> None:
        held = getattr(self, "_held", None)
        if held is not None and not (held.closed and held.context is None):
            reclaim.release(held.close)

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_torch_module(source: Any) -> bool:
    """Whether ``source`` is a torch.nn.Module, told by its classes' names: torch is not imported here."""
    return any(c.__name__ == "Module" and c.__module__ == "torch.nn.modules.module" for c in type(source).__mro__)


def _artifact(source: Any) -> tuple[bytes, int]:
    """The payload and artifact format of ``source``: NVFP4 projections by type or by magic (ours, NVF4, or
    upstream's, VKNVFP4 and VKNVMOE), else TOSA."""
    from ..nvfp4 import upstream
    from ..nvfp4.format import MAGIC
    from ..nvfp4.projection import ProjectionArtifact

    payload = source.to_bytes() if isinstance(source, ProjectionArtifact) else _payload(source)
    if upstream.recognises(payload):
        return payload, VKNVFP4_FORMAT
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
        f"cannot compile a {type(source).__name__}: give a path, bytes, a tosa Program, an nvfp4 projection "
        "or a torch.nn.Module with example_inputs="
    )
