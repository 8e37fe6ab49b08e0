"""How a batch of inputs, and its outputs, travel between the pool and a replica.

Ray serialises every numpy array of a task's arguments and results as a buffer of its own, so a batch sent as
a list of 32 small arrays costs 32 buffers each way, and that per-array work, not the bytes, is what a pool
of a small program pays for. A batch whose items all have the same form (one array, a tuple of arrays, or a
mapping of arrays by name, with equal shapes and dtypes across items) therefore travels as :class:`Stacked`:
one array per input with the items along a new leading axis. The replica runs each item on views of those
arrays, writes each call's outputs into one stacked array per output, and returns those; the pool hands
each item's outputs back as views of them. Any other batch (items of mixed forms or shapes) travels as the
list it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Stacked:
    """``count`` items as one array per input (or output) slot, the items along axis 0. ``names``: the
    mapping keys when the items were mappings by input name, else None (positional)."""

    arrays: tuple[np.ndarray, ...]
    count: int
    names: tuple[str, ...] | None = None
    single: bool = False  # each item was one bare array (not a one-element tuple)

    def item(self, index: int) -> Any:
        """Item ``index`` in the form it was given: views of the stacked arrays."""
        parts = [a[index] for a in self.arrays]
        if self.names is not None:
            return dict(zip(self.names, parts, strict=True))
        return parts[0] if self.single else tuple(parts)

    def outputs(self) -> list[list[np.ndarray]]:
        """Per item, its outputs (``exe``'s list) as views of the stacked output arrays."""
        return [[a[i] for a in self.arrays] for i in range(self.count)]


def _slots(item: Any) -> tuple[tuple[str, ...] | None, bool, list[Any]] | None:
    if isinstance(item, np.ndarray):
        return None, True, [item]
    if isinstance(item, Mapping):
        names = tuple(item)
        if all(isinstance(n, str) for n in names):
            return names, False, [item[n] for n in names]
        return None
    if isinstance(item, tuple | list):
        return None, False, list(item)
    return None


def pack(items: Sequence[Any]) -> Stacked | list[Any]:
    """``items`` as one :class:`Stacked` when they all share one form, else as a list (unchanged)."""
    if not items:
        return list(items)
    first = _slots(items[0])
    if first is None or not first[2] or not all(isinstance(a, np.ndarray) for a in first[2]):
        return list(items)
    names, single, parts = first
    forms = [(a.shape, a.dtype) for a in parts]
    columns: list[list[np.ndarray]] = [[a] for a in parts]
    for item in items[1:]:
        slots = _slots(item)
        if slots is None or slots[0] != names or slots[1] != single or len(slots[2]) != len(parts):
            return list(items)
        for column, form, a in zip(columns, forms, slots[2], strict=True):
            if not isinstance(a, np.ndarray) or (a.shape, a.dtype) != form:
                return list(items)
            column.append(a)
    return Stacked(tuple(np.stack(c) for c in columns), len(items), names, single)


def output_arrays(specs: Sequence[Any], count: int) -> tuple[np.ndarray, ...]:
    """Empty stacked outputs for ``count`` calls of a program with output ``specs``."""
    return tuple(np.empty((count, *s.shape), s.numpy_dtype) for s in specs)


__all__ = ["Stacked", "output_arrays", "pack"]
