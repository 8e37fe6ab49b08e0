"""The elementwise, comparison and reduction operators and MATMUL of the Vulkan FP32 tier against the CPU
backend (the oracle), on lavapipe. The tensor operators are in test_vulkan_tensor_ops.py, data movement,
type and integer operators in test_vulkan_data_ops.py; the shared helpers in vulkan_fixtures.py.

``IRONACCEL_TEST_VULKAN_DEVICE`` names another device (``scripts/gpu-check`` runs this module on the
NVIDIA H200 with ``IRONACCEL_TEST_VULKAN_DEVICE=nvidia``).

Random inputs over several shapes (rank 0 to 4, broadcasting where the operator has it), special values
(NaN, infinities, signed zeros), and one multi-operator program end to end through ``ironaccel.open``.

Tolerances, in units in the last place of the oracle's fp32 result (the CPU rounds a float64 result
once, so it is correctly rounded or within a hair of it):

* exact (0): ABS NEGATE FLOOR CEIL ADD SUB MUL MAXIMUM MINIMUM CLAMP SELECT, comparisons, TRANSPOSE,
  RESHAPE, IDENTITY, REDUCE_MAX — the kernels pick an operand or make one IEEE-rounded operation.
* RECIPROCAL 1, RSQRT 2 (TOSA's bounds); EXP LOG 2; SIN COS 2, or 2^-24 absolute near their zeros
  (TOSA bounds them absolutely); TANH SIGMOID 3; ERF 5 (TOSA's bound); POW 4 while |b ln a| <= 30.
* MATMUL and REDUCE_SUM: |error| <= n 2^-23 sum |terms| for n terms, the dot-product bound.

Measured on lavapipe (LLVM 15) over 2^20 random points each: 0 ulp for the exact group, RECIPROCAL and
RSQRT; 1 for EXP, LOG, TANH, ERF, POW; 2 for SIN, COS (|x| <= 100) and SIGMOID; MATMUL within 1.7 x 2^-23
of sum |a b|, REDUCE_SUM (4096 terms) within 0.6 x 2^-23 of sum |x|.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ironaccel
from ironaccel.backends.cpu import run as cpu_run
from ironaccel.tosa import ProgramBuilder
from vulkan_fixtures import DEVICE, RNG_SEED, assert_close, clean, dev, flushed, normal, run_both

__all__ = ["clean", "dev"]  # fixtures, used by name


def _unary_program(op: str, shape: tuple[int, ...]):
    b = ProgramBuilder()
    b.output(getattr(b, op)(b.input("x0", shape, "fp32")))
    return b.build()


# ---- elementwise unary and activations -----------------------------------------------------------------
SHAPES = [(), (7,), (3, 5), (2, 3, 4), (2, 1, 3, 5)]


def _positive(rng, shape):
    return np.asarray(np.abs(normal(rng, shape, 10.0)) + np.float32(1e-3), np.float32)


UNARY = {
    # op: (inputs, max ulp, absolute tolerance)
    "abs": (lambda r, s: normal(r, s, 10), 0, 0.0),
    "negate": (lambda r, s: normal(r, s, 10), 0, 0.0),
    "floor": (lambda r, s: normal(r, s, 10), 0, 0.0),
    "ceil": (lambda r, s: normal(r, s, 10), 0, 0.0),
    "exp": (lambda r, s: normal(r, s, 30), 2, 0.0),
    "log": (_positive, 2, 0.0),
    "reciprocal": (lambda r, s: normal(r, s, 10), 1, 0.0),
    "rsqrt": (_positive, 2, 0.0),
    "sin": (lambda r, s: normal(r, s, 20), 2, 2.0**-24),
    "cos": (lambda r, s: normal(r, s, 20), 2, 2.0**-24),
    "tanh": (lambda r, s: normal(r, s, 2), 3, 0.0),
    "sigmoid": (lambda r, s: normal(r, s, 20), 3, 0.0),
    "erf": (lambda r, s: normal(r, s, 2), 5, 0.0),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary_matches_the_oracle(dev, op, shape):
    make, max_ulp, abs_tol = UNARY[op]
    x = make(np.random.default_rng(RNG_SEED), shape)
    (got,), (want,) = run_both(dev, lambda b, a: getattr(b, op)(a), [x])
    assert_close(got, want, max_ulp, abs_tol, op)


@pytest.mark.parametrize("op", list(UNARY))
def test_unary_dense_accuracy(dev, op):
    """65536 points per function over its interesting range, plus values near its edges."""
    make, max_ulp, abs_tol = UNARY[op]
    rng = np.random.default_rng(RNG_SEED + 1)
    x = make(rng, (1 << 16,))
    edges = {
        "exp": [-87.0, -88.5, 88.7, 0.3465, -0.3466, 1e-8],
        "log": [1.0, 1.0000001, 0.99999994, 1.4142135, 0.70710677, 3.4e38, 1.2e-38],
        "sin": [np.pi, 2 * np.pi, 100 * np.pi, 6433.0, 1e-5, -1e-5],
        "cos": [np.pi / 2, 3 * np.pi / 2, 1e-5, 6433.0],
        "tanh": [0.5499, 0.5501, 9.0, -9.2, 1e-5],
        "sigmoid": [-80.0, -17.0, 16.0, 0.0],
        "erf": [0.8749, 0.8751, 3.99, 4.01, -2.5, 1e-6],
        "reciprocal": [1e-38, 3e38, 1.5e-31, 7e30],
        "rsqrt": [1e-38, 3e38, 7.0e-31, 1.5e30],
    }.get(op, [])
    x = np.concatenate([x, np.asarray(edges, np.float32)])
    (got,), (want,) = run_both(dev, lambda b, a: getattr(b, op)(a), [x])
    (want_ftz,) = cpu_run(_unary_program(op, x.shape), [flushed(x)])
    assert_close(got, want, max_ulp, abs_tol, op, want_flushed=want_ftz)


SPECIAL = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 88.72, 88.73, -87.3, -104.5, 1e30, -1e-30, 1e-37],
    np.float32,
)


@pytest.mark.parametrize("op", list(UNARY))
def test_unary_special_values(dev, op):
    (got,), (want,) = run_both(dev, lambda b, a: getattr(b, op)(a), [SPECIAL])
    max_ulp, abs_tol = UNARY[op][1], UNARY[op][2]
    if op in ("sin", "cos"):  # at 1e30 TOSA's bound (proportional to |x|) allows any value in [-1, 1]
        keep = np.abs(SPECIAL) < 1e6
        got, want = got[keep], want[keep]
        assert np.all(np.abs(got) <= 1) or np.isnan(got).any()
    assert_close(got, want, max_ulp, abs_tol, op)


@pytest.mark.parametrize("mode", ["propagate", "ignore"])
def test_clamp_with_nan_modes(dev, mode):
    x = np.concatenate([normal(np.random.default_rng(RNG_SEED), (4, 9), 2).reshape(-1), SPECIAL]).reshape(4, 13)
    (got,), (want,) = run_both(dev, lambda b, a: b.clamp(a, -0.75, 1.25, nan_mode=mode), [x])
    assert_close(got, want, 0, 0.0, f"clamp {mode}")


# ---- elementwise binary, comparison, select ---------------------------------------------------------
BROADCAST = [((), ()), ((5,), (5,)), ((3, 1), (1, 4)), ((2, 3, 4), (2, 1, 4)), ((2, 1, 3, 1), (1, 4, 1, 5))]
BROADCAST += [((2, 3, 4), (2, 3, 4)), ((6, 7), (6, 7))]  # same shapes: vec4s (24 elements) or not (42)
BINARY = {"add": 0, "sub": 0, "mul": 0, "maximum": 0, "minimum": 0, "pow": 4}


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_matches_the_oracle(dev, op, shapes):
    rng = np.random.default_rng(RNG_SEED)
    a, b_ = normal(rng, shapes[0], 3), normal(rng, shapes[1], 3)
    if op == "pow":  # TOSA's POW wants a > 0; keep |b ln a| moderate
        a = np.asarray(np.abs(a) + np.float32(0.05), np.float32)
    (got,), (want,) = run_both(dev, lambda b, x, y: getattr(b, op)(x, y), [a, b_])
    assert_close(got, want, BINARY[op], 0.0, op)


def test_same_shape_binary_operators_move_vec4s_and_the_rest_elements():
    from ironaccel.backends.vulkan import plan as planning

    def spec(shape_a, shape_b):
        b = ProgramBuilder()
        b.output(b.add(b.input("x", shape_a, "fp32"), b.input("y", shape_b, "fp32")))
        (step,) = planning.build(b.build()).steps
        return step.spec[3], step.groups[0]

    assert spec((64, 1024), (64, 1024)) == (1, 256)  # 65536 elements, 4 per invocation, 64 per group
    assert spec((3, 7), (3, 7)) == (0, 1)
    assert spec((64, 1024), (1, 1024)) == (0, 1024)  # broadcasting: element by element


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_special_values(dev, op):
    a = np.repeat(SPECIAL, SPECIAL.size)
    b_ = np.tile(SPECIAL, SPECIAL.size)
    if op == "pow":  # negative bases are unpredictable in TOSA; the rest must match numpy
        keep = ~(a < 0)
        a, b_ = a[keep], b_[keep]
    (got,), (want,) = run_both(dev, lambda b, x, y: getattr(b, op)(x, y), [a, b_])
    assert_close(got, want, BINARY[op], 0.0, op)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_ignore_nan(dev, op):
    a = np.repeat(SPECIAL, SPECIAL.size)
    b_ = np.tile(SPECIAL, SPECIAL.size)
    (got,), (want,) = run_both(dev, lambda b, x, y: getattr(b, op)(x, y, nan_mode="ignore"), [a, b_])
    assert_close(got, want, 0, 0.0, op)


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("op", ["equal", "greater", "greater_equal"])
def test_comparisons(dev, op, shapes):
    rng = np.random.default_rng(RNG_SEED)
    a, b_ = np.asarray(np.round(normal(rng, shapes[0], 2))), np.asarray(np.round(normal(rng, shapes[1], 2)))
    (got,), (want,) = run_both(dev, lambda b, x, y: getattr(b, op)(x, y), [a, b_])
    assert_close(got, want, what=op)
    a, b_ = np.repeat(SPECIAL, SPECIAL.size), np.tile(SPECIAL, SPECIAL.size)
    (got,), (want,) = run_both(dev, lambda b, x, y: getattr(b, op)(x, y), [a, b_])
    assert_close(got, want, what=f"{op} special")


@pytest.mark.parametrize(
    "shapes", [((), (), ()), ((6,), (6,), (6,)), ((3, 1), (1, 4), (3, 4)), ((2, 1, 4, 1), (1, 3, 1, 5), (2, 3, 4, 5))]
)
def test_select(dev, shapes):
    rng = np.random.default_rng(RNG_SEED)
    cond = rng.random(shapes[0]) > 0.5
    cond = np.asarray(cond, np.bool_)
    a, b_ = normal(rng, shapes[1]), normal(rng, shapes[2])
    (got,), (want,) = run_both(dev, lambda b, c, x, y: b.select(c, x, y), [cond, a, b_])
    assert_close(got, want, what="select")


def test_select_on_a_computed_condition(dev):
    rng = np.random.default_rng(RNG_SEED)
    a, b_ = normal(rng, (5, 7)), normal(rng, (5, 7))
    (got,), (want,) = run_both(dev, lambda b, x, y: b.select(b.greater(x, y), x, b.negate(y)), [a, b_])
    assert_close(got, want, what="select(greater)")


# ---- data layout ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shape", "perms"),
    [((7,), (0,)), ((3, 5), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4, 5), (3, 1, 0, 2)), ((4, 1, 6), (0, 2, 1))],
)
def test_transpose(dev, shape, perms):
    x = normal(np.random.default_rng(RNG_SEED), shape)
    (got,), (want,) = run_both(dev, lambda b, a: b.transpose(a, perms), [x])
    assert_close(got, want, what="transpose")


def test_reshape_and_identity_as_views_copies_and_folded_constants(dev):
    x = normal(np.random.default_rng(RNG_SEED), (4, 6))
    c = normal(np.random.default_rng(RNG_SEED + 2), (24,))

    def build(b, a):
        t = b.reshape(b.abs(a), (2, 12))  # a view of an intermediate
        u = b.identity(b.reshape(b.const(c), (2, 12)))  # folded constant
        v = b.reshape(a, (24,))  # a copy: the input lives in the caller's binding
        return b.add(t, u), v, b.identity(b.greater(a, 0.0)), b.reshape(b.const(c), (3, 8))

    got, want = run_both(dev, build, [x])
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, 0, 0.0, "reshape/identity")


# ---- reductions and MATMUL -----------------------------------------------------------------------------
@pytest.mark.parametrize(("shape", "axis"), [((9,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 3, 4), 1), ((2, 3, 4, 5), 3)])
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max"])
def test_reductions(dev, op, shape, axis):
    x = normal(np.random.default_rng(RNG_SEED), shape, 4)
    (got,), (want,) = run_both(dev, lambda b, a: getattr(b, op)(a, axis), [x])
    if op == "reduce_max":
        assert_close(got, want, what=op)
    else:
        n = shape[axis]
        bound = n * 2.0**-23 * np.sum(np.abs(x.astype(np.float64)), axis=axis, keepdims=True)
        assert np.all(np.abs(got.astype(np.float64) - want) <= bound), np.max(np.abs(got - want))


def test_reduce_max_nan_modes(dev):
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [-1.0, -2.0, -0.5]], np.float32)
    for mode in ("propagate", "ignore"):
        (got,), (want,) = run_both(dev, lambda b, a, mode=mode: b.reduce_max(a, 1, nan_mode=mode), [x])
        assert_close(got, want, what=f"reduce_max {mode}")


def test_long_reduction(dev):
    x = normal(np.random.default_rng(RNG_SEED), (3, 4096))
    (got,), (want,) = run_both(dev, lambda b, a: b.reduce_sum(a, 1), [x])
    bound = 4096 * 2.0**-23 * np.sum(np.abs(x.astype(np.float64)), axis=1, keepdims=True)
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


@pytest.mark.parametrize(
    "shapes",
    [
        ((1, 1, 1), (1, 1, 1)),
        ((1, 16, 16), (1, 16, 16)),
        ((3, 37, 53), (3, 53, 29)),
        ((2, 5, 1), (2, 1, 7)),
        ((1, 8, 300), (1, 300, 20)),
        ((4, 33, 17), (4, 17, 65)),
    ],
)
def test_matmul(dev, shapes):
    rng = np.random.default_rng(RNG_SEED)
    a, b_ = normal(rng, shapes[0]), normal(rng, shapes[1])
    (got,), (want,) = run_both(dev, lambda b, x, y: b.matmul(x, y), [a, b_])
    c = shapes[0][2]
    bound = c * 2.0**-23 * (np.abs(a.astype(np.float64)) @ np.abs(b_.astype(np.float64))) + 1e-30
    assert got.shape == want.shape
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound), np.max(np.abs(got - want) / bound)


# ---- a program of several operators, through the public API -----------------------------------------------
def _model():
    rng = np.random.default_rng(7)
    b = ProgramBuilder()
    x = b.input("x", (2, 8, 16), "fp32")
    w = b.const(normal(rng, (2, 16, 12), 0.25))
    bias = b.const(normal(rng, (1, 1, 12)))
    h = b.clamp(b.add(b.matmul(x, w), bias), -1.0, 1.0)  # matmul -> add -> clamp
    t = b.transpose(b.reshape(h, (16, 12)), (1, 0))  # a view, then a transpose
    s = b.reduce_sum(t, 1)  # [12, 1]
    gate = b.sigmoid(b.reduce_max(h, 2))  # [2, 8, 1]
    picked = b.select(b.greater(h, 0.0), h, b.mul(h, b.const(np.full((1, 1, 1), 0.1, np.float32))))
    b.output(s, gate, picked)
    return b.build()


def test_a_multi_operator_program_end_to_end(dev):
    program = _model()
    x = normal(np.random.default_rng(3), (2, 8, 16))
    with ironaccel.open(DEVICE) as own:  # the default resident bound suffices here
        exe = own.compile(program)
        got = exe(x)
        again = exe.submit(x).wait(30)
        exe.close()
    leaks = {k: v for k, v in own.accelerator.live_resources().items() if v}
    own.accelerator.close()
    assert not leaks, leaks
    want = cpu_run(program, [x])
    for g, a, w in zip(got, again, want, strict=True):
        np.testing.assert_array_equal(g, a)
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=16 * 2.0**-23)


def test_one_executable_from_several_threads(dev):
    program = _model()
    exe = dev.compile(program)
    inputs = [normal(np.random.default_rng(k), (2, 8, 16)) for k in range(4)]
    wants = [cpu_run(program, [x]) for x in inputs]
    failures: list[str] = []

    def call(k: int) -> None:
        for _ in range(5):
            got = exe(inputs[k])
            for g, w in zip(got, wants[k], strict=True):
                if not np.allclose(g, w, rtol=2e-6, atol=16 * 2.0**-23):
                    failures.append(f"thread {k}")

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    exe.close()
    assert failures == []
