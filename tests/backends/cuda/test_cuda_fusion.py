"""The CUDA plan's passes (backends/cuda/fusion.py): elementwise chains fused into one launch where nothing
else can see the intermediates, and launches over contiguous operands given the contiguous kernel variant;
fused programs run on the stand-in driver with host kernels give the unfused plan's bits and the CPU
reference's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ironaccel.backends.cuda import plan
from ironaccel.backends.cuda.ops.common import Launch
from ironaccel.tosa import DType, Op, ProgramBuilder


def _chain(n: int, shape: tuple[int, ...] = (256,)):
    b = ProgramBuilder()
    x = b.input("x", shape, DType.FP32)
    v = x
    for _ in range(n):
        v = b.add(v, x)
    b.output(v)
    return b.build()


def _names(program) -> list[str]:
    return [s.kernel.name for s in plan.build(program).steps if isinstance(s, Launch)]


def test_a_chain_of_fifty_adds_is_one_launch(monkeypatch):
    names = _names(_chain(50))
    assert len(names) == 1 and names[0].startswith("ia_fused50_")
    monkeypatch.setenv("IRONACCEL_CUDA_FUSION", "0")
    assert len(_names(_chain(50))) == 50


def test_an_intermediate_that_is_an_output_or_read_twice_stays():
    b = ProgramBuilder()
    x = b.input("x", (64,), DType.FP32)
    t = b.exp(x)
    u = b.add(t, x)  # t is an output too: it must be written
    b.output(t)
    b.output(b.mul(u, u, 0))
    names = _names(b.build())
    assert len(names) == 2 and names[0].startswith("ia_exp_fp32") and names[1].startswith("ia_fused2_")

    b = ProgramBuilder()
    x = b.input("x", (64,), DType.FP32)
    t = b.exp(x)  # read by two launches
    b.output(b.sub(b.add(t, x), b.mul(t, x, 0)))
    names = _names(b.build())
    assert len(names) == 2 and names[0].startswith("ia_exp_fp32") and names[1].startswith("ia_fused3_")


def test_a_broadcast_intermediate_or_too_many_operands_or_scalars_stay_apart():
    b = ProgramBuilder()
    x = b.input("x", (4, 8), DType.FP32)
    row = b.input("row", (1, 8), DType.FP32)
    b.output(b.add(x, b.exp(row)))  # the exponential is read broadcast over the rows
    assert len(_names(b.build())) == 2

    b = ProgramBuilder()
    xs = [b.input(f"x{k}", (16,), DType.FP32) for k in range(4)]
    b.output(b.add(b.add(b.add(xs[0], xs[1]), xs[2]), xs[3]))  # four distinct operands: three fit
    assert len(_names(b.build())) == 2

    b = ProgramBuilder()
    v = b.input("x", (16,), DType.FP32)
    for k in range(6):  # three scalar words each: five fit in sixteen
        v = b.clamp(v, -float(k + 1), float(k + 1))
    b.output(v)
    steps = plan.build(b.build()).launches
    assert len(steps) == 2 and all(len(s.scalars) <= 16 for s in steps)


def test_contiguous_launches_take_the_vector_variant():
    b = ProgramBuilder()
    x = b.input("x", (1 << 12,), DType.FP32)
    one = b.input("one", (1,), DType.FP32)
    b.output(b.add(x, one))
    (launch,) = plan.build(b.build()).launches
    assert launch.kernel.name == "ia_add_fp32_v10" and launch.kernel.per_thread == 4
    assert launch.grid == (1 << 12) // (4 * 256)
    b = ProgramBuilder()
    x = b.input("x", (2, 3), DType.FP32)
    b.output(b.add(x, b.input("row", (1, 3), DType.FP32)))
    assert _names(b.build()) == ["ia_add_fp32"]  # broadcast over two dimensions: the general kernel


def _fp16_program():
    b = ProgramBuilder()
    x = b.input("x", (3, 67), DType.FP16)
    y = b.input("y", (1, 67), DType.FP16)
    v = b.mul(b.add(x, y), x, 0)
    v = b.clamp(b.exp(b.sub(v, y)), -3.0, 60000.0)
    b.output(b.maximum(b.sigmoid(v), y))
    return b.build(), lambda r: [r.standard_normal((3, 67)) * 4, r.standard_normal((1, 67))], np.float16


def _int8_program():
    b = ProgramBuilder()
    x = b.input("x", (203,), DType.INT8)
    y = b.input("y", (203,), DType.INT32)
    k = b.input("k", (203,), DType.INT8)
    v = b.clamp(b.negate(x), -50, 100)  # NEGATE saturates -(-128), CLAMP keeps int8
    v = b.clamp(b.op(Op.LOGICAL_LEFT_SHIFT, [v, k]), -100, 90)  # the shift's int8 result keeps its low bits
    m = b.mul(b.mul(v, v), y, 3)  # int8 x int8 -> int32, then int32 with a shift
    b.output(b.cast(b.add(m, y), DType.INT8))
    return (
        b.build(),
        lambda r: [r.integers(-128, 128, 203), r.integers(-(2**20), 2**20, 203), r.integers(0, 8, 203)],
        (np.int8, np.int32, np.int8),
    )


def _mixed_program():
    b = ProgramBuilder()
    x = b.input("x", (130,), DType.FP32)
    h = b.cast(b.mul(x, x, 0), DType.FP16)  # fp32 product into fp16
    g = b.cast(b.add(b.cast(h, DType.FP32), x), DType.BF16)
    c = b.clamp(g, -100.0, 100.0, nan_mode="ignore")
    f = b.add(b.cast(c, DType.FP32), x)  # an fp32 sum after a product: no contraction across parts
    b.output(b.minimum(f, x, nan_mode="ignore"))
    return b.build(), lambda r: [r.standard_normal(130) * 30], np.float32


def _scalars_program():
    b = ProgramBuilder()
    x = b.input("x", (97,), DType.FP32)
    y = b.input("y", (97,), DType.FP32)
    v = b.clamp(x, -2.0, 3.0)
    v = b.maximum(v, y, nan_mode="ignore")
    v = b.clamp(b.mul(v, y, 0), -1.0, 2.5, nan_mode="ignore")
    b.output(b.minimum(v, b.clamp(y, 0.5, 1.5)))
    return b.build(), lambda r: [r.standard_normal(97) * 3, r.standard_normal(97) * 3], np.float32


PROGRAMS = {"fp16": _fp16_program, "int8": _int8_program, "mixed": _mixed_program, "scalars": _scalars_program}


def _inputs(program, make, types, seed: int) -> list[np.ndarray]:
    values = make(np.random.default_rng(seed))
    dtypes = types if isinstance(types, tuple) else (types,) * len(values)
    arrays = [np.asarray(v).astype(t) for v, t in zip(values, dtypes, strict=True)]
    for a in arrays:
        if a.dtype.kind == "f" and a.size > 4:  # the special values go through every part too
            a.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return arrays


@pytest.fixture(scope="module")
def device():
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is installed with the [cuda] extra")
    from cuda_driver_fake import stand_in

    with stand_in() as (dev, _):
        yield dev


def _run(dev, program, inputs) -> list[np.ndarray]:
    exe = dev.compile(program)
    try:
        return [np.asarray(o) for o in exe(*inputs)]
    finally:
        exe.close()


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16 else a


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_fused_programs_give_the_unfused_bits_and_the_reference(device, monkeypatch, name):
    from ironaccel.backends import cpu

    program, make, types = PROGRAMS[name]()
    fused = plan.build(program).launches
    assert any(s.kernel.name.startswith("ia_fused") for s in fused)
    for seed in range(2):
        inputs = _inputs(program, make, types, seed)
        got = _run(device, program, inputs)
        with monkeypatch.context() as patch:
            patch.setenv("IRONACCEL_CUDA_FUSION", "0")
            assert len(plan.build(program).launches) > len(fused)
            unfused = _run(device, program, inputs)
        want = [np.asarray(w) for w in cpu.load(program).run(list(inputs))]
        for g, u, w in zip(got, unfused, want, strict=True):
            np.testing.assert_array_equal(_bits(g), _bits(u))
            if g.dtype.kind in "iub":
                np.testing.assert_array_equal(g, w)
            else:  # the host's expf / sigmoid against numpy's: within the operator suite's few units
                np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=2e-3, atol=1e-6)
