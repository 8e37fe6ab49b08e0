"""What ``ironaccel run`` feeds the program: the program file and its inputs, from the command's ``-i`` values.

PATH is a .tosa file, or a conformance-suite test directory whose desc.json names the program and, when no
``-i`` is given, the input files. The ``-i`` values are all positional (``FILE``, in the program's input
order), all named (``NAME=FILE``), or one ``.npz`` archive holding every input by name; any other mix, a
missing or an extra input is refused with the program's input names. Every file is read bounded
(:mod:`ironaccel.core.files`) and ``.npy`` inputs must be plain numeric arrays
(:mod:`ironaccel.conformance.npy`). A .tosa file given no ``-i`` runs on :func:`random_inputs`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("ironaccel.cli.run")  # the command's logger: its records name the command

MAX_DESCRIPTION_BYTES = 1 << 20  # a conformance test's desc.json: a few hundred bytes in the suite


def read_description(desc_file: Path) -> tuple[str, list[str], list[str]]:
    """(tosa_file, ifm_name, ifm_file) of a test's desc.json, read bounded and checked field by field."""
    from ..core.errors import InvalidArgument
    from ..core.files import read_limited

    try:
        desc = json.loads(read_limited(desc_file, MAX_DESCRIPTION_BYTES, "test description"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"{desc_file}: not JSON: {exc}") from None
    if not isinstance(desc, dict):
        raise InvalidArgument(f"{desc_file}: holds a JSON {type(desc).__name__}, not an object")
    tosa_file = desc.get("tosa_file")
    if not isinstance(tosa_file, str) or not tosa_file:
        raise InvalidArgument(f"{desc_file}: 'tosa_file' must name the program file, got {tosa_file!r}")
    lists = []
    for key in ("ifm_name", "ifm_file"):
        value = desc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidArgument(f"{desc_file}: {key!r} must be a list of strings, got {value!r}")
        lists.append(value)
    if len(lists[0]) != len(lists[1]):
        raise InvalidArgument(f"{desc_file}: {len(lists[0])} ifm_name entries but {len(lists[1])} ifm_file entries")
    return tosa_file, lists[0], lists[1]


def program_and_inputs(program: str, inputs: list[str]) -> tuple[Path, list[str]]:
    """The program file and the -i values; a test directory stands for its program and, without -i, its
    input files (by the block's input names, in order)."""
    path = Path(program)
    if not path.is_dir():
        return path, inputs
    desc_file = path / "desc.json"
    if not desc_file.exists():
        raise ValueError(f"{path} is a directory without desc.json: give a .tosa file or a conformance test")
    tosa_file, ifm_names, ifm_files = read_description(desc_file)
    if inputs:
        return path / tosa_file, inputs
    from ..tosa.codec import read

    tosa = path / tosa_file
    files = dict(zip(ifm_names, ifm_files, strict=True))
    names = read(tosa).main.inputs
    missing = [n for n in names if n not in files]
    if missing:
        raise ValueError(f"{desc_file} names no file for input(s) {', '.join(missing)}")
    return tosa, [str(path / files[n]) for n in names]


def _names(specs: tuple) -> str:
    return ", ".join(repr(s.name) for s in specs) or "none"


def bind_inputs(values: list[str], specs: tuple) -> list[tuple[Any, str, str | None]]:
    """What each of the program's inputs is read from, in input order: (spec, file, archive member or None).

    ``values`` are the ``-i`` arguments: all positional (``FILE``), all named (``NAME=FILE``, NAME one of
    the inputs' names), or one ``.npz`` archive. A value with ``=`` whose prefix names no input is a file
    name when such a file exists, else refused with the known names."""
    from ..core.errors import InvalidArgument

    known = {spec.name: spec for spec in specs}
    archives = [v for v in values if v.lower().endswith(".npz") and v.partition("=")[0] not in known]
    if archives:
        if len(values) != 1:
            raise InvalidArgument(
                f"-i {archives[0]}: an .npz archive feeds every input by name; give it as the only -i "
                f"({len(values)} given)"
            )
        return [(spec, archives[0], spec.name) for spec in specs]
    named: dict[str, str] = {}
    positional: list[str] = []
    for value in values:
        name, eq, file = value.partition("=")
        if eq and name in known:
            if name in named:
                raise InvalidArgument(f"-i {value}: input {name!r} is already given ({named[name]})")
            named[name] = file
        elif eq and not Path(value).exists():
            raise InvalidArgument(f"-i {value}: the program has no input named {name!r}; its inputs: {_names(specs)}")
        else:
            positional.append(value)
    if named and positional:
        raise InvalidArgument(
            f"-i: give every input by name (NAME=FILE) or every one in order, not both "
            f"({', '.join(named)} by name; {', '.join(positional)} in order)"
        )
    if named:
        missing = [spec.name for spec in specs if spec.name not in named]
        if missing:
            raise InvalidArgument(
                f"-i: no file for input(s) {', '.join(map(repr, missing))}; the program's inputs: {_names(specs)}"
            )
        return [(spec, named[spec.name], None) for spec in specs]
    if len(positional) != len(specs):
        wanted = ", ".join(str(s) for s in specs) or "none"
        raise InvalidArgument(f"the program takes {len(specs)} input(s) ({wanted}); {len(positional)} given")
    return [(spec, file, None) for spec, file in zip(specs, positional, strict=True)]


def load_inputs(bound: list[tuple[Any, str, str | None]]) -> list:
    """The arrays ``bind_inputs`` points at, read bounded; an archive's members are checked by name."""
    from ..conformance import npy
    from ..core.errors import InvalidArgument

    if bound and bound[0][2] is not None:
        archive = bound[0][1]
        arrays = npy.load_npz(archive)
        wanted = [spec.name for spec, _, _ in bound]
        missing = [n for n in wanted if n not in arrays]
        extra = [n for n in arrays if n not in wanted]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"holds no array for input(s) {', '.join(map(repr, missing))}")
            if extra:
                parts.append(f"member(s) {', '.join(map(repr, extra))} name no input")
            raise InvalidArgument(
                f"{archive}: {'; '.join(parts)} (the program's inputs: {', '.join(map(repr, wanted))})"
            )
        return [npy.coerce(arrays[spec.name], spec.dtype, f"{archive}[{spec.name}]") for spec, _, _ in bound]
    for spec, file, _ in bound:
        log.debug("input %r (%s) from %s", spec.name, spec, file)
    return [npy.load(Path(file), spec.dtype) for spec, file, _ in bound]


def random_inputs(specs: tuple, seed: int) -> list:
    """Seeded random values for every input: integers over their type's range (int32 / int48 over 16 bits,
    so sums and products stay far from wrapping), booleans, floats standard normal rounded to their type."""
    import numpy as np

    from ..tosa.dtypes import DType

    rng = np.random.default_rng(seed)
    values = []
    for spec in specs:
        if spec.dtype is DType.SHAPE:
            raise ValueError(f"input {spec} is a shape: give it with -i")
        storage = spec.numpy_dtype
        if storage.kind == "b":
            value = rng.integers(0, 2, spec.shape)
        elif storage.kind in "iu":
            bits = min(spec.dtype.bits if isinstance(spec.dtype, DType) else storage.itemsize * 8, 16)
            low = -(1 << (bits - 1)) if storage.kind == "i" else 0
            value = rng.integers(low, low + (1 << bits), spec.shape)
        else:
            value = rng.standard_normal(spec.shape)
        values.append(np.asarray(value).astype(storage))
    return values
