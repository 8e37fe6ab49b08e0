"""int4 tensors (EXT-INT4) held and moved by Vulkan: IDENTITY of graph inputs, constants and intermediates,
bit for bit against the CPU backend, and the extension claimed because every row it enables is registered.

An int4 value is one byte, as the runtime's arrays hold it (``DType.INT4.numpy`` is int8), in a caller's
buffers, the arena and the constants alike; packing two per byte is a .tosa file's matter (and the
corpus harness's), never a buffer's.
"""

from __future__ import annotations

import numpy as np

from ironaccel.backends.cpu import run as cpu_run
from ironaccel.backends.vulkan import capability
from ironaccel.tosa import ProgramBuilder, admit
from ironaccel.tosa.target import Extension
from ironaccel.tosa.tiers import unmet_rows
from vulkan_fixtures import clean, dev, run_vulkan

__all__ = ["clean", "dev"]  # fixtures, used by name

EVERY_INT4 = np.arange(-8, 8, dtype=np.int8)


def test_the_int4_extension_is_claimed_with_everything_it_enables():
    assert Extension.INT4 in capability.TARGET.extensions
    assert unmet_rows(capability.ALL_OPERATORS, Extension.INT4) == []


def test_identity_moves_every_int4_value_from_input_to_output(dev):
    b = ProgramBuilder()
    b.output(b.identity(b.input("x", (4, 4), "int4")))
    program = b.build()
    admit(program, dev.accelerator.capabilities())
    x = EVERY_INT4.reshape(4, 4)
    (got,) = run_vulkan(dev, program, [x])
    assert got.dtype == np.int8 and got.shape == (4, 4)
    np.testing.assert_array_equal(got, x)


def test_int4_identities_of_a_constant_and_an_intermediate_feed_a_convolution(dev):
    """An int4 constant through IDENTITY (an arena view or copy), a caller's int4 input through two, and
    the result as weights of an int8 x int4 CONV2D and as an int4 output of its own."""
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (1, 5, 5, 3)).astype(np.int8)
    w_in = rng.integers(-8, 8, (4, 3, 3, 3)).astype(np.int8)
    w_const = rng.integers(-8, 8, (4, 3, 3, 3)).astype(np.int8)
    b = ProgramBuilder()
    xv, wv = b.input("x", x.shape, "int8"), b.input("w", w_in.shape, "int4")
    moved = b.identity(b.identity(wv))
    bias = b.const(np.zeros(4, np.int32), "int32")
    conv = b.conv2d(xv, moved, bias, 0, 0, pad=(1, 1, 1, 1), acc_type="int32")
    conv_const = b.conv2d(xv, b.identity(b.const(w_const, "int4")), bias, 0, 0, pad=(0, 0, 0, 0), acc_type="int32")
    b.output(conv)
    b.output(conv_const)
    b.output(moved)
    program = b.build()
    got = run_vulkan(dev, program, [x, w_in])
    want = cpu_run(program, [x, w_in])
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[2], w_in)
