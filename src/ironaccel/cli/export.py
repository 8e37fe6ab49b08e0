"""``ironaccel export MODULE:FACTORY -o model.tosa [--int8] [--shape N,C,H,W ...] [--input-name NAME ...]``.

Imports ``MODULE`` (the current directory first on the import path, as ``python -m`` has it), calls
``FACTORY`` with no arguments for a ``torch.nn.Module`` (``torchvision.models:resnet18`` works where
torchvision is installed), and exports it with seeded random inputs of the given shapes through
``ironaccel.torch.export``: the program to ``-o`` and its metadata beside it (``model.json``), where
``Device.compile`` and ``ironaccel run`` find it. ``--int8`` quantizes, calibrated on a few seeded random
batches of those shapes (real data calibrates better: ``ironaccel.torch.export(..., calibration=...)``).
A module that does not lower whole to one TOSA program fails with every operator left outside and the
line of the module that calls it.

``ironaccel export MODEL.onnx -o model.tosa [--shape ... --input-name NAME ...]`` converts an ONNX model
through ``ironaccel.onnx`` instead (its tools in ``.venv-onnx``: ``make onnx-env``); ``--shape`` with
``--input-name`` fixes an input whose dimensions the model leaves symbolic.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from ..core.errors import InvalidArgument

# "package.module:factory" or "package.module:Class.factory"
SPEC = re.compile(r"(?P<module>[A-Za-z_]\w*(\.[A-Za-z_]\w*)*):(?P<attribute>[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)")
CALIBRATION_BATCHES = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "factory",
        metavar="MODULE:FACTORY | MODEL.onnx",
        help="a function or class giving the torch.nn.Module, or an ONNX model's file",
    )
    parser.add_argument("-o", "--output", required=True, metavar="FILE.tosa", help="where the program goes")
    parser.add_argument("--int8", action="store_true", help="quantize to int8 (TOSA-1.0+INT; default: float, +FP)")
    parser.add_argument(
        "--shape",
        action="append",
        metavar="N,C,H,W",
        help="the shape of one float32 input (repeat once per input of forward, in order; for an ONNX model, "
        "of the input named by the --input-name at the same place, where the model leaves it symbolic)",
    )
    parser.add_argument(
        "--input-name",
        action="append",
        metavar="NAME",
        help="the name of one input (repeat once per input; default: forward's parameter names)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights' and inputs' randomness (default 0)")


def run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        if not args.verbose:
            warnings.simplefilter("ignore")
        return _export(args)


def _export(args: argparse.Namespace) -> int:
    from ..torch import export
    from ..torch.errors import require_torch

    if args.factory.endswith(".onnx"):
        return _export_onnx(args)
    if not args.shape:
        raise InvalidArgument("give --shape once per input of forward (e.g. --shape 1,3,224,224)")
    shapes = [_shape(text) for text in args.shape]
    if args.input_name is not None and len(args.input_name) != len(shapes):
        raise InvalidArgument(f"{len(args.input_name)} --input-name for {len(shapes)} --shape: give one per input")
    if args.output.endswith(".json"):
        raise InvalidArgument(f"{args.output}: the program's file must not end in .json (its metadata goes there)")
    torch = require_torch()
    if not args.verbose:
        _quiet_libraries()
    factory = _factory(args.factory)
    torch.manual_seed(args.seed)
    module = _call(factory, args.factory)
    if not isinstance(module, torch.nn.Module):
        raise InvalidArgument(f"{args.factory}() returned a {type(module).__name__}, not a torch.nn.Module")
    inputs = tuple(torch.randn(shape) for shape in shapes)
    calibration = None
    if args.int8:
        calibration = [inputs] + [tuple(torch.randn(s) for s in shapes) for _ in range(CALIBRATION_BATCHES - 1)]
    made = export(
        module,
        inputs,
        "int8" if args.int8 else None,
        names=args.input_name,
        calibration=calibration,
        description=f"{args.factory}() exported from PyTorch ({'TOSA-1.0+INT' if args.int8 else 'TOSA-1.0+FP'})",
    )
    program_path, sidecar = made.save(args.output)
    signature = ", ".join(f"{t['name']}: {t['dtype']}{t['shape']}" for t in made.metadata["inputs"])
    results = ", ".join(f"{t['name']}: {t['dtype']}{t['shape']}" for t in made.metadata["outputs"])
    print(f"{args.factory}: ({signature}) -> ({results}), {made.profile}")
    print(f"wrote {program_path} ({len(made.tosa):,} bytes) and {sidecar}")
    return 0


def _export_onnx(args: argparse.Namespace) -> int:
    from ..onnx import export
    from ..tosa.codec import save

    if args.int8:
        raise InvalidArgument("--int8 applies to PyTorch modules; an ONNX model is converted with its own types")
    shapes = [_shape(text) for text in args.shape or []]
    if len(args.input_name or []) != len(shapes):
        raise InvalidArgument("for an ONNX model, give one --input-name with each --shape (the input it fixes)")
    if args.output.endswith(".json"):
        raise InvalidArgument(f"{args.output}: the program's file must not end in .json (its metadata goes there)")
    program = export(args.factory, shapes=dict(zip(args.input_name or [], shapes, strict=True)))
    main = program.main
    tensors = {t.name: t for t in main.tensors}
    side = {
        role: [{"name": n, "shape": list(tensors[n].shape), "dtype": str(tensors[n].dtype)} for n in names]
        for role, names in (("inputs", main.inputs), ("outputs", main.outputs))
    }
    metadata = {"description": f"{os.path.basename(args.factory)} converted from ONNX by torch-mlir", **side}
    program_path = Path(args.output)
    save(program, program_path)
    sidecar = program_path.with_suffix(".json")
    sidecar.write_text(json.dumps(metadata, indent=1) + "\n")
    signature = ", ".join(f"{t['name']}: {t['dtype']}{t['shape']}" for t in side["inputs"])
    results = ", ".join(f"{t['name']}: {t['dtype']}{t['shape']}" for t in side["outputs"])
    print(f"{args.factory}: ({signature}) -> ({results})")
    print(f"wrote {program_path} ({program_path.stat().st_size:,} bytes) and {sidecar}")
    return 0


def _quiet_libraries() -> None:
    """torch, torchao and ExecuTorch log what concerns their developers (optional kernels not loaded,
    deprecations, casts their passes insert) as warnings; the command's output is the export's (-v keeps
    them). After torch is imported: its logging setup sets the level of its loggers then."""
    for name in ("torch", "torchao", "executorch"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        shape = ()
    if not shape or any(n <= 0 for n in shape):
        raise InvalidArgument(f"--shape {text!r}: give positive integers separated by commas, e.g. 1,3,224,224")
    return shape


def _factory(spec: str) -> Any:
    """The object ``spec`` ("package.module:attribute") names, imported as ``python -m`` would find it."""
    match = SPEC.fullmatch(spec)
    if not match:
        raise InvalidArgument(f"{spec!r} is not MODULE:FACTORY (e.g. mymodels:make_model, torchvision.models:resnet18)")
    name = match["module"]
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise InvalidArgument(f"cannot import {name}: {exc}") from exc
    except Exception as exc:  # the user's module may raise anything as it is imported
        raise InvalidArgument(f"importing {name} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        if added:
            sys.path.remove(os.getcwd())
    for part in match["attribute"].split("."):
        if not hasattr(found, part):
            raise InvalidArgument(f"{name} has no {match['attribute']}")
        found = getattr(found, part)
    if not callable(found):
        raise InvalidArgument(f"{spec} is a {type(found).__name__}, not something to call")
    return found


def _call(factory: Any, spec: str) -> Any:
    try:
        return factory()
    except Exception as exc:  # the user's factory may raise anything
        raise InvalidArgument(f"{spec}() failed: {type(exc).__name__}: {exc}") from exc
