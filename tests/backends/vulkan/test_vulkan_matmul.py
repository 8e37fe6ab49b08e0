"""MATMUL on the Vulkan backend against float64, judged by TOSA's dot-product bound, and the kernel
choice the planner makes (ops/matmul.py).

The bound: |got - exact| <= (C + 1) 2^-23 S + tiny for an fp32 accumulator, where S is the same
product of |A| and |B| (the sum of the absolute terms); an fp16 result may add half an fp16 ulp of
rounding on top. Measured on lavapipe the worst was 0.16 of the bound (a single-term product).
Shapes reach every tile width of matmul.comp (16, 64 and 128 rows / columns), partial tiles, odd
extents (scalar loads), multiples of 4 (vector loads), batches, and split-k (few tiles, long C), and
on a device with cooperative matrices (``IRONACCEL_TEST_VULKAN_DEVICE=nvidia``) matmul_coop.comp.
"""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.backends.vulkan import plan as planning
from ironaccel.backends.vulkan.ops import matmul as mm
from ironaccel.tosa import ProgramBuilder
from ironaccel.tosa.operators import Op
from vulkan_fixtures import RNG_SEED, clean, dev, run_vulkan

__all__ = ["clean", "dev"]  # fixtures, used by name

NP = {"fp32": np.float32, "fp16": np.float16}


def _program(n, h, c, w, in_t="fp32", out_t="fp32"):
    b = ProgramBuilder()
    x, y = b.input("a", (n, h, c), in_t), b.input("b", (n, c, w), in_t)
    b.output(b.op(Op.MATMUL, [x, y, 0, 0], out_dtype=out_t))
    return b.build()


def _check(got, a, b, out_t):
    wa, wb = a.astype(np.float64), b.astype(np.float64)
    exact, magnitude = np.matmul(wa, wb), np.matmul(np.abs(wa), np.abs(wb))
    c = a.shape[2]
    bound = (c + 1) * 2.0**-23 * magnitude + 1e-30
    if out_t == "fp16":  # one rounding to fp16 after the fp32 accumulation
        bound += np.abs(exact) * 2.0**-11 + 2.0**-25
    assert got.dtype == NP[out_t] and got.shape == exact.shape
    worst = float(np.max(np.abs(got.astype(np.float64) - exact) / bound))
    assert worst <= 1.0, f"error {worst:.3g} x the dot-product bound"


