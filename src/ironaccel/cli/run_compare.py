"""How ``ironaccel run --compare DEVICE`` judges one device's outputs against another's.

Every output element is judged by ``|x - ref| <= atol + rtol * |ref|`` (ref: the reference device's value;
NaN equals NaN, an infinity itself), with the caller's ``--atol`` / ``--rtol`` or defaults per dtype
(:data:`TOLERANCES`: exact for integers and booleans). Each output's row names its worst element.
"""

from __future__ import annotations

import math
from typing import Any

# numpy storage dtype name -> (atol, rtol) of --compare: about two units in the last place relative, and
# an absolute floor near the type's smallest normal numbers. Integers and booleans: exact.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-8, 1e-6),
    "float32": (1e-5, 1e-4),
    "float16": (1e-3, 1e-2),
    "bfloat16": (1e-2, 2e-2),
    "float8_e4m3fn": (1 / 64, 0.25),
    "float8_e5m2": (1 / 64, 0.5),
}


def default_tolerance(dtype: Any) -> tuple[float, float]:
    """(atol, rtol) for outputs of numpy ``dtype``: exact for integers and booleans, per float type."""
    import numpy as np

    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        return 0.0, 0.0
    return TOLERANCES.get(dtype.name, TOLERANCES["float32"])


def compare(a: list, b: list, atol: float | None = None, rtol: float | None = None) -> list[dict]:
    """Per output of ``a`` against the reference ``b``: differing elements, the largest absolute
    difference, and the verdict of ``|a - b| <= atol + rtol * |b|`` (NaN equals NaN, an infinity itself;
    None: :func:`default_tolerance` of the output's dtype) with the worst element."""
    import numpy as np

    rows = []
    for x, y in zip(a, b, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        default_atol, default_rtol = default_tolerance(x.dtype)
        row: dict[str, Any] = {
            "shape": list(x.shape),
            "dtype": str(x.dtype),
            "atol": default_atol if atol is None else atol,
            "rtol": default_rtol if rtol is None else rtol,
        }
        if x.shape != y.shape:
            mismatch = {"differing": x.size, "max_abs_diff": math.inf, "beyond": x.size, "agree": False, "worst": None}
            rows.append({**row, **mismatch, "shape_mismatch": [list(x.shape), list(y.shape)]})
            continue
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        same = (xf == yf) | (np.isnan(xf) & np.isnan(yf))
        with np.errstate(invalid="ignore"):
            diff = np.where(same, 0.0, np.abs(xf - yf))  # NaN where only one side is NaN
            allowed = row["atol"] + row["rtol"] * np.abs(yf)
            excess = np.where(np.isnan(diff) | np.isinf(diff), np.inf, diff - allowed)
            excess[same] = -np.inf  # equal elements (NaN with NaN, an infinity with itself) are never worst
        beyond = int(np.count_nonzero(excess > 0))
        row.update(
            differing=int(np.count_nonzero(~same)),
            max_abs_diff=float(np.nanmax(diff)) if diff.size and not np.isnan(diff).all() else 0.0,
            beyond=beyond,
            agree=beyond == 0,
            worst=None,
        )
        if diff.size and row["differing"]:
            flat = int(np.argmax(excess))
            index = [int(i) for i in np.unravel_index(flat, x.shape)]
            row["worst"] = {
                "index": index,
                "value": float(xf.reshape(-1)[flat]),
                "reference": float(yf.reshape(-1)[flat]),
                "abs_diff": float(diff.reshape(-1)[flat]),
            }
        rows.append(row)
    return rows


def compare_line(i: int, name: str, row: dict, device: str, reference: str) -> str:
    head = f"output {i} {name} {row['dtype']}{row['shape']}"
    if "shape_mismatch" in row:
        mine, theirs = row["shape_mismatch"]
        return f"{head}: shape {mine} on {device} but {theirs} on {reference}"
    text = f"{head}: {row['differing']} differing elements, max |diff| {row['max_abs_diff']:.3g} vs {reference}"
    tolerance = (
        "exactly" if row["atol"] == 0 and row["rtol"] == 0 else f"atol {row['atol']:.3g}, rtol {row['rtol']:.3g}"
    )
    if row["agree"]:
        return f"{text}; agree ({tolerance})"
    worst = row["worst"]
    where = ", ".join(map(str, worst["index"]))
    return (
        f"{text}; {row['beyond']} beyond {tolerance}, worst at [{where}]: {worst['value']:.7g} on {device} "
        f"vs {worst['reference']:.7g} on {reference} (|diff| {worst['abs_diff']:.3g})"
    )
