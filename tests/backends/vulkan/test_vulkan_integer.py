"""The Vulkan backend's integer tier (PRO-INT) against the CPU backend, bit for bit, on lavapipe.

Integer results have no tolerance: every kernel of the tier is exact (RESCALE's 64-bit intermediate
is carried in 32-bit words, sums wrap like the int32 accumulator), so the device must give the CPU
oracle's bits. Inputs are random over the whole range of each type, with zero points, per-channel
scales, unsigned views and both rounding modes; the bundled INT8 model runs end to end.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import ironaccel
from ironaccel.backends.cpu import run as cpu_run
from ironaccel.cli.main import main as cli
from ironaccel.tosa import read
from vulkan_fixtures import DEVICE, RNG_SEED, clean, dev, run_both

__all__ = ["clean", "dev"]  # fixtures, used by name

MODELS = Path(ironaccel.__file__).parent / "models"
INT_RANGES = {np.int8: (-128, 128), np.int16: (-32768, 32768), np.int32: (-(2**31), 2**31)}


def _ints(rng, shape, dtype, lo=None, hi=None):
    dtype = np.dtype(dtype).type
    a, b = INT_RANGES[dtype]
    return rng.integers(a if lo is None else lo, b if hi is None else hi, shape, dtype=np.int64).astype(dtype)


def _assert_equal(got, want, what=""):
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, g.dtype, w.dtype, g.shape, w.shape)
        flat_g, flat_w = g.reshape(-1), w.reshape(-1)
        diff = np.flatnonzero(flat_g != flat_w)
        first = diff[0] if diff.size else 0
        assert diff.size == 0, (
            f"{what}: {diff.size} of {g.size} differ, first at {first}: {flat_g[first]} vs {flat_w[first]}"
        )


# ---- the bundled INT8 model ----------------------------------------------------------------------------
@pytest.mark.parametrize("model", sorted(p.name for p in MODELS.glob("*int8*.tosa")))
def test_int8_models_are_bit_identical_to_the_cpu_backend(dev, model):
    program = read(MODELS / model)
    rng = np.random.default_rng(RNG_SEED)
    block = program.main
    for trial in range(3):
        inputs = [_ints(rng, block.tensor(n).shape, block.tensor(n).dtype.numpy) for n in block.inputs]
        exe = dev.compile(program, resident_bytes=1 << 30)
        try:
            got = exe(*inputs)
        finally:
            exe.close()
        _assert_equal(got, cpu_run(program, inputs), f"{model} trial {trial}")


@pytest.mark.parametrize("model", sorted(p.name for p in MODELS.glob("*int8*.tosa")))
def test_run_command_compares_an_int8_model_with_the_cpu_backend(dev, model, capsys):
    """``ironaccel run MODEL --device vulkan --compare cpu``: seeded random inputs, 0 differing elements."""
    assert cli(["run", str(MODELS / model), "--device", DEVICE, "--compare", "cpu", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "inputs: seeded random (seed 3)" in out
    assert ": 0 differing elements, max |diff| 0 vs CPU" in out, out


# ---- RESCALE ---------------------------------------------------------------------------------------------
RESCALE_TYPES = [(i, o) for i in (np.int8, np.int16, np.int32) for o in (np.int8, np.int16, np.int32)]
TYPE_NAMES = {np.int8: "int8", np.int16: "int16", np.int32: "int32"}


@pytest.mark.parametrize(("src", "dst"), RESCALE_TYPES, ids=lambda t: TYPE_NAMES[t])
@pytest.mark.parametrize("double_round", [False, True], ids=["single", "double"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["tensor", "channel"])
def test_rescale(dev, src, dst, double_round, per_channel):
    rng = np.random.default_rng(RNG_SEED)
    channels = 7
    x = _ints(rng, (3, 5, channels), src)
    count = channels if per_channel else 1
    multiplier = rng.integers(1 << 30, 1 << 31, count, dtype=np.int64).astype(np.int32)
    multiplier[0] = 2**31 - 1  # the largest multiplier
    # shifts across the range, including > 31 (the double rounding stage) and the extremes 2 and 62
    shift = rng.integers(2, 63, count).astype(np.int8)
    shift[0] = 40 if src is np.int32 else 30
    in_zp = int(rng.integers(-128, 128)) if src is np.int8 else 0
    out_zp = int(rng.integers(-128, 128)) if dst is np.int8 else 0

    def build(b, v):
        return b.rescale(
            v,
            b.const(multiplier, "int32"),
            b.const(shift, "int8"),
            b.const(np.array([in_zp]), TYPE_NAMES[src]),
            b.const(np.array([out_zp]), TYPE_NAMES[dst]),
            out_dtype=TYPE_NAMES[dst],
            rounding_mode="double_round" if double_round else "single_round",
            per_channel=per_channel,
        )

    got, want = run_both(dev, build, [x])
    _assert_equal(got, want, "RESCALE")


@pytest.mark.parametrize(
    ("src", "dst", "input_unsigned", "output_unsigned"),
    [
        ("int8", "int8", True, False),
        ("int8", "int8", False, True),
        ("int16", "int8", True, False),
        ("int8", "int16", False, True),
        ("int16", "int16", False, True),
    ],
)
@pytest.mark.parametrize("scale32", [True, False])
def test_rescale_unsigned_views_and_scale16(dev, src, dst, input_unsigned, output_unsigned, scale32):
    rng = np.random.default_rng(RNG_SEED + 1)
    x = _ints(rng, (4, 33), np.dtype(src).type)
    mul_type = "int32" if scale32 else "int16"
    multiplier = np.array([1_518_500_250 if scale32 else 23_170], np.int64)
    shift = np.array([33 if scale32 else 16], np.int8)
    in_zp = 128 if input_unsigned and src == "int8" else 0
    out_zp = 3 if dst == "int8" else 0

    def build(b, v):
        m, s = b.const(multiplier, mul_type), b.const(shift, "int8")
        unsigned = {"input_unsigned": input_unsigned, "output_unsigned": output_unsigned}
        return b.rescale(v, m, s, in_zp, out_zp, out_dtype=dst, scale32=scale32, **unsigned)

    got, want = run_both(dev, build, [x])
    _assert_equal(got, want, f"RESCALE scale32={scale32}")


def test_rescale_with_multiplier_and_shift_computed_at_run_time(dev):
    """Multiplier and shift as graph inputs (not constants): the kernel reads them from their tensors."""
    rng = np.random.default_rng(RNG_SEED + 2)
    x = _ints(rng, (2, 9), np.int32)
    multiplier = rng.integers(1, 2**31, 9, dtype=np.int64).astype(np.int32)
    shift = rng.integers(2, 63, 9).astype(np.int8)
    got, want = run_both(
        dev, lambda b, v, m, s: b.rescale(v, m, s, out_dtype="int16", per_channel=True), [x, multiplier, shift]
    )
    _assert_equal(got, want, "RESCALE")


# ---- convolutions -----------------------------------------------------------------------------------------
CONVS = [
    # (input NHWC, weight [OC, KH, KW, IC], pad, stride, dilation)
    ((1, 9, 11, 3), (5, 3, 3, 3), (1, 1, 1, 1), (1, 1), (1, 1)),
    ((2, 16, 16, 16), (32, 3, 3, 16), (1, 0, 1, 0), (2, 2), (1, 1)),
    ((1, 7, 7, 40), (70, 2, 3, 40), (0, 2, 1, 1), (1, 2), (2, 1)),
    ((1, 1, 1, 2048), (10, 1, 1, 2048), (0, 0, 0, 0), (1, 1), (1, 1)),
]


@pytest.mark.parametrize(("xs", "ws", "pad", "stride", "dilation"), CONVS, ids=str)
@pytest.mark.parametrize(("x_zp", "w_zp"), [(0, 0), (-128, 0), (7, -3)], ids=str)
def test_conv2d_int8_with_zero_points(dev, xs, ws, pad, stride, dilation, x_zp, w_zp):
    rng = np.random.default_rng(RNG_SEED + 3)
    x = _ints(rng, xs, np.int8)
    w = _ints(rng, ws, np.int8)
    bias = _ints(rng, (ws[0],), np.int32, -(2**20), 2**20)

    def build(b, v):
        zps = b.const(np.array([x_zp]), "int8"), b.const(np.array([w_zp]), "int8")
        geometry = {"pad": pad, "stride": stride, "dilation": dilation}
        return b.conv2d(v, b.const(w, "int8"), b.const(bias, "int32"), *zps, acc_type="int32", **geometry)

    got, want = run_both(dev, build, [x])
    _assert_equal(got, want, "CONV2D")


def test_conv2d_int32_accumulator_wraps_like_the_oracle(dev):
    """A sum past int32 (a REQUIRE violation, so unpredictable) still gives the oracle's wrapped bits."""
    x = np.full((1, 4, 4, 64), -128, np.int8)
    w = np.full((3, 3, 3, 64), -128, np.int8)
    bias = np.array([2**31 - 1, -(2**31), 5], np.int32)

    def build(b, v):
        return b.conv2d(
            v,
            b.const(w, "int8"),
            b.const(bias, "int32"),
            b.const(np.array([127]), "int8"),
            b.const(np.array([127]), "int8"),
            pad=(1, 1, 1, 1),
            acc_type="int32",
        )

    got, want = run_both(dev, build, [x])
    _assert_equal(got, want, "CONV2D wrap")


