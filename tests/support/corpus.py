"""virtio-accel's operator corpus (../shared/testdata/virtio-accel/cases): its cases, read into the arrays our
runtime takes, and each case's own comparison rule (``meta.json["compare"]``, the corpus README's table)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

CASES = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "virtio-accel" / "cases"
NAMES = sorted(p.name for p in CASES.iterdir() if (p / "meta.json").is_file()) if CASES.is_dir() else []


def load_case(name: str) -> tuple[bytes, list[np.ndarray], dict]:
    case = CASES / name
    meta = json.loads((case / "meta.json").read_text())
    inputs = [_typed(np.load(case / spec["file"]), spec["dtype"]) for spec in meta["inputs"]]
    return (case / "program.tosa").read_bytes(), inputs, meta


def _typed(array: np.ndarray, dtype: str) -> np.ndarray:
    """The storage form our runtime takes: raw-bit arrays viewed as their ml_dtypes type."""
    if dtype in ("FP8E4M3", "FP8E5M2", "BF16"):
        import ml_dtypes

        kind = {"FP8E4M3": ml_dtypes.float8_e4m3fn, "FP8E5M2": ml_dtypes.float8_e5m2, "BF16": ml_dtypes.bfloat16}
        return array.view(kind[dtype])
    return array


def _storage(array: np.ndarray, dtype: str) -> bytes:
    """The output's TOSA buffer bytes (INT4 packed two per byte, low nibble first)."""
    if dtype == "INT4":
        nibbles = (np.asarray(array, np.int8).reshape(-1) & 0xF).astype(np.uint8)
        if nibbles.size % 2:
            nibbles = np.append(nibbles, 0)
        return (nibbles[0::2] | (nibbles[1::2] << 4)).tobytes()
    return np.ascontiguousarray(array).tobytes()


def _is_nan(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "FP16":
        return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)
    if dtype == "BF16":
        return ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0)
    if dtype == "FP8E4M3":
        return (bits & 0x7F) == 0x7F
    if dtype == "FP8E5M2":
        return ((bits & 0x7C) == 0x7C) & ((bits & 3) != 0)
    return np.zeros(bits.shape, bool)


def compare(got: np.ndarray, meta: dict) -> None:
    """``got`` judged by the case's rule (the corpus README's table)."""
    spec, rule = meta["expected"][0], meta["compare"]
    dtype = spec["dtype"]
    assert list(got.shape) == spec["shape"], (got.shape, spec["shape"])
    want_bytes, got_bytes = bytes.fromhex(spec["hex_le"]), _storage(got, dtype)
    assert len(got_bytes) == len(want_bytes)
    name = rule["rule"]
    if name == "exact_bytes" or (name == "packed_exact_nan_any" and dtype in ("INT8", "INT4")):
        assert got_bytes == want_bytes, (got_bytes.hex(), want_bytes.hex())
        return
    if name in ("fp16_bit_exact_nan_any", "raw_fp16_ulp", "bf16_bit_exact_nan_any", "packed_exact_nan_any"):
        width = np.uint8 if dtype.startswith("FP8") else np.uint16
        g = np.frombuffer(got_bytes, width).astype(np.int64)
        w = np.frombuffer(want_bytes, width).astype(np.int64)
        nan = _is_nan(w, dtype)
        assert np.all(_is_nan(g, dtype)[nan]), f"expected NaN: got {got_bytes.hex()}"
        max_ulps = rule.get("fp16_max_ulps", 0)
        if name == "raw_fp16_ulp" and max_ulps:
            strict = ((g ^ w) & 0x8000).astype(bool) | ((w & 0x7FFF) == 0)
            ok = np.where(strict, g == w, np.abs(g - w) <= max_ulps)
        else:
            ok = g == w
        assert np.all(ok | nan), f"got {got_bytes.hex()} want {want_bytes.hex()} ({rule})"
        return
    if name == "fp32_abs_or_rel":
        if got.dtype != np.float32:  # the FP32 tier's BOOL / INT32 outputs: exact
            assert got_bytes == want_bytes
            return
        g, w = np.frombuffer(got_bytes, np.float32), np.frombuffer(want_bytes, np.float32)
        special = (w == 0) | np.isinf(w)
        assert np.all(np.isnan(g)[np.isnan(w)])
        assert np.array_equal(g.view(np.uint32)[special], w.view(np.uint32)[special])
        rest = ~special & ~np.isnan(w)
        err = np.abs(g[rest].astype(np.float64) - w[rest].astype(np.float64))
        abs_tol, rel_tol = rule["absolute_tolerance"], rule["relative_tolerance"]
        assert np.all((err <= abs_tol) | (err <= rel_tol * np.abs(w[rest].astype(np.float64)))), (g, w)
        return
    raise AssertionError(f"unknown compare rule {rule}")
