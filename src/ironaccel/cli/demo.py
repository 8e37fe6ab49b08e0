"""``ironaccel demo``: the main job end to end on whatever this host has.

Lists the devices, loads the bundled TOSA program made from a PyTorch model, runs it on the best
device and on the CPU reference, and shows outputs, agreement and timing. The model, its ``.json``
description and its ``.torch.npz`` reference are read bounded (a ``--model`` path is the user's).
Compiling and timing show a spinner on a terminal, plain lines in a log or a pipe.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MODELS = Path(__file__).resolve().parent.parent / "models"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help=f"a .tosa file (default: the bundled model in {MODELS})")
    parser.add_argument("--device", default="auto", help="device for the main run (default: auto)")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per device (default 20)")


DEFAULT_MODEL = "cnn_fp32.tosa"


def _bundled() -> Path | None:
    default = MODELS / DEFAULT_MODEL
    if default.exists():
        return default
    candidates = sorted(MODELS.glob("*.tosa")) if MODELS.is_dir() else []
    return candidates[0] if candidates else None


MAX_DESCRIPTION_BYTES = 1 << 20  # a model's .json description: a few hundred bytes for the bundled ones


def _description(meta_path: Path) -> dict:
    """A model's .json description (a JSON object), read bounded."""
    from ..core.errors import InvalidArgument
    from ..core.files import read_limited

    try:
        meta = json.loads(read_limited(meta_path, MAX_DESCRIPTION_BYTES, "model description"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"{meta_path}: not JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise InvalidArgument(f"{meta_path}: holds a JSON {type(meta).__name__}, not an object")
    return meta


def _time(exe, inputs, repeat: int) -> tuple[list, float]:
    outputs = exe(*inputs)  # warm-up (first call plans buffers)
    samples = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        exe(*inputs)
        samples.append(time.perf_counter() - start)
    return outputs, statistics.median(samples)


@contextlib.contextmanager
def _step(console: Any, text: str) -> Iterator[None]:
    """A long step: a spinner on a terminal; elsewhere (a log, a pipe) ``text`` as a plain line before it
    starts and how long it took after."""
    if console.is_terminal:
        with console.status(text):
            yield
        return
    started = time.perf_counter()
    console.print(f"{text}...", soft_wrap=True, markup=False, highlight=False)
    yield
    console.print(f"  done in {time.perf_counter() - started:.1f} s", soft_wrap=True, highlight=False)


def run(args: argparse.Namespace) -> int:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from .. import open as open_device
    from ..conformance import npy
    from ..core.errors import InvalidArgument
    from ..tosa.codec import load
    from . import devices as devices_cmd
    from .run_compare import compare

    console = Console()
    devices_cmd.run(argparse.Namespace(json=False, family=None, timeout=10.0, driver_messages=False))

    path = Path(args.model) if args.model else _bundled()
    if path is None:
        console.print(f"No bundled model found in {MODELS}.")
        return 1
    program = load(path)
    meta_path = path.with_suffix(".json")
    meta = _description(meta_path) if meta_path.exists() else {}
    rng = np.random.default_rng(0)
    inputs = []
    torch_ref = path.with_name(path.stem + ".torch.npz")
    reference = npy.load_npz(torch_ref) if torch_ref.exists() else None
    float_model = all(t.dtype.numpy.kind == "f" for t in program.main.input_tensors)
    if reference is not None and float_model and not {"input", "output"} <= set(reference):
        raise InvalidArgument(f"{torch_ref}: needs arrays 'input' and 'output', holds {sorted(reference)}")
    if reference is not None and float_model and len(program.main.inputs) == 1:
        inputs = [reference["input"].astype(program.main.input_tensors[0].dtype.numpy)]
    for t in program.main.input_tensors[len(inputs) :]:
        dt = t.dtype.numpy
        if dt.kind == "f":
            inputs.append(rng.standard_normal(t.shape).astype(dt))
        else:
            info = np.iinfo(dt)
            inputs.append(rng.integers(max(info.min, -128), min(info.max, 127) + 1, t.shape).astype(dt))
    console.print(f"\n[bold]Model[/] {path.name}: {meta.get('description', 'TOSA program')}")
    console.print(
        f"  {len(program.main.operators)} operators; inputs "
        + ", ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in program.main.input_tensors)
    )

    results = {}
    with open_device(args.device) as dev:
        with _step(console, f"compiling {path.name} for {dev.info.name}, then {args.repeat} timed runs"):
            exe = dev.compile(path)
            results["best"] = (dev.info.name, dev.why, *_time(exe, inputs, args.repeat))
    with open_device("cpu") as ref:
        with _step(
            console, f"compiling {path.name} for {ref.info.name} (the reference), then {args.repeat} timed runs"
        ):
            exe = ref.compile(path)
            results["cpu"] = (ref.info.name, "reference", *_time(exe, inputs, args.repeat))

    table = Table(title="Runs", title_justify="left")
    for col in ("run", "device", "median time", "first output (first values)"):
        table.add_column(col)
    for key, (name, why, outs, seconds) in results.items():
        first = np.asarray(outs[0]).reshape(-1)[:4]
        table.add_row(key, f"{name}\n[dim]{why}[/]", f"{seconds * 1e3:.3f} ms", np.array2string(first, precision=4))
    console.print(table)
    rows = compare(results["best"][2], results["cpu"][2])
    for i, row in enumerate(rows):
        console.print(
            f"agreement, output {i} {row['dtype']}{row['shape']}: {row['differing']} differing elements, "
            f"max |diff| {row['max_abs_diff']:.3g}"
        )
    if reference is not None and float_model:
        (row,) = compare(results["best"][2][:1], [reference["output"]])
        console.print(
            f"agreement with PyTorch's own output for the same input: max |diff| {row['max_abs_diff']:.3g} "
            f"over {int(np.prod(row['shape']))} values"
        )
    return 0
