"""Run tosa-tools' reference model on .tosa files; runs inside the tosa-tools virtual environment.

    python run_reference_model.py MODEL.tosa [INPUT.npy ...] --out DIR
    python run_reference_model.py --batch JOBS.json

Each run writes ``DIR/output-N.npy`` (the arrays exactly as the reference model returned them) and
``DIR/status.json`` (``{"status": "TOSA_VALID" | "TOSA_ERROR" | ..., "error": str | null,
"outputs": n}``), the status last, so a run that crashed the process leaves no status behind.
A batch file is a JSON list of ``{"tosa": path, "inputs": [paths], "out": dir}``; one process serves
the whole batch, which saves the interpreter and library start-up per file.

This script imports only numpy and tosa_reference_model: it must not import ironaccel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def run_one(tosa: str, inputs: list[str], out: str) -> None:
    import numpy as np
    import tosa_reference_model

    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    status, error, outputs = "OTHER_ERROR", None, []
    try:
        arrays = [np.load(p, allow_pickle=False) for p in inputs]
        outputs, graph_status = tosa_reference_model.run(Path(tosa).read_bytes(), arrays)
        status = graph_status.name
    except Exception as exc:  # noqa: BLE001 - report, do not die: the caller compares statuses
        error = f"{type(exc).__name__}: {exc}"
    for index, array in enumerate(outputs):
        np.save(out_dir / f"output-{index}.npy", np.asarray(array), allow_pickle=False)
    tmp = out_dir / "status.json.tmp"
    tmp.write_text(json.dumps({"status": status, "error": error, "outputs": len(outputs)}))
    os.replace(tmp, out_dir / "status.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help=".tosa file")
    parser.add_argument("inputs", nargs="*", help="input .npy files, in the graph's input order")
    parser.add_argument("--out", help="directory for output-N.npy and status.json")
    parser.add_argument("--batch", help="JSON list of jobs {tosa, inputs, out}")
    args = parser.parse_args(argv)
    if args.batch:
        for job in json.loads(Path(args.batch).read_text()):
            run_one(job["tosa"], job["inputs"], job["out"])
            sys.stdout.flush()
        return 0
    if not args.model or not args.out:
        parser.error("give MODEL and --out, or --batch")
    run_one(args.model, args.inputs, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
