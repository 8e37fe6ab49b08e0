"""Where ``ironaccel run`` writes a program's outputs: ``-o OUT.npy`` (a program of one output), ``-o OUT.npz``
(every output by name) or ``-o DIR/`` (one ``.npy`` per output).

Outputs are written in the forms the TOSA tools use for types numpy lacks (bf16 / fp8 as raw void or
uint8), so any numpy can read them and the reference model's tools can compare them. File and member names
are the outputs' tensor names only where every one is plain and distinct, so a name never reaches outside
the target. A ``-o`` of another form is refused before the program runs.
"""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from pathlib import Path

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}")


def _file_names(specs: tuple) -> list[str]:
    """A file (or archive member) name per output: its tensor name where every name is plain and distinct
    (even ignoring case), else ``output-N`` for all, so names never reach outside the target."""
    names = [spec.name for spec in specs]
    plain = all(_PLAIN_NAME.fullmatch(n) for n in names) and len({n.lower() for n in names}) == len(names)
    return names if plain else [f"output-{i}" for i in range(len(names))]


def output_kind(out: str) -> str:
    """How ``-o out`` is written: "npy", "npz" or "dir"; anything else is refused before the program runs."""
    from ..core.errors import InvalidArgument

    path = Path(out)
    if out.endswith(("/", os.sep)) or path.is_dir():
        return "dir"
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        return suffix[1:]
    raise InvalidArgument(
        f"-o {out}: give OUT.npy (one output), OUT.npz (every output by name) or a directory "
        f"(an existing one, or end the name with /)"
    )


def check_output_count(out: str | None, specs: tuple) -> None:
    from ..core.errors import InvalidArgument

    if out and output_kind(out) == "npy" and len(specs) != 1:
        names = ", ".join(repr(s.name) for s in specs)
        raise InvalidArgument(f"-o {out}: the program has {len(specs)} outputs ({names}); give OUT.npz or a directory")


def save_outputs(outputs: list, specs: tuple, out: str | None) -> list[str]:
    """Write ``outputs`` where ``-o out`` says (:func:`output_kind`); the paths written."""
    from ..conformance import npy

    if not out:
        return []
    kind, path = output_kind(out), Path(out)
    if kind == "npy":
        check_output_count(out, specs)
        npy.save(path, outputs[0], specs[0].dtype)
        return [str(path)]
    files = _file_names(specs)
    if kind == "dir":
        path.mkdir(parents=True, exist_ok=True)
        written = []
        for value, spec, name in zip(outputs, specs, files, strict=True):
            npy.save(path / f"{name}.npy", value, spec.dtype)
            written.append(str(path / f"{name}.npy"))
        return written
    # One member per output, each written by npy.save so bf16 / fp8 keep the suite's raw forms.
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for i, (value, spec, name) in enumerate(zip(outputs, specs, files, strict=True)):
            member = Path(scratch) / f"{i}.npy"
            npy.save(member, value, spec.dtype)
            archive.write(member, f"{name}.npy")
    return [str(path)]
