"""``ironaccel inspect PATH``: what a .tosa file holds — version, regions, blocks, operators and tensors.

Tables by default; ``--json`` prints one machine-readable object instead. A file that cannot be read
(missing, not a regular file, over the codec's size limit, malformed, not TOSA 1.0) is reported on
stderr in one line with exit status 1; the file is read bounded (:func:`ironaccel.core.files.read_limited`).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
from typing import Any

from ..core.errors import IronAccelError
from ..tosa import Block, Program, Tensor, load
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
def _value(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple):
        return [_value(v) for v in value]
    return value


def attributes(op: Any) -> dict[str, Any]:
    """An operator's attribute fields as JSON-ready values (enums by name, bytes as hex)."""
    if op.attribute is None:
        return {}
    return {f.name: _value(getattr(op.attribute, f.name)) for f in dataclasses.fields(op.attribute)}


def _tensor(tensor: Tensor) -> dict[str, Any]:
    return {
        "name": tensor.name,
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype),
        "constant_bytes": None if tensor.data is None else int(tensor.data.nbytes),
        "variable": tensor.variable,
        "variable_name": tensor.variable_name or None,
        "unranked": tensor.unranked,
    }


def _block(block: Block) -> dict[str, Any]:
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
                "attributes": attributes(op),
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
    return {
        "path": str(path),
        "version": {"major": v.major, "minor": v.minor, "patch": v.patch, "draft": v.draft, "text": str(v)},
        "regions": [{"name": r.name, "blocks": [_block(b) for b in r.blocks]} for r in program.regions],
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


def _key_attributes(op: Any) -> str:
    values = attributes(op)
    return " ".join(f"{k}={_short(v)}" for k, v in values.items() if v not in ((), [], "", b"", None))


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
    for region in program.regions:
        for block in region.blocks:
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
                    escape(_key_attributes(op)),
                )
            console.print(ops)
            tensors = Table(title="tensors", title_justify="left")
            for column in ("name", "shape", "dtype", "constant bytes", "flags"):
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
                    escape(", ".join(flags)),
                )
            console.print(tensors)
