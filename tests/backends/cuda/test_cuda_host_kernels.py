"""The host runner of the CUDA kernels (host_kernels.py) and the stand-in driver's checks around a launch
(cuda_driver_fake.py): the shim's intrinsics mean what CUDA's do (rounding, saturation, NaN, counts of
bits), a source the host cannot build fails with the compiler's message, and the stand-in refuses a launch
that reads outside its operands' allocations or writes outside its result.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is installed with the [cuda] extra")

import host_kernels

if host_kernels.compiler() is None:
    pytest.skip(host_kernels.NO_COMPILER, allow_module_level=True)

from cuda.bindings import driver as real
from cuda_driver_fake import ARGS, FakeDriver, source_image

from ironaccel.backends.cuda.prelude import MAX_OPERANDS, MAX_RANK, PRELUDE, SCALARS

INT_MAX, INT_MIN = 2**31 - 1, -(2**31)


def _source(name: str, body: str) -> str:
    return (
        PRELUDE
        + f'extern "C" __global__ void {name}(const __grid_constant__ IaArgs a) {{\n'
        + "    const long long step = (long long)gridDim.x * blockDim.x;\n"
        + "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.count; i += step) {\n"
        + f"        {body}\n"
        + "    }\n}\n"
    )


def _block(ins: list[int], out: int, count: int, strides: list[int] | None = None) -> np.ndarray:
    """A packed one-dimensional argument block: ``count`` elements, each operand at ``strides`` (1)."""
    per_operand = strides or [1] * len(ins)
    stride_words = []
    for k in range(MAX_OPERANDS):
        stride_words += [per_operand[k] if k < len(ins) else 0] + [0] * (MAX_RANK - 1)
    words = ARGS.pack(
        *ins,
        *[0] * (MAX_OPERANDS - len(ins)),
        out,
        count,
        1,
        count,
        *[1] * (MAX_RANK - 1),
        *stride_words,
        *[0] * SCALARS,
    )
    return np.frombuffer(words, dtype=np.uint8).copy()


def _map(expression: str, x: np.ndarray, result: type, storage: str, out_storage: str) -> np.ndarray:
    """``expression`` of ``x`` (C, over the element ``v``) computed by a host kernel, one per element."""
    body = f"const {storage} v = ((const {storage}*)a.in[0])[i]; (({out_storage}*)a.out)[i] = {expression};"
    module = host_kernels.load(_source("ia_probe", body))
    out = np.zeros(x.shape, result)
    block = _block([x.ctypes.data], out.ctypes.data, x.size)
    module.function("ia_probe")(block.ctypes.data)
    return out


FLOATS = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3e9, -3e9, np.nan, np.inf, -np.inf, 2147483520.0, -0.0], np.float32)


def test_float_to_int_conversions_round_as_named_saturate_and_map_nan_to_zero():
    big = [INT_MAX, INT_MIN, 0, INT_MAX, INT_MIN, 2147483520, 0]
    rn = _map("__float2int_rn(v)", FLOATS, np.int32, "float", "int")
    assert rn.tolist() == [0, 2, 2, 0, -2, *big]
    rz = _map("__float2int_rz(v)", FLOATS, np.int32, "float", "int")
    assert rz.tolist() == [0, 1, 2, 0, -2, *big]
    rd = _map("__float2int_rd(v)", FLOATS, np.int32, "float", "int")
    assert rd.tolist()[:5] == [0, 1, 2, -1, -3]
    unsigned = _map("__float2uint_rn(v)", FLOATS, np.uint32, "float", "unsigned")
    assert unsigned.tolist() == [0, 2, 2, 0, 0, 3000000000, 0, 0, 2**32 - 1, 0, 2147483520, 0]


def test_integer_to_float_rounds_to_nearest_even():
    x = np.array([2**24 + 1, 2**24 + 3, -(2**53) - 1, 2**62 + 2**38, 7], np.int64)
    got = _map("__ll2float_rn(v)", x, np.float32, "long long", "float")
    assert got.tolist() == x.astype(np.float32).tolist()
    small = np.array([2**24 + 1, -(2**24) - 3, 5], np.int32)
    assert _map("__int2float_rn(v)", small, np.float32, "int", "float").tolist() == small.astype(np.float32).tolist()


def test_bit_counts_bit_casts_and_the_functions_cuda_adds():
    x = np.array([0, 1, -1, 0x00010000, 5], np.int32)
    assert _map("__clz(v)", x, np.int32, "int", "int").tolist() == [32, 31, 0, 15, 29]
    assert _map("__popc((unsigned)v)", x, np.int32, "int", "int").tolist() == [0, 1, 32, 1, 2]
    assert _map("__clzll((long long)v)", x, np.int32, "int", "int").tolist() == [64, 63, 0, 47, 61]
    f = np.array([4.0, 0.25, -1.5, np.nan], np.float32)
    assert _map("ia_bits(v)", f, np.uint32, "float", "unsigned").tolist() == f.view(np.uint32).tolist()
    assert _map("rsqrtf(v)", f[:2], np.float32, "float", "float").tolist() == [0.5, 2.0]
    # CUDA's max and min of floats are fmaxf and fminf: a NaN operand is ignored.
    assert _map("max(v, 1.0f)", f, np.float32, "float", "float").tolist() == [4.0, 1.0, 1.0, 1.0]
    assert _map("min(v, 1.0f)", f, np.float32, "float", "float").tolist() == [1.0, 0.25, -1.5, 1.0]


def test_a_source_the_host_cannot_build_fails_with_the_compilers_message():
    # The GPU's approximate exponential has an error the host cannot reproduce: the shim leaves it out.
    source = _source("ia_fast_exp", "((float*)a.out)[i] = __expf(((const float*)a.in[0])[i]);")
    assert host_kernels.build([source]) and source in host_kernels.build([source])
    with pytest.raises(host_kernels.HostCompileError, match="__expf"):
        host_kernels.load(source)


# ---- the stand-in's checks around a launch -------------------------------------------------------------


@pytest.fixture
def driver():
    fake = FakeDriver([("Stand-in Device", bytes(16))])
    (_, ctx) = fake.cuDevicePrimaryCtxRetain(real.CUdevice(0))
    fake.cuCtxSetCurrent(ctx)
    yield fake
    fake.cuDevicePrimaryCtxRelease(real.CUdevice(0))


def _launch(fake: FakeDriver, source: str, name: str, block: np.ndarray) -> tuple:
    image = np.frombuffer(source_image(source, "sm_90"), np.uint8)
    _, module = fake.cuModuleLoadData(image.ctypes.data)
    status, function = fake.cuModuleGetFunction(module, name.encode())
    assert status == real.CUresult.CUDA_SUCCESS
    _, stream = fake.cuStreamCreate(0)
    params = np.array([block.ctypes.data], np.uint64)
    try:
        return fake.cuLaunchKernel(function, 1, 1, 1, 256, 1, 1, 0, stream, params.ctypes.data, 0)
    finally:
        fake.cuStreamDestroy(stream)
        fake.cuModuleUnload(module)


def _device(fake: FakeDriver, values: np.ndarray) -> int:
    _, address = fake.cuMemAlloc(values.nbytes)
    ctypes.memmove(int(address), values.ctypes.data, values.nbytes)
    return int(address)


COPY = "((float*)a.out)[i] = ((const float*)a.in[0])[ia_offset(a, 0, i)];"


def test_a_launch_runs_the_kernel_and_a_missing_entry_point_is_not_found(driver):
    x, out = _device(driver, np.arange(4, dtype=np.float32)), _device(driver, np.zeros(4, np.float32))
    assert _launch(driver, _source("ia_copy", COPY), "ia_copy", _block([x], out, 4)) == (real.CUresult.CUDA_SUCCESS,)
    assert np.frombuffer(ctypes.string_at(out, 16), np.float32).tolist() == [0, 1, 2, 3]
    image = np.frombuffer(source_image(_source("ia_copy", COPY), "sm_90"), np.uint8)
    _, module = driver.cuModuleLoadData(image.ctypes.data)
    assert driver.cuModuleGetFunction(module, b"ia_other")[0] == real.CUresult.CUDA_ERROR_NOT_FOUND
    driver.cuModuleUnload(module)
    for address in (x, out):
        driver.cuMemFree(address)


def test_a_launch_reading_past_its_operand_is_refused(driver):
    x, out = _device(driver, np.arange(4, dtype=np.float32)), _device(driver, np.zeros(8, np.float32))
    with pytest.raises(AssertionError, match="outside every live"):
        _launch(driver, _source("ia_copy", COPY), "ia_copy", _block([x], out, 8))
    for address in (x, out):
        driver.cuMemFree(address)


@pytest.mark.parametrize(
    "body",
    [
        COPY + " ((float*)a.in[0])[i] = 0.0f;",  # into its operand
        "((float*)a.out)[i - 1] = 1.0f;",  # before its result
    ],
)
def test_a_launch_writing_outside_its_result_is_refused(driver, body):
    values = np.arange(16, dtype=np.float32)
    x, out = _device(driver, values), _device(driver, values)
    with pytest.raises(AssertionError, match="wrote"):
        _launch(driver, _source("ia_stray", body), "ia_stray", _block([x], out + 16, 2))
    for address in (x, out):
        driver.cuMemFree(address)
