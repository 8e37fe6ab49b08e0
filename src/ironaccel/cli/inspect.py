"""``ironaccel inspect PATH``: what a .tosa file holds — version, regions, blocks, operators and tensors.

The header names the program's inputs and outputs (name, dtype, shape) and counts its operators by kind,
most used first. Attributes are shown as values: CLAMP's min_val / max_val, stored as the raw bytes of
the input's type, are decoded by that type (``max_val=6.0``, not ``0000c040``); constants of at most
:data:`SMALL_CONSTANT` elements (PAD's pad_const, shapes, zero points) are shown with their values.

Tables by default; ``--json`` prints one machine-readable object instead. A file that cannot be read
(missing, not a regular file, over the codec's size limit, malformed, not TOSA 1.0) is reported on
stderr in one line with exit status 1; the file is read bounded (:func:`ironaccel.core.files.read_limited`).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import math
import sys
from collections import ChainMap, Counter
from collections.abc import Mapping
from typing import Any

from ..core.errors import IronAccelError
from ..tosa import Block, DType, Op, Program, Tensor, load
from ..tosa.errors import FormatError, NotTosa10Error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="a .tosa flatbuffer")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def run(args: argparse.Namespace) -> int:
    try:
        program = load(args.path)
    except (OSError, IronAccelError) as exc:
        if isinstance(exc, FormatError):
            kind = "not TOSA 1.0:" if isinstance(exc, NotTosa10Error) else "cannot read"
            message = f"{kind} {args.path}: {exc}"
        elif isinstance(exc, IronAccelError):  # refused by the bounded reader, which names the path
            message = f"cannot read {exc}"
        else:
            message = f"cannot read {args.path}: {exc.strerror or exc}"
        print(f"ironaccel inspect: {message}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(describe(program, args.path), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(program, args.path)
    return 0


# -- description ------------------------------------------------------------------------------------------
SMALL_CONSTANT = 16  # constants of at most this many elements are shown with their values


def _json_number(value: Any) -> Any:
    """A Python number JSON can hold: non-finite floats as "nan", "inf", "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def decode_scalar(raw: bytes, dtype: DType) -> int | float | bool | None:
    """The value of one ``dtype`` element stored as ``raw`` little-endian bytes (CLAMP's min_val / max_val
    and the like), or None when ``raw`` is not exactly one element of that type."""
    from ..tosa.codec.constants import DataError, unpack
    from ..tosa.dtypes import storage_bytes

    if not dtype.is_tosa_1_0 or dtype in (DType.SHAPE, DType.INT4) or len(raw) != storage_bytes(dtype, 1):
        return None
    try:
        value = unpack(bytes(raw), dtype, 1)[0]
    except DataError:
        return None
    if dtype is DType.BOOL:
        return bool(value)
    return int(value) if dtype.is_integer else float(value)


def _value(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple):
        return [_value(v) for v in value]
    return value


def attributes(op: Any, dtype: DType | None = None) -> dict[str, Any]:
    """An operator's attribute fields as JSON-ready values: enums by name; byte strings (CLAMP's bounds)
    decoded as one value of ``dtype``, the type of the operator's first input, where they are exactly
    one; other bytes (CUSTOM's implementation_attrs) as hex."""
    if op.attribute is None:
        return {}
    fields = {}
    for f in dataclasses.fields(op.attribute):
        raw = getattr(op.attribute, f.name)
        decoded = None
        if isinstance(raw, bytes) and raw and dtype is not None and op.op is not Op.CUSTOM:
            decoded = decode_scalar(raw, dtype)
        fields[f.name] = _value(raw) if decoded is None else _json_number(decoded)
    return fields


def _first_input_dtype(op: Any, lookup: Mapping[str, Tensor]) -> DType | None:
    tensor = lookup.get(op.inputs[0]) if op.inputs else None
    return tensor.dtype if tensor is not None else None


def _everywhere(program: Program) -> dict[str, Tensor]:
    return {t.name: t for b in reversed(list(program.blocks())) for t in reversed(b.tensors)}  # first one wins


def _lookup(everywhere: dict[str, Tensor], block: Block) -> Mapping[str, Tensor]:
    """Tensors a block's operators may name: its own, then any block's (nested blocks see outer ones)."""
    return ChainMap(block.tensor_map, everywhere)


def _io(tensor: Tensor | None, name: str) -> dict[str, Any]:
    if tensor is None:
        return {"name": name, "dtype": None, "shape": None}
    return {"name": name, "dtype": str(tensor.dtype), "shape": list(tensor.shape)}


def operator_counts(program: Program) -> dict[str, int]:
    """Operator name -> how many times the program uses it (every block), most used first, then by name."""
    counts = Counter(op.op.name for b in program.blocks() for op in b.operators)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _constant_values(tensor: Tensor) -> list[Any] | None:
    if tensor.data is None or tensor.data.size > SMALL_CONSTANT:
        return None
    values = tensor.data.reshape(-1)
    if values.dtype.kind == "f" or tensor.dtype.is_float:
        return [_json_number(float(v)) for v in values]
    if values.dtype.kind == "b":
        return [bool(v) for v in values]
    return [int(v) for v in values]


