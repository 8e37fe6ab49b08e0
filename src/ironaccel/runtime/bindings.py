"""Binding checks: a program's slots against the buffer ranges a submission or a prepared submission binds.

A binding is accepted when its slot exists once, its buffer is live and in the program's context, its
access covers what the slot needs (inputs read, outputs written) and the buffer's usage allows it, and
its range lies inside the buffer, covers exactly the slot's bytes and is aligned to the element size.
What a backend's ``_submit`` and ``_prepare`` then receive per slot is a :class:`BoundRange`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..core.errors import InvalidArgument, OutOfBounds, PermissionDenied, ResourceLimit
from .handles import Buffer, Program, Queue
from .records import Book, Record
from .spec import TensorSpec
from .types import Access, Binding, usage_allows


class BoundRange(NamedTuple):
    """A binding after validation: what a backend's ``_submit`` receives per slot. (A named tuple: made
    per binding on every submission, at a third of a frozen dataclass's cost.)"""

    slot: int
    native: Any
    offset: int
    length: int
    access: Access
    spec: TensorSpec


class Binder(Book):
    """The checks shared by ``submit`` and ``prepare`` (a base of Accelerator)."""

    def _work(
        self, queue: Queue, program: Program, bindings: Sequence[Binding]
    ) -> tuple[Record, Record, list[BoundRange], list[Record]]:
        """The checks of ``submit`` and ``prepare`` (under the lock): the queue's and program's records, the
        bound ranges and the buffers' records."""
        self._check_alive()
        qrec = self._record(queue, Queue)
        prec = self._record(program, Program)
        if queue.context is not program.context:
            raise PermissionDenied("queue and program belong to different contexts")
        ranges, brecs = self._bind(program, bindings)
        return qrec, prec, ranges, brecs

    def _bind(self, program: Program, bindings: Sequence[Binding]) -> tuple[list[BoundRange], list[Record]]:
        specs = (*program.inputs, *program.outputs)
        n_in = len(program.inputs)
        limit = self.device_info().limits.max_bindings_per_submission
        if len(bindings) > limit:
            raise ResourceLimit(f"{len(bindings)} bindings exceed the limit {limit}")
        if len(bindings) != len(specs):
            raise InvalidArgument(f"program has {len(specs)} slots ({n_in} inputs), got {len(bindings)} bindings")
        seen: set[int] = set()
        ranges: list[BoundRange] = []
        recs: list[Record] = []
        ordered = all(type(b.slot) is int and b.slot == i for i, b in enumerate(bindings))
        for b in bindings if ordered else sorted(bindings, key=lambda b: b.slot if isinstance(b.slot, int) else -1):
            if not isinstance(b.slot, int) or not 0 <= b.slot < len(specs) or b.slot in seen:
                raise InvalidArgument(f"binding slot {b.slot!r} is out of range or repeated")
            seen.add(b.slot)
            spec = specs[b.slot]
            rec = self._record(b.buffer, Buffer)
            if b.buffer.context is not program.context:
                raise PermissionDenied(f"{b.buffer!r} belongs to another context")
            access = b.access or (Access.READ if b.slot < n_in else Access.WRITE)
            need = Access.READ if b.slot < n_in else Access.WRITE
            if not access & need:
                raise InvalidArgument(f"slot {b.slot} ({spec}) needs {need.name} access, binding grants {access.name}")
            if not usage_allows(rec.desc.usage, access):
                raise PermissionDenied(f"{b.buffer!r} usage {rec.desc.usage!r} does not allow {access.name}")
            length = rec.desc.size - b.offset if b.length is None else b.length
            if not isinstance(b.offset, int) or b.offset < 0 or length < 0 or b.offset + length > rec.desc.size:
                raise OutOfBounds(f"slot {b.slot}: range [{b.offset}, +{length}) outside a {rec.desc.size}-byte buffer")
            if length != spec.nbytes:
                raise InvalidArgument(f"slot {b.slot} ({spec}) needs {spec.nbytes} bytes, binding covers {length}")
            if b.offset % spec.numpy_dtype.itemsize:
                raise InvalidArgument(f"slot {b.slot}: offset {b.offset} not aligned to {spec.numpy_dtype.itemsize}")
            ranges.append(BoundRange(b.slot, rec.native, b.offset, length, access, spec))
            recs.append(rec)
        return ranges, recs


__all__ = ["Binder", "BoundRange"]
