#!/usr/bin/env python3
"""Whole models on IronAccel's CPU backend against onnxruntime, IREE (llvm-cpu) and torch eager.

    make models-zoo                          # installs what it needs, then runs this script
    .venv-export/bin/python benchmarks/models/zoo.py [--models mobilenet_v2,resnet50] [--seconds 20]
        [--no-int8] [--iree-timeout 240] [--refresh] [--no-write] [--no-merge]

The models: torchvision's MobileNetV2, ResNet-50 and ViT-B/16 (batch 1, 224x224), and, from ``language.py``,
BERT-base (transformers' BertModel, 128 tokens) and one layer of ``examples/decode.py``'s Llama-style decoder
(hidden 2048), a prefill of 512 tokens and one decode step after a 512-token cache. A run of some models
(``--models``) keeps the other models' rows from the last results.json, each labelled with its run.

Each model is built with random weights from a fixed seed (no download), exported once to TOSA through
``ironaccel.torch.export`` (fp32, and int8 where ExecuTorch's PT2E quantizer takes it) and once to ONNX
(``torch.onnx.export``); both are kept under ``.cache/models/``, keyed by the model and the versions that
decide the bytes. A failed export is kept too, with its message, and the table shows it (``--refresh``
exports again).

The script runs in ``.venv-export`` (ironaccel, torch, ExecuTorch and tosa-tools' pins), where onnxruntime,
IREE and matplotlib install without moving those pins. The ``onnx`` package does not: it needs a newer
ml_dtypes than tosa-tools allows, so the ONNX export alone runs in ``.venv-bench`` (``make bench``), in a
subprocess of this script that loads the same weights. IREE compiles the same .tosa as IronAccel (tosa-opt
from ``.venv-tosa``). The timing reuses ``benchmarks/peers.py``: each peer in its fast form, inputs in
its own layout prepared outside the timed calls, interleaved rounds in a rotating order.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # peers.py and workloads.py

import peers as peer_mod  # noqa: E402
from compat import import_torchvision  # noqa: E402
from workloads import Workload  # noqa: E402

from ironaccel.conformance import cts  # noqa: E402

REPO = HERE.parents[1]
CACHE = REPO / ".cache" / "models"
BENCH_PYTHON = REPO / ".venv-bench" / "bin" / "python"
PEERS = ("ironaccel", "ort", "iree", "torch")
ROUNDS = 5
SETTLE_S = 0.1  # the pause before each peer's calls in a round (see _time)
SEED = 0
RECIPE = 2  # how the random weights are made (build): part of the cache key
FP32_BOUND = 1e-3  # largest |ours - torch| over torch's largest |output value| (a logit for the classifiers)
INT8_INPUTS = 8  # inputs on which int8's top-1 is compared with fp32 torch's (and calibration inputs)


# -- the models ---------------------------------------------------------------------------------------
MODELS: dict[str, dict[str, Any]] = {
    "mobilenet_v2": {"what": "MobileNetV2 (torchvision), 1x3x224x224", "build": "mobilenet_v2"},
    "resnet50": {"what": "ResNet-50 (torchvision), 1x3x224x224", "build": "resnet50"},
    "vit_b_16": {"what": "ViT-B/16 (torchvision), 1x3x224x224", "build": "vit_b_16"},
    # language.py's modules: no classes to compare, so int8 is checked by its relative error.
    "bert_base": {"what": "BERT-base (transformers BertModel, no pooler), 128 int32 token ids", "language": True},
    "decoder_prefill": {
        "what": "Llama-style decoder layer (examples/decode.py), hidden 2048, 16 heads: prefill of 512 tokens",
        "language": True,
    },
    "decoder_step": {
        "what": "the same layer: one decode step after a 512-token KV cache",
        "language": True,
    },
}
TOKENS = 512  # the decoder's prefill length and its cache's rows at the decode step


def is_language(name: str) -> bool:
    return bool(MODELS[name].get("language"))


def build(name: str) -> Any:
    """The model in eval mode with its seeded random weights."""
    import torch

    if is_language(name):
        import language

        if name == "bert_base":
            return language.bert(SEED)
        cfg = language.decoder_config()
        return language.Prefill(cfg, SEED, TOKENS) if name == "decoder_prefill" else language.DecodeStep(cfg, SEED)
    torchvision = import_torchvision()
    torch.manual_seed(SEED)
    model = getattr(torchvision.models, MODELS[name]["build"])(weights=None)
    # Fresh batch norms (mean 0, variance 1) let the activations shrink layer after layer: a random
    # MobileNetV2's logits come out near 1e-9, where int8 rounds everything to zero and top-1 means
    # nothing. Statistics gathered on random images keep every layer's activations near unit scale.
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a plain average over the batches
    model.train()
    with torch.no_grad():
        for batch in make_inputs(4, SEED + 4, batch=8):
            model(batch)
        # ViT's head starts at zero: every logit would be 0 and the checks would compare nothing.
        for layer in model.modules():
            if isinstance(layer, torch.nn.Linear) and not layer.weight.any():
                torch.nn.init.normal_(layer.weight, std=0.02)
    return model.eval()


def make_inputs(count: int, seed: int, batch: int = 1) -> list[Any]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, 3, 224, 224, generator=generator) for _ in range(count)]


def model_inputs(name: str, model: Any, count: int, seed: int) -> list[tuple[Any, ...]]:
    """``count`` input tuples for the model, one tensor per ``forward`` parameter."""
    if not is_language(name):
        return [(x,) for x in make_inputs(count, seed)]
    import language

    if name == "bert_base":
        return [language.bert_inputs(model, seed + i) for i in range(count)]
    if name == "decoder_prefill":
        return [language.prefill_inputs(model, seed + i) for i in range(count)]
    return [language.step_inputs(model, seed + i, TOKENS) for i in range(count)]


# -- the cache ----------------------------------------------------------------------------------------
def versions() -> dict[str, str]:
    from importlib.metadata import version

    import torch

    import ironaccel

    found = {
        "torch": torch.__version__,
        "torchvision": version("torchvision"),
        "executorch": version("executorch"),
        "ironaccel": ironaccel.__version__,
    }
    try:
        found["transformers"] = version("transformers")
    except ImportError:
        pass  # BERT's row says so
    return found


def cache_key(name: str, mode: str, found: dict[str, str]) -> str:
    exporter = f"executorch{found['executorch']}-ironaccel{found['ironaccel']}" if mode != "onnx" else "onnx"
    if name == "bert_base":
        library = f"transformers{found.get('transformers', 'none')}"
    else:  # the decoder's definition is examples/decode.py, of this tree: IronAccel's version stands for it
        library = f"torchvision{found['torchvision']}" if not is_language(name) else f"ironaccel{found['ironaccel']}"
    return f"{name}-{mode}-seed{SEED}r{RECIPE}-torch{found['torch']}-{library}-{exporter}"


def tosa_export(name: str, mode: str, model: Any, found: dict[str, str], refresh: bool) -> tuple[bytes, dict] | str:
    """(the program's bytes, its metadata), or the reason the export failed, from the cache when there."""
    stem = str(CACHE / cache_key(name, mode, found))  # the versions' dots are no suffix
    program, sidecar, failure = Path(stem + ".tosa"), Path(stem + ".json"), Path(stem + ".error")
    if not refresh:
        if program.exists() and sidecar.exists():
            return program.read_bytes(), json.loads(sidecar.read_text())
        if failure.exists():
            return failure.read_text()
    from ironaccel.torch import export

    CACHE.mkdir(parents=True, exist_ok=True)
    failure.unlink(missing_ok=True)
    (inputs,) = model_inputs(name, model, 1, SEED + 1)
    calibration = model_inputs(name, model, INT8_INPUTS, SEED + 2) if mode == "int8" else None
    started = time.monotonic()
    try:
        made = export(model, inputs, "int8" if mode == "int8" else None, calibration=calibration)
    except Exception as exc:  # noqa: BLE001 - the table says why, whatever failed
        failure.write_text(f"{type(exc).__name__}: {exc}")
        return failure.read_text()
    made.metadata["export_seconds"] = round(time.monotonic() - started, 1)
    made.save(program)
    return made.tosa, made.metadata


def onnx_export(name: str, model: Any, found: dict[str, str], refresh: bool) -> Path | str:
    """The ONNX file, exported in .venv-bench (it has the onnx package) from this model's weights."""
    stem = str(CACHE / cache_key(name, "onnx", found))
    onnx, failure = Path(stem + ".onnx"), Path(stem + ".onnx.error")
    if not refresh:
        if onnx.exists():
            return onnx
        if failure.exists():
            return failure.read_text()
    if not BENCH_PYTHON.exists():
        return f"no ONNX export: {BENCH_PYTHON.parent.parent.name} (with onnx) is missing; `make bench` makes it"
    import torch

    CACHE.mkdir(parents=True, exist_ok=True)
    weights = Path(stem + ".pt")
    torch.save(model.state_dict(), weights)
    done = subprocess.run(
        [str(BENCH_PYTHON), __file__, "--onnx-export", name, str(weights), str(onnx)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    weights.unlink(missing_ok=True)
    if done.returncode != 0 or not onnx.exists():
        failure.write_text("ONNX export failed: " + peer_mod._last_line(done.stderr or done.stdout))
        return failure.read_text()
    return onnx


def _onnx_export_main(name: str, weights: str, out: str) -> int:
    """Runs in .venv-bench: the model's architecture, the given weights, torch.onnx.export to ``out``."""
    import inspect

    import torch

    model = build(name)
    model.load_state_dict(torch.load(weights, weights_only=True))
    (example,) = model_inputs(name, model, 1, SEED + 1)
    with torch.no_grad():
        produced = model(*example)
    count = len(produced) if isinstance(produced, tuple) else 1
    inputs = list(inspect.signature(model.forward).parameters)
    outputs = [f"output_{j}" for j in range(count)] if count > 1 else ["output"]
    # The TorchScript exporter needs no onnxscript; opset 17 is one every onnxruntime of the pins reads.
    torch.onnx.export(model, example, out, dynamo=False, opset_version=17, input_names=inputs, output_names=outputs)
    return 0


# -- the peers on one model ---------------------------------------------------------------------------
def torch_order(metadata: dict) -> list[int]:
    """Where each of ``forward``'s outputs is among the program's: the export names them ``output_J`` after
    their place J in what ``forward`` returns, and the program may list them in another order."""
    names = [t["name"] for t in metadata["outputs"]]
    places = [int(n.rsplit("_", 1)[1]) if n.startswith("output_") else 0 for n in names]
    return sorted(range(len(names)), key=places.__getitem__)


class ZooIronAccel(peer_mod.IronAccel):
    """peers.IronAccel with the outputs in ``forward``'s order (the program's may differ), and for an int8
    program the model as a user feeds it floats: each float input quantized, ``exe(...)``, each output
    dequantized (all inside the timed call), with the scales the export recorded."""

    def __init__(self, device: Any = None) -> None:
        if device is None:
            super().__init__()
        else:
            self.device = device

    def prepare(self, workload: Workload) -> peer_mod.Prepared | str:
        exe = self.device.compile(workload.tosa, metadata=workload.metadata)  # type: ignore[attr-defined]
        order = torch_order(workload.metadata)  # type: ignore[attr-defined]
        inputs = workload.inputs  # read at each call: the int8 check swaps the inputs in place
        if not workload.metadata.get("quantized"):  # type: ignore[attr-defined]

            def plain() -> list[np.ndarray]:
                outs = exe(*inputs)  # one run, its outputs put in forward's order
                return [outs[j] for j in order]

            return peer_mod.Prepared(plain, lambda y: y)
        q_in = [spec.quantization for spec in exe.metadata.inputs]
        q_out = [spec.quantization for spec in exe.metadata.outputs]

        def call() -> list[np.ndarray]:
            pairs = zip(q_in, inputs, strict=True)
            fed = [x if q is None or x.dtype != np.float32 else q.quantize(x) for q, x in pairs]
            outs = exe(*fed)
            return [q_out[j].dequantize(outs[j]) for j in order]

        return peer_mod.Prepared(call, lambda y: y)


class ZooTorch(peer_mod.TorchEager):
    """peers.TorchEager, also for a module that returns several tensors."""

    def prepare(self, workload: Workload) -> peer_mod.Prepared | str:
        torch = self.torch
        module = workload.torch_module()  # type: ignore[misc]
        tensors = workload.torch_inputs(workload.inputs)  # type: ignore[misc]

        def call() -> list[np.ndarray]:
            with torch.inference_mode():
                result = module(*tensors)
            return [t.numpy() for t in (result if isinstance(result, tuple) else (result,))]

        return peer_mod.Prepared(call, lambda y: y)


class ZooIree(peer_mod.Iree):
    """peers.Iree with a bound on iree-compile's time (a whole model may take long on a small machine), and
    the outputs in ``forward``'s order."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self.timeout = timeout

    def prepare(self, workload: Workload) -> peer_mod.Prepared | str:
        real = subprocess.run

        def bounded(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
            if args and args[0] and str(args[0][0]) == self.compiler:
                kwargs["timeout"] = self.timeout
            return real(*args, **kwargs)

        subprocess.run = bounded  # type: ignore[assignment]
        try:
            ready = super().prepare(workload)
        except subprocess.TimeoutExpired:
            return f"n/a: iree-compile took over {self.timeout:.0f} s"
        finally:
            subprocess.run = real  # type: ignore[assignment]
        if isinstance(ready, str):
            return ready
        order, call = torch_order(workload.metadata), ready._call  # type: ignore[attr-defined]

        def reordered() -> list[np.ndarray]:
            outs = call()
            return [outs[j] for j in order]

        return peer_mod.Prepared(reordered, lambda y: y)


def _workload(name: str, tosa: bytes, metadata: dict, onnx: Path | str, model: Any, xs: list[np.ndarray]) -> Workload:
    """Our inputs in the program's layout (an image NHWC where the export chose it); the framework peers'
    as torch makes them (the CNNs' images channels_last for torch eager)."""
    image = not is_language(name.split(" ")[0])
    shapes = [[int(d) for d in t["shape"]] for t in metadata["inputs"]]
    ours = [
        np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 and list(x.shape) != shape else x
        for x, shape in zip(xs, shapes, strict=True)
    ]

    def torch_module() -> Any:
        import torch

        return model.to(memory_format=torch.channels_last) if image else model

    def torch_inputs(_: list[np.ndarray]) -> list[Any]:
        import torch

        if image:
            return [torch.from_numpy(x).contiguous(memory_format=torch.channels_last) for x in xs]
        return [torch.from_numpy(x) for x in xs]

    workload = Workload(
        name=name,
        description=MODELS[name.split(" ")[0]]["what"],
        tosa=tosa,
        inputs=ours,
        onnx_model=(lambda: str(onnx)) if isinstance(onnx, Path) else None,
        torch_module=torch_module,
        to_framework=lambda _: xs,
        torch_inputs=torch_inputs,
    )
    workload.metadata = metadata  # type: ignore[attr-defined]
    return workload


def _time(prepared: dict[str, peer_mod.Prepared], seconds: float) -> dict[str, dict[str, float]]:
    """Medians over interleaved rounds: each round calls every peer in turn, the order rotating, after a
    pause in which the last peer's worker threads go idle (onnxruntime's spin after a run, and would take
    the cores of whichever peer came next)."""
    order = list(prepared)
    per_call = {}
    for name in order:
        per_call[name] = max(min(prepared[name].measure(2)), 1e-6)  # the second call: warm caches
    budget = seconds / (ROUNDS * max(1, len(order)))
    calls = {name: max(1, int(budget / per_call[name])) for name in order}
    times: dict[str, list[float]] = {name: [] for name in order}
    for index in range(ROUNDS):
        shift = index % len(order)
        for name in order[shift:] + order[:shift]:
            time.sleep(SETTLE_S)
            times[name] += prepared[name].measure(calls[name])
    stats = {}
    for name, seconds_list in times.items():
        ms = np.asarray(seconds_list) * 1e3
        p10, p50, p90 = np.percentile(ms, [10, 50, 90])
        stats[name] = {"median_ms": float(p50), "p10_ms": float(p10), "p90_ms": float(p90), "calls": len(ms)}
    return stats


def _agreement(ours: list[np.ndarray], theirs: list[np.ndarray]) -> dict[str, float]:
    """The largest |ours - torch| of each output, relative to torch's largest |value| there: the worst output's."""
    worst = {"max_abs_diff": 0.0, "max_rel_to_peak": -1.0}
    for mine, reference in zip(ours, theirs, strict=True):
        diff = float(np.max(np.abs(mine.reshape(reference.shape).astype(np.float64) - reference.astype(np.float64))))
        peak = float(np.max(np.abs(reference)))
        rel = diff / peak if peak else diff
        if rel > worst["max_rel_to_peak"]:
            worst = {"max_abs_diff": diff, "max_rel_to_peak": rel}
    return worst


def _torch_outputs(model: Any, inputs: tuple[Any, ...]) -> list[np.ndarray]:
    import torch

    with torch.inference_mode():
        result = model(*inputs)
    return [t.numpy() for t in (result if isinstance(result, tuple) else (result,))]


def run_model(
    name: str, mode: str, peers: dict[str, peer_mod.Peer], args: argparse.Namespace, found: dict[str, str]
) -> dict[str, Any]:
    label = f"{name} {mode}"
    record: dict[str, Any] = {"model": name, "mode": mode, "what": MODELS[name]["what"], "peers": {}}
    model = build(name)
    exported = tosa_export(name, mode, model, found, args.refresh)
    if isinstance(exported, str):
        record["export_failed"] = exported
        return record
    tosa, metadata = exported
    record["export_seconds"] = metadata.get("export_seconds")
    record["tosa_bytes"] = len(tosa)
    onnx: Path | str = "fp32 row"
    if mode == "fp32":
        onnx = onnx_export(name, model, found, args.refresh)
        if isinstance(onnx, str):
            record["peers"]["ort"] = {"na": onnx}
    (inputs,) = model_inputs(name, model, 1, SEED + 1)
    reference = _torch_outputs(model, inputs)
    workload = _workload(label, tosa, metadata, onnx, model, [t.numpy() for t in inputs])
    prepared: dict[str, peer_mod.Prepared] = {}
    for peer_name in PEERS:
        if peer_name not in peers or peer_name in record["peers"]:
            continue
        if mode == "int8" and peer_name != "ironaccel":
            record["peers"][peer_name] = {"na": "fp32 row"}  # the peers run the float model only
            continue
        peer = peers[peer_name]
        started = time.monotonic()
        try:
            ready = peer.prepare(workload)
        except Exception as exc:  # noqa: BLE001 - one peer failing must not stop the comparison
            ready = f"n/a: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        if isinstance(ready, str):
            record["peers"][peer_name] = {"na": ready}
            continue
        prepared[peer_name] = ready
        record["peers"][peer_name] = {
            "prepare_seconds": round(time.monotonic() - started, 1),
            "agreement": _agreement(ready.outputs(), reference),
        }
        if mode == "int8" and is_language(name):
            record["peers"][peer_name]["rel_l2"] = _int8_error(ready, workload, name, model)
        elif mode == "int8":
            record["peers"][peer_name]["top1"] = _top1_agreement(ready, workload, model)
        print(f"  {label}: {peer_name} ready", file=sys.stderr, flush=True)
    if "ironaccel" in prepared:
        for peer_name, stats in _time(prepared, args.seconds).items():
            record["peers"][peer_name].update(stats)
    return record


def _top1_agreement(ready: Any, workload: Workload, model: Any) -> dict[str, int]:
    """On INT8_INPUTS fresh inputs: how often int8's top-1 class is fp32 torch's."""
    same = 0
    inputs = make_inputs(INT8_INPUTS, SEED + 3)
    (template,) = workload.inputs
    for tensor in inputs:
        x = tensor.numpy()
        workload.inputs[0] = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if template.shape != x.shape else x
        (ours,) = ready.outputs()
        (theirs,) = _torch_outputs(model, (tensor,))
        same += int(np.argmax(ours) == np.argmax(theirs))
    workload.inputs[0] = template
    return {"same": same, "of": len(inputs)}


def _int8_error(ready: Any, workload: Workload, name: str, model: Any) -> dict[str, float]:
    """On INT8_INPUTS fresh inputs: ||int8 - fp32 torch|| / ||fp32 torch|| of each output (L2 over the
    whole tensor), the mean over the inputs of the worst output's, and the worst."""
    errors = []
    templates = list(workload.inputs)
    for tensors in model_inputs(name, model, INT8_INPUTS, SEED + 3):
        workload.inputs[:] = [t.numpy() for t in tensors]
        ours = ready.outputs()
        theirs = _torch_outputs(model, tensors)
        pairs = zip(ours, theirs, strict=True)
        errors.append(max(float(np.linalg.norm(a.reshape(b.shape) - b) / np.linalg.norm(b)) for a, b in pairs))
    workload.inputs[:] = templates
    return {"mean": float(np.mean(errors)), "worst": float(np.max(errors)), "of": len(errors)}


def _left_out(name: str, mode: str, why: str) -> dict[str, Any]:
    return {"model": name, "mode": mode, "what": MODELS[name]["what"], "left_out": why, "peers": {}}


# -- the report ---------------------------------------------------------------------------------------
def _fmt(entry: dict[str, Any]) -> str:
    if "na" in entry:
        return entry["na"].removeprefix("n/a: ")
    if "median_ms" not in entry:
        return "-"
    return f"{entry['median_ms']:.1f} ({entry['p10_ms']:.1f}-{entry['p90_ms']:.1f})"


def _fmt_check(record: dict[str, Any]) -> str:
    parts = []
    for name, entry in record["peers"].items():
        agreement = entry.get("agreement")
        if not agreement or name == "torch":
            continue
        text = f"{name} {agreement['max_abs_diff']:.2g} ({agreement['max_rel_to_peak']:.1g} of peak)"
        if "top1" in entry:
            text += f", top-1 {entry['top1']['same']}/{entry['top1']['of']} as fp32"
        elif "rel_l2" in entry:
            error = entry["rel_l2"]
            text += f", rel. L2 error {error['mean']:.2g} (worst {error['worst']:.2g}) on {error['of']} inputs"
        elif agreement["max_rel_to_peak"] > FP32_BOUND:
            text += " OUT OF BOUND"
        parts.append(text)
    return "; ".join(parts) or "-"


def render(results: dict[str, Any]) -> str:
    env = results["environment"]
    lines = [
        "# Model zoo on the CPU backend",
        "",
        f"Run {results['date']} on {env['cpu']} ({env['cores']} cores, load {env['load_before']}"
        f"{', at the end ' + env['load_after'] if 'load_after' in env else ''}); "
        f"{', '.join(f'{k} {v}' for k, v in env['versions'].items())}; {env['peer_versions']}.",
        "Median ms per inference, batch 1 (p10-p90 in brackets); ratio = peer / IronAccel (> 1: IronAccel faster).",
        f"Threads: {env['threads']}.",
        f"Check: max |output - torch eager fp32| (relative to torch's largest |output value|; fp32 bound "
        f"{FP32_BOUND:g}); "
        f"int8 (per-tensor symmetric, PT2E, calibrated on {INT8_INPUTS} inputs): IronAccel only, the float "
        f"input quantized and the output dequantized inside the timed call; checked by top-1 class against fp32 "
        f"torch on {INT8_INPUTS} other inputs (the language models, which have no classes: by ||int8 - fp32 "
        f"torch|| / ||fp32 torch|| of the worst output, on {INT8_INPUTS} other inputs). The peers' figures for "
        f"the model are in its fp32 row. Several outputs: the worst one's figures.",
        f"Plot: {env['plot']}.",
        *_kept_runs(results),
        "",
        "| model | IronAccel | onnxruntime | IREE llvm-cpu | torch eager | vs ort | vs IREE | vs torch | check |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for record in results["models"]:
        label = f"{record['model']} {record['mode']}"
        if "export_failed" in record:
            reason = " ".join(record["export_failed"].split())
            lines.append(f"| {label} | export failed: {reason[:600]} | | | | | | | |")
            continue
        if "left_out" in record:
            lines.append(f"| {label} | {record['left_out']} | | | | | | | |")
            continue
        peers = record["peers"]
        ours = peers.get("ironaccel", {}).get("median_ms")
        cells = [_fmt(peers.get(name, {"na": "not run"})) for name in PEERS]
        ratios = []
        for name in ("ort", "iree", "torch"):
            theirs = peers.get(name, {}).get("median_ms")
            ratios.append(f"{theirs / ours:.2f}x" if ours and theirs else "-")
        lines.append(f"| {label} | {' | '.join(cells)} | {' | '.join(ratios)} | {_fmt_check(record)} |")
    lines.append("")
    return "\n".join(lines)


def _kept_runs(results: dict[str, Any]) -> list[str]:
    """A line naming the rows kept from earlier runs (``--models`` ran the others), with those runs' dates,
    machines and loads; none when every row is of this run."""
    this = results["environment"]
    earlier: dict[str, list[str]] = {}
    for record in results["models"]:
        run = record.get("run")
        if run and (run["date"], run["load_before"]) != (results["date"], this["load_before"]):
            when = f"{run['date']} on {run['cpu']} ({run['cores']} cores, load {run['load_before']})"
            label = f"{record['model']} {record['mode']}"
            earlier.setdefault(when, []).append(label)
    return [f"Rows from an earlier run: {', '.join(rows)}: {when}." for when, rows in earlier.items()]


def merged(records: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """This run's rows and, for each model it did not run, that model's rows from ``path`` (the last
    results), each labelled with the run it came from; in MODELS' order."""
    kept: list[dict[str, Any]] = []
    if path.exists():
        earlier = json.loads(path.read_text())
        env = earlier["environment"]
        ran = {r["model"] for r in records}
        for record in earlier["models"]:
            if record["model"] in MODELS and record["model"] not in ran:
                record.setdefault(
                    "run",
                    {k: env[k] for k in ("cpu", "cores", "load_before")} | {"date": earlier["date"]},
                )
                kept.append(record)
    order = list(MODELS)
    return sorted(records + kept, key=lambda r: order.index(r["model"]))  # stable: fp32 before int8


def plot(results: dict[str, Any], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "none (matplotlib is not installed where this ran)"
    rows = [r for r in results["models"] if "ironaccel" in r["peers"] and "median_ms" in r["peers"]["ironaccel"]]
    if not rows:
        return "none (no model ran)"
    labels = [f"{r['model']}\n{r['mode']}" for r in rows]
    # From a few ms (MobileNetV2) to seconds (the decoder's prefill): a log axis keeps every bar readable.
    fig, ax = plt.subplots(figsize=(1.5 * len(rows) + 2, 4.5))
    width = 0.8 / len(PEERS)
    timed = [e["median_ms"] for r in rows for e in r["peers"].values() if e.get("median_ms")]
    floor = min(timed) / 2  # where "n/a" is written: a log axis has no 0
    for index, name in enumerate(PEERS):
        values = [r["peers"].get(name, {}).get("median_ms", 0.0) for r in rows]
        positions = [i + (index - (len(PEERS) - 1) / 2) * width for i in range(len(rows))]
        bars = ax.bar(positions, values, width, label=name)
        for bar, value in zip(bars, values, strict=True):
            if not value:
                ax.text(bar.get_x() + bar.get_width() / 2, floor, "n/a", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(rows)), labels)
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor / 1.5)
    ax.set_ylabel("ms per inference (median, batch 1, log scale)")
    ax.set_title(f"Model zoo, CPU backend vs peers ({results['date']})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"`{path.name}`"


def _environment(peers: dict[str, peer_mod.Peer], missing: dict[str, str], found: dict[str, str]) -> dict[str, Any]:
    import torch

    threads = "; ".join(f"{name}: {peer.threads}" for name, peer in peers.items())
    threads += f"; torch.get_num_threads() = {torch.get_num_threads()}"
    return {
        "cpu": _cpu_name(),
        "cores": os.cpu_count(),
        "load_before": ", ".join(f"{v:.1f}" for v in os.getloadavg()),
        "python": platform.python_version(),
        "versions": found,
        "peer_versions": ", ".join(p.version for p in peers.values() if p.version and p.name != "ironaccel"),
        "threads": threads,
        "missing_peers": missing,
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--seconds", type=float, default=20.0, help="timing budget per model and mode (default 20)")
    parser.add_argument("--no-int8", action="store_true", help="fp32 only")
    parser.add_argument("--fp32-only", default="", help="comma-separated models whose int8 row is left out")
    parser.add_argument("--iree-timeout", type=float, default=240.0, help="seconds iree-compile may take (240)")
    parser.add_argument("--refresh", action="store_true", help="export again, ignoring .cache/models")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument(
        "--no-merge", action="store_true", help="write this run's rows only (default: keep the other models' rows)"
    )
    parser.add_argument("--onnx-export", nargs=3, metavar=("MODEL", "WEIGHTS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.onnx_export:
        return _onnx_export_main(*args.onnx_export)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; known: {list(MODELS)}")
    found = versions()
    peers: dict[str, peer_mod.Peer] = {}
    missing: dict[str, str] = {}
    factories: dict[str, Callable[[], peer_mod.Peer]] = {
        "ironaccel": ZooIronAccel,
        "ort": peer_mod.OnnxRuntime,
        "iree": lambda: ZooIree(args.iree_timeout),
        "torch": ZooTorch,
    }
    for name, factory in factories.items():
        try:
            peers[name] = factory()
        except (ImportError, cts.ToolsNotFound) as exc:
            missing[name] = str(exc).splitlines()[0]
    started = time.monotonic()
    results: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "environment": _environment(peers, missing, found),
        "models": [],
    }
    try:
        for name in names:
            for mode in ("fp32",) if args.no_int8 else ("fp32", "int8"):
                print(f"{name} {mode} ...", file=sys.stderr, flush=True)
                if mode == "int8" and name in args.fp32_only.split(","):
                    results["models"].append(_left_out(name, mode, "int8 left out of this run (--fp32-only)"))
                    continue
                record = run_model(name, mode, peers, args, found)
                for peer_name, reason in missing.items():
                    record["peers"].setdefault(peer_name, {"na": f"n/a: not installed ({reason})"})
                results["models"].append(record)
    finally:
        for peer in peers.values():
            peer.close()
    results["environment"]["wall_seconds"] = round(time.monotonic() - started, 1)
    # Other work on the machine moves the figures (see the README): the load at the end tells of the run too.
    results["environment"]["load_after"] = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    if not args.no_merge:
        results["models"] = merged(results["models"], HERE / "results.json")
    if args.no_write:
        results["environment"]["plot"] = "not drawn (--no-write)"
    else:
        results["environment"]["plot"] = plot(results, HERE / "cpu.png")
    table = render(results)
    print(table)
    if not args.no_write:
        (HERE / "results.md").write_text(table)
        (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
