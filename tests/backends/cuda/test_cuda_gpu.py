"""The CUDA backend on a real device (marked gpu: scripts/gpu-check runs them; elsewhere they skip, saying
why no device opens): the contract's semantic suite, programs against the CPU reference (broadcasting,
constants, views, every float type, a grid larger than one launch's blocks), the narrow conversions bit for
bit over every 16-bit pattern, runs of one program from several queues at once, and a clean close.
"""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest

import ironaccel
from ironaccel.backends import cpu
from ironaccel.conformance import semantic
from ironaccel.tosa import DType, Op, ProgramBuilder

pytestmark = pytest.mark.gpu
NEEDS_WHILE_LOOP = {
    "event.deadline-stops-running-work",
    "event.cancel-stops-running-work",
    "reset.ends-running-work",
    "reset.admission-stops",
}


@pytest.fixture(scope="module")
def reason() -> None:
    from ironaccel.backends.cuda.registration import why_not

    why = why_not()
    if why is not None:
        pytest.skip(f"no CUDA device opens here: {why}")


@pytest.fixture(scope="module")
def dev(reason):
    device = ironaccel.open("cuda")
    yield device
    device.close()
    device.accelerator.close()


def _open():
    from ironaccel.backends.cuda import open_accelerator

    return open_accelerator()


@pytest.mark.parametrize("case_id", list(semantic.CASES))
def test_the_semantic_suite_passes(reason, case_id):
    (result,) = semantic.run(_open, only=[case_id])
    if case_id in NEEDS_WHILE_LOOP:
        assert result.status == "skip", result
    else:
        assert result.status == "pass", result


def _run_both(dev, program, *inputs):
    got = dev.compile(program)(*inputs)
    want = cpu.load(program).run(list(inputs))
    return [np.asarray(g) for g in got], [np.asarray(w) for w in want]


def test_a_chain_with_broadcasting_constants_and_views(dev):
    b = ProgramBuilder()
    x = b.input("x", (3, 1, 5, 4), DType.FP32)
    y = b.input("y", (1, 2, 5, 1), DType.FP32)
    c = b.const(np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 1, 1, 4), DType.FP32)
    s = b.op(Op.ADD, [b.op(Op.SUB, [x, y]), c])
    t = b.op(Op.TANH, [b.mul(s, s, 0)])
    r = b.reshape(b.op(Op.SIGMOID, [t]), b.const_shape([6, 20]))
    b.output(r, b.clamp(b.op(Op.EXP, [s]), 0.25, 3.0))
    rng = np.random.default_rng(1)
    xs, ys = rng.uniform(-2, 2, (3, 1, 5, 4)).astype(np.float32), rng.uniform(-2, 2, (1, 2, 5, 1)).astype(np.float32)
    got, want = _run_both(dev, b.build(), xs, ys)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [DType.FP16, DType.BF16])
def test_narrow_float_arithmetic_rounds_once(dev, dtype):
    b = ProgramBuilder()
    x = b.input("x", (64, 33), dtype)
    y = b.input("y", (1, 33), dtype)
    b.output(b.mul(b.op(Op.ADD, [x, y]), y, 0), b.op(Op.MAXIMUM, [x, y]), b.op(Op.RECIPROCAL, [y]))
    rng = np.random.default_rng(2)
    xs = rng.uniform(-4, 4, (64, 33)).astype(dtype.numpy)
    ys = rng.uniform(0.5, 4, (1, 33)).astype(dtype.numpy)
    got, want = _run_both(dev, b.build(), xs, ys)
    np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))  # + and * are exact
    np.testing.assert_array_equal(got[1].view(np.uint16), want[1].view(np.uint16))
    np.testing.assert_array_equal(got[2].view(np.uint16), want[2].view(np.uint16))  # 1/y: IEEE division


def test_int32_arithmetic_wraps_and_mul_rounds_at_its_shift(dev):
    b = ProgramBuilder()
    x = b.input("x", (7, 9), DType.INT32)
    y = b.input("y", (7, 1), DType.INT32)
    b.output(b.mul(x, y, 13), b.op(Op.ADD, [x, y]), b.op(Op.ABS, [x]), b.negate(y, 0, 0))
    rng = np.random.default_rng(3)
    xs = rng.integers(-(2**30), 2**30, (7, 9), dtype=np.int32)
    ys = rng.integers(-(2**16), 2**16, (7, 1), dtype=np.int32)
    got, want = _run_both(dev, b.build(), xs, ys)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_a_grid_larger_than_one_launch(dev):
    n = (1 << 20) * 256 + 1000  # past MAX_BLOCKS x BLOCK: the grid-stride loop covers the rest
    b = ProgramBuilder()
    x = b.input("x", (n,), DType.FP32)
    b.output(b.negate(x, 0, 0))
    xs = np.arange(n, dtype=np.float32)
    (got,) = dev.compile(b.build())(xs)
    np.testing.assert_array_equal(np.asarray(got), -xs)