# ---- MATMUL on int8 cooperative matrices ------------------------------------------------------------------
MATMULS = [  # [N, H, C] x [N, C, W]: whole 128 x 128 tiles, partial tiles, a batch, C over several steps
    (1, 128, 64, 128),
    (1, 100, 48, 80),
    (2, 130, 208, 144),
    (1, 16, 1024, 16),
]


@pytest.mark.parametrize("shape", MATMULS, ids=str)
@pytest.mark.parametrize(("a_zp", "b_zp"), [(0, 0), (-128, 0), (0, 5), (7, -3)], ids=str)
def test_matmul_int8_with_zero_points(dev, shape, a_zp, b_zp):
    """Bit-exact against the CPU backend; on devices with int8 cooperative matrices these shapes take
    matmul_int_coop.comp (the zero points applied after the product, from row and column sums)."""
    n, h, c, w = shape
    rng = np.random.default_rng(RNG_SEED + 4)
    x, y = _ints(rng, (n, h, c), np.int8), _ints(rng, (n, c, w), np.int8)
    x.flat[:3], y.flat[:3] = -128, -128  # the extremes, where a zero point widens a value past int8

    def build(b, u, v):
        return b.matmul(u, v, b.const(np.array([a_zp]), "int8"), b.const(np.array([b_zp]), "int8"))

    got, want = run_both(dev, build, [x, y])
    _assert_equal(got, want, "MATMUL")


