"""A verifying, schema-driven view of a flatbuffer: nothing is trusted before it is checked.

The reader never touches the buffer except through :class:`FlatBuffer`, which checks every access the
way the flatbuffers verifier does, and more:

* the file identifier, and every uoffset (in bounds, 4-byte aligned);
* every table: its soffset, a vtable that is in bounds, 2-byte aligned, of even size >= 4, and a table
  size >= 4 that fits in the buffer; every present field lies inside its table and is aligned to its size;
* every vector and string: 4-byte aligned length prefix, ``count`` checked against its limit *before*
  anything is sized from it, then ``count x element size`` checked against the end of the buffer;
  strings NUL-terminated inside the buffer and valid UTF-8;
* enum codes are members of their schema enum; a union's type and value are both present or both absent.

Cycles and unbounded depth cannot occur: traversal follows the schema (at most six levels) and uoffsets
only point forward. Shared objects (two offsets to one table, vector or string) are legal flatbuffers;
every decoded object is memoised by position, so sharing cannot amplify work or memory: decoding is
linear in the file size. Values come back as Python scalars, strings, tuples, zero-copy memoryviews
(byte vectors) and :class:`FlatTable` views, whose fields are decoded on first access.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import FormatError
from ..schema import ENUMS, FILE_IDENTIFIER, ROOT_TABLE, TABLES, UNIONS, Field, Kind, Table
from . import limits as _lim
from .limits import Limits

_U16 = struct.Struct("<H")
_U16x2 = struct.Struct("<HH")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")

_MISSING = object()
_GENERIC_LIMITS = {
    Kind.STRING: _lim.GENERIC_STRING_LIMIT,
    Kind.INT32_VECTOR: _lim.GENERIC_INT32_VECTOR_LIMIT,
    Kind.UBYTE_VECTOR: _lim.GENERIC_UBYTE_VECTOR_LIMIT,
    Kind.STRING_VECTOR: _lim.GENERIC_STRING_VECTOR_LIMIT,
    Kind.TABLE_VECTOR: _lim.GENERIC_TABLE_VECTOR_LIMIT,
}


class _Slot:
    """What the decoder needs to know about one field, worked out once from the schema."""

    __slots__ = ("absent", "checks_absence", "child", "codes", "entry", "field", "kind", "limit", "scalar", "size")

    def __init__(self, table: Table, index: int, field: Field) -> None:
        kind = field.kind
        self.field = field
        self.kind = kind
        self.entry = 4 + 2 * index  # position of the field's voffset inside the vtable
        self.size = kind.size
        self.scalar = kind.is_scalar
        self.absent = (bool(field.default) if kind is Kind.BOOL else field.default) if self.scalar else None
        self.checks_absence = field.required or kind is Kind.UNION
        self.child = TABLES[field.ref] if kind in (Kind.TABLE, Kind.TABLE_VECTOR) else None
        self.codes = frozenset(int(m) for m in ENUMS[field.ref]) if kind is Kind.ENUM else None
        self.limit = _lim.FIELD_LIMITS.get((table.name, field.name), _GENERIC_LIMITS.get(kind, ""))


_SLOTS = {spec.name: {f.name: _Slot(spec, i, f) for i, f in enumerate(spec.fields)} for spec in TABLES.values()}


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


class FlatTable:
    """A verified table; ``get(name)`` decodes (and caches) one field by its schema name."""

    __slots__ = ("_fb", "_tsize", "_values", "_vt", "_vtsize", "pos", "spec", "where")

    def __init__(self, fb: FlatBuffer, spec: Table, pos: int, where: str, vt: int, vtsize: int, tsize: int) -> None:
        self._fb = fb
        self.spec = spec
        self.pos = pos
        self.where = where
        self._vt = vt
        self._vtsize = vtsize
        self._tsize = tsize
        self._values: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        value = self._values.get(name, _MISSING)
        if value is _MISSING:
            value = self._fb._field(self, name)
            self._values[name] = value
        return value

    def field_where(self, name: str) -> str:
        return _join(self.where, name)


class FlatBuffer:
    """Bounds-checked access to one buffer under one set of :class:`Limits`."""

    def __init__(self, data: bytes | bytearray | memoryview, limits: Limits) -> None:
        view = memoryview(data)
        if not view.c_contiguous:
            view = memoryview(view.tobytes())
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.view = view
        self.size = len(view)
        self.limits = limits
        self._memo: dict[tuple[Any, ...], Any] = {}
        if self.size > limits.max_file_bytes:
            raise FormatError(f"file is {self.size} bytes, limit max_file_bytes={limits.max_file_bytes}", "file")

    # -- entry point -------------------------------------------------------------------------------
    def root(self) -> FlatTable:
        if self.size < 12:
            raise FormatError(f"file is {self.size} bytes, too small to be a TOSA flatbuffer", "file")
        ident = bytes(self.view[4:8])
        if ident != FILE_IDENTIFIER:
            from .sniff import looks_like  # only on this error path

            what = looks_like(self.view)
            hint = f": this looks like {what}" if what else ""
            found = f"file identifier {ident!r}, expected {FILE_IDENTIFIER!r}"
            raise FormatError(f"not a TOSA flatbuffer ({found}){hint}", "file")
        return self.table(_U32.unpack_from(self.view, 0)[0], TABLES[ROOT_TABLE], "")

    # -- objects -----------------------------------------------------------------------------------
    def table(self, pos: int, spec: Table, where: str) -> FlatTable:
        key = (pos, spec.name)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        what = where or spec.name
        if pos % 4 or pos + 4 > self.size:
            self._bad_offset(pos, 4, what)
        vt = pos - _I32.unpack_from(self.view, pos)[0]
        if vt < 0 or vt % 2 or vt + 4 > self.size:
            raise FormatError(f"vtable offset {vt} of the table at {pos} is outside the file or misaligned", what)
        vtsize, tsize = _U16x2.unpack_from(self.view, vt)
        if vtsize < 4 or vtsize % 2 or vt + vtsize > self.size:
            raise FormatError(f"vtable at {vt} has invalid size {vtsize}", what)
        if tsize < 4 or pos + tsize > self.size:
            raise FormatError(f"table at {pos} has invalid size {tsize} (file is {self.size} bytes)", what)
        table = FlatTable(self, spec, pos, where, vt, vtsize, tsize)
        self._memo[key] = table
        return table

    def _bad_offset(self, pos: int, align: int, what: str) -> None:
        if pos % align:
            raise FormatError(f"offset {pos} is not {align}-byte aligned", what)
        raise FormatError(f"offset {pos} points outside the file ({self.size} bytes)", what)

    def _vector(self, pos: int, elem_size: int, limit_name: str, what: str) -> tuple[int, int]:
        """Verify a vector's header; returns (count, first element position)."""
        if pos % 4 or pos + 4 > self.size:
            self._bad_offset(pos, 4, what)
        count = _U32.unpack_from(self.view, pos)[0]
        limit = getattr(self.limits, limit_name)
        if count > limit:
            unit = "bytes" if elem_size == 1 else "entries"
            raise FormatError(f"{count} {unit}, limit {limit_name}={limit}", what)
        start = pos + 4
        if start + count * elem_size > self.size:
            raise FormatError(
                f"{count} x {elem_size}-byte entries at {start} overrun the file ({self.size} bytes)", what
            )
        return count, start

    def string(self, pos: int, limit_name: str, where: str) -> str:
        key = (pos, "s", limit_name)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        count, start = self._vector(pos, 1, limit_name, where)
        end = start + count
        if end >= self.size or self.view[end] != 0:
            raise FormatError("string is not NUL-terminated inside the file", where)
        try:
            text = str(self.view[start:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"string is not valid UTF-8 ({exc.reason} at byte {exc.start})", where) from None
        self._memo[key] = text
        return text

    def _offsets(self, pos: int, limit_name: str, where: str) -> list[int]:
        count, start = self._vector(pos, 4, limit_name, where)
        if count == 0:
            return []
        offsets = struct.unpack_from(f"<{count}I", self.view, start)
        return [start + 4 * i + off for i, off in enumerate(offsets)]

    def strings(self, pos: int, limit_name: str, where: str) -> tuple[str, ...]:
        key = (pos, "S", limit_name)
        hit = self._memo.get(key)
        if hit is None:
            names = self._offsets(pos, limit_name, where)
            hit = tuple(self.string(p, _lim.GENERIC_STRING_LIMIT, f"{where}[{i}]") for i, p in enumerate(names))
            self._memo[key] = hit
        return hit

    def tables(self, pos: int, spec: Table, limit_name: str, where: str) -> tuple[FlatTable, ...]:
        key = (pos, "T", spec.name, limit_name)
        hit = self._memo.get(key)
        if hit is None:
            targets = self._offsets(pos, limit_name, where)
            hit = tuple(self.table(p, spec, f"{where}[{i}]") for i, p in enumerate(targets))
            self._memo[key] = hit
        return hit

    def int32s(self, pos: int, limit_name: str, where: str) -> tuple[int, ...]:
        key = (pos, "i", limit_name)
        hit = self._memo.get(key)
        if hit is None:
            count, start = self._vector(pos, 4, limit_name, where)
            hit = struct.unpack_from(f"<{count}i", self.view, start) if count else ()
            self._memo[key] = hit
        return hit

    def ubytes(self, pos: int, limit_name: str, where: str) -> memoryview:
        key = (pos, "B", limit_name)
        hit = self._memo.get(key)
        if hit is None:
            count, start = self._vector(pos, 1, limit_name, where)
            hit = self.view[start : start + count]
            self._memo[key] = hit
        return hit

    # -- fields ------------------------------------------------------------------------------------
    def _field(self, table: FlatTable, name: str) -> Any:
        slot = _SLOTS[table.spec.name][name]
        voff = _U16.unpack_from(self.view, table._vt + slot.entry)[0] if slot.entry + 2 <= table._vtsize else 0
        if voff == 0:
            if slot.checks_absence:
                self._absent(table, slot.field, table.field_where(name))
            return slot.absent
        size = slot.size
        if voff < 4 or voff + size > table._tsize:
            raise FormatError(
                f"field at table offset {voff} overruns its {table._tsize}-byte table", table.field_where(name)
            )
        pos = table.pos + voff
        if pos % size:
            raise FormatError(f"field at {pos} is not {size}-byte aligned", table.field_where(name))
        kind = slot.kind
        if slot.scalar:
            return self._scalar(table, slot, pos)
        where = table.field_where(name)
        target = pos + _U32.unpack_from(self.view, pos)[0]
        if kind is Kind.STRING:
            return self.string(target, slot.limit, where)
        if kind is Kind.TABLE:
            return self.table(target, slot.child, where)
        if kind is Kind.UNION:
            code = table.get(f"{name}_type")
            if code == 0:
                raise FormatError("union value present but its type is NONE", where)
            member = UNIONS[slot.field.ref][code - 1]
            return member, self.table(target, TABLES[member], where)
        if kind is Kind.INT32_VECTOR:
            return self.int32s(target, slot.limit, where)
        if kind is Kind.UBYTE_VECTOR:
            return self.ubytes(target, slot.limit, where)
        if kind is Kind.STRING_VECTOR:
            return self.strings(target, slot.limit, where)
        return self.tables(target, slot.child, slot.limit, where)

    def _absent(self, table: FlatTable, field: Field, where: str) -> None:
        if field.required:
            raise FormatError("required field is missing", where)
        if table.get(f"{field.name}_type") != 0:
            raise FormatError(f"union type is set but {field.name} is missing", where)

    def _scalar(self, table: FlatTable, slot: _Slot, pos: int) -> int | bool:
        kind = slot.kind
        if kind is Kind.BOOL:
            return self.view[pos] != 0
        if kind is Kind.INT32:
            return _I32.unpack_from(self.view, pos)[0]
        if kind is Kind.UINT64:
            return _U64.unpack_from(self.view, pos)[0]
        if kind is Kind.UNION_TYPE:
            code = self.view[pos]
            if code > len(UNIONS[slot.field.ref]):
                raise FormatError(f"unknown {slot.field.ref} union type {code}", table.field_where(slot.field.name))
            return code
        value = _U32.unpack_from(self.view, pos)[0]
        if slot.codes is not None and value not in slot.codes:
            raise FormatError(f"unknown {slot.field.ref} code {value}", table.field_where(slot.field.name))
        return value
