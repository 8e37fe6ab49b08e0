"""The CUDA lowerings of the data layout, scatter / gather, type conversion and image groups where the
operator suite's one case per signature says too little: what TRANSPOSE's and SLICE's launches carry, and,
run on the host (``host_kernels``) against the CPU reference bit for bit, a chain of every layout operator
on every moved type, RESCALE in every valid combination of per-channel, unsigned and double-rounding
forms with large shifts, every CAST at the ends of its range (NaN, infinities, ties, saturation, the
integers that rounding twice would get wrong), and RESIZE with fractions that resize_t rounds.
"""

from __future__ import annotations

import ctypes
import itertools
import zlib

import host_kernels
import numpy as np
import pytest

import operator_cases
from ironaccel.backends import cpu
from ironaccel.backends.cuda import plan
from ironaccel.backends.cuda.ops.common import Copy, Place, pack
from ironaccel.backends.cuda.ops.type_conversion import CASTS
from ironaccel.tosa import DType, Program, ProgramBuilder
from ironaccel.tosa.errors import ValidationError

MOVED = (DType.FP32, DType.FP16, DType.BF16, DType.INT8, DType.INT16, DType.INT32, DType.BOOL)


@pytest.fixture(scope="module", autouse=True)
def host_compiler() -> None:
    if host_kernels.compiler() is None:
        pytest.skip(host_kernels.NO_COMPILER)


def _program(inputs: list[tuple[tuple[int, ...], DType]], build) -> Program:
    b = ProgramBuilder()
    values = [b.input(f"x{k}", shape, dtype) for k, (shape, dtype) in enumerate(inputs)]
    b.output(build(b, *values))
    return b.build()


def _on_host(program: Program, arrays: list[np.ndarray]) -> np.ndarray:
    """The program's one result, its plan's steps run over host memory (launches by the host runner)."""
    p = plan.build(program)
    memory = {"arena": np.zeros(p.arena_bytes + 8, np.uint8), "const": np.zeros(p.const_bytes + 8, np.uint8)}

    def address(place: Place) -> int:
        return memory[place.buffer].ctypes.data + place.offset

    for place, array in zip(p.inputs, arrays, strict=True):
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        memory[place.buffer][place.offset : place.offset + raw.size] = raw
    for offset, array in p.constants:
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        memory["const"][offset : offset + raw.size] = raw
    for step in p.steps:
        if isinstance(step, Copy):
            ctypes.memmove(address(step.dst), address(step.src), step.dst.size)
            continue
        block = pack(step, address)
        argument = ctypes.create_string_buffer(block, len(block))
        host_kernels.load(step.kernel.source).function(step.kernel.name)(ctypes.addressof(argument))
    (tensor,) = program.main.output_tensors
    (place,) = p.outputs
    dtype = np.dtype(tensor.dtype.numpy)
    size = int(np.prod(tensor.shape)) * dtype.itemsize
    return np.frombuffer(memory[place.buffer][place.offset : place.offset + size].tobytes(), dtype).reshape(
        tensor.shape
    )


def _check(program: Program, arrays: list[np.ndarray], exact: bool = True) -> None:
    """The host run agrees with the CPU reference: bit for bit (a NaN only as a NaN), or within the float
    tolerance of a sum of products."""
    got = _on_host(program, arrays)
    (want,) = cpu.load(program).run(arrays)
    want = np.ascontiguousarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "fV":
        g, w = got.astype(np.float32), want.astype(np.float32)
        nan = np.isnan(w)
        assert (np.isnan(g) == nan).all()
        if not exact:
            np.testing.assert_allclose(g, w, rtol=2e-2 if got.itemsize == 2 else 1e-5, atol=1e-6)
            return
        got, want = got[~nan], want[~nan]
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


# ---- data layout ------------------------------------------------------------------------------------------


def test_transpose_and_slice_are_the_copy_of_bits_through_rearranged_strides():
    shape = (2, 3, 4)
    for dtype in (DType.FP16, DType.BF16, DType.INT16):
        p = plan.build(_program([(shape, dtype)], lambda b, x: b.transpose(x, [2, 0, 1])))
        (launch,) = p.launches
        assert launch.kernel.name == "ia_copy_b16" and launch.dims == (4, 6) and launch.strides == ((1, 4),)
    p = plan.build(_program([(shape, DType.FP32)], lambda b, x: b.slice(x, [1, 1, 2], [1, 2, 2])))
    (launch,) = p.launches
    assert launch.reads[0].offset == p.inputs[0].offset + 4 * (12 + 4 + 2) and launch.dims == (2, 2)


