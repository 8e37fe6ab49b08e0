"""The scaling plot of bench_pool.py: items per second against CPU replicas, the ideal linear line from the
one-replica figure, and each GPU replica as a point of its own.

    python benchmarks/cluster/plot_pool.py [results.json] [pool.png]

It needs matplotlib alone (not Ray nor ironaccel), so bench_pool.py can hand the drawing to another
environment's Python when its own has no matplotlib (this repository's .venv-export has it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def draw(document: dict[str, Any], path: Path) -> None:
    """Write the plot of a results.json document to ``path`` (PNG). ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = document["rows"]
    cpu = sorted((r for r in rows if r["device"] == "cpu:0"), key=lambda r: r["replicas"])
    base = next(r["items_per_s"] for r in cpu if r["replicas"] == 1)
    xs = [r["replicas"] for r in cpu]
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.plot(xs, [r["items_per_s"] for r in cpu], "o-", label="CPU replicas (one thread each)")
    ax.plot(xs, [base * x for x in xs], "--", color="grey", label="ideal (linear from 1 replica)")
    for r in rows:
        if r["device"] != "cpu:0":
            ax.plot([r["replicas"]], [r["items_per_s"]], "s", label=f"{r['device']} replica")
    ax.set_xticks(xs)
    ax.set_xlabel("replicas")
    ax.set_ylabel("items / s (bundled CNN)")
    ax.set_ylim(bottom=0)
    host = document.get("host", {})
    ax.set_title(f"ironaccel.cluster Pool on {host.get('cores', '?')} cores, batch {document.get('batch', '?')}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else HERE / "results.json"
    target = Path(argv[1]) if len(argv) > 1 else source.with_name("pool.png")
    draw(json.loads(source.read_text()), target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
