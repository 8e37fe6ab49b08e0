"""MATMUL's int8 forms through the CUDA backend on the stand-in driver (host-compiled kernels, numpy for
cuBLASLt's products): B transposed by tiles or element by element, or once at load when it is a constant;
zero points corrected by row and column terms added to the product (a constant B's column terms computed at
load). Every result exact against numpy's int64."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_driver_fake import stand_in

from ironaccel.backends.cuda import plan
from ironaccel.backends.cuda.ops.common import Gemm
from ironaccel.tosa import ProgramBuilder


@pytest.fixture
def device():
    with stand_in() as (dev, _):
        yield dev


def _program(batch: int, m: int, k: int, n: int, za: int, zb: int, weights: np.ndarray | None):
    b = ProgramBuilder()
    x = b.input("a", (batch, m, k), "int8")
    y = b.const(weights, "int8") if weights is not None else b.input("b", (batch, k, n), "int8")
    b.output(b.matmul(x, y, b.const(np.array([za]), "int8"), b.const(np.array([zb]), "int8")))
    return b.build()


def _expected(a: np.ndarray, w: np.ndarray, za: int, zb: int) -> np.ndarray:
    exact = np.matmul(a.astype(np.int64) - za, w.astype(np.int64) - zb)
    return ((exact + 2**31) % 2**32 - 2**31).astype(np.int32)


@pytest.mark.parametrize(
    ("batch", "m", "k", "n", "za", "zb", "constant", "transpose"),
    [
        (2, 5, 32, 48, -3, 5, False, "ia_transpose_int8_tiles"),  # n and k multiples of 16: by tiles
        (1, 3, 20, 12, 7, -128, False, "ia_copy_int8"),  # element by element
        (2, 4, 32, 16, 0, 0, False, "ia_transpose_int8_tiles"),  # no zero points: the product alone
        (1, 6, 24, 8, 2, -1, True, None),  # a constant B, transposed at load
        (8, 2, 3, 8, 5, -7, False, "ia_matmul_int8_direct"),  # k not a multiple of 4: no library product
        (1, 7, 20, 6, 0, 3, False, "ia_copy_int8"),  # zb alone; k not a multiple of 16, n not of 4
        (2, 3, 16, 32, -128, 0, False, "ia_transpose_int8_tiles"),  # za alone
        (2, 3, 80, 144, 1, 2, False, "ia_transpose_int8_tiles"),  # several 64-byte tiles each way, partial at the ends
        (3, 2, 48, 16, 127, -128, True, None),  # the widest zero points, a constant B
    ],
)
def test_int8_products_are_exact(device, batch, m, k, n, za, zb, constant, transpose):
    rng = np.random.default_rng(batch * 100 + m)
    a = rng.integers(-128, 128, (batch, m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (batch, k, n), dtype=np.int8)
    program = _program(batch, m, k, n, za, zb, w if constant else None)
    kernels = [k_.name for k_ in plan.build(program).kernels]
    gemms = [s for s in plan.build(program).steps if isinstance(s, Gemm)]
    assert (transpose in kernels) if transpose else not any("transpose" in k_ or "copy" in k_ for k_ in kernels)
    direct = transpose == "ia_matmul_int8_direct"
    assert len(gemms) == (0 if direct else 1)  # the product; the zero points' terms are kernels of ours
    sums = [k_ for k_ in kernels if k_.startswith("ia_int8_row_sums")]
    summed = not direct and (zb != 0 or (za != 0 and not constant))  # row sums of A, or of an input B
    assert sorted(sums) == (["ia_int8_row_sums_finish", "ia_int8_row_sums_partial"] if summed else [])
    exe = device.compile(program)
    (got,) = exe(a) if constant else exe(a, w)
    np.testing.assert_array_equal(got, _expected(a, w, za, zb))
    exe.close()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_int8_kernels_compile_with_nvrtc(arch):
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC is installed with the [cuda] extra")
    from ironaccel.backends.cuda import kernels
    from ironaccel.backends.cuda.ops import matmul
    from ironaccel.backends.cuda.prelude import PRELUDE

    source = PRELUDE + "\n" + matmul.WORDS + matmul.DIRECT + matmul.TRANSPOSE_TILES + matmul.ROW_SUMS_PARTIAL
    image = kernels.compile_source(source + matmul.ROW_SUMS_FINISH + matmul.ADD_TERMS, arch)
    assert image[:4] == b"\x7fELF"


@pytest.fixture
def ampere():
    """A device of compute capability 8.0: cuBLASLt has no fp8 products there."""
    with stand_in((8, 0), "Stand-in Ampere") as (dev, _):
        yield dev


@pytest.mark.parametrize(
    ("dtype", "batch", "m", "k", "n", "constant", "native"),
    [
        ("fp8e4m3", 2, 5, 32, 48, False, True),  # the library's fp8 product, B transposed by tiles
        ("fp8e4m3", 1, 3, 16, 16, True, True),  # a constant B, transposed at load
        ("fp8e4m3", 1, 4, 24, 16, False, False),  # k not a multiple of 16: widened to fp16
        ("fp8e5m2", 2, 3, 32, 32, False, False),  # no E5M2 x E5M2 product in the library: widened
        ("fp8e5m2", 1, 2, 8, 5, True, False),  # widened, the constant once at load
    ],
)
def test_fp8_products_match_the_exact_sum_rounded_once(device, dtype, batch, m, k, n, constant, native):
    import ml_dtypes

    storage = ml_dtypes.float8_e4m3fn if dtype == "fp8e4m3" else ml_dtypes.float8_e5m2
    rng = np.random.default_rng(k * 7 + n)
    a = rng.standard_normal((batch, m, k)).astype(np.float32).astype(storage)
    w = rng.standard_normal((batch, k, n)).astype(np.float32).astype(storage)
    b = ProgramBuilder()
    x = b.input("a", (batch, m, k), dtype)
    y = b.const(w, dtype) if constant else b.input("b", (batch, k, n), dtype)
    zero = np.zeros(1, storage)
    b.output(b.matmul(x, y, b.const(zero, dtype), b.const(zero, dtype)))
    program = b.build()
    gemms = [s for s in plan.build(program).steps if isinstance(s, Gemm)]
    assert [g.operands.name.lower() for g in gemms] == [dtype if native else "fp16"]
    exe = device.compile(program)
    (got,) = exe(a) if constant else exe(a, w)
    want = np.matmul(a.astype(np.float64), w.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(got, want)
    exe.close()


def test_fp8_products_are_widened_where_the_device_has_no_fp8_kernels(ampere):
    import ml_dtypes

    b = ProgramBuilder()
    x, y = b.input("a", (1, 2, 32), "fp8e4m3"), b.input("b", (1, 32, 16), "fp8e4m3")
    zero = np.zeros(1, ml_dtypes.float8_e4m3fn)
    b.output(b.matmul(x, y, b.const(zero, "fp8e4m3"), b.const(zero, "fp8e4m3")))
    program = b.build()
    assert [g.operands.name for g in plan.build(program, native_fp8=False).gemms] == ["FP16"]
    a = np.full((1, 2, 32), 0.5, ml_dtypes.float8_e4m3fn)
    w = np.full((1, 32, 16), -2.0, ml_dtypes.float8_e4m3fn)
    with ampere.compile(program) as exe:
        (got,) = exe(a, w)
    np.testing.assert_array_equal(got, np.full((1, 2, 16), -32.0, np.float16))