@pytest.mark.parametrize("dtype", MOVED, ids=str)
def test_every_layout_operator_in_a_chain_moves_the_reference_s_bits(dtype):
    rng = np.random.default_rng(5)
    shapes = [(2, 3, 1, 4, 5), (2, 3, 1, 2, 5), (2, 3, 1, 1, 5)]
    arrays = [operator_cases.data(rng, dtype, s) for s in shapes]
    value = True if dtype is DType.BOOL else (-2.5 if dtype.is_float else -7)

    def build(b, x, y, z):
        c = b.reverse(b.concat([x, y, z, y], axis=3), axis=0)
        c = b.pad(c, [[1, 0], [0, 2], [1, 1], [0, 0], [2, 3]], value)
        c = b.transpose(b.tile(c, [2, 1, 1, 3, 1]), [4, 2, 0, 3, 1])
        c = b.slice(c, [1, 0, 1, 2, 1], [5, 2, 4, 20, 3])
        return b.concat([b.reverse(c, axis=3), c], axis=0)

    _check(_program([(s, dtype) for s in shapes], build), arrays)


def test_gather_and_scatter_move_rows():
    rng = np.random.default_rng(9)
    values = rng.standard_normal((3, 11, 7)).astype(np.float32)
    indices = rng.integers(0, 11, (3, 9)).astype(np.int32)
    program = _program([((3, 11, 7), DType.FP32), ((3, 9), DType.INT32)], lambda b, v, i: b.gather(v, i))
    _check(program, [values, indices])
    rows = np.stack([rng.permutation(11)[:6] for _ in range(3)]).astype(np.int32)
    updates = rng.standard_normal((3, 6, 7)).astype(np.float16)
    inputs = [((3, 11, 7), DType.FP16), ((3, 6), DType.INT32), ((3, 6, 7), DType.FP16)]
    _check(_program(inputs, lambda b, v, i, u: b.scatter(v, i, u)), [values.astype(np.float16), rows, updates])


# ---- RESCALE and CAST -------------------------------------------------------------------------------------

RESCALE_IN = (DType.INT8, DType.INT16, DType.INT32, DType.INT48)
RESCALE_OUT = (DType.INT8, DType.INT16, DType.INT32)
# (per_channel, input_unsigned, output_unsigned, double_round, scale32)
FORMS = [
    (False, False, False, False, True),
    (True, False, False, False, True),
    (False, True, False, False, True),
    (True, True, False, True, True),
    (True, False, True, True, True),
    (True, False, False, False, False),
]


@pytest.mark.parametrize(("src", "dst", "form"), list(itertools.product(RESCALE_IN, RESCALE_OUT, FORMS)), ids=str)
def test_rescale_is_the_reference_bit_for_bit(src, dst, form):
    per_channel, in_unsigned, out_unsigned, double, scale32 = form
    in_unsigned &= src in (DType.INT8, DType.INT16)
    out_unsigned &= dst in (DType.INT8, DType.INT16)
    scale32 &= src is not DType.INT48
    rng = np.random.default_rng(zlib.crc32(f"{src}:{dst}:{form}".encode()))
    shape, n = (2, 3, 5), 5 if per_channel else 1
    x = rng.integers(-(2 ** (src.bits - 1)), 2 ** (src.bits - 1), shape, dtype=np.int64).astype(src.numpy)
    top = 31 if scale32 else 15
    multiplier, shift = rng.integers(1 << (top - 2), 1 << top, n), rng.integers(2, 63, n)
    in_zp = int(rng.integers(0, 256)) if in_unsigned and src is DType.INT8 else (-17 if src is DType.INT8 else 0)
    in_zp = 32768 if in_unsigned and src is DType.INT16 else in_zp
    out_zp = int(rng.integers(0, 256)) if out_unsigned and dst is DType.INT8 else (9 if dst is DType.INT8 else 0)
    out_zp = 32768 if out_unsigned and dst is DType.INT16 else out_zp

    def build(b, v):
        m = b.const(multiplier, DType.INT32 if scale32 else DType.INT16)
        s = b.const(shift, DType.INT8)
        rounding = "double_round" if double and scale32 else "single_round"
        flags = {"input_unsigned": in_unsigned, "output_unsigned": out_unsigned, "rounding_mode": rounding}
        return b.rescale(v, m, s, in_zp, out_zp, out_dtype=dst, scale32=scale32, per_channel=per_channel, **flags)

    try:
        program = _program([(shape, src)], build)
    except ValidationError as exc:  # the unsigned forms the specification refuses for this pair
        pytest.skip(str(exc))
    _check(program, [x])


