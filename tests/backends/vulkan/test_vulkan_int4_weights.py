"""Convolutions of int8 inputs with int4 weights (EXT-INT4) on Vulkan, bit for bit against the CPU backend.

int4 values are held one per byte (``DType.INT4.numpy`` is int8) in constants, the arena and a caller's
buffers alike, so the int8 kernels (``conv_int.comp``, ``depthwise_int.comp``) compute them unchanged:
the signature is one registration in ops/tensor.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.backends.cpu import run as cpu_run
from ironaccel.tosa import ProgramBuilder
from vulkan_fixtures import RNG_SEED, clean, dev, run_both, run_vulkan

__all__ = ["clean", "dev"]  # fixtures, used by name

INT4 = (-8, 8)


def _int4(rng, shape):
    return rng.integers(*INT4, shape).astype(np.int8)


def _conv(b, op, x, w, bias, x_zp):
    if op == "conv2d":
        return b.conv2d(x, w, bias, x_zp, 0, pad=(1, 0, 1, 0), stride=(1, 2), acc_type="int32")
    if op == "depthwise_conv2d":
        return b.depthwise_conv2d(x, w, bias, x_zp, 0, pad=(1, 1, 0, 1), dilation=(2, 1), acc_type="int32")
    if op == "transpose_conv2d":
        return b.transpose_conv2d(x, w, bias, x_zp, 0, stride=(2, 1), out_pad=(0, 1, 1, 0), acc_type="int32")
    geometry = {"pad": (0, 1, 1, 0, 1, 1), "stride": (1, 1, 2), "dilation": (1, 1, 1), "acc_type": "int32"}
    return b.op("conv3d", [x, w, bias, x_zp, b.const(np.zeros(1, np.int8), "int4")], **geometry)


SHAPES = {  # input, weight
    "conv2d": ((2, 9, 7, 5), (6, 3, 2, 5)),
    "depthwise_conv2d": ((1, 8, 9, 3), (3, 3, 3, 2)),
    "transpose_conv2d": ((1, 5, 6, 4), (7, 3, 3, 4)),
    "conv3d": ((1, 4, 6, 5, 3), (4, 2, 3, 3, 3)),
}


@pytest.mark.parametrize("op", sorted(SHAPES))
def test_int4_weight_constants_give_the_cpu_backends_bits(dev, op):
    rng = np.random.default_rng(RNG_SEED + 41)
    xs, ws = SHAPES[op]
    x = rng.integers(-128, 128, xs).astype(np.int8)
    w = _int4(rng, ws)
    channels = ws[2] * ws[3] if op == "depthwise_conv2d" else ws[0]
    bias = rng.integers(-(2**20), 2**20, (channels,)).astype(np.int32)

    def build(b, v):
        return _conv(b, op, v, b.const(w, "int4"), b.const(bias, "int32"), b.const(np.array([-7]), "int8"))

    (got,), (want,) = run_both(dev, build, [x])
    assert got.dtype == want.dtype == np.int32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want, err_msg=op)
    assert np.abs(want).max() > 0


def test_int4_weights_from_the_caller_give_the_cpu_backends_bits(dev):
    """Weights bound as a graph input of int4 (a caller's int8-valued buffer), not a constant."""
    rng = np.random.default_rng(RNG_SEED + 42)
    (xs, ws) = SHAPES["conv2d"]
    b = ProgramBuilder()
    x, w = b.input("x", xs, "int8"), b.input("w", ws, "int4")
    b.output(_conv(b, "conv2d", x, w, b.const(np.zeros(ws[0], np.int32), "int32"), 3))
    program = b.build()
    inputs = [rng.integers(-128, 128, xs).astype(np.int8), _int4(rng, ws)]
    (got,) = run_vulkan(dev, program, inputs)
    (want,) = cpu_run(program, inputs)
    np.testing.assert_array_equal(got, want)