def _tensor(tensor: Tensor) -> dict[str, Any]:
    return {
        "name": tensor.name,
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype),
        "constant_bytes": None if tensor.data is None else int(tensor.data.nbytes),
        "values": _constant_values(tensor),
        "variable": tensor.variable,
        "variable_name": tensor.variable_name or None,
        "unranked": tensor.unranked,
    }


def _block(everywhere: dict[str, Tensor], block: Block) -> dict[str, Any]:
    lookup = _lookup(everywhere, block)
    return {
        "name": block.name,
        "inputs": list(block.inputs),
        "outputs": list(block.outputs),
        "operators": [
            {
                "index": index,
                "op": op.op.name,
                "inputs": list(op.inputs),
                "outputs": list(op.outputs),
                "attribute_table": type(op.attribute).__name__ if op.attribute is not None else None,
                "attributes": attributes(op, _first_input_dtype(op, lookup)),
                "location": op.location,
            }
            for index, op in enumerate(block.operators)
        ],
        "tensors": [_tensor(t) for t in block.tensors],
    }


def describe(program: Program, path: str = "") -> dict[str, Any]:
    """The whole program as plain data: what ``--json`` prints."""
    v = program.version
    blocks = list(program.blocks())
    main = program.main
    everywhere = _everywhere(program)
    return {
        "path": str(path),
        "version": {"major": v.major, "minor": v.minor, "patch": v.patch, "draft": v.draft, "text": str(v)},
        "inputs": [_io(main.tensor_map.get(n), n) for n in main.inputs],
        "outputs": [_io(main.tensor_map.get(n), n) for n in main.outputs],
        "operator_counts": operator_counts(program),
        "regions": [{"name": r.name, "blocks": [_block(everywhere, b) for b in r.blocks]} for r in program.regions],
        "totals": {
            "regions": len(program.regions),
            "blocks": len(blocks),
            "operators": sum(len(b.operators) for b in blocks),
            "tensors": sum(len(b.tensors) for b in blocks),
            "constant_bytes": sum(t.data.nbytes for b in blocks for t in b.tensors if t.data is not None),
        },
    }


# -- tables ----------------------------------------------------------------------------------------------
def _typed(block: Block, name: str) -> str:
    tensor = block.tensor_map.get(name)
    if tensor is None:
        return f"{name} (?)"
    dims = "x".join(map(str, tensor.shape)) if tensor.shape else "scalar"
    return f"{name} {dims} {tensor.dtype}"


def _short(value: Any, limit: int = 48) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _key_attributes(op: Any, dtype: DType | None) -> str:
    values = attributes(op, dtype)
    return " ".join(f"{k}={_short(v)}" for k, v in values.items() if v not in ((), [], "", b"", None))


def _signature(entry: dict[str, Any]) -> str:
    if entry["dtype"] is None:
        return f"{entry['name']} (undeclared)"
    return f"{entry['name']} {entry['dtype']}{entry['shape']}"


def render(program: Program, path: str = "") -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    info = describe(program, path)
    totals = info["totals"]
    console.print(
        f"[bold]{escape(str(path))}[/]: TOSA {program.version}, {totals['regions']} region(s), "
        f"{totals['blocks']} block(s), {totals['operators']} operator(s), {totals['tensors']} tensor(s), "
        f"{totals['constant_bytes']:,} constant bytes"
    )
    console.print(f"inputs: {escape(', '.join(map(_signature, info['inputs'])) or '—')}")
    console.print(f"outputs: {escape(', '.join(map(_signature, info['outputs'])) or '—')}")
    counts = ", ".join(f"{name} {n}" for name, n in info["operator_counts"].items())
    console.print(f"operator counts: {counts or '—'}")
    everywhere = _everywhere(program)
    for region in program.regions:
        for block in region.blocks:
            lookup = _lookup(everywhere, block)
            title = f"region {region.name!r} · block {block.name!r}"
            console.print(
                f"\n[bold]{escape(title)}[/]  inputs: {escape(', '.join(block.inputs) or '—')}"
                f"  outputs: {escape(', '.join(block.outputs) or '—')}"
            )
            ops = Table(title="operators", title_justify="left")
            for column in ("#", "op", "inputs", "outputs", "attributes"):
                ops.add_column(column, overflow="fold", justify="right" if column == "#" else "left")
            for index, op in enumerate(block.operators):
                ops.add_row(
                    str(index),
                    op.op.name,
                    escape("\n".join(_typed(block, n) for n in op.inputs)),
                    escape("\n".join(_typed(block, n) for n in op.outputs)),
                    escape(_key_attributes(op, _first_input_dtype(op, lookup))),
                )
            console.print(ops)
            tensors = Table(title="tensors", title_justify="left")
            for column in ("name", "shape", "dtype", "constant bytes", "values", "flags"):
                tensors.add_column(column, overflow="fold", justify="right" if column == "constant bytes" else "left")
            for t in block.tensors:
                flags = []
                if t.variable:
                    flags.append(f"variable {t.variable_name}".strip())
                if t.unranked:
                    flags.append("unranked")
                tensors.add_row(
                    escape(t.name),
                    "[" + ", ".join(map(str, t.shape)) + "]",
                    str(t.dtype),
                    "—" if t.data is None else f"{t.data.nbytes:,}",
                    escape(_short(_constant_values(t)) if _constant_values(t) is not None else ""),
                    escape(", ".join(flags)),
                )
            console.print(tensors)
