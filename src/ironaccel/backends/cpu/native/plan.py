"""Where every tensor of a lowered program lives while the generated code runs.

* Program inputs and outputs are the caller's arrays; constants (declared or folded at load) and the
  arrays lowerings prepare live in one read-only blob made at load.
* A RESHAPE or IDENTITY result is its operand's bytes (an alias class), unless that would put two
  fixed storages (an input, a constant, an output) in one class; then it is a copy.
* A class that holds a program output is written straight into that output's array. An output that is
  an input, a constant or a second copy of another output is copied at the end of the run.
* Everything else goes into one arena: each class lives from the operator that writes it to the last
  one that reads it, scratch buffers for the length of their operator, and classes whose lifetimes do
  not overlap share bytes (largest first, each at the lowest offset free over its lifetime).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ....tosa.ir import Block, Tensor
from .lowering import Kernel, NotNative

ALIGN = 64
MAX_ELEMENTS = 1 << 31  # per tensor: the generated indices are 64-bit, this keeps every product far from it
MAX_ARENA_BYTES = 1 << 34


@dataclasses.dataclass(frozen=True)
class Storage:
    kind: str  # "input", "output", "const" or "arena"
    index: int  # input / output position, or byte offset into the blob / arena


@dataclasses.dataclass
class Plan:
    storage: dict[str, Storage]  # every tensor the code touches
    scratch: dict[tuple[int, int], int]  # (operator position, scratch index) -> arena offset
    arrays: dict[tuple[int, str], int]  # (operator position, array name) -> blob offset
    final_copies: list[tuple[int, str]]  # (output position, tensor) copied at the end of a run
    arena_bytes: int
    blob: np.ndarray  # uint8, every constant the code reads


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _nbytes(tensor: Tensor) -> int:
    return int(np.prod(tensor.shape, dtype=np.int64)) * tensor.dtype.numpy.itemsize


class _Classes:
    """Union-find over tensor names."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        root = self.parent.setdefault(name, name)
        while root != self.parent[root]:
            root = self.parent[root]
        while name != root:  # path compression
            self.parent[name], name = root, self.parent[name]
        return root

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(b)] = self.find(a)


