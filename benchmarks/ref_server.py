"""Times tosa-tools' reference model; runs inside the tosa-tools virtual environment (.venv-tosa).

tosa-tools pins old numpy / flatbuffers, so the benchmark drives this script as a long-lived subprocess
and asks it for timings between its own measurements (that keeps the reference model interleaved with
the other peers). Protocol: one JSON object per line on stdin, one JSON answer per line on stdout.

    {"cmd": "load", "id": K, "tosa": PATH, "inputs": [NPY, ...], "out": DIR}
        -> {"ok": true, "status": "TOSA_VALID", "outputs": n}  (outputs saved as DIR/output-N.npy)
    {"cmd": "time", "id": K, "reps": N}  -> {"ok": true, "seconds": [t, ...]}
    {"cmd": "quit"}

A timed call is one ``tosa_reference_model.run(flatbuffer, inputs)``: the reference model has no separate
compile step, so each call parses the graph and runs it. This script imports only numpy and the
reference model (never ironaccel).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    # The reference model's C++ code prints warnings on stdout: keep a private copy of stdout for the
    # protocol and send fd 1 to stderr, which the parent logs.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import numpy as np
    import tosa_reference_model

    jobs: dict[int, tuple[bytes, list]] = {}
    for line in sys.stdin:
        request = json.loads(line)
        cmd = request.get("cmd")
        try:
            if cmd == "quit":
                break
            if cmd == "load":
                payload = Path(request["tosa"]).read_bytes()
                arrays = [np.load(p, allow_pickle=False) for p in request["inputs"]]
                outputs, status = tosa_reference_model.run(payload, arrays)
                out = Path(request["out"])
                out.mkdir(parents=True, exist_ok=True)
                for index, array in enumerate(outputs):
                    np.save(out / f"output-{index}.npy", np.asarray(array), allow_pickle=False)
                jobs[request["id"]] = (payload, arrays)
                answer = {"ok": True, "status": status.name, "outputs": len(outputs)}
            elif cmd == "time":
                payload, arrays = jobs[request["id"]]
                seconds = []
                for _ in range(int(request["reps"])):
                    start = time.perf_counter()
                    tosa_reference_model.run(payload, arrays)
                    seconds.append(time.perf_counter() - start)
                answer = {"ok": True, "seconds": seconds}
            else:
                answer = {"ok": False, "error": f"unknown command {cmd!r}"}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which marks the peer n/a
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        proto.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
