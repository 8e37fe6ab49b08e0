"""Constant data between its .tosa byte form and the IR's numpy storage form.

Bytes are little-endian. BOOL takes one byte (0 or 1); INT4 packs two values per byte, low nibble
first, and the IR holds them as int8 in [-8, 7]; INT48 takes six bytes per value and the IR holds it
sign-extended in int64; SHAPE values are int64. Unpacking is zero-copy (a read-only view of the file)
for every type whose storage equals its wire form; INT4 and INT48 need one conversion.
"""

from __future__ import annotations

import sys

import numpy as np

from ..dtypes import DType, storage_bytes

_LITTLE = sys.byteorder == "little"
_INT48_MIN = -(1 << 47)
_INT48_MAX = (1 << 47) - 1


class DataError(ValueError):
    """Data that cannot be converted; the codec re-raises it as a FormatError with a location."""


def _wire(dtype: DType) -> np.dtype:
    """The little-endian unsigned type with the storage type's width (the numpy view of the wire bytes)."""
    return np.dtype(f"<u{dtype.numpy.itemsize}")


def unpack(raw: memoryview | bytes, dtype: DType, count: int) -> np.ndarray:
    """``count`` values of ``dtype`` from exactly ``storage_bytes(dtype, count)`` bytes, as a flat array
    in ``dtype.numpy``. The result is read-only when it is a view of ``raw``."""
    if len(raw) != storage_bytes(dtype, count):
        raise DataError(f"{len(raw)} bytes, expected {storage_bytes(dtype, count)}")
    if dtype is DType.INT4:
        packed = np.frombuffer(raw, np.uint8)
        nibbles = np.empty(2 * len(packed), np.int8)
        nibbles[0::2] = packed & 0x0F
        nibbles[1::2] = packed >> 4
        values = (nibbles ^ 8) - 8
        return values[:count]
    if dtype is DType.INT48:
        six = np.frombuffer(raw, np.uint8).reshape(count, 6)
        eight = np.empty((count, 8), np.uint8)
        eight[:, :6] = six
        eight[:, 6:] = np.where(six[:, 5:6] & 0x80, 0xFF, 0).astype(np.uint8)
        return eight.view("<i8").reshape(count).astype(np.int64, copy=False)
    if dtype is DType.BOOL:
        byte = np.frombuffer(raw, np.uint8)
        if count and int(byte.max()) > 1:
            raise DataError("BOOL values must be bytes 0 or 1")
        return byte.view(np.bool_)
    wire = np.frombuffer(raw, _wire(dtype), count)
    if not _LITTLE:
        wire = wire.astype(wire.dtype.newbyteorder("="))
    return wire.view(dtype.numpy)


def pack(values: np.ndarray, dtype: DType) -> np.ndarray:
    """The wire bytes of ``values`` (already in ``dtype.numpy``, C order) as a flat uint8 array."""
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.dtype != dtype.numpy:
        raise DataError(f"data is {flat.dtype}, expected {dtype.numpy} storage for {dtype}")
    if dtype is DType.INT4:
        if flat.size and (int(flat.min()) < -8 or int(flat.max()) > 7):
            raise DataError("INT4 values must lie in [-8, 7]")
        nibbles = flat.view(np.uint8) & 0x0F
        if nibbles.size % 2:
            nibbles = np.append(nibbles, np.uint8(0))
        return nibbles[0::2] | (nibbles[1::2] << 4)
    if dtype is DType.INT48:
        if flat.size and (int(flat.min()) < _INT48_MIN or int(flat.max()) > _INT48_MAX):
            raise DataError("INT48 values must lie in [-2**47, 2**47 - 1]")
        eight = flat.astype("<i8", copy=False).view(np.uint8).reshape(-1, 8)
        return np.ascontiguousarray(eight[:, :6]).reshape(-1)
    if dtype is DType.BOOL:
        return flat.view(np.uint8)
    wire = flat.view(_wire(dtype).newbyteorder("="))
    if not _LITTLE:
        wire = wire.astype(_wire(dtype))
    return wire.view(np.uint8)