def test_int8_matmul_longer_than_a_driver_loop_cap_is_split_and_exact(dev):
    """lavapipe stops an invocation after 65535 loop iterations: C = 65538 runs as slices whose int32
    sums reduce_int.comp adds (the conformance suite's MATMUL 1x2x65538 case)."""
    from ironaccel.backends.vulkan import plan as planning
    from ironaccel.tosa import ProgramBuilder

    rng = np.random.default_rng(RNG_SEED + 5)
    x, y = _ints(rng, (1, 2, 65538), np.int8), _ints(rng, (1, 65538, 3), np.int8)
    x[...], y[...] = 127, -128  # every product the same sign: the sum runs far past int16 and wraps nowhere

    def build(b, u, v):
        return b.matmul(u, v, b.const(np.array([-1]), "int8"), b.const(np.array([2]), "int8"))

    b = ProgramBuilder()
    b.output(build(b, b.input("a", x.shape, "int8"), b.input("b", y.shape, "int8")))
    shaders = [s.shader for s in planning.build(b.build(), max_loop_iterations=65535).steps]
    assert shaders == ["matmul_int", "reduce_int"]
    got, want = run_both(dev, build, [x, y])
    _assert_equal(got, want, "MATMUL")
    assert int(np.asarray(want[0])[0, 0, 0]) == 65538 * 128 * -130


