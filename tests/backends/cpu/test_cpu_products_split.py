"""The interpreter's products split across threads: by rows, or by column blocks of the second operand where
a single product has more columns than rows (a linear layer over few tokens); the result is the product
either way (integers exactly)."""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.backends.cpu.interpreter import load as interpret
from ironaccel.backends.cpu.ops import products
from ironaccel.tosa.builder import ProgramBuilder

RNG = np.random.default_rng(37)


@pytest.fixture
def two_threads(monkeypatch):
    """Splits as on an idle machine of two CPUs or more, whatever the load here."""
    monkeypatch.setattr(products, "split_threads", lambda: 2)


@pytest.mark.parametrize(
    ("n", "h", "c", "w"),
    [
        (1, 128, 768, 3072),  # columns: blocks of whole 64-column panels
        (1, 7, 1000, 4001),  # columns, a last block of one column
        (1, 512, 300, 200),  # rows
        (3, 64, 100, 700),  # batches: rows
    ],
)
def test_matmul_into_splits_and_gives_the_product(two_threads, n, h, c, w):
    a = RNG.standard_normal((n, h, c)).astype(np.float32)
    b = RNG.standard_normal((n, c, w)).astype(np.float32)
    out = np.full((n, h, w), np.nan, np.float32)
    got = products.matmul_into(a, b, out)
    assert got is out
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=0, atol=float(np.abs(a).max() * np.abs(b).max() * c) * 2.0**-20)


def test_an_int8_product_split_by_columns_is_exact(two_threads):
    a = RNG.integers(-128, 127, (1, 24, 700), endpoint=True).astype(np.int8)
    b = RNG.integers(-128, 127, (1, 700, 900), endpoint=True).astype(np.int8)
    builder = ProgramBuilder()
    builder.output(builder.matmul(builder.input("a", a.shape, "int8"), builder.const(b), 3, -5))
    (got,) = interpret(builder.build()).run([a])
    want = np.matmul(a.astype(np.int64) - 3, b.astype(np.int64) + 5)
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_a_linear_layer_split_by_columns_matches_one_thread(two_threads, monkeypatch):
    """The pointwise convolution (BERT's linear layers) through the interpreter, split and not."""
    x = RNG.standard_normal((96, 1, 1, 256)).astype(np.float32)
    weights = RNG.standard_normal((1024, 1, 1, 256)).astype(np.float32)
    bias = RNG.standard_normal(1024).astype(np.float32)
    builder = ProgramBuilder()
    builder.output(builder.conv2d(builder.input("x", x.shape, "fp32"), builder.const(weights), builder.const(bias)))
    program = interpret(builder.build())
    (split,) = program.run([x])
    monkeypatch.setattr(products, "split_threads", lambda: 1)
    (single,) = program.run([x])
    want = x.reshape(96, 256).astype(np.float64) @ weights.reshape(1024, 256).T.astype(np.float64) + bias
    np.testing.assert_allclose(split.reshape(96, 1024), want, rtol=0, atol=1e-3)
    np.testing.assert_allclose(split, single, rtol=0, atol=1e-4)