def _cast_input(dtype: DType, rng: np.random.Generator) -> np.ndarray:
    if dtype is DType.BOOL:
        return rng.random(512) < 0.5
    if not dtype.is_float:
        info = np.iinfo(dtype.numpy)
        ends = [info.min, info.max, 0, -1, 1, 2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**24 + 1]
        x = rng.integers(info.min, info.max, 512, endpoint=True, dtype=np.int64)
        x[: len(ends)] = np.clip(ends, info.min, info.max)
        return x.astype(dtype.numpy)
    x = np.concatenate([rng.uniform(-7e4, 7e4, 256), np.round(rng.uniform(-300, 300, 256) * 2) / 2])
    x[:6] = [np.nan, np.inf, -np.inf, 3e9, -3e9, -0.0]
    with np.errstate(over="ignore"):
        return x.astype(np.float32).astype(dtype.numpy)


@pytest.mark.parametrize(("src", "dst"), CASTS, ids=str)
def test_cast_at_the_ends_of_its_range_is_the_reference_bit_for_bit(src, dst):
    x = _cast_input(src, np.random.default_rng(1))
    _check(_program([(x.shape, src)], lambda b, v: b.cast(v, dst)), [x])


# ---- RESIZE -----------------------------------------------------------------------------------------------

# (input shape, scale, offset, mode): up- and downscaling, negative offsets, numerators bf16 rounds
RESIZES = [
    ((2, 5, 7, 3), [3, 2, 5, 3], [0, 0], "bilinear"),
    ((1, 4, 6, 2), [2, 3, 1, 2], [-1, 0], "nearest"),
    ((1, 3, 3, 1), [300, 100, 257, 100], [-50, 17], "bilinear"),
    ((1, 3, 3, 2), [300, 100, 257, 100], [-50, 17], "nearest"),
    ((1, 6, 5, 2), [1, 2, 2, 3], [0, 1], "bilinear"),
]
RESIZE_TYPES = [
    *((DType.INT8, t) for t in (DType.INT8, DType.INT32)),
    *((DType.INT16, t) for t in (DType.INT16, DType.INT48)),
    *((t, t) for t in (DType.FP32, DType.FP16, DType.BF16)),
]


# integer NEAREST keeps the type, integer BILINEAR widens it
RESIZE_CASES = [
    (r, t)
    for r, t in itertools.product(RESIZES, RESIZE_TYPES)
    if t[0].is_float or (r[3] == "nearest") == (t[0] == t[1])
]


@pytest.mark.parametrize(("resize", "types"), RESIZE_CASES, ids=str)
def test_resize_is_the_reference_s(resize, types):
    shape, scale, offset, mode = resize
    src, dst = types
    (ih, iw), (yn, yd, xn, xd) = shape[1:3], scale
    oh, ow = ((ih - 1) * yn - offset[0]) // yd + 1, ((iw - 1) * xn - offset[1]) // xd + 1
    border = [(oh - 1) * yd - (ih - 1) * yn + offset[0], (ow - 1) * xd - (iw - 1) * xn + offset[1]]
    low, high = (-2.0, 2.0) if src.is_float else (None, None)
    x = operator_cases.data(np.random.default_rng(3), src, shape, low, high)
    program = _program([(shape, src)], lambda b, v: b.resize(v, scale, offset, border, mode=mode, out_dtype=str(dst)))
    _check(program, [x], exact=mode == "nearest" or not src.is_float)
