#!/usr/bin/env python3
"""The model zoo (``zoo.py``'s models, fp32 and int8) on a GPU machine: IronAccel's ``cuda`` and ``vulkan``
backends against torch eager and ``torch.compile`` on the same card.

    .venv/bin/python benchmarks/models/gpu_zoo.py pack --out .cache/gpu/zoo [--models mobilenet_v2,...]
    PYTHONPATH=src python3 benchmarks/models/gpu_zoo.py run --skeletons .cache/gpu/zoo --devices cuda,vulkan \
        --out DIR [--models ...] [--seconds 3] [--compile-timeout 150] [--no-compile] [--merge]
        [--skip vulkan:bert_base,...] [--allow-software]
    python3 benchmarks/models/gpu_zoo.py plot DIR

The exported programs hold random weights (the zoo draws them from a fixed seed) and weigh up to hundreds of
MB, more than goes to a GPU machine. ``pack`` turns each cached export (``.cache/models/``, the newest of
each model and mode) into a skeleton: the same program with every large weight constant zero-filled,
gzip-compressed (zeros cost nothing), and a manifest that names each such constant with the statistics to
draw similar values. Everything else (small constants, biases, RESCALE parameters, TABLE contents, masks
of a few distinct values) stays byte for byte.

``run`` refills the weights from a seeded generator per tensor, loads the program on each device, keeps the
inputs on the device (``dev.array``) and times ``exe`` calls, each synchronous. The torch peers build the
same architecture with zoo.py's ``build()`` and its own random weights, fp32 with TF32 off (the programs
run fp32 without TF32). Their weights differ from the program's, so each device's outputs are checked
against IronAccel's ``cpu`` backend on the same refilled program and inputs. With no CUDA (a machine
without a GPU), the torch peers run on the CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gzip
import json
import signal
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = REPO / ".cache" / "models"
MODES = ("fp32", "int8")
LARGE = 4096  # elements from which a float (or an int8 program's int8) constant counts as a weight
FEW_VALUES = 16  # a large constant of at most this many distinct values is structure (a mask), kept
FP32_BOUND = 1e-3  # max |device - cpu| over the cpu output's largest |value|
INT8_BOUND = 1  # int8 outputs: at most one quantization step from the cpu backend's
WARMUP = 3  # calls before timing: first-call work (plans, cuBLAS heuristics) stays out of the figures
PROFILED = 5  # calls under torch.profiler for the GPU time of one call


# -- pack ---------------------------------------------------------------------------------------------
def newest_exports(names: list[str]) -> dict[tuple[str, str], Path]:
    """The newest cached program of each model and mode that has its metadata beside it."""
    found: dict[tuple[str, str], Path] = {}
    for name in names:
        for mode in MODES:
            programs = [p for p in CACHE.glob(f"{name}-{mode}-*.tosa") if p.with_suffix(".json").exists()]
            if programs:
                found[(name, mode)] = max(programs, key=lambda p: p.stat().st_mtime)
    return found


def _limits() -> Any:
    from ironaccel.tosa.codec import DEFAULT_LIMITS, HARD_MAX_FILE_BYTES

    return DEFAULT_LIMITS.replace(max_file_bytes=HARD_MAX_FILE_BYTES, max_tensor_bytes=HARD_MAX_FILE_BYTES)


def _is_weight(tensor: Any, quantized: bool) -> bool:
    from ironaccel.tosa.dtypes import DType

    kinds = {DType.FP32, DType.FP16, DType.BF16} | ({DType.INT8} if quantized else set())
    if tensor.data is None or tensor.dtype not in kinds or tensor.data.size < LARGE:
        return False
    sample = tensor.data.reshape(-1)[: 1 << 16]
    return len(np.unique(sample)) > FEW_VALUES or len(np.unique(tensor.data)) > FEW_VALUES


def _statistics(data: np.ndarray) -> dict[str, float]:
    values = data.astype(np.float64)
    return {
        "mean": float(values.mean()),
        "std": float(values.std()),
        "min": float(values.min()),
        "max": float(values.max()),
    }


def _map_constants(program: Any, change: Callable[[Any], Any]) -> Any:
    """``program`` with each tensor replaced by ``change(tensor)`` (the same tensor where it changes none)."""
    regions = []
    for region in program.regions:
        blocks = [dataclasses.replace(b, tensors=tuple(change(t) for t in b.tensors)) for b in region.blocks]
        regions.append(dataclasses.replace(region, blocks=tuple(blocks)))
    return dataclasses.replace(program, regions=tuple(regions))


def skeleton(path: Path) -> tuple[bytes, list[dict[str, Any]]]:
    """The program at ``path`` with its weights zero-filled (written, not yet compressed), and one manifest
    entry per weight: its name, dtype, shape and statistics."""
    from ironaccel.tosa.codec import read, write

    metadata = json.loads(path.with_suffix(".json").read_text())
    program = read(path.read_bytes(), limits=_limits())
    entries: list[dict[str, Any]] = []

    def zeroed(tensor: Any) -> Any:
        if not _is_weight(tensor, bool(metadata.get("quantized"))):
            return tensor
        entries.append(
            {"name": tensor.name, "dtype": tensor.dtype.name, "shape": list(tensor.shape)} | _statistics(tensor.data)
        )
        zeros = np.broadcast_to(np.zeros((), tensor.data.dtype), tensor.data.shape)
        return dataclasses.replace(tensor, data=zeros)

    return write(_map_constants(program, zeroed)), entries


def pack(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    for (name, mode), path in newest_exports(_names(args.models)).items():
        started = time.monotonic()
        print(f"{name}/{mode}: packing {path.name} ...", file=sys.stderr, flush=True)
        data, entries = skeleton(path)
        packed = gzip.compress(data, compresslevel=6, mtime=0)
        (out / f"{name}-{mode}.tosa.gz").write_bytes(packed)
        manifest = {
            "model": name,
            "mode": mode,
            "source": path.name,
            "source_bytes": path.stat().st_size,
            "metadata": json.loads(path.with_suffix(".json").read_text()),
            "rule": f"float constants (and an int8 program's int8 ones) of >= {LARGE} elements and more than "
            f"{FEW_VALUES} distinct values, zero-filled",
            "constants": entries,
        }
        text = json.dumps(manifest, indent=1) + "\n"
        (out / f"{name}-{mode}.json").write_text(text)
        size = len(packed) + len(text)
        total += size
        print(
            f"{name}-{mode}: {len(entries)} constants refilled at run time, skeleton {len(packed) / 1e6:.2f} MB "
            f"+ manifest {len(text) / 1e3:.0f} kB (program {path.stat().st_size / 1e6:.1f} MB; "
            f"{time.monotonic() - started:.1f} s)",
            flush=True,
        )
    print(f"all skeletons: {total / 1e6:.2f} MB in {out}", flush=True)
    return 0


# -- refill -------------------------------------------------------------------------------------------
def refill(skeleton_path: Path, manifest: dict[str, Any]) -> bytes:
    """The skeleton's program with each listed constant drawn anew: floats normal with the recorded mean and
    standard deviation, integers a rounded normal of the same kind clipped to the recorded range; one
    generator per tensor, seeded by its place in the manifest and its name."""
    from ironaccel.tosa.codec import read, write

    program = read(gzip.decompress(skeleton_path.read_bytes()), limits=_limits())
    wanted = {entry["name"]: (index, entry) for index, entry in enumerate(manifest["constants"])}

    def drawn(tensor: Any) -> Any:
        if tensor.data is None or tensor.name not in wanted:
            return tensor
        index, entry = wanted[tensor.name]
        rng = np.random.default_rng([index, zlib.crc32(tensor.name.encode())])
        values = rng.standard_normal(tensor.data.shape, dtype=np.float32)
        values *= np.float32(entry["std"])
        values += np.float32(entry["mean"])
        if np.issubdtype(tensor.data.dtype, np.integer):
            values = np.clip(np.rint(values), entry["min"], entry["max"])
        return dataclasses.replace(tensor, data=values.astype(tensor.data.dtype))

    return write(_map_constants(program, drawn))


# -- run: the pieces ----------------------------------------------------------------------------------
class Skip(Exception):
    """A device or peer that cannot take part, with the reason in words."""


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class CompileTimeout(BaseException):
    """Not an Exception: torch.compile catches those inside and goes on compiling (or falls back to eager)."""


def _bounded(seconds: float, work: Callable[[], Any]) -> Any:
    """``work()``, interrupted by SIGALRM after ``seconds`` (torch.compile's compile runs in this thread)."""

    def expire(*_: Any) -> None:
        raise CompileTimeout(f"over {seconds:.0f} s (--compile-timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return work()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def program_inputs(name: str, metadata: dict[str, Any], tensors: tuple[Any, ...], quantized: list[Any]) -> list:
    """The inputs in the program's layout (an image NHWC where the export chose it), quantized where the
    program takes int8."""
    shapes = [[int(d) for d in t["shape"]] for t in metadata["inputs"]]
    ours = []
    for tensor, shape, q in zip(tensors, shapes, quantized, strict=True):
        x = tensor.detach().cpu().numpy()
        if x.ndim == 4 and list(x.shape) != shape:
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        ours.append(q.quantize(x) if q is not None and x.dtype == np.float32 else x)
    return ours


def check(outputs: list[np.ndarray], reference: list[np.ndarray], quantized: bool) -> dict[str, Any]:
    """The worst output's max |device - cpu|: in integer steps for int8 (the worst by that), else also
    relative to the cpu output's largest |value| (the worst by that)."""
    found = []
    for mine, ref in zip(outputs, reference, strict=True):
        diff = float(np.max(np.abs(mine.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
        peak = float(np.max(np.abs(ref))) if ref.size else 0.0
        found.append({"max_abs_diff": diff, "max_rel_to_peak": diff / peak if peak else diff})
    worst = max(found, key=lambda f: f["max_abs_diff" if quantized else "max_rel_to_peak"])
    worst["ok"] = worst["max_abs_diff"] <= INT8_BOUND if quantized else worst["max_rel_to_peak"] <= FP32_BOUND
    return worst


def gpu_time_ms(call: Callable[[], Any]) -> float | str:
    """The CUDA kernel time of one call: torch.profiler (CUPTI) records every kernel of the process, ours
    included; their durations summed over PROFILED calls, divided by PROFILED."""
    import torch

    if not torch.cuda.is_available():
        return "n/a: no CUDA"
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED):
            call()
        torch.cuda.synchronize()
    total_us = 0.0
    for event in prof.events():
        if "cuda" not in str(getattr(event, "device_type", "")).lower():
            continue
        if event.name.lower().startswith(("memcpy", "memset")):
            continue
        total_us += event.time_range.elapsed_us()
    return total_us / 1e3 / PROFILED if total_us else "n/a: the profiler recorded no kernel"


class Devices:
    """IronAccel's devices, opened once for the whole run; one that does not open is remembered with why."""

    def __init__(self, allow_software: bool) -> None:
        self.opened: dict[str, Any] = {}
        self.failed: dict[str, str] = {}
        self.allow_software = allow_software

    def get(self, spec: str) -> Any:
        if spec in self.failed:
            raise Skip(self.failed[spec])
        if spec not in self.opened:
            import importlib.util

            import ironaccel

            found = importlib.util.find_spec("vulkan") if spec.startswith("vulkan") else None
            if found is not None and found.origin is None:  # benchmarks/vulkan/, no package, stands in for it
                self.failed[spec] = "does not open: the vulkan Python package is not installed"
                raise Skip(self.failed[spec])
            try:
                self.opened[spec] = ironaccel.open(spec)
            except Exception as exc:  # a missing backend or driver: a reason in the rows, not a crash
                self.failed[spec] = f"does not open: {_short(exc)}"
                raise Skip(self.failed[spec]) from exc
            software = self.opened[spec].info.software
            if software and spec != "cpu" and not self.allow_software:
                # A GPU machine without the vendor's Vulkan driver offers lavapipe: minutes per model, no GPU.
                self.opened.pop(spec).close()
                self.failed[spec] = f"only a software device ({software}; --allow-software times it)"
                raise Skip(self.failed[spec])
        return self.opened[spec]

    def describe(self) -> dict[str, str]:
        named = {spec: f"{dev.info.name}" for spec, dev in self.opened.items()}
        return named | self.failed

    def close(self) -> None:
        for dev in self.opened.values():
            dev.close()


def torch_calls(model: Any, tensors: tuple[Any, ...], image: bool, timeout: float | None) -> dict[str, Any]:
    """torch eager and torch.compile (default mode) of ``model``, each a call that ends synchronized; a
    peer that fails is its reason instead."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    fmt = torch.channels_last if image else torch.contiguous_format
    module = model.to(device=device, memory_format=fmt) if image else model.to(device)
    xs = [t.to(device).contiguous(memory_format=fmt) if image else t.to(device) for t in tensors]
    calls: dict[str, Any] = {}

    def eager() -> None:
        with torch.inference_mode():
            module(*xs)
        sync()

    calls["torch"] = eager
    if timeout is None:
        calls["torch.compile"] = "not run (--no-compile)"
        return calls
    try:
        compiled = torch.compile(module)

        def fast() -> None:
            with torch.no_grad():
                compiled(*xs)
            sync()

        started = time.monotonic()
        _bounded(timeout, fast)  # the first call compiles
        calls["compile_seconds"] = round(time.monotonic() - started, 1)
        calls["torch.compile"] = fast
    except (Exception, CompileTimeout) as exc:  # noqa: BLE001 - the row says why, whatever failed
        calls["torch.compile"] = f"n/a: {_short(exc)}"
        torch._dynamo.reset()  # an interrupted compile leaves no half-made state behind for the next model
    return calls


class Loaded:
    """A program loaded on one device, its inputs and outputs held there: ``call()`` runs it synchronously,
    ``read()`` copies the outputs to the host, ``close()`` frees it all."""

    def __init__(self, dev: Any, tosa: bytes, metadata: dict[str, Any], inputs: list[np.ndarray]) -> None:
        self.exe = dev.compile(tosa, metadata=metadata)
        self.held = [dev.array(x) for x in inputs]
        self.outs = [dev.empty(spec.shape, spec.numpy_dtype) for spec in self.exe.outputs]

    def call(self) -> None:
        self.exe(*self.held, out=self.outs)

    def read(self) -> list[np.ndarray]:
        return [o.numpy() for o in self.outs]

    def close(self) -> None:
        for array in (*self.held, *self.outs):
            array.close()
        self.exe.close()


# -- run: one model -----------------------------------------------------------------------------------
def _progress(label: str, what: str) -> None:
    print(f"{label}: {what}", file=sys.stderr, flush=True)


def run_mode(
    name: str, mode: str, prepared_model: dict[str, Any], devices: Devices, args: argparse.Namespace, failed: set
) -> dict[str, Any]:
    """One row: the refilled program on each device, the torch peers for fp32, all timed together."""
    import zoo
    from peers import Prepared

    from ironaccel.runtime.metadata import Quantization

    label = f"{name}/{mode}"
    record: dict[str, Any] = {"model": name, "mode": mode, "what": zoo.MODELS[name]["what"], "devices": {}, "peers": {}}
    manifest = json.loads((Path(args.skeletons) / f"{name}-{mode}.json").read_text())
    metadata = manifest["metadata"]
    quantized = bool(metadata.get("quantized"))
    _progress(label, f"refilling {len(manifest['constants'])} constants...")
    tosa = refill(Path(args.skeletons) / f"{name}-{mode}.tosa.gz", manifest)
    record["tosa_bytes"] = len(tosa)
    entries = metadata.get("quantization", {}).get("inputs") or [None] * len(metadata["inputs"])
    scales = [Quantization.of(e) if e else None for e in entries]
    inputs = program_inputs(name, metadata, prepared_model["inputs"], scales if quantized else [None] * len(scales))
    loaded: dict[str, Loaded] = {}
    timed: dict[str, Prepared] = {}
    try:
        _progress(label, "cpu reference...")
        try:
            reference_run = Loaded(devices.get("cpu"), tosa, metadata, inputs)
            reference_run.call()
            reference = reference_run.read()
            loaded["cpu"] = reference_run
        except Exception as exc:  # noqa: BLE001 - without a reference the rows are timed, unchecked
            reference = None
            record["reference"] = f"n/a: {_short(exc)}"
        for spec in args.devices:
            if f"{spec}:{name}" in args.skip or spec in failed:
                why = "skipped (--skip)" if spec not in failed else "skipped: failed in this model's other row"
                record["devices"][spec] = {"na": why}
                continue
            _progress(f"{label}/{spec}", "loading...")
            try:
                started = time.monotonic()
                run = loaded.get(spec) or Loaded(devices.get(spec), tosa, metadata, inputs)
                loaded[spec] = run
                for _ in range(WARMUP):
                    run.call()
                entry: dict[str, Any] = {"load_seconds": round(time.monotonic() - started, 1)}
                if reference is not None:
                    entry["check"] = check(run.read(), reference, quantized)
                record["devices"][spec] = entry
                timed[spec] = Prepared(run.call, lambda y: y)
            except Skip as exc:
                record["devices"][spec] = {"na": f"n/a: {exc}"}
            except Exception as exc:  # noqa: BLE001 - one device failing must not stop the others
                record["devices"][spec] = {"na": f"n/a: {_short(exc)}"}
                if spec != "cpu":
                    failed.add(spec)
        if quantized:
            record["peers"] = {"torch": {"na": "fp32 row"}, "torch.compile": {"na": "fp32 row"}}
        elif "torch_calls" in prepared_model:
            for peer, call in prepared_model["torch_calls"].items():
                if peer == "compile_seconds":
                    record["compile_seconds"] = call
                elif isinstance(call, str):
                    record["peers"][peer] = {"na": call}
                else:
                    record["peers"][peer] = {}
                    timed[peer] = Prepared(call, lambda y: y)
        if timed:
            _progress(label, f"timing {', '.join(timed)}...")
            for who, stats in zoo._time(timed, args.seconds * len(timed)).items():
                (record["devices"] if who in record["devices"] else record["peers"])[who].update(stats)
        if "cuda" in timed:
            _progress(f"{label}/cuda", "profiling...")
            try:
                record["devices"]["cuda"]["gpu_ms"] = gpu_time_ms(loaded["cuda"].call)
            except Exception as exc:  # noqa: BLE001 - the profiler is a nicety
                record["devices"]["cuda"]["gpu_ms"] = f"n/a: {_short(exc)}"
    finally:
        for run in loaded.values():
            run.close()
    return record


def prepare_model(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """zoo.py's model with torch's random weights, its inputs, and the torch peers' calls (fp32)."""
    import zoo

    _progress(name, "building the torch model...")
    model = zoo.build(name)
    (tensors,) = zoo.model_inputs(name, model, 1, zoo.SEED + 1)
    prepared: dict[str, Any] = {"inputs": tensors}
    if (Path(args.skeletons) / f"{name}-fp32.json").exists():
        _progress(f"{name}/torch", "eager and torch.compile...")
        timeout = None if args.no_compile else args.compile_timeout
        prepared["torch_calls"] = torch_calls(model, tensors, not zoo.is_language(name), timeout)
    return prepared


def _write(out: Path, results: dict[str, Any], kept: list[dict[str, Any]]) -> str:
    """gpu.json and gpu.md as they stand: written after every row, so a run cut short leaves its rows."""
    import gpu_report

    order = list(ALL_MODELS)
    whole = dict(results, models=sorted(results["models"] + kept, key=lambda r: order.index(r["model"])))
    (out / "gpu.json").write_text(json.dumps(whole, indent=1) + "\n")
    table = gpu_report.render(whole)
    (out / "gpu.md").write_text(table)
    return table


def run(args: argparse.Namespace) -> int:
    import gpu_report
    import torch

    sys.path.insert(0, str(HERE))  # zoo.py, language.py
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    args.devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = _names(args.models)
    kept: list[dict[str, Any]] = []
    if args.merge and (out / "gpu.json").exists():  # the other models' rows of an earlier run into DIR
        earlier = json.loads((out / "gpu.json").read_text())
        kept = [r for r in earlier["models"] if r["model"] not in names]
        for record in kept:
            record.setdefault("run", earlier["date"])
    devices = Devices(args.allow_software)
    started = time.monotonic()
    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "environment": gpu_report.environment() | {"devices": args.devices, "ironaccel_devices": {}},
        "bounds": {"fp32": FP32_BOUND, "int8": INT8_BOUND},
        "models": [],
    }
    try:
        for name in names:
            modes = [m for m in MODES if (Path(args.skeletons) / f"{name}-{m}.tosa.gz").exists()]
            if not modes:
                _progress(name, f"no skeleton in {args.skeletons}")
                continue
            failed: set[str] = set()
            try:
                prepared = prepare_model(name, args)
            except Exception as exc:  # noqa: BLE001 - no inputs without the model: its rows say why
                prepared = {"error": f"the torch model: {_short(exc)}"}
            for mode in modes:
                try:
                    if "error" in prepared:
                        raise Skip(prepared["error"])
                    record = run_mode(name, mode, prepared, devices, args, failed)
                except Exception as exc:  # noqa: BLE001 - one model failing must not stop the others
                    record = {"model": name, "mode": mode, "error": str(exc) if isinstance(exc, Skip) else _short(exc)}
                results["models"].append(record)
                results["environment"]["ironaccel_devices"] = devices.describe()
                results["environment"]["wall_seconds"] = round(time.monotonic() - started, 1)
                _write(out, results, kept)
            del prepared
            torch._dynamo.reset()  # the compiled graphs of this model are not needed again
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    finally:
        devices.close()
    results["environment"]["wall_seconds"] = round(time.monotonic() - started, 1)
    print(_write(out, results, kept), flush=True)
    return 0


# -- the command line ---------------------------------------------------------------------------------
ALL_MODELS = ("mobilenet_v2", "resnet50", "vit_b_16", "bert_base", "decoder_prefill", "decoder_step")  # zoo.MODELS


def _names(models: str) -> list[str]:
    names = [n.strip() for n in models.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALL_MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; known: {list(ALL_MODELS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="write the skeletons of the cached exports")
    packing.add_argument("--out", default=str(REPO / ".cache" / "gpu" / "zoo"))
    packing.add_argument("--models", default=",".join(ALL_MODELS))
    running = commands.add_parser("run", help="refill, load and time on the devices; write gpu.md and gpu.json")
    running.add_argument("--skeletons", default=str(REPO / ".cache" / "gpu" / "zoo"))
    running.add_argument("--devices", default="cuda,vulkan", help="IronAccel devices, comma-separated")
    running.add_argument("--out", required=True)
    running.add_argument("--models", default=",".join(ALL_MODELS))
    running.add_argument("--seconds", type=float, default=3.0, help="timing per model per device or peer (3)")
    running.add_argument("--compile-timeout", type=float, default=150.0, help="seconds torch.compile may take")
    running.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    running.add_argument("--skip", default="", help="DEVICE:MODEL pairs to leave out, e.g. vulkan:bert_base")
    running.add_argument("--merge", action="store_true", help="keep the other models' rows of DIR/gpu.json")
    running.add_argument("--allow-software", action="store_true", help="time software devices (lavapipe) too")
    drawing = commands.add_parser("plot", help="draw DIR/gpu.png from DIR/gpu.json")
    drawing.add_argument("dir")
    args = parser.parse_args(argv)
    if args.command == "plot":
        import gpu_report

        return gpu_report.plot(Path(args.dir))
    return pack(args) if args.command == "pack" else run(args)


if __name__ == "__main__":
    raise SystemExit(main())
