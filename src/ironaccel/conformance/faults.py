"""A fault-injecting accelerator: wraps a real backend and fails chosen hook calls on purpose.

It proves that callers (the runtime, the virtio device engine, user code) keep ownership straight
when a backend fails at each point the contract allows: before or after doing the work, with a
rejection, with an indeterminate outcome, or with device loss. ``live_resources()`` of the wrapper
must return to zero after every scenario that the caller cleans up.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..core.errors import DeviceLost, IronAccelError
from ..runtime.accelerator import Accelerator, BoundRange
from ..runtime.errors import ReleaseRejected, SubmitIndeterminate
from ..runtime.event import EventCore
from ..runtime.types import BufferDesc, BufferInfo, DeviceInfo


@dataclasses.dataclass
class Fault:
    """Fail call number ``at`` (0-based) of ``hook``. ``when`` is "before" (the inner hook is not
    called) or "after" (the inner hook ran, then the error is raised)."""

    hook: str
    error: IronAccelError
    at: int = 0
    when: str = "before"
    indeterminate: bool = False  # submit: raise SubmitIndeterminate after the work was accepted
    reject_release: bool = False  # release hooks: raise ReleaseRejected, keeping the object


class FaultyAccelerator(Accelerator):
    """Delegates every hook to ``inner`` except where a :class:`Fault` says otherwise."""

    def __init__(self, inner: Accelerator, faults: Sequence[Fault] = ()) -> None:
        super().__init__()
        self.inner = inner
        self.faults = list(faults)
        self.calls: dict[str, int] = {}
        self._calls_lock = threading.Lock()
        self.supports_cancellation = inner.supports_cancellation
        # A backend without a worker thread completes events when asked (poll / wait): pass that through.
        self.observes_completion = inner.observes_completion

    def _inject(self, hook: str, call: Callable[[], Any]) -> Any:
        with self._calls_lock:  # hooks run on several threads; each call must get its own number
            n = self.calls.get(hook, 0)
            self.calls[hook] = n + 1
        fault = next((f for f in self.faults if f.hook == hook and f.at == n), None)
        if fault is None:
            return call()
        if fault.reject_release:
            raise ReleaseRejected(fault.error, None)
        if fault.when == "after" or fault.indeterminate:
            call()
            if fault.indeterminate:
                raise SubmitIndeterminate(fault.error, None)
        raise fault.error

    def _device_info(self) -> DeviceInfo:
        return self.inner._device_info()

    def _capabilities(self) -> Any:
        return self.inner._capabilities()

    def _create_context(self) -> Any:
        return self._inject("create_context", self.inner._create_context)

    def _destroy_context(self, native: Any) -> None:
        self._inject("destroy_context", lambda: self.inner._destroy_context(native))

    def _allocate(self, context: Any, desc: BufferDesc) -> tuple[Any, BufferInfo]:
        return self._inject("allocate", lambda: self.inner._allocate(context, desc))

    def _write(self, native: Any, offset: int, data: memoryview) -> None:
        self._inject("write", lambda: self.inner._write(native, offset, data))

    def _read(self, native: Any, offset: int, out: memoryview) -> None:
        self._inject("read", lambda: self.inner._read(native, offset, out))

    def _free(self, native: Any) -> None:
        self._inject("free", lambda: self.inner._free(native))

    def _load(self, context: Any, program: Any, limit: int) -> tuple[Any, int]:
        return self._inject("load", lambda: self.inner._load(context, program, limit))

    def _unload(self, native: Any) -> None:
        self._inject("unload", lambda: self.inner._unload(native))

    def _create_queue(self, context: Any) -> Any:
        return self._inject("create_queue", lambda: self.inner._create_queue(context))

    def _destroy_queue(self, native: Any) -> None:
        self._inject("destroy_queue", lambda: self.inner._destroy_queue(native))

    def _submit(self, queue: Any, program: Any, ranges: Sequence[BoundRange], event: EventCore) -> None:
        self._inject("submit", lambda: self.inner._submit(queue, program, ranges, event))

    def _progress(self, event: Any, timeout: float) -> None:
        self._inject("progress", lambda: self.inner._progress(event, timeout))


def device_lost(hook: str, at: int = 0) -> Fault:
    return Fault(hook, DeviceLost(f"injected device loss in {hook}"), at)
