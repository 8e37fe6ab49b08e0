"""Where the conversion's tools live: a virtual environment of their own (``.venv-onnx``, ADR 0046), run as
subprocesses so that none of their packages is imported into the caller's process."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from .errors import SETUP, OnnxEnvironmentMissing

ENV_VARIABLE = "IRONACCEL_ONNX_ENV"
DEFAULT_NAME = ".venv-onnx"


@dataclasses.dataclass(frozen=True)
class Tools:
    """The executables of one environment."""

    root: Path
    python: Path  # runs torch-mlir's importer and the preparation step (onnx, onnxruntime)
    torch_mlir_opt: Path
    tosa_opt: Path


def _candidates() -> list[Path]:
    named = os.environ.get(ENV_VARIABLE)
    if named:
        return [Path(named)]
    # A checkout's environment (src/ironaccel/onnx -> the repository), then one in the working directory.
    return [Path(__file__).resolve().parents[3] / DEFAULT_NAME, Path.cwd() / DEFAULT_NAME]


def find_tools(root: str | os.PathLike[str] | None = None) -> Tools:
    """The tools of ``root``, else of ``$IRONACCEL_ONNX_ENV``, else of a ``.venv-onnx`` in the checkout or the
    working directory. Raises :class:`OnnxEnvironmentMissing` naming what is missing and how to build it."""
    roots = [Path(root)] if root is not None else _candidates()
    missing: list[str] = []
    for base in roots:
        tools = Tools(base, base / "bin" / "python", base / "bin" / "torch-mlir-opt", base / "bin" / "tosa-opt")
        absent = [p for p in (tools.python, tools.torch_mlir_opt, tools.tosa_opt) if not p.exists()]
        if not absent:
            return tools
        missing += [str(p) for p in absent] if base.exists() else [f"{base} (no such directory)"]
    raise OnnxEnvironmentMissing(f"the ONNX conversion's tools are missing: {', '.join(missing)}; {SETUP}")


def available(root: str | os.PathLike[str] | None = None) -> bool:
    """Whether :func:`find_tools` finds an environment."""
    try:
        find_tools(root)
    except OnnxEnvironmentMissing:
        return False
    return True


__all__ = ["DEFAULT_NAME", "ENV_VARIABLE", "Tools", "available", "find_tools"]
