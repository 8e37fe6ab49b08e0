"""Element strides of contiguous tensors, as kernels that index through strides walk them.

A kernel that computes an elementwise result from operands broadcast to it (TOSA's rule: equal ranks,
each extent equal to the result's or 1) reads each operand through strides over the result's extents,
0 where the operand broadcasts. :func:`coalesce` then merges the dimensions every operand walks
contiguously, so that most kernels index one or two dimensions.
"""

from __future__ import annotations

from collections.abc import Sequence

Strides = tuple[tuple[int, ...], ...]


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a row-major ``shape``."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Element strides of a contiguous ``shape`` read at ``out_shape``'s coordinates: 0 where it
    broadcasts."""
    own = contiguous_strides(shape)
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(shape, out_shape, own, strict=True)]


def coalesce(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], Strides]:
    """Drop extents of 1 and merge neighbours every operand walks contiguously (outer stride = inner
    stride x inner extent): ``(dims, strides)``, the strides one tuple per operand."""
    dims: list[int] = []
    merged: list[list[int]] = [[] for _ in strides]
    for d, extent in enumerate(shape):
        if extent == 1:
            continue
        if dims and all(m[-1] == s[d] * extent for m, s in zip(merged, strides, strict=True)):
            dims[-1] *= extent
            for m, s in zip(merged, strides, strict=True):
                m[-1] = s[d]
            continue
        dims.append(extent)
        for m, s in zip(merged, strides, strict=True):
            m.append(s[d])
    return tuple(dims), tuple(tuple(m) for m in merged)


__all__ = ["Strides", "broadcast_strides", "coalesce", "contiguous_strides"]
