"""MATMUL's int8 forms through the CUDA backend on the stand-in driver (host-compiled kernels, numpy for
cuBLASLt's products): B transposed by tiles or element by element, or once at load when it is a constant;
zero points corrected with sums that are products with ones. Every result exact against numpy's int64."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from cuda_driver_fake import FakeDriver, install

import ironaccel
from ironaccel.backends.cuda import plan
from ironaccel.backends.cuda.ops.common import Gemm
from ironaccel.tosa import ProgramBuilder


@pytest.fixture
def device(monkeypatch):
    driver = FakeDriver([("Stand-in Device", bytes(range(16)))])
    install(monkeypatch, driver)
    with ironaccel.open("cuda") as dev:
        yield dev
    gc.collect()
    assert not driver.memory and not driver.events


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
    assert len(gemms) == (0 if direct else 1 if za == zb == 0 else 3)  # the product, then the correction's sums
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

    image = kernels.compile_source(PRELUDE + "\n" + matmul.DIRECT + matmul.TRANSPOSE_TILES, arch)
    assert image[:4] == b"\x7fELF"