SHAPES = [
    (1, 1, 1, 1),
    (1, 5, 7, 3),
    (2, 33, 17, 65),
    (1, 128, 128, 128),
    (3, 64, 600, 20),  # split-k, batched
    (1, 1, 4096, 8),  # a vector times a matrix: split-k
    (1, 600, 40, 700),  # 128-wide tiles, partial
    (1, 17, 1030, 9),  # odd extents, split-k
    (4, 20, 24, 36),  # vector loads on 16- / 64-wide tiles
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fp32(dev, shape):
    n, h, c, w = shape
    rng = np.random.default_rng(RNG_SEED)
    a = rng.standard_normal((n, h, c)).astype(np.float32)
    b = rng.standard_normal((n, c, w)).astype(np.float32)
    (got,) = run_vulkan(dev, _program(*shape), [a, b])
    _check(got, a, b, "fp32")


@pytest.mark.parametrize("out_t", ["fp16", "fp32"])
@pytest.mark.parametrize("shape", [(2, 33, 18, 40), (1, 70, 304, 24), (1, 130, 64, 136), (1, 3, 1000, 5)], ids=str)
def test_fp16_inputs_with_either_accumulator(dev, shape, out_t):
    n, h, c, w = shape
    rng = np.random.default_rng(RNG_SEED)
    a = rng.standard_normal((n, h, c)).astype(np.float16)
    b = rng.standard_normal((n, c, w)).astype(np.float16)
    (got,) = run_vulkan(dev, _program(*shape, "fp16", out_t), [a, b])
    _check(got, a, b, out_t)


@pytest.mark.parametrize("in_t", ["fp32", "fp16"])
@pytest.mark.parametrize(
    "shape", [(1, 5, 7, 3), (2, 33, 17, 65), (3, 64, 600, 20), (1, 600, 40, 700), (2, 256, 64, 256)], ids=str
)
def test_a_compiled_in_shape_gives_the_same_bits(dev, monkeypatch, shape, in_t):
    """A shape compiled into the kernel (ADR 0022) changes only addresses and, on whole tiles, bound
    checks: every result is bit for bit what the kernel reading its shape from push constants computes
    (partial tiles, scalar loads, split-k, batches, whole 128 x 128 tiles)."""
    n, h, c, w = shape
    rng = np.random.default_rng(RNG_SEED)
    a = rng.standard_normal((n, h, c)).astype(NP[in_t])
    b = rng.standard_normal((n, c, w)).astype(NP[in_t])
    got = {}
    for work in (0, 1 << 62):  # every shape compiled in, then none
        monkeypatch.setattr(mm, "FIXED_SHAPE_WORK", work)
        (got[work],) = run_vulkan(dev, _program(*shape, in_t), [a, b])
    np.testing.assert_array_equal(got[0].view(np.uint32), got[1 << 62].view(np.uint32))
    _check(got[0], a, b, "fp32")


def test_shape_specialized_pipelines_are_bounded(dev, monkeypatch):
    """Past SHAPED_PIPELINES pipelines with a shape compiled in, a device serves new shapes from the
    push-constant form: results stay right, and the cache stops growing with every new shape."""
    from ironaccel.backends.vulkan import kernels as vk_kernels

    cache = dev.accelerator._native.kernels
    monkeypatch.setattr(mm, "FIXED_SHAPE_WORK", 0)
    monkeypatch.setattr(vk_kernels, "SHAPED_PIPELINES", cache.shaped + 1)
    rng = np.random.default_rng(RNG_SEED)
    for shape in ((1, 9, 12, 5), (1, 10, 12, 5), (1, 11, 12, 5)):
        a = rng.standard_normal(shape[:3]).astype(np.float32)
        b = rng.standard_normal((shape[0], shape[2], shape[3])).astype(np.float32)
        (got,) = run_vulkan(dev, _program(*shape), [a, b])
        _check(got, a, b, "fp32")
    assert cache.shaped == vk_kernels.SHAPED_PIPELINES  # the first shape only
    shaped = [spec[7:10] for shader, spec in cache._pipelines if shader == "matmul" and any(spec[7:])]
    assert (9, 12, 5) in shaped and (10, 12, 5) not in shaped and (11, 12, 5) not in shaped  # H, C, W


def test_specials_propagate(dev):
    """inf * 0 is NaN, inf + finite is inf; staging zeros beyond the edges must not add either."""
    a = np.array([[[np.inf, 1.0, 2.0], [1.0, 2.0, 3.0]]], np.float32)
    b = np.array([[[0.0, 1.0], [1.0, 1.0], [1.0, 1.0]]], np.float32)
    (got,) = run_vulkan(dev, _program(1, 2, 3, 2), [a, b])
    assert np.isnan(got[0, 0, 0]) and got[0, 0, 1] == np.inf
    np.testing.assert_array_equal(got[0, 1], [5.0, 6.0])


def test_a_long_reduction_on_a_loop_capped_driver(dev):
    """lavapipe stops an invocation after 65535 loop iterations: the planner splits C to stay below."""
    rng = np.random.default_rng(RNG_SEED)
    a = rng.standard_normal((1, 2, 70_000)).astype(np.float32)
    b = rng.standard_normal((1, 70_000, 3)).astype(np.float32)
    (got,) = run_vulkan(dev, _program(1, 2, 70_000, 3), [a, b])
    _check(got, a, b, "fp32")


# ---- kernel choice (planning only, no device) -------------------------------------------------------
def _plan(shape, in_t="fp32", out_t="fp32", **limits):
    return planning.build(_program(*shape, in_t, out_t), **limits)


def test_large_products_take_128_wide_tiles_without_split():
    (step,) = _plan((1, 2048, 1024, 2048)).steps
    assert step.shader == "matmul" and step.groups == (16, 16, 1)
    assert step.spec[:7] == (16, 16, 8, 8, 8, 0, 1)  # TX, TY, TM, TN, BK, fp16 inputs, vector loads


def test_large_products_compile_their_shape_in():
    """H, C, W (and C per slice) become specialization constants from FIXED_SHAPE_WORK multiply-adds
    on; smaller products keep one pipeline for every shape (zeros: read from the push constants)."""
    (step,) = _plan((1, 2048, 1024, 2048)).steps
    assert step.spec[7:] == (2048, 1024, 2048, 1024)
    (step,) = _plan((1, 64, 64, 64)).steps
    assert step.spec[7:] == (0, 0, 0, 0)
    coop = frozenset({mm.COOP_FP16})
    (step,) = _plan((2, 1024, 512, 1024), "fp16", "fp32", matrix_tiles=coop).steps
    assert step.shader == "matmul_coop" and step.spec == (128, 1024, 512, 1024)  # invocations, H, C, W
    (step,) = _plan((1, 256, 256, 256), "fp16", "fp32", matrix_tiles=coop).steps
    assert step.spec == (128, 0, 0, 0)


def test_skinny_products_split_k_and_sum_the_slices():
    first, reduce = _plan((1, 4, 8192, 16)).steps
    assert first.shader == "matmul" and reduce.shader == "matmul_reduce"
    assert first.spec[:4] == (4, 4, 4, 4) and first.groups[2] > 1  # 16 x 16 tile, slices in z
    assert reduce.reads == first.writes


def test_odd_extents_use_scalar_loads():
    (step,) = _plan((1, 33, 17, 65)).steps
    assert step.spec[-1] == 0


def test_fp16_result_is_rounded_once_by_cast():
    steps = _plan((1, 64, 64, 64), "fp16", "fp16").steps
    assert [s.shader for s in steps] == ["matmul", "cast"] and steps[0].spec[5] == 1


def test_cooperative_matrix_kernel_only_where_the_device_lists_it():
    coop = frozenset({mm.COOP_FP16})
    (step,) = _plan((1, 256, 256, 256), "fp16", "fp32", matrix_tiles=coop).steps
    assert step.shader == "matmul_coop" and step.groups == (2, 2, 1)
    (step,) = _plan((1, 256, 256, 256), "fp16", "fp32").steps
    assert step.shader == "matmul"
    (step,) = _plan((1, 256, 258, 256), "fp16", "fp32", matrix_tiles=coop).steps  # C not a multiple of 8
    assert step.shader == "matmul"
    (step,) = _plan((1, 256, 256, 256), "fp32", "fp32", matrix_tiles=coop).steps  # fp32 inputs
    assert step.shader == "matmul"


def test_tiles_fit_the_shared_memory_limit():
    for h, w in ((1, 1), (100, 2000), (4096, 4096)):
        for limit in (2048, 16384, 49152):
            assert mm.tile_for(h, w, limit).shared_bytes <= limit


def test_the_device_reports_its_kernel_choice(dev):
    """The kernels a loaded MATMUL uses: matmul_coop where the device lists fp16 16x16x16, else matmul."""
    tiles = dev.accelerator._native.device.matrix_tiles
    plan = planning.build(_program(1, 256, 256, 256, "fp16", "fp32"), matrix_tiles=tiles, max_shared_memory=49152)
    expected = "matmul_coop" if mm.COOP_FP16 in tiles else "matmul"
    assert [s.shader for s in plan.steps] == [expected]
