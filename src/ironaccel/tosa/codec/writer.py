""":class:`~ironaccel.tosa.ir.Program` -> ``.tosa`` bytes, with ``flatbuffers.Builder``.

The program is first turned into plain values keyed by schema field names (tables as dicts, unions as
``(member, dict)``), then a schema-driven encoder writes them; it knows the slots, defaults and kinds
only from :mod:`..schema`. The writer refuses what the reader would refuse (versions other than 1.0.x,
1.1-draft operators and types, malformed data), so ``read(write(p)) == p`` for every program it accepts.

Layout follows tosa-tools: SHAPE-dtype tensors go to the block's ``shapes`` list (as ``TosaShape``:
name, rank, int64 data) and every other tensor to ``tensors``; constant data is written exactly
(no padding), aligned to 8 bytes as the schema's ``force_align`` asks; a tensor without data gets no
``data`` vector. Blocks read back with their tensors first and their shape values after, each in order.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np

from ..attributes import ATTRIBUTE_OF, Attribute
from ..dtypes import DType
from ..errors import FormatError, NotTosa10Error
from ..ir import Block, Operator, Program, Tensor
from ..schema import ATTRIBUTE_MEMBERS, ENUMS, FILE_IDENTIFIER, ROOT_TABLE, TABLES, UNIONS, Field, Kind, Table
from .constants import DataError, pack

_INT32 = (-(1 << 31), (1 << 31) - 1)
_SCALAR_PREPEND = {
    Kind.INT32: "PrependInt32Slot",
    Kind.UINT32: "PrependUint32Slot",
    Kind.ENUM: "PrependUint32Slot",
    Kind.UINT64: "PrependUint64Slot",
    Kind.UNION_TYPE: "PrependUint8Slot",
}


def write(program: Program) -> bytes:
    """Encode ``program`` as a TOSA 1.0 flatbuffer (file identifier ``TOSA``)."""
    graph = _graph(program)
    data_bytes = sum(t.data.nbytes for b in program.blocks() for t in b.tensors if t.data is not None)
    builder = flatbuffers.Builder(min(data_bytes + 4096, (1 << 31) - 1))
    root = _Encoder(builder).table(TABLES[ROOT_TABLE], graph)
    builder.Finish(root, FILE_IDENTIFIER)
    return bytes(builder.Output())


def save(program: Program, path: str | os.PathLike) -> None:
    """Write ``program`` to ``path`` (through a temporary file, so a failure leaves no partial file)."""
    path = Path(path)
    data = write(program)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# -- IR -> schema values ---------------------------------------------------------------------------
def _graph(program: Program) -> dict[str, Any]:
    v = program.version
    if v.major != 1 or v.minor != 0 or v.patch < 0:
        raise NotTosa10Error(f"not TOSA 1.0: cannot write version {v}", "version")
    for value in (v.major, v.minor, v.patch):
        _int32(value, "version")
    regions = []
    for r, region in enumerate(program.regions):
        where = f"regions[{r}]"
        blocks = [_block(block, f"{where}.blocks[{b}]") for b, block in enumerate(region.blocks)]
        regions.append({"name": _text(region.name, f"{where}.name"), "blocks": blocks})
    version = {"_major": v.major, "_minor": v.minor, "_patch": v.patch, "_draft": bool(v.draft)}
    return {"version": version, "regions": regions}


def _text(value: str, where: str) -> str:
    if not isinstance(value, str):
        raise FormatError(f"expected a string, got {type(value).__name__}", where)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FormatError(f"string is not encodable as UTF-8 ({exc.reason})", where) from None
    return value


def _texts(values: tuple[str, ...], where: str) -> list[str]:
    return [_text(v, f"{where}[{i}]") for i, v in enumerate(values)]


def _int32(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not _INT32[0] <= value <= _INT32[1]:
        raise FormatError(f"{value!r} is not an int32", where)
    return int(value)


def _block(block: Block, where: str) -> dict[str, Any]:
    tensors, shapes = [], []
    for i, tensor in enumerate(block.tensors):
        if tensor.dtype is DType.SHAPE:
            shapes.append(_shape(tensor, f"{where}.tensors[{i}]"))
        else:
            tensors.append(_tensor(tensor, f"{where}.tensors[{i}]"))
    return {
        "name": _text(block.name, f"{where}.name"),
        "operators": [_operator(op, f"{where}.operators[{i}]") for i, op in enumerate(block.operators)],
        "tensors": tensors,
        "inputs": _texts(block.inputs, f"{where}.inputs"),
        "outputs": _texts(block.outputs, f"{where}.outputs"),
        "shapes": shapes,
    }


def _operator(op: Operator, where: str) -> dict[str, Any]:
    if not op.op.is_tosa_1_0:
        raise NotTosa10Error(f"not TOSA 1.0: operator {op.op.name} is a 1.1-draft operator", f"{where}.op")
    values: dict[str, Any] = {
        "op": int(op.op),
        "inputs": _texts(op.inputs, f"{where}.inputs"),
        "outputs": _texts(op.outputs, f"{where}.outputs"),
    }
    if op.attribute is not None:
        values["attribute"] = _attribute(op.attribute, f"{where}.attribute")
    if op.location is not None:
        values["location"] = {"text": _text(op.location, f"{where}.location")}
    return values


def _attribute(attribute: Attribute, where: str) -> tuple[str, dict[str, Any]]:
    op = getattr(attribute, "op", None)
    if op is None or ATTRIBUTE_OF.get(op) is not type(attribute):
        raise FormatError(f"{type(attribute).__name__} is not a TOSA 1.0 attribute record", where)
    member = ATTRIBUTE_MEMBERS[op - 1]
    values: dict[str, Any] = {}
    for field in TABLES[member].fields:
        value, at = getattr(attribute, field.name), f"{where}.{field.name}"
        if field.kind is Kind.INT32:
            value = _int32(value, at)
        elif field.kind is Kind.INT32_VECTOR:
            value = [_int32(v, f"{at}[{i}]") for i, v in enumerate(value)]
        elif field.kind is Kind.ENUM:
            value = _enum_value(field, value, at)
        elif field.kind is Kind.STRING:
            value = _text(value, at)
        elif field.kind is Kind.UBYTE_VECTOR:
            value = bytes(value)
        elif field.kind is Kind.BOOL:
            value = bool(value)
        values[field.name] = value
    return member, values


def _enum_value(field: Field, value: Any, where: str) -> int:
    try:
        member = ENUMS[field.ref](value)
    except ValueError:
        raise FormatError(f"{value!r} is not a {field.ref}", where) from None
    if isinstance(member, DType) and member is not DType.UNKNOWN and not member.is_tosa_1_0:
        raise NotTosa10Error(f"not TOSA 1.0: element type {member.name} is a 1.1-draft type", where)
    return int(member)


def _dtype(tensor: Tensor, where: str) -> DType:
    dtype = tensor.dtype
    if not isinstance(dtype, DType) or dtype is DType.UNKNOWN:
        raise FormatError(f"tensor {tensor.name!r} has no element type", where)
    if not dtype.is_tosa_1_0:
        raise NotTosa10Error(f"not TOSA 1.0: element type {dtype.name} is a 1.1-draft type", where)
    return dtype


def _data(tensor: Tensor, dtype: DType, count: int, where: str) -> np.ndarray | None:
    if tensor.data is None or (tensor.data.size == 0 and count == 0):
        return None
    if tensor.data.size != count:
        raise FormatError(f"{tensor.data.size} values, expected {count} for {dtype}{list(tensor.shape)}", where)
    try:
        return pack(tensor.data, dtype)
    except DataError as exc:
        raise FormatError(str(exc), where) from None


def _tensor(tensor: Tensor, where: str) -> dict[str, Any]:
    dtype = _dtype(tensor, f"{where}.type")
    shape = [_int32(d, f"{where}.shape[{i}]") for i, d in enumerate(tensor.shape)]
    data = None
    if tensor.data is not None:
        if any(d < 0 for d in shape):
            raise FormatError(f"a constant needs static dims, not {shape}", f"{where}.shape")
        data = _data(tensor, dtype, math.prod(shape), f"{where}.data")
    values: dict[str, Any] = {
        "name": _text(tensor.name, f"{where}.name"),
        "shape": shape,
        "type": int(dtype),
        "data": data,
        "variable": bool(tensor.variable),
        "is_unranked": bool(tensor.unranked),
    }
    if tensor.variable_name:
        values["variable_name"] = _text(tensor.variable_name, f"{where}.variable_name")
    return values


def _shape(tensor: Tensor, where: str) -> dict[str, Any]:
    if len(tensor.shape) != 1 or tensor.shape[0] < 0:
        raise FormatError(f"a SHAPE tensor must have shape (rank,), not {tensor.shape}", f"{where}.shape")
    rank = tensor.shape[0]
    if rank >= 1 << 32:
        raise FormatError(f"shape rank {rank} does not fit a uint32", f"{where}.shape")
    return {
        "name": _text(tensor.name, f"{where}.name"),
        "rank": rank,
        "data": _data(tensor, DType.SHAPE, rank, f"{where}.data"),
    }


# -- schema values -> flatbuffer ----------------------------------------------------------------------
class _Encoder:
    """Writes value dicts as tables of the schema; children first, as flatbuffers requires."""

    def __init__(self, builder: flatbuffers.Builder) -> None:
        self.b = builder

    def table(self, spec: Table, values: dict[str, Any]) -> int:
        offsets: dict[int, int] = {}
        for slot, field in enumerate(spec.fields):
            value = values.get(field.name)
            if value is not None and not field.kind.is_scalar:
                offsets[slot] = self._offset(field, value)
        b = self.b
        b.StartObject(len(spec.fields))
        # Largest scalars first keeps padding small; offsets are 4 bytes like int32.
        for slot, field in sorted(enumerate(spec.fields), key=lambda item: -item[1].kind.size):
            if field.kind is Kind.UNION_TYPE:
                union = values.get(field.name[: -len("_type")])
                code = 0 if union is None else UNIONS[field.ref].index(union[0]) + 1
                b.PrependUint8Slot(slot, code, 0)
            elif field.kind is Kind.BOOL:
                b.PrependBoolSlot(slot, bool(values.get(field.name, field.default)), bool(field.default))
            elif field.kind.is_scalar:
                prepend = getattr(b, _SCALAR_PREPEND[field.kind])
                prepend(slot, int(values.get(field.name, field.default)), field.default)
            elif slot in offsets:
                b.PrependUOffsetTRelativeSlot(slot, offsets[slot], 0)
        return b.EndObject()

    def _offset(self, field: Field, value: Any) -> int:
        kind, b = field.kind, self.b
        if kind is Kind.STRING:
            return b.CreateString(value)
        if kind is Kind.TABLE:
            return self.table(TABLES[field.ref], value)
        if kind is Kind.UNION:
            member, values = value
            return self.table(TABLES[member], values)
        if kind is Kind.INT32_VECTOR:
            return b.CreateNumpyVector(np.asarray(value, dtype="<i4").reshape(-1))
        if kind is Kind.UBYTE_VECTOR:
            return self._bytes(value, field.align)
        if kind is Kind.STRING_VECTOR:
            return self._offsets([b.CreateString(s) for s in value])
        return self._offsets([self.table(TABLES[field.ref], v) for v in value])

    def _offsets(self, offsets: list[int]) -> int:
        b = self.b
        b.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            b.PrependUOffsetTRelative(offset)
        return b.EndVector()

    def _bytes(self, data: bytes | np.ndarray, align: int) -> int:
        """A [ubyte] vector whose first byte is ``align``-aligned, copied straight into the builder."""
        view = memoryview(data).cast("B")
        b, n = self.b, len(view)
        b.StartVector(1, n, align)
        b.head = b.head - n
        b.Bytes[b.head : b.head + n] = view
        return b.EndVector()
