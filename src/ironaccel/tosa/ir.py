"""The immutable program IR: Program -> Region -> Block -> Operator / Tensor.

Values are referenced by name, as in the format. Constant data is a read-only numpy array in the
tensor's storage type (:attr:`DType.numpy`): INT4 as int8 values in [-8, 7] (packing two per byte is
the codec's business), INT48 as int64, SHAPE as int64. SHAPE values (from CONST_SHAPE or block shape
lists) are tensors of dtype SHAPE whose ``shape`` is ``(rank,)``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator

import numpy as np

from .attributes import Attribute, default_attribute
from .dtypes import DType
from .operators import Op


@dataclasses.dataclass(frozen=True)
class Version:
    major: int = 1
    minor: int = 0
    patch: int = 0
    draft: bool = False

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}" + ("-draft" if self.draft else "")

    @property
    def is_tosa_1_0(self) -> bool:
        return self.major == 1 and self.minor == 0 and not self.draft


@dataclasses.dataclass(frozen=True, eq=False)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: DType
    data: np.ndarray | None = None
    variable: bool = False
    variable_name: str = ""
    unranked: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.data is not None:
            arr = np.asarray(self.data)
            if arr.flags.writeable:
                arr = arr.copy()
                arr.flags.writeable = False
            object.__setattr__(self, "data", arr)

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        same_data = (self.data is None and other.data is None) or (
            self.data is not None
            and other.data is not None
            and self.data.dtype == other.data.dtype
            and self.data.shape == other.data.shape
            and self.data.tobytes() == other.data.tobytes()
        )
        return (
            self.name == other.name
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.variable == other.variable
            and self.variable_name == other.variable_name
            and self.unranked == other.unranked
            and same_data
        )

    def __hash__(self) -> int:
        return hash((self.name, self.shape, self.dtype))


@dataclasses.dataclass(frozen=True)
class Operator:
    op: Op
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attribute: Attribute | None = None
    location: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if self.attribute is None and self.op.is_tosa_1_0:
            object.__setattr__(self, "attribute", default_attribute(self.op))


@dataclasses.dataclass(frozen=True)
class Block:
    name: str
    operators: tuple[Operator, ...]
    tensors: tuple[Tensor, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def __post_init__(self) -> None:
        for field in ("operators", "tensors", "inputs", "outputs"):
            object.__setattr__(self, field, tuple(getattr(self, field)))

    @functools.cached_property
    def tensor_map(self) -> dict[str, Tensor]:
        return {t.name: t for t in self.tensors}

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensor_map[name]
        except KeyError:
            raise KeyError(f"block {self.name!r} has no tensor {name!r}") from None

    @property
    def input_tensors(self) -> list[Tensor]:
        return [self.tensor(n) for n in self.inputs]

    @property
    def output_tensors(self) -> list[Tensor]:
        return [self.tensor(n) for n in self.outputs]


@dataclasses.dataclass(frozen=True)
class Region:
    name: str
    blocks: tuple[Block, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", tuple(self.blocks))


@dataclasses.dataclass(frozen=True)
class Program:
    regions: tuple[Region, ...]
    version: Version = Version()

    def __post_init__(self) -> None:
        object.__setattr__(self, "regions", tuple(self.regions))

    @property
    def main(self) -> Block:
        """The entry block: the first block of the region named "main" (else of the first region)."""
        for region in self.regions:
            if region.name == "main" and region.blocks:
                return region.blocks[0]
        if not self.regions or not self.regions[0].blocks:
            raise ValueError("program has no blocks")
        return self.regions[0].blocks[0]

    def blocks(self) -> Iterator[Block]:
        for region in self.regions:
            yield from region.blocks

    def block(self, name: str) -> Block:
        """A block by name (COND_IF / WHILE_LOOP refer to their graphs by block name)."""
        for block in self.blocks():
            if block.name == name:
                return block
        raise KeyError(f"program has no block {name!r}")

    def operators(self) -> Iterator[tuple[Block, int, Operator]]:
        for block in self.blocks():
            for index, op in enumerate(block.operators):
                yield block, index, op
