"""How a program's tensors sit in buffers: one contiguous little-endian array per tensor.

Elements use the numpy storage type of their TOSA dtype (:attr:`DType.numpy`): INT4 one byte per
value, INT48 eight bytes (int64), BOOL one byte, BF16/FP8 their 2/1 bytes. Slots of artifacts that
are not TOSA programs (an NVFP4 projection's packed uint8 weights) carry a numpy dtype instead. A
binding must cover exactly ``nbytes``.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ..tosa.dtypes import DType
from ..tosa.ir import Tensor


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: DType | np.dtype

    @functools.cached_property
    def numpy_dtype(self) -> np.dtype:
        return self.dtype.numpy if isinstance(self.dtype, DType) else self.dtype

    @functools.cached_property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @functools.cached_property
    def nbytes(self) -> int:  # read on every submission's binding check
        return self.size * self.numpy_dtype.itemsize

    @classmethod
    def of(cls, tensor: Tensor) -> TensorSpec:
        return cls(tensor.name, tensor.shape, tensor.dtype)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{list(self.shape)}"
