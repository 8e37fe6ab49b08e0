"""``ironaccel run PATH -i x.npy [-i ...] -o OUT [--device SPEC] [--compare cpu]``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("program", help="a .tosa file")
    parser.add_argument("-i", "--input", action="append", default=[], metavar="NPY", help="input array, in order")
    parser.add_argument("-o", "--output", metavar="OUT", help="a .npy file for one output, a directory for several")
    parser.add_argument("--device", default="auto", help="cpu, vulkan, vulkan:N or auto (default)")
    parser.add_argument("--compare", metavar="DEVICE", help="also run on DEVICE and report the largest difference")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _load_inputs(paths: list[str]) -> list:
    import numpy as np

    return [np.load(p, allow_pickle=False) for p in paths]


def _save(outputs: list, out: str | None) -> list[str]:
    import numpy as np

    if not out:
        return []
    path = Path(out)
    if len(outputs) == 1 and path.suffix == ".npy":
        np.save(path, outputs[0])
        return [str(path)]
    path.mkdir(parents=True, exist_ok=True)
    written = []
    for i, value in enumerate(outputs):
        p = path / f"output-{i}.npy"
        np.save(p, value)
        written.append(str(p))
    return written


def compare(a: list, b: list) -> list[dict]:
    """Per output: differing elements and the largest absolute difference (NaNs equal to NaNs)."""
    import numpy as np

    rows = []
    for x, y in zip(a, b, strict=True):
        xf, yf = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        both_nan = np.isnan(xf) & np.isnan(yf)
        diff = np.where(both_nan, 0.0, np.abs(xf - yf))
        rows.append(
            {
                "shape": list(x.shape),
                "dtype": str(x.dtype),
                "differing": int(np.count_nonzero(diff)),
                "max_abs_diff": float(np.nanmax(diff)) if diff.size else 0.0,
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    from .. import open as open_device
    from ..core.errors import IronAccelError

    try:
        inputs = _load_inputs(args.input)
        with open_device(args.device) as dev:
            exe = dev.compile(args.program)
            start = time.perf_counter()
            outputs = exe(*inputs)
            seconds = time.perf_counter() - start
            report: dict = {"device": dev.info.name, "why": dev.why, "seconds": seconds}
            report["written"] = _save(outputs, args.output)
        if args.compare:
            with open_device(args.compare) as ref:
                other = ref.compile(args.program)(*inputs)
                report["compare"] = {"device": ref.info.name, "outputs": compare(outputs, other)}
    except (IronAccelError, OSError, ValueError) as exc:
        print(f"ironaccel run: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report))
    else:
        print(f"ran on {report['device']} in {seconds * 1e3:.2f} ms ({report['why']})")
        for path in report["written"]:
            print(f"wrote {path}")
        for i, row in enumerate(report.get("compare", {}).get("outputs", [])):
            print(
                f"output {i} {row['dtype']}{row['shape']}: {row['differing']} differing elements, "
                f"max |diff| {row['max_abs_diff']:.3g} vs {report['compare']['device']}"
            )
    differs = any(r["differing"] for r in report.get("compare", {}).get("outputs", []))
    return 1 if differs and args.compare and _exact(outputs) else 0


def _exact(outputs: list) -> bool:
    """Integer and boolean outputs must match exactly; floats are reported, not judged."""
    return all(o.dtype.kind in "iub" for o in outputs)
