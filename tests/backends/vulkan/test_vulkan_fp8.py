"""The Vulkan FP8 tier (EXT-FP8E4M3, EXT-FP8E5M2) on lavapipe, against the CPU backend.

* Conversions (shaders/include/fp8.glsl, through CAST): all 256 patterns of each format widened to
  fp32 and fp16 exactly; fp32 patterns at every fp8 rounding boundary (each midpoint between
  neighbouring values and its fp32 neighbours, the overflow threshold included), random patterns and
  every fp16 narrowed bit for bit as the CPU backend narrows them (round to nearest even; above the
  largest finite value E5M2 gives infinity and E4M3 NaN; NaN the format's plain NaN).
* Products and pools (fp32 accumulation, fp16 results) within the fp16 rounding of the CPU's result;
  MAX_POOL2D, ARGMAX, data movement, GATHER / SCATTER exact.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ironaccel.backends.vulkan import capability
from vulkan_fixtures import RNG_SEED, clean, dev, run_both

__all__ = ["clean", "dev"]  # fixtures, used by name

FORMATS = {"fp8e4m3": ml_dtypes.float8_e4m3fn, "fp8e5m2": ml_dtypes.float8_e5m2}


def _all(dtype) -> np.ndarray:
    return np.arange(256, dtype=np.uint16).astype(np.uint8).view(dtype)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize]).reshape(-1)


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bit for bit, except that any NaN matches any NaN."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    with np.errstate(invalid="ignore"):
        nan = (np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))).reshape(-1)
    bad = (_bits(got) != _bits(want)) & ~nan
    assert not bad.any(), f"{what}: {int(bad.sum())} differ, first at {int(np.argmax(bad))}"


def _boundaries(dtype) -> np.ndarray:
    """fp32 patterns at and around every point where rounding to ``dtype`` changes its answer."""
    with np.errstate(invalid="ignore"):
        values = np.unique(_all(dtype).astype(np.float64))
    values = values[np.isfinite(values) & (values >= 0)]
    top = values[-1] + (values[-1] - values[-2])  # the next value the format would have
    mids = (values + np.append(values[1:], top)) / 2
    bits = np.concatenate([mids, values]).astype(np.float32).view(np.uint32).astype(np.int64)
    bits = np.concatenate([bits + d for d in (-2, -1, 0, 1, 2)])
    bits = bits[(bits >= 0) & (bits < 0x7F800000)]
    return np.concatenate([bits, bits | 0x80000000]).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("wide", ["fp32", "fp16", "bf16"])
def test_widen_every_pattern(dev, fmt, wide):
    x = _all(FORMATS[fmt])
    got, want = run_both(dev, lambda b, a: b.cast(a, wide), [x])
    assert_same(got[0], want[0], f"{fmt} -> {wide}")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_narrow_fp32_boundaries_random_and_special_patterns(dev, fmt):
    rng = np.random.default_rng(RNG_SEED)
    randoms = rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    specials = np.array([0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFA00000, 0x7F7FFFFF, 1, 0x80000001])
    x = np.concatenate([_boundaries(FORMATS[fmt]), randoms, specials.astype(np.uint32).view(np.float32)])
    got, want = run_both(dev, lambda b, a: b.cast(a, fmt), [x])
    np.testing.assert_array_equal(_bits(got[0]), _bits(want[0]))  # NaNs too: both give the plain NaN


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_narrow_every_fp16(dev, fmt):
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got, want = run_both(dev, lambda b, a: b.cast(a, fmt), [x])
    np.testing.assert_array_equal(_bits(got[0]), _bits(want[0]))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_narrow_every_bf16(dev, fmt):
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)
    got, want = run_both(dev, lambda b, a: b.cast(a, fmt), [x])
    np.testing.assert_array_equal(_bits(got[0]), _bits(want[0]))


def _values(rng, shape, dtype, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _close_fp16(got, want, what: str) -> None:
    """Within 2 fp16 ulp: the CPU accumulates in float64, the kernels in fp32; both round to fp16."""
    assert got.dtype == want.dtype == np.float16, (got.dtype, want.dtype)
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(g - w) <= 2 * ulp), f"{what}: worst {float(np.max(np.abs(g - w) / ulp))} fp16 ulp"


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_products_and_pools(dev, fmt):
    rng = np.random.default_rng(RNG_SEED)
    dtype = FORMATS[fmt]
    x = _values(rng, (1, 8, 8, 5), dtype)
    w, dw = _values(rng, (6, 3, 3, 5), dtype, 0.3), _values(rng, (3, 3, 5, 2), dtype, 0.3)
    bias, dbias = np.zeros(6, np.float16), np.zeros(10, np.float16)
    a, c = _values(rng, (2, 9, 24), dtype), _values(rng, (2, 24, 7), dtype)

    def build(bld, v):
        return (
            bld.conv2d(v, bld.const(w), bld.const(bias), pad=(1, 1, 1, 1), acc_type="fp16"),
            bld.depthwise_conv2d(v, bld.const(dw), bld.const(dbias), pad=(1, 1, 1, 1), acc_type="fp16"),
            bld.avg_pool2d(v, kernel=(2, 2), stride=(2, 2), acc_type="fp16"),
            bld.max_pool2d(v, kernel=(2, 2), stride=(1, 2)),
            bld.argmax(v, 2),
        )

    got, want = run_both(dev, build, [x])
    for what, g, wnt in zip(("conv2d", "depthwise"), got, want, strict=False):
        _close_fp16(g, wnt, f"{fmt} {what}")
    # AVG_POOL2D's result is fp8: the fp32 mean rounded once, the CPU's float64 one likewise
    g, wnt = (_bits(v).astype(np.int64) for v in (got[2], want[2]))
    g, wnt = (np.where(v & 0x80, -(v & 0x7F), v) for v in (g, wnt))
    assert got[2].dtype == want[2].dtype == np.dtype(dtype) and np.abs(g - wnt).max() <= 1, "avg_pool2d"
    assert_same(got[3], want[3], "max_pool2d")
    assert_same(got[4], want[4], "argmax")
    got, want = run_both(dev, lambda bld, p, q: bld.op("MATMUL", [p, q, 0, 0], out_dtype="fp16"), [a, c])
    _close_fp16(got[0], want[0], f"{fmt} matmul")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_data_movement_gather_scatter_exact(dev, fmt):
    rng = np.random.default_rng(RNG_SEED)
    dtype = FORMATS[fmt]
    x = rng.integers(0, 256, 3 * 4 * 5, dtype=np.uint16).astype(np.uint8).view(dtype).reshape(3, 4, 5)

    def build(b, a):
        return (
            b.slice(a, [1, 0, 2], [2, 3, 3]),
            b.pad(a, [0, 2, 1, 0, 3, 1], 0.5),
            b.tile(a, [2, 1, 3]),
            b.reverse(a, 2),
            b.transpose(a, (2, 0, 1)),
            b.concat([a, b.slice(a, [0, 0, 0], [3, 4, 1]), a], 2),
            b.reshape(a, (60,)),
            b.identity(a),
        )

    got, want = run_both(dev, build, [x])
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.tobytes() == w.tobytes(), f"output {i}"
    values = x.reshape(3, 20, 1)
    unique = np.stack([rng.permutation(20)[:4] for _ in range(3)]).astype(np.int32)
    updates = x.reshape(-1)[:12].reshape(3, 4, 1)
    got, want = run_both(dev, lambda b, v, i: b.gather(v, i), [values, unique])
    assert got[0].tobytes() == want[0].tobytes(), "gather"
    got, want = run_both(dev, lambda b, v, i, u: b.scatter(v, i, u), [values, unique, updates])
    assert got[0].tobytes() == want[0].tobytes(), "scatter"


def test_the_tier_is_the_fp8_extensions():
    """Every fp8 signature the specification's FP8E4M3 and FP8E5M2 extensions add to PRO-FP, only those."""
    from ironaccel.tosa.dtypes import DType
    from ironaccel.tosa.operators import Op
    from ironaccel.tosa.spec import operator as spec_of
    from ironaccel.tosa.target import Target

    enabled = Target.of(profiles=["pro-fp"], extensions=["fp8e4m3", "fp8e5m2"], level="8k").enabled
    fp8 = {DType.FP8E4M3, DType.FP8E5M2}
    wanted = {}
    for op in capability.FP8_OPERATORS:
        spec = spec_of(op)
        rows = [r for r in (spec.typesupport if spec else ()) if r.enabled(enabled)]
        found = {frozenset(r.types.items()) for r in rows if fp8 & set(r.types.values())}
        if found and op is not Op.CONST:  # CONST takes every type (judged where each constant is used)
            wanted[op] = found
    offered = {op: {frozenset(s.types) for s in sigs} for op, sigs in capability.FP8_SIGNATURES.items()}
    assert wanted == offered
    # with BF16 as well, CAST between bf16 and fp8: advertised where the tiers are together
    both = Target.of(profiles=["pro-fp"], extensions=["bf16", "fp8e4m3", "fp8e5m2"], level="8k").enabled
    rows = [r for r in spec_of(Op.CAST).typesupport if r.enabled(both)]
    cross = {frozenset(r.types.items()) for r in rows if DType.BF16 in r.types.values() and fp8 & set(r.types.values())}
    assert cross == {frozenset(s.types) for s in capability.BF16_FP8_CASTS}
    assert set(capability.BF16_FP8_CASTS) <= set(capability.ALL_OPERATORS[Op.CAST].signatures)
