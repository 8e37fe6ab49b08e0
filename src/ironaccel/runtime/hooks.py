"""What a backend implements: the underscore hooks the execution contract calls, with what each may assume.

:class:`~.accelerator.Accelerator` validates every public call (arguments, ownership, quotas) and only
then calls these hooks with trusted values: a hook may assume valid input, and raises InternalError for
a case that cannot happen. The defaults here either do nothing (releases of objects that need none) or
raise NotImplementedError (what every backend must provide); the optional capabilities (cancellation,
completion by observation, native launchers, direct runs) are off until a backend turns them on.

Locking: ``_create_context``, ``_allocate``, ``_load``, ``_direct``, ``_create_queue``, ``_prepare`` and the
release hooks run under the accelerator's lock; ``_write``, ``_read`` and ``_submit`` run outside it (a
backend allows those three concurrently, ``_submit`` also on the thread that signals a host gate), as do
``_progress`` and a launcher's methods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..nvfp4.bounds import Form
from .types import TOSA_FORMAT, VKNVFP4_TARGET, BufferDesc, BufferInfo, DeviceInfo

if TYPE_CHECKING:
    from .bindings import BoundRange
    from .event import EventCore
    from .prepared import Launcher

# What ``_direct`` returns: ``run(inputs, outputs)``, optionally with a ``start`` attribute (see there).
DirectFunction = Callable[[Sequence[Any], Sequence[Any]], None]


class BackendHooks:
    """The hooks of every execution backend (override them in the Accelerator subclass)."""

    # ---- identity -------------------------------------------------------------------------------
    def _device_info(self) -> DeviceInfo:
        raise NotImplementedError("device_info")

    def _capabilities(self) -> Any:
        """The backend's ``tosa.capability.CapabilityDescriptor``."""
        raise NotImplementedError("capabilities")

    # ---- contexts and buffers -------------------------------------------------------------------
    def _create_context(self) -> Any:
        return object()

    def _destroy_context(self, native: Any) -> None:
        pass

    def _allocate(self, context: Any, desc: BufferDesc) -> tuple[Any, BufferInfo]:
        raise NotImplementedError("allocate_buffer")

    def _write(self, native: Any, offset: int, data: memoryview) -> None:
        raise NotImplementedError("write_buffer")

    def _read(self, native: Any, offset: int, out: memoryview) -> None:
        raise NotImplementedError("read_buffer")

    def _free(self, native: Any) -> None:
        pass

    def _host_view(self, native: Any) -> memoryview | None:
        """The buffer's bytes as memory this process addresses for as long as the buffer lives, or None
        where it is not (device memory, another process's); the default."""
        return None

    # ---- programs -------------------------------------------------------------------------------
    def _load(self, context: Any, program: Any, limit: int) -> tuple[Any, int]:
        """Make ``program`` (a validated, admitted tosa.ir.Program, or a checked description of another
        format in ``artifact_formats``) resident; returns (native, resident bytes). ``limit``: the most it
        may keep (the artifact's bound and what the context's quota has left). A backend that knows its
        figure before it allocates (a planned arena) raises ResourceLimit then, with nothing allocated;
        the runtime checks the figure returned in any case."""
        raise NotImplementedError("load_program")

    # Artifact formats the backend loads besides TOSA programs, which every backend loads. The only other
    # format is NVFP4_FORMAT (an ironaccel.nvfp4 projection, ADR 0012): a backend that lists it receives the
    # projection in ``_load``; load_program refuses it with LoweringError on every other backend.
    artifact_formats: frozenset[int] = frozenset({TOSA_FORMAT})
    # A backend listing NVFP4_FORMAT also loads upstream's NVFP4 artifacts (VKNVFP4_FORMAT, ADR 0042), read
    # into the same projections: those whose 12 target words are one of ``nvfp4_targets``, of the forms in
    # ``nvfp4_forms`` (ironaccel.nvfp4.Form; the mixture of experts only where a backend adds it).
    nvfp4_targets: frozenset[tuple[int, ...]] = frozenset({VKNVFP4_TARGET})
    nvfp4_forms: frozenset[Form] = frozenset({Form.SINGLE, Form.BATCHED, Form.EXPERTS})

    def _unload(self, native: Any) -> None:
        pass

    # Direct runs (optional, ADR 0029). A backend that can run a program to completion on the caller's
    # thread, with host arrays in place of bound buffers, returns a function doing so from ``_direct``; the
    # user API then calls it instead of submitting (no queue hand-off, no event, no buffers or copies).
    # Offer it only for programs whose runs cannot observe each other (no state carried from run to run):
    # a direct run is ordered against nothing on any queue. The default offers none, and ``submit``
    # remains the contract's way to run anything.
    def _direct(self, program: Any) -> DirectFunction | None:
        """A function ``run(inputs, outputs)`` for ``program`` (a ``_load`` result), or None. It gets numpy
        arrays of the declared dtypes and shapes, C-contiguous, the outputs writable and overlapping neither
        each other nor an input; it fills the outputs or raises an IronAccelError. Called once, at load,
        under the accelerator's lock.

        Where direct runs complete somewhere other than this thread (a virtio device), the function may
        also have ``start(inputs) -> pending``: the run begins and the call returns; ``pending.done()``
        says without blocking whether it ended; ``pending.finish(outputs, timeout)`` waits (DeadlineExpired
        when ``timeout`` seconds pass first; it may be called again) and fills the outputs or raises the
        run's error. Every started run is finished exactly once."""
        return None

    # ---- queues and submission ------------------------------------------------------------------
    def _create_queue(self, context: Any) -> Any:
        raise NotImplementedError("create_queue")

    def _destroy_queue(self, native: Any) -> None:
        pass

    def _submit(self, queue: Any, program: Any, ranges: Sequence[BoundRange], event: EventCore) -> None:
        """Start the work (never wait for it). Call ``event.try_start()`` when execution begins and
        ``event.complete()`` / ``event.fail(err)`` when it ends. Raising an IronAccelError means the
        work was not accepted; raising SubmitIndeterminate means acceptance is unknown."""
        raise NotImplementedError("submit")

    supports_cancellation = False

    # Completion by observation. A backend with no thread of its own to complete events (Vulkan: work
    # finishes on the device and a fence says so) sets ``observes_completion`` and implements
    # ``_progress``; ``poll_event`` and ``wait`` then ask it, and the releases that refuse pinned or
    # pending objects (free_buffer, unload_program, destroy_queue, destroy_event) let it retire finished
    # work first. Backends that complete events themselves leave both alone and see no change.
    observes_completion = False

    def _progress(self, event: EventCore | None, timeout: float | None) -> None:
        """Observe finished work and complete (or fail) its events. ``event`` None: retire whatever has
        finished, never blocking. Otherwise bring ``event`` up to date, blocking until it is terminal,
        something changed, or ``timeout`` seconds passed (0: never block; None: no limit). Called
        outside the accelerator's lock; may raise DeviceLost (which poisons the instance)."""

    # ---- prepared submissions -------------------------------------------------------------------
    def _prepare(self, queue: Any, program: Any, ranges: Sequence[BoundRange]) -> Launcher | None:
        """A native launcher (:class:`~.prepared.Launcher`) of ``program`` bound to ``ranges`` on ``queue``,
        or None for the generic one, which launches through ``submit``. Runs under the lock."""
        return None

    def _release_launcher(self, native: Launcher) -> None:
        native.destroy()


__all__ = ["BackendHooks", "DirectFunction"]