def test_int8_matmul_takes_cooperative_matrices_only_where_listed():
    from ironaccel.backends.vulkan import plan as planning
    from ironaccel.backends.vulkan.ops.matmul import COOP_INT8
    from ironaccel.tosa import ProgramBuilder

    def program(c, w, zp_const=True):
        b = ProgramBuilder()
        x, y = b.input("a", (1, 200, c), "int8"), b.input("b", (1, c, w), "int8")
        za = b.const(np.array([3]), "int8") if zp_const else b.input("za", (1,), "int8")
        b.output(b.matmul(x, y, za, b.const(np.array([-2]), "int8")))
        return b.build()

    listed = frozenset({COOP_INT8})
    (step,) = planning.build(program(64, 256), matrix_tiles=listed).steps
    assert step.shader == "matmul_int_coop" and step.groups == (2, 2, 1)
    assert struct.unpack("<4I2i", step.push) == (0, 200, 64, 256, 3, -2)
    assert [s.shader for s in planning.build(program(64, 256)).steps] == ["matmul_int"]
    assert [s.shader for s in planning.build(program(72, 256), matrix_tiles=listed).steps] == ["matmul_int"]
    assert [s.shader for s in planning.build(program(64, 264), matrix_tiles=listed).steps] == ["matmul_int"]
    assert [s.shader for s in planning.build(program(64, 256, False), matrix_tiles=listed).steps] == ["matmul_int"]


# ---- the rest of the tier ------------------------------------------------------------------------------------
def _c(b, values, dtype):
    return b.const(np.asarray(values), dtype)


