"""``.tosa`` bytes -> :class:`~ironaccel.tosa.ir.Program`, for hostile input.

Everything the file says is checked before it is used (see :mod:`.flatbuf` for the structural checks);
on top of those this module checks what TOSA 1.0 means:

* version 1.0.x (patch >= 0); any other version -> :class:`NotTosa10Error`.
* operators, attribute tables and element types of the 1.1 draft -> :class:`NotTosa10Error` naming
  them; unknown codes -> :class:`FormatError`. The 1.1-draft tensor fields (external data ``offset`` /
  ``size``, block scaling ``scale_*`` / ``block_shape``) must be unset.
* a constant has static dims (>= 0) and at least ``storage_bytes(dtype, count)`` bytes of data; a
  CONST / CONST_SHAPE output must carry data. Longer data is read up to that size: the C++ serializer
  pads data to a multiple of 8 bytes, the Python one writes 8 bytes for an empty shape value, and
  ExecuTorch's Arm backend writes per-channel zero points (OC bytes) for tensors declared ``[1]``.

Some things the specification forbids appear in real files that must read (conformance negative tests
are invalid only semantically): tosa-tools stamps its 1.0.2 conformance tests ``draft = true`` (the
serializer's default), ERROR_IF tests carry dims below -1, and constants carry surplus data (above).
All are accepted by default and left to validation; ``strict=True`` refuses them (draft ->
NotTosa10Error; a dim below -1, or data beyond the exact size and its 8-byte padding -> FormatError).

A block's tensors come in file order, SHAPE values last: ``TosaShape`` entries of ``shapes``, after any
SHAPE-typed ``TosaTensor`` (a form older writers may use); the writer puts all of them in ``shapes``.

Constants become read-only numpy arrays that view the input buffer (no copy) where the wire form is
the storage form. Operators, blocks, tensors and constant arrays reached twice through shared tables
are decoded once and shared in the IR.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

from ...core.files import read_limited
from ..attributes import ATTRIBUTE_OF, Attribute
from ..dtypes import DType, storage_bytes
from ..errors import FormatError, NotTosa10Error
from ..ir import Block, Operator, Program, Region, Tensor, Version
from ..operators import Op
from ..schema import ATTRIBUTE_MEMBERS, ENUMS, TABLES, CompatibilityFeature, Kind
from .constants import DataError, unpack
from .flatbuf import FlatBuffer, FlatTable
from .limits import DEFAULT_LIMITS, Limits

Source = bytes | bytearray | memoryview | str | os.PathLike

_CONST_PRODUCERS = (Op.CONST, Op.CONST_SHAPE)
_DRAFT_TENSOR_FIELDS = ("offset", "size", "scale_type", "block_shape", "scale_offset", "scale_size")


def _check_attribute_records() -> None:
    """The attribute records of :mod:`..attributes` must mirror the schema tables field for field."""
    for op, cls in ATTRIBUTE_OF.items():
        schema_fields = [f.name for f in TABLES[ATTRIBUTE_MEMBERS[op - 1]].fields]
        record_fields = [f.name for f in dataclasses.fields(cls)]
        if schema_fields != record_fields:
            raise RuntimeError(f"{cls.__name__} fields {record_fields} do not match the schema {schema_fields}")


_check_attribute_records()


def read(source: Source, *, limits: Limits | None = None, strict: bool = False) -> Program:
    """Decode a TOSA 1.0 flatbuffer given as bytes (or a path, as :func:`load`).

    Raises :class:`FormatError` for anything malformed and :class:`NotTosa10Error` for a well-formed
    file of another version; no other exception escapes for bad content.
    """
    if isinstance(source, str | os.PathLike):
        return load(source, limits=limits, strict=strict)
    limits = limits or DEFAULT_LIMITS
    try:
        return _Decoder(FlatBuffer(source, limits), limits, strict).program()
    except (FormatError, MemoryError):
        raise
    except Exception as exc:  # a checked invariant slipped: still never let bad input escape as anything else
        raise FormatError(f"internal decoder error: {type(exc).__name__}: {exc}", "file") from exc


def load(path: str | os.PathLike, *, limits: Limits | None = None, strict: bool = False) -> Program:
    """Read a ``.tosa`` file.

    Besides what :func:`read` raises: a path that is not a regular file (a directory, FIFO, device) or
    cannot be opened -> :class:`~ironaccel.core.errors.InvalidArgument` (``PermissionDenied`` where access
    is refused); a file over ``limits.max_file_bytes`` -> :class:`~ironaccel.core.errors.ResourceLimit`,
    raised before anything is read. These refusals name the path; content faults are :func:`read`'s.
    """
    limits = limits or DEFAULT_LIMITS
    data = read_limited(path, limits.max_file_bytes, "TOSA file", limit_name="Limits.max_file_bytes")
    return read(data, limits=limits, strict=strict)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _dims(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


class _Decoder:
    def __init__(self, fb: FlatBuffer, limits: Limits, strict: bool) -> None:
        self.fb = fb
        self.limits = limits
        self.strict = strict
        self._memo: dict[Any, Any] = {}
        self._constant_bytes = 0

    def _cached(self, key: Any, make: Any, *args: Any) -> Any:
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = make(*args)
        return hit

    # -- graph -------------------------------------------------------------------------------------
    def program(self) -> Program:
        root = self.fb.root()
        version = self._version(root.get("version"))
        self._software(root)
        regions = root.get("regions") or ()
        return Program(tuple(self._cached((r.pos, "region"), self._region, r) for r in regions), version)

    def _version(self, table: FlatTable) -> Version:
        major, minor, patch = table.get("_major"), table.get("_minor"), table.get("_patch")
        draft = table.get("_draft")
        version = Version(major, minor, patch, draft)
        if major != 1 or minor != 0:
            raise NotTosa10Error(f"not TOSA 1.0: the file is TOSA {major}.{minor}.{patch}", table.where)
        if patch < 0:
            raise FormatError(f"version 1.0 has no valid patch number ({patch})", table.where)
        if draft and self.strict:
            raise NotTosa10Error(f"not TOSA 1.0: the file is a draft ({version})", table.where)
        return version

    def _software(self, root: FlatTable) -> None:
        """Verify the writer-information tables (not kept in the IR); refuse required 1.1 features."""
        for name in ("software_version", "compatibility"):
            table = root.get(name)
            if table is None:
                continue
            if name == "compatibility":
                features = table.get("features")
                if features:
                    named = [f.name for f in CompatibilityFeature if f and features & (1 << f)] or [hex(features)]
                    raise NotTosa10Error(
                        f"not TOSA 1.0: the file requires serialization features {', '.join(named)}",
                        table.field_where("features"),
                    )
                table = table.get("min_reader_version")
                if table is None:
                    continue
            for field in table.spec.fields:
                table.get(field.name)

    def _region(self, table: FlatTable) -> Region:
        blocks = table.get("blocks") or ()
        return Region(table.get("name") or "", tuple(self._cached((b.pos, "block"), self._block, b) for b in blocks))

    def _block(self, table: FlatTable) -> Block:
        operators = tuple(self._cached((o.pos, "op"), self._operator, o) for o in table.get("operators") or ())
        produced = {name for op in operators if op.op in _CONST_PRODUCERS for name in op.outputs}
        tensors, shapes = [], []
        for t in table.get("tensors") or ():
            is_const = t.get("name") in produced
            tensor = self._cached((t.pos, "tensor", is_const), self._tensor, t, is_const)
            (shapes if tensor.dtype is DType.SHAPE else tensors).append(tensor)
        for s in table.get("shapes") or ():
            is_const = s.get("name") in produced
            shapes.append(self._cached((s.pos, "shape", is_const), self._shape, s, is_const))
        return Block(
            table.get("name") or "",
            operators,
            (*tensors, *shapes),
            table.get("inputs") or (),
            table.get("outputs") or (),
        )

    # -- operators ---------------------------------------------------------------------------------
    def _operator(self, table: FlatTable) -> Operator:
        op = Op(table.get("op"))
        where = table.field_where("op")
        if op is Op.UNKNOWN:
            raise FormatError("operator code 0 (UNKNOWN)", where)
        if not op.is_tosa_1_0:
            raise NotTosa10Error(f"not TOSA 1.0: operator {op.name} is a 1.1-draft operator", where)
        attribute = table.get("attribute")
        record = None if attribute is None else self._attribute(*attribute)
        location = table.get("location")
        return Operator(
            op,
            table.get("inputs") or (),
            table.get("outputs") or (),
            record,
            None if location is None else location.get("text") or "",
        )

    def _attribute(self, member: str, table: FlatTable) -> Attribute:
        op = Op(ATTRIBUTE_MEMBERS.index(member) + 1)
        if not op.is_tosa_1_0:
            raise NotTosa10Error(f"not TOSA 1.0: attribute {member} is a 1.1-draft attribute", table.where)
        values: dict[str, Any] = {}
        for field in table.spec.fields:
            value = table.get(field.name)
            if field.kind is Kind.ENUM:
                value = self._enum(field.ref, value, table.field_where(field.name))
            elif field.kind is Kind.UBYTE_VECTOR:
                value = b"" if value is None else bytes(value)
            elif field.kind is Kind.STRING:
                value = value or ""
            elif field.kind is Kind.INT32_VECTOR:
                value = value or ()
            values[field.name] = value
        return ATTRIBUTE_OF[op](**values)

    def _enum(self, name: str, code: int, where: str) -> Any:
        if name == "DType":
            return self._dtype(code, where, allow_unknown=True)
        return ENUMS[name](code)

    def _dtype(self, code: int, where: str, allow_unknown: bool = False) -> DType:
        dtype = DType(code)
        if dtype is DType.UNKNOWN and not allow_unknown:
            raise FormatError("element type is UNKNOWN", where)
        if dtype is not DType.UNKNOWN and not dtype.is_tosa_1_0:
            raise NotTosa10Error(f"not TOSA 1.0: element type {dtype.name} is a 1.1-draft type", where)
        return dtype

    # -- tensors -----------------------------------------------------------------------------------
    def _tensor(self, table: FlatTable, is_const: bool) -> Tensor:
        name = table.get("name") or ""
        shape = table.get("shape") or ()
        for axis, dim in enumerate(shape):
            if dim < -1 and self.strict:
                raise FormatError(f"dimension {axis} is {dim}; dims must be >= -1", table.field_where("shape"))
        dtype = self._dtype(table.get("type"), table.field_where("type"))
        if dtype is DType.SHAPE and len(shape) != 1:
            raise FormatError(f"a SHAPE tensor must have shape [rank], not {_dims(shape)}", table.field_where("shape"))
        for field in _DRAFT_TENSOR_FIELDS:
            if table.get(field):
                raise NotTosa10Error(
                    f"not TOSA 1.0: tensor field {field} (external data / block scaling) is a 1.1-draft feature",
                    table.field_where(field),
                )
        scale_data = table.get("scale_data")
        if scale_data is not None and len(scale_data):
            raise NotTosa10Error(
                "not TOSA 1.0: block-scale data is a 1.1-draft feature", table.field_where("scale_data")
            )
        unranked = table.get("is_unranked")
        data = self._constant(table.get("data"), dtype, shape, is_const, table.field_where("data"))
        return Tensor(name, shape, dtype, data, table.get("variable"), table.get("variable_name") or "", unranked)

    def _shape(self, table: FlatTable, is_const: bool) -> Tensor:
        rank = table.get("rank")
        if rank > self.limits.max_shape_length:
            raise FormatError(
                f"shape value of rank {rank}, limit max_shape_length={self.limits.max_shape_length}",
                table.field_where("rank"),
            )
        data = self._constant(table.get("data"), DType.SHAPE, (rank,), is_const, table.field_where("data"))
        return Tensor(table.get("name") or "", (rank,), DType.SHAPE, data)

    def _constant(
        self, raw: memoryview | None, dtype: DType, shape: tuple[int, ...], is_const: bool, where: str
    ) -> np.ndarray | None:
        """The constant array, or None for a tensor without data (not a CONST / CONST_SHAPE output)."""
        if (raw is not None and len(raw)) or is_const:
            # An empty array still needs its other dimensions' product to fit numpy's index type.
            if math.prod(d for d in shape if d > 0) >= 1 << 62:
                raise FormatError(f"constant shape {_dims(shape)} is too large to represent", where)
        if raw is None or len(raw) == 0:
            if not is_const:
                return None
            if any(d < 0 for d in shape):
                raise FormatError(f"constant without data has a dynamic shape {_dims(shape)}", where)
            if math.prod(shape):
                expected = storage_bytes(dtype, math.prod(shape))
                raise FormatError(f"constant has 0 bytes, expected {expected} for {dtype}{_dims(shape)}", where)
            return _frozen(np.empty(shape, dtype.numpy))
        if any(d < 0 for d in shape):
            raise FormatError(f"constant data for a dynamic shape {_dims(shape)}", where)
        count = math.prod(shape)
        if count == 0 and not is_const:
            # No element to hold: only a CONST output's empty array means anything (the writer stores
            # none for it either way), so stray padding bytes read as "no data", as a writer would emit.
            return None
        expected = storage_bytes(dtype, count)
        padded = len(raw) == expected or len(raw) == max(8, -(-expected // 8) * 8)
        if len(raw) < expected or (self.strict and not padded):
            raise FormatError(f"{len(raw)} bytes, expected {expected} for {dtype}{_dims(shape)}", where)
        key = (id(raw), dtype, shape)
        hit = self._memo.get(key)
        if hit is not None:
            return hit[1]
        self._constant_bytes += len(raw)
        if self._constant_bytes > self.limits.max_total_constant_bytes:
            raise FormatError(
                f"constants total {self._constant_bytes} bytes, "
                f"limit max_total_constant_bytes={self.limits.max_total_constant_bytes}",
                where,
            )
        try:
            array = unpack(raw[:expected], dtype, count).reshape(shape)
        except DataError as exc:
            raise FormatError(str(exc), where) from None
        if not self.fb.view.readonly and dtype not in (DType.INT4, DType.INT48):
            array = array.copy()  # a view of a mutable buffer would change under the IR's feet
        array = _frozen(array)
        self._memo[key] = (raw, array)  # keep raw alive: the key is its id
        return array
