"""Tensors in the ``.npy`` forms the TOSA conformance tools read and write.

The suite stores bf16 and fp8e4m3 as little-endian void (``'<V2'``, ``'<V1'``) and fp8e5m2 as uint8,
because numpy has no such types; the reference model and ``tosa_verify`` read exactly those forms. INT4
values sit one per int8, INT48 in int64, SHAPE in int64 — the storage dtypes IronAccel already uses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..tosa.dtypes import DType

_VOID_LE = (DType.BF16, DType.FP8E4M3)
_RAW = (DType.BF16, DType.FP8E4M3, DType.FP8E5M2)  # numpy has no such types: files hold their bits


def load(path: Path, dtype: DType) -> np.ndarray:
    """An array from a suite ``.npy`` file, in IronAccel's storage dtype for ``dtype``.

    Raw forms of the same width are reinterpreted; integers are widened or narrowed only when every
    value survives; anything else is a ValueError naming both types (never a silent conversion)."""
    array = np.load(path, allow_pickle=False)
    storage = dtype.numpy
    if array.dtype == storage:
        return array
    if dtype in _RAW and array.dtype.kind in "uV" and array.dtype.itemsize == storage.itemsize:
        return array.view(storage)
    if array.dtype.kind in "iub" and storage.kind in "iub":
        converted = array.astype(storage)
        if np.array_equal(converted.astype(array.dtype), array):
            return converted
    raise ValueError(f"{path}: holds {array.dtype} values, which are not {dtype} ({storage})")


def save(path: Path, value: np.ndarray, dtype: DType) -> None:
    """Write ``value`` (IronAccel storage form) the way the reference model writes its outputs."""
    value = np.array(value, order="C")  # not ascontiguousarray: that turns rank 0 into rank 1
    if dtype is DType.FP8E5M2:
        np.save(path, value.view(np.uint8), allow_pickle=False)
        return
    if dtype not in _VOID_LE:
        np.save(path, value, allow_pickle=False)
        return
    size = dtype.numpy.itemsize
    np.save(path, value.view(f"V{size}"), allow_pickle=False)
    # numpy writes void as '|V2'; the suite's readers expect the little-endian spelling.
    data = path.read_bytes()
    path.write_bytes(data.replace(f"'|V{size}'".encode(), f"'<V{size}'".encode(), 1))