I8, I16, I32 = np.int8, np.int16, np.int32
CASES = {
    # name: (build(b, *xs), input (shape, dtype) list)
    "depthwise": (
        lambda b, x: b.depthwise_conv2d(
            x,
            _c(b, np.arange(3 * 3 * 4 * 2).reshape(3, 3, 4, 2) % 251 - 125, "int8"),
            _c(b, np.arange(8) * 1000 - 3000, "int32"),
            _c(b, [-5], "int8"),
            _c(b, [3], "int8"),
            pad=(1, 1, 0, 2),
            stride=(2, 1),
            dilation=(1, 2),
            acc_type="int32",
        ),
        [((2, 9, 8, 4), I8)],
    ),
    "transpose_conv": (
        lambda b, x: b.transpose_conv2d(
            x,
            _c(b, np.arange(6 * 3 * 2 * 5).reshape(6, 3, 2, 5) % 255 - 127, "int8"),
            _c(b, [7] * 6, "int32"),
            _c(b, [-1], "int8"),
            _c(b, [2], "int8"),
            out_pad=(0, 1, 1, 0),
            stride=(2, 2),
            acc_type="int32",
        ),
        [((1, 5, 4, 5), I8)],
    ),
    "matmul": (
        lambda b, x, y: b.matmul(x, y, _c(b, [-7], "int8"), _c(b, [12], "int8")),
        [((2, 5, 37), I8), ((2, 37, 6), I8)],
    ),
    "avg_pool_int8": (
        lambda b, x: b.avg_pool2d(
            x, _c(b, [-3], "int8"), _c(b, [9], "int8"), kernel=(3, 3), stride=(2, 2), pad=(1, 1, 1, 1), acc_type="int32"
        ),
        [((1, 9, 9, 6), I8)],
    ),
    "avg_pool_int16": (
        lambda b, x: b.avg_pool2d(x, kernel=(2, 3), stride=(1, 2), pad=(1, 0, 1, 1), acc_type="int32"),
        [((2, 5, 7, 3), I16)],
    ),
    "max_pool_int8": (
        lambda b, x: b.max_pool2d(x, kernel=(3, 2), stride=(2, 1), pad=(1, 1, 0, 1)),
        [((1, 7, 6, 5), I8)],
    ),
    "max_pool_int16": (lambda b, x: b.max_pool2d(x, kernel=(2, 2), stride=(2, 2)), [((1, 6, 6, 3), I16)]),
    "clamp_int8": (lambda b, x: b.clamp(x, -20, 100), [((5, 7), I8)]),
    "clamp_int16": (lambda b, x: b.clamp(x, -3000, 2000), [((5, 7), I16)]),
    "add": (lambda b, x, y: b.add(x, y), [((3, 4), I32), ((1, 4), I32)]),
    "sub": (lambda b, x, y: b.sub(x, y), [((3, 4), I32), ((3, 1), I32)]),
    "mul_shift": (lambda b, x, y: b.mul(x, y, _c(b, [13], "int8")), [((3, 5), I32), ((3, 5), I32)]),
    "mul_int8": (lambda b, x, y: b.mul(x, y), [((3, 5), I8), ((1, 5), I8)]),
    "mul_int16": (lambda b, x, y: b.mul(x, y), [((3, 5), I16), ((3, 5), I16)]),
    "maximum": (lambda b, x, y: b.maximum(x, y), [((4, 6), I32), ((4, 6), I32)]),
    "minimum": (lambda b, x, y: b.minimum(x, y), [((4, 6), I32), ((1, 6), I32)]),
    "intdiv": (lambda b, x, y: b.op("INTDIV", [x, y]), [((4, 6), I32), ((4, 6), I32)]),
    "abs": (lambda b, x: b.abs(x), [((4, 6), I32)]),
    "clz": (lambda b, x: b.op("CLZ", [x]), [((4, 6), I32)]),
    "negate_int8": (lambda b, x: b.negate(x, _c(b, [-7], "int8"), _c(b, [5], "int8")), [((4, 6), I8)]),
    "negate_int16": (lambda b, x: b.negate(x), [((4, 6), I16)]),
    "negate_int32": (lambda b, x: b.negate(x), [((4, 6), I32)]),
    "table_int8": (lambda b, x: b.table(x, _c(b, (np.arange(256) * 37) % 256 - 128, "int8")), [((6, 7), I8)]),
    "table_int16": (lambda b, x: b.table(x, _c(b, (np.arange(513) * 977) % 65536 - 32768, "int16")), [((6, 7), I16)]),
    "equal": (lambda b, x, y: b.equal(x, y), [((3, 5), I32), ((3, 5), I32)]),
    "greater": (lambda b, x, y: b.greater(x, y), [((3, 5), I32), ((1, 5), I32)]),
    "greater_equal": (lambda b, x, y: b.greater_equal(x, y), [((3, 5), I32), ((3, 1), I32)]),
    "select_int8": (
        lambda b, x, y: b.select(b.greater(b.cast(x, "int32"), b.cast(y, "int32")), x, y),
        [((3, 5), I8), ((3, 5), I8)],
    ),
    "select_int16": (
        lambda b, x, y: b.select(b.greater(b.cast(x, "int32"), b.cast(y, "int32")), x, y),
        [((3, 5), I16), ((3, 5), I16)],
    ),
    "reduce_sum": (lambda b, x: b.reduce_sum(x, 1), [((3, 7, 4), I32)]),
    "reduce_max_int8": (lambda b, x: b.reduce_max(x, 0), [((9, 5), I8)]),
    "reduce_min_int16": (lambda b, x: b.reduce_min(x, 2), [((2, 3, 11), I16)]),
    "reduce_max_int32": (lambda b, x: b.reduce_max(x, 1), [((2, 13), I32)]),
    "argmax_int8": (lambda b, x: b.argmax(x, 1), [((4, 9, 3), I8)]),
    "argmax_int16": (lambda b, x: b.argmax(x, 0), [((33, 5), I16)]),
    "gather_int32": (lambda b, x: b.gather(x, _c(b, [[2, 0, 1, 2]], "int32")), [((1, 3, 5), I32)]),
    "cast_chain": (
        lambda b, x: (b.cast(x, "int8"), b.cast(x, "int16"), b.cast(x, "bool"), b.cast(b.cast(x, "bool"), "int16")),
        [((5, 7), I32)],
    ),
    "cast_widen": (lambda b, x: (b.cast(x, "int32"), b.cast(x, "int16"), b.cast(x, "bool")), [((5, 7), I8)]),
    "layout_int16": (
        lambda b, x: b.concat([b.transpose(x, (1, 0)), b.reverse(b.transpose(x, (1, 0)), 1)], 0),
        [((3, 5), I16)],
    ),
    "pad_tile_int8": (lambda b, x: b.tile(b.pad(x, [1, 0, 2, 1], _c(b, [-9], "int8")), (2, 1)), [((3, 5), I8)]),
}
for _op in ("bitwise_and", "bitwise_or", "bitwise_xor", "logical_left_shift", "logical_right_shift"):
    for _t in (I8, I16, I32):
        CASES[f"{_op}_{np.dtype(_t).name}"] = (
            lambda b, x, y, _op=_op: b.op(_op.upper(), [x, y]),
            [((4, 5), _t), ((1, 5), _t)],
        )
