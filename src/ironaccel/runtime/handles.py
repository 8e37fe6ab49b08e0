"""Opaque handles the contract hands out. A handle names an object; the accelerator holds its state.

IDs are generational (index in the low 32 bits, generation above), never reused within an instance,
so a stale or foreign handle is recognised instead of silently naming a newer object.

Thread safety: a handle is an immutable name and may be shared between threads; every operation on
it goes through its accelerator, which checks it (a handle released on one thread is stale on all).

Lifetime: a handle of the contract is released explicitly, as the accelerator's ``destroy_context``,
``free_buffer``, ``unload_program``, ``destroy_queue``, ``destroy_event`` or ``release_prepared`` does,
or by ``handle.release()`` and by leaving a ``with`` block, which call the same method. Dropping a
handle releases nothing: the contract's objects have owners that say when they go (a virtio guest's
ids, a queue's pending work), unlike the user API's objects (runtime.session), which are released
when collected.
"""

from __future__ import annotations

import itertools
import threading


class Handle:
    """Names one object of ``owner`` (an Accelerator). Never changed after creation: safe to share."""

    __slots__ = ("context", "id", "owner")
    kind = "object"
    _release = ""  # the owner's method that releases this kind of object


    def __init__(self, owner: object, id: int, context: Context | None) -> None:
        self.owner = owner
        self.id = id
        self.context = context

    def __repr__(self) -> str:
        return f"<{self.kind} {self.id:#x}>"

    def release(self) -> None:
        """Release the object through its accelerator (which raises as that method does)."""
        getattr(self.owner, self._release)(self)

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Context(Handle):
    __slots__ = ()
    kind = "context"
    _release = "destroy_context"


class Buffer(Handle):
    __slots__ = ("info",)
    kind = "buffer"
    _release = "free_buffer"

    def __init__(self, owner: object, id: int, context: Context | None, info: object) -> None:
        super().__init__(owner, id, context)
        self.info = info


class Program(Handle):
    __slots__ = ("inputs", "outputs")
    kind = "program"
    _release = "unload_program"

    def __init__(self, owner: object, id: int, context: Context | None, inputs: tuple, outputs: tuple) -> None:
        super().__init__(owner, id, context)
        self.inputs = inputs  # TensorSpec per input slot
        self.outputs = outputs  # TensorSpec per output slot


class Queue(Handle):
    __slots__ = ()
    kind = "queue"
    _release = "destroy_queue"


class Event(Handle):
    """Names one submission's completion. Any thread may poll, wait on or cancel it (the first
    transition out of PENDING wins; a terminal state never changes); destroy it once, when terminal."""

    __slots__ = ()
    kind = "event"
    _release = "destroy_event"


class Prepared(Handle):
    """Names one prepared submission: a program bound to buffers on a queue, checked once, launched any
    number of times (``Accelerator.launch``). Each launch returns a ticket, a positive integer that grows
    by one per launch; launches finish in ticket order."""

    __slots__ = ()
    kind = "prepared"
    _release = "release_prepared"


class IdAllocator:
    """Generational ids: a fresh index per object, generation bumped per allocator instance. Thread-safe."""

    _instances = itertools.count(1)

    def __init__(self) -> None:
        self._next = itertools.count(1)
        self._generation = next(IdAllocator._instances) & 0xFFFFFFFF
        self._lock = threading.Lock()

    def new(self) -> int:
        with self._lock:
            return (self._generation << 32) | (next(self._next) & 0xFFFFFFFF)