def _cast(dev, values: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    b = ProgramBuilder()
    x = b.input("x", values.shape, src)
    b.output(b.cast(x, dst))
    (got,) = dev.compile(b.build())(values)
    return np.asarray(got)


def _same_or_nan(got: np.ndarray, want: np.ndarray, what: str) -> None:
    nan = np.isnan(want.astype(np.float32))
    assert np.isnan(got.astype(np.float32)[nan]).all(), what
    bits = got.view(np.uint32 if got.itemsize == 4 else np.uint16)
    np.testing.assert_array_equal(bits[~nan], want.view(bits.dtype)[~nan], err_msg=what)


def test_narrow_conversions_bit_for_bit(dev):
    patterns = np.arange(1 << 16, dtype=np.uint16)
    for dtype, numpy_type in ((DType.FP16, np.float16), (DType.BF16, ml_dtypes.bfloat16)):
        values = patterns.view(numpy_type)
        _same_or_nan(_cast(dev, values, dtype, DType.FP32), values.astype(np.float32), f"{dtype} -> fp32")
        rng = np.random.default_rng(4)
        wide = np.concatenate(
            [
                values.astype(np.float32),
                rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32),
            ]
        )
        wide = np.concatenate([wide, np.nextafter(wide, np.float32(np.inf)), np.nextafter(wide, np.float32(-np.inf))])
        with np.errstate(all="ignore"):
            _same_or_nan(_cast(dev, wide, DType.FP32, dtype), wide.astype(numpy_type), f"fp32 -> {dtype}")


def test_float_to_int_rounds_to_even_and_saturates(dev):
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 3e9, -3e9, np.nan, np.inf, -np.inf, 2147483520.0], np.float32)
    got = _cast(dev, values, DType.FP32, DType.INT32)
    assert got.tolist() == [0, 2, 2, 0, -2, 2**31 - 1, -(2**31), 0, 2**31 - 1, -(2**31), 2147483520]


def test_one_program_from_several_queues_at_once(reason):
    """Runs of one loaded program share its arena: from two queues at once they take turns, and each gets
    its own inputs' results."""
    from ironaccel.runtime import ArtifactRef, Binding, BufferDesc, EventState, MemoryDomain
    from ironaccel.tosa.codec import write

    b = ProgramBuilder()
    x = b.input("x", (4096,), DType.FP32)
    b.output(b.op(Op.EXP, [b.op(Op.ABS, [x])]))
    acc = _open()
    try:
        ctx = acc.create_context()
        program = acc.load_program(ctx, ArtifactRef(write(b.build()), 1 << 24))
        failures: list[BaseException] = []

        def work(seed: int) -> None:
            try:
                queue = acc.create_queue(ctx)
                bufs = [acc.allocate_buffer(ctx, BufferDesc(4 * 4096, MemoryDomain.DEVICE)) for _ in range(2)]
                rng = np.random.default_rng(seed)
                for _ in range(50):
                    xs = rng.uniform(-3, 3, 4096).astype(np.float32)
                    acc.write_buffer(bufs[0], 0, xs.tobytes())
                    event = acc.submit(queue, program, [Binding(0, bufs[0]), Binding(1, bufs[1])])
                    assert acc.wait(event, 30) is EventState.COMPLETE, acc.event_error(event)
                    got = np.frombuffer(acc.read_buffer(bufs[1], 0, 4 * 4096), np.float32)
                    np.testing.assert_allclose(got, np.exp(np.abs(xs)), rtol=1e-5)
            except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures[0]
    finally:
        acc.close()


def test_close_leaves_nothing_live(reason):
    device = ironaccel.open("cuda")
    exe = device.compile(semantic.add_program(8))
    exe(np.ones(8, np.float32), np.ones(8, np.float32))
    exe.close()
    device.close()
    assert not {k: v for k, v in device.accelerator.live_resources().items() if v}
    device.accelerator.close()