for _t in (I8, I16, I32):
    CASES[f"bitwise_not_{np.dtype(_t).name}"] = (lambda b, x: b.op("BITWISE_NOT", [x]), [((4, 5), _t)])
    for _round in (False, True):
        CASES[f"ars_{np.dtype(_t).name}_{_round}"] = (
            lambda b, x, y, _round=_round: b.op("ARITHMETIC_RIGHT_SHIFT", [x, y], round=_round),
            [((4, 5), _t), ((4, 5), _t)],
        )

SHIFTS = ("shift", "ars_")


def _case_inputs(name, specs, rng):
    inputs = []
    for k, (shape, dtype) in enumerate(specs):
        x = _ints(rng, shape, dtype)
        if k == 1 and any(s in name for s in SHIFTS):  # shift counts inside the type's width
            x = rng.integers(0, np.dtype(dtype).itemsize * 8, shape).astype(dtype)
        if name == "intdiv" and k == 1:
            x[x == 0] = 3
        if name in ("mul_shift",):
            x = _ints(rng, shape, dtype, -(2**20), 2**20)
        if name in ("add", "sub", "abs", "negate_int32"):
            x = _ints(rng, shape, dtype, -(2**30), 2**30)
        if name in ("equal", "greater", "greater_equal", "maximum", "minimum") and k == 1:
            x[..., :2] = inputs[0][..., :2] if inputs[0].shape == x.shape else x[..., :2]
        inputs.append(x)
    return inputs


@pytest.mark.parametrize("name", sorted(CASES))
def test_integer_operator_is_bit_exact(dev, name):
    build, specs = CASES[name]
    rng = np.random.default_rng(RNG_SEED + 7)
    inputs = _case_inputs(name, specs, rng)
    got, want = run_both(dev, build, inputs)
    _assert_equal(got, want, name)


def test_rescale_edge_values_and_the_most_negative_values(dev):
    """Inputs at the ends of int32 and multipliers / shifts at the ends of their ranges."""
    x = np.array([-(2**31), 2**31 - 1, -1, 0, 1, 2**30, -(2**30) - 1, 12345], np.int32)
    for shift in (2, 31, 32, 62):
        got, want = run_both(
            dev,
            lambda b, v, shift=shift: b.rescale(
                v, _c(b, [2**31 - 1], "int32"), _c(b, [shift], "int8"), out_dtype="int32"
            ),
            [x],
        )
        _assert_equal(got, want, f"shift {shift}")


@pytest.mark.parametrize(("shape", "axis", "op"), [((65536, 2), 0, "reduce_sum"), ((2, 65536), 1, "reduce_max")])
def test_reductions_longer_than_the_loop_cap_are_sliced(dev, shape, axis, op):
    rng = np.random.default_rng(RNG_SEED + 9)
    x = _ints(rng, shape, np.int32)
    got, want = run_both(dev, lambda b, v: getattr(b, op)(v, axis), [x])
    _assert_equal(got, want, op)
