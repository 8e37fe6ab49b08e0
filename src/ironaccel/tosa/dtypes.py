"""TOSA element types: their wire codes, sizes and numpy storage types.

Codes are the ``DType`` enum of the official schema (tosa-tools 2026.8). Types the schema lists after
FP8E5M2 (FP6, FP4, FP8UE8M0, INT64, MXINT8) belong to the 1.1 draft and are not TOSA 1.0.
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np


class DType(enum.IntEnum):
    UNKNOWN = 0
    BOOL = 1
    INT4 = 2
    INT8 = 3
    INT16 = 4
    INT32 = 5
    INT48 = 6
    FP32 = 7
    FP16 = 8
    BF16 = 9
    SHAPE = 10
    FP8E4M3 = 11
    FP8E5M2 = 12
    # 1.1 draft only: read so they can be named in the error, never accepted.
    FP6E2M3 = 13
    FP6E3M2 = 14
    FP4E2M1 = 15
    FP8UE8M0 = 16
    INT64 = 17
    MXINT8 = 18

    @classmethod
    def parse(cls, name: str | DType) -> DType:
        """``"fp32"``, ``"FP32"``, ``"int8"``, ``"fp8e4m3"`` (also ``"bfloat16"``, ``"float32"``...)."""
        if isinstance(name, DType):
            return name
        key = str(name).strip().upper().replace("_", "")
        key = _ALIASES.get(key, key)
        try:
            return cls[key]
        except KeyError:
            raise ValueError(f"unknown TOSA dtype {name!r}") from None

    @property
    def is_tosa_1_0(self) -> bool:
        return DType.BOOL <= self <= DType.FP8E5M2

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_integer(self) -> bool:
        return self in _INTS

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype values of this type are held in (INT4 in int8, INT48 in int64, SHAPE in int64)."""
        return _NUMPY[self]

    def __str__(self) -> str:
        return self.name.lower()


_ALIASES = {
    "FLOAT32": "FP32",
    "FLOAT16": "FP16",
    "HALF": "FP16",
    "BFLOAT16": "BF16",
    "F32": "FP32",
    "F16": "FP16",
    "I8": "INT8",
    "I16": "INT16",
    "I32": "INT32",
    "FP8E4M3FN": "FP8E4M3",
    "FLOAT8E4M3FN": "FP8E4M3",
    "FLOAT8E5M2": "FP8E5M2",
}
_FLOATS = frozenset({DType.FP32, DType.FP16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2})
_INTS = frozenset({DType.INT4, DType.INT8, DType.INT16, DType.INT32, DType.INT48})
_BITS = {
    DType.UNKNOWN: 0,
    DType.BOOL: 8,
    DType.INT4: 4,
    DType.INT8: 8,
    DType.INT16: 16,
    DType.INT32: 32,
    DType.INT48: 48,
    DType.FP32: 32,
    DType.FP16: 16,
    DType.BF16: 16,
    DType.SHAPE: 64,
    DType.FP8E4M3: 8,
    DType.FP8E5M2: 8,
    DType.FP6E2M3: 6,
    DType.FP6E3M2: 6,
    DType.FP4E2M1: 4,
    DType.FP8UE8M0: 8,
    DType.INT64: 64,
    DType.MXINT8: 8,
}
_NUMPY = {
    DType.BOOL: np.dtype(np.bool_),
    DType.INT4: np.dtype(np.int8),
    DType.INT8: np.dtype(np.int8),
    DType.INT16: np.dtype(np.int16),
    DType.INT32: np.dtype(np.int32),
    DType.INT48: np.dtype(np.int64),
    DType.FP32: np.dtype(np.float32),
    DType.FP16: np.dtype(np.float16),
    DType.BF16: np.dtype(ml_dtypes.bfloat16),
    DType.SHAPE: np.dtype(np.int64),
    DType.FP8E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
    DType.FP8E5M2: np.dtype(ml_dtypes.float8_e5m2),
}


def storage_bytes(dtype: DType, count: int) -> int:
    """Bytes ``count`` elements take in a .tosa constant (INT4 packs two per byte, INT48 takes six)."""
    if dtype is DType.INT4:
        return (count + 1) // 2
    if dtype is DType.SHAPE:
        return count * 8
    return count * ((dtype.bits + 7) // 8)