def plan(
    block: Block, operators: list, kernels: list[Kernel], constants: dict[str, np.ndarray], used: list[set[str]]
) -> Plan:
    """``operators`` and ``kernels`` in run order; ``used[i]``: the operand names kernel i's code reads
    through a pointer (constants among them go into the blob)."""
    for tensor in block.tensors:
        if tensor.dtype.numpy.itemsize and int(np.prod(tensor.shape, dtype=np.int64)) > MAX_ELEMENTS:
            raise NotNative(f"tensor {tensor.name!r} has more than {MAX_ELEMENTS} elements")
    inputs = {name: k for k, name in enumerate(block.inputs)}
    classes = _Classes()
    fixed: dict[str, Storage] = {}  # class root -> fixed storage
    for name, k in inputs.items():
        fixed[classes.find(name)] = Storage("input", k)
    for name in constants:
        if name not in inputs:
            fixed[classes.find(name)] = Storage("const", -1)

    producer: dict[str, int] = {}
    copies: set[int] = set()  # alias operators that must copy after all
    for position, (operator, kernel) in enumerate(zip(operators, kernels, strict=True)):
        for name in operator.outputs:
            producer[name] = position
        if kernel.alias:
            source, result = classes.find(operator.inputs[0]), classes.find(operator.outputs[0])
            if source in fixed and result in fixed:
                copies.add(position)
            else:
                if result in fixed:
                    fixed[source] = fixed.pop(result)
                classes.union(source, result)
    for position in copies:
        kernels[position].alias = False  # the lowering's body copies the bytes

    final_copies: list[tuple[int, str]] = []
    for k, name in enumerate(block.outputs):
        root = classes.find(name)
        if name in producer and root not in fixed:
            fixed[root] = Storage("output", k)
        else:
            final_copies.append((k, name))

    # Lifetimes of the classes left for the arena, and scratch buffers.
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for position, operator in enumerate(operators):
        for name in (*operator.inputs, *operator.outputs):
            root = classes.find(name)
            if root in fixed:
                continue
            first.setdefault(root, position)
            last[root] = position
    for _, name in final_copies:
        root = classes.find(name)
        if root not in fixed:
            last[root] = len(operators)
    sizes: dict[str, int] = {}
    for operator in operators:
        for name in operator.outputs:
            root = classes.find(name)
            if root not in fixed:
                sizes[root] = max(sizes.get(root, 0), _nbytes(block.tensor(name)))
    items: list[tuple[int, int, int, object]] = [(sizes[r], first[r], last[r], r) for r in sizes]
    for position, kernel in enumerate(kernels):
        for index, nbytes in enumerate(kernel.scratch):
            items.append((nbytes, position, position, (position, index)))
    offsets, arena_bytes = _pack(items)
    if arena_bytes > MAX_ARENA_BYTES:
        raise NotNative(f"intermediates need {arena_bytes} bytes")

    # The blob: constants read through pointers, then the lowerings' arrays.
    pieces: list[np.ndarray] = []
    blob_size = 0
    const_offsets: dict[str, int] = {}
    array_offsets: dict[tuple[int, str], int] = {}

    def add(value: np.ndarray) -> int:
        nonlocal blob_size
        data = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        offset = blob_size
        pieces.append((offset, data))
        blob_size = _align(offset + data.nbytes)
        return offset

    for position, names in enumerate(used):
        for name in sorted(names):
            root = classes.find(name)
            if fixed.get(root, Storage("", 0)).kind == "const" and root not in const_offsets:
                const_offsets[root] = add(constants[root])
        for array_name, value in kernels[position].arrays.items():
            array_offsets[(position, array_name)] = add(value)
    for _, name in final_copies:
        root = classes.find(name)
        if fixed.get(root, Storage("", 0)).kind == "const" and root not in const_offsets:
            const_offsets[root] = add(constants[root])
    blob = np.zeros(max(blob_size, ALIGN) + ALIGN, np.uint8)
    skip = (-blob.ctypes.data) % ALIGN  # the blob's start is aligned too
    blob = blob[skip : skip + max(blob_size, ALIGN)]
    for offset, data in pieces:
        blob[offset : offset + data.nbytes] = data
    blob.flags.writeable = False

    storage: dict[str, Storage] = {}
    names = set(classes.parent) | set(producer)
    for operator in operators:
        names.update(operator.inputs)
    names.update(block.outputs)
    for name in names:
        root = classes.find(name)
        where = fixed.get(root)
        if where is None:
            if root not in offsets:
                continue  # a constant nothing reads through a pointer
            where = Storage("arena", offsets[root])
        elif where.kind == "const":
            if root not in const_offsets:
                continue
            where = Storage("const", const_offsets[root])
        storage[name] = where
    scratch = {key: offsets[key] for key in offsets if isinstance(key, tuple)}
    return Plan(storage, scratch, array_offsets, final_copies, arena_bytes, blob)


def _pack(items: list[tuple[int, int, int, object]]) -> tuple[dict[object, int], int]:
    """Offsets for (bytes, first, last, key) items: largest first, each at the lowest aligned offset that
    no placed item with an overlapping lifetime covers."""
    placed: list[tuple[int, int, int, int]] = []  # offset, end, first, last
    offsets: dict[object, int] = {}
    top = 0
    for nbytes, start, stop, key in sorted(items, key=lambda item: (-item[0], item[1], str(item[3]))):
        need = _align(max(nbytes, 1))
        busy = sorted((o, e) for o, e, f, la in placed if f <= stop and start <= la)
        offset = 0
        for o, e in busy:
            if offset + need <= o:
                break
            offset = max(offset, e)
        placed.append((offset, offset + need, start, stop))
        offsets[key] = offset
        top = max(top, offset + need)
    return offsets, top
