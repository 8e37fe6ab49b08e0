"""NVFP4 projections on the CUDA backend (ADR 0040): every form and activation through the backend on the
stand-in driver with its kernels compiled for the host (cuda_driver_fake.py, host_kernels.py; products by
cuda_blas_fake.py) against the CPU backend's oracle; both paths' decode of every (byte, scale code) pair
bit for bit; non-finite tensor scales; the plan's places and path choice; the mixture of experts from
upstream's bytes (planes on and off the GEMV's widest alignment) and its plan; every kernel kind compiled
by NVRTC for sm_80 and sm_90; and, marked gpu, every form on a real device against the CPU backend."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is installed with the [cuda] extra")

from ironaccel import nvfp4
from ironaccel.backends.cpu.nvfp4 import ProjectionRunner
from ironaccel.backends.cuda import nvfp4 as planning
from ironaccel.backends.cuda.ops.common import Gemm, Launch, Place
from ironaccel.backends.cuda.plan import ALIGNMENT
from ironaccel.nvfp4 import codec
from ironaccel.nvfp4.quantize import E4M3_DTYPE

BIG = 1 << 34
TENSOR_SCALE = np.float32(0.7310586)  # not a power of two: the decode's one rounding matters


@pytest.fixture(scope="module")
def dev():
    """The CUDA backend opened on the stand-in driver, kernels run on the host."""
    from cuda_driver_fake import stand_in

    with stand_in() as (device, _):
        yield device


def _case(form: str, m: int, n: int, k: int, count: int, activation: str, seed: int):
    rng = np.random.default_rng(seed)
    if form == "single":
        projection = nvfp4.Projection(m=m, n=n, k=k, activation=activation)
        qs = [nvfp4.quantize(rng.standard_normal((n, k)).astype(np.float32))]
        x = rng.standard_normal((m, k)).astype(np.float32)
    elif form == "batched":
        projection = nvfp4.BatchedProjection(batch=count, n=n, k=k, activation=activation)
        qs = [nvfp4.quantize(rng.standard_normal((count, n, k)).astype(np.float32))]
        x = rng.standard_normal((count, k)).astype(np.float32)
    else:
        projection = nvfp4.ExpertProjection(experts=count, m=m, n=n, k=k, activation=activation)
        qs = [nvfp4.quantize(rng.standard_normal((n, k)).astype(np.float32) * (e + 1)) for e in range(count)]
        x = rng.standard_normal((count, m, k)).astype(np.float32)
    return projection, x, [a for q in qs for a in q.operands], qs


def _check(device, form: str, m: int, n: int, k: int, count: int, activation: str, seed: int = 0) -> None:
    projection, x, operands, qs = _case(form, m, n, k, count, activation, seed)
    exe = device.compile(projection, resident_bytes=BIG)
    try:
        (y,) = exe(x, *operands)
    finally:
        exe.close()
    (want,) = ProjectionRunner(projection).run([x, *operands])
    # Summation orders differ, so the error scales with each dot product's terms, sum |x| |w|.
    w = [np.abs(nvfp4.dequantize(q)) for q in qs]
    if form == "single":
        terms = np.abs(x) @ w[0].T
    elif form == "batched":
        terms = np.einsum("bk,bnk->bn", np.abs(x), w[0])
    else:
        terms = np.stack([np.abs(x[e]) @ w[e].T for e in range(count)])
    bound = 1e-5 * np.abs(want) + 1e-6 * terms.reshape(want.shape)
    assert y.dtype == np.float32 and y.shape == want.shape
    assert np.all(np.abs(y - want) <= bound), float(np.max(np.abs(y - want) - bound))


ACTIVATIONS = list(nvfp4.ACTIVATIONS)
# (m, n, k): one row of x, a partial pass of rows, k an odd multiple of 16 (8-byte chunks), a short team,
# several passes of GEMV_X_ROWS, and the decode + product path from GEMM_FROM_M rows.
SHAPES = [(1, 33, 256), (3, 5, 48), (9, 17, 16), (planning.GEMM_FROM_M, 9, 96)]


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize(("m", "n", "k"), SHAPES, ids=[f"m{m}-n{n}-k{k}" for m, n, k in SHAPES])
def test_single_projection_matches_the_cpu_backend(dev, activation, m, n, k):
    _check(dev, "single", m, n, k, 1, activation)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize(("n", "k"), [(20, 64), (7, 48)])
def test_batched_projection_matches_the_cpu_backend(dev, activation, n, k):
    _check(dev, "batched", 1, n, k, 3, activation)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("m", [2, planning.GEMM_FROM_M], ids=["gemv", "gemm"])
def test_expert_projection_matches_the_cpu_backend(dev, activation, m):
    _check(dev, "experts", m, 24, 80, 3, activation)


def _every_pair() -> tuple[np.ndarray, np.ndarray]:
    """Weights (65536, 16) whose row r is packed byte r % 256 eight times under scale code r // 256."""
    rows = np.arange(65536)
    packed = np.repeat((rows % 256).astype(np.uint8)[:, None], 8, axis=1)
    scales = (rows // 256).astype(np.uint8)[:, None].view(E4M3_DTYPE)
    return packed, scales


@pytest.mark.parametrize("m", [16, planning.GEMM_FROM_M], ids=["gemv", "gemm"])
def test_every_byte_under_every_scale_decodes_exactly(dev, m):
    # x holds rows of the 16 x 16 identity, so y[i, r] = w_hat[r, i % 16]: a one-hot dot product adds zeros.
    packed, scales = _every_pair()
    want = codec.decode(packed, scales.view(np.uint8), TENSOR_SCALE)
    x = np.eye(16, dtype=np.float32)[np.arange(m) % 16]
    exe = dev.compile(nvfp4.Projection(m=m, n=65536, k=16), resident_bytes=BIG)
    try:
        (y,) = exe(x, packed, scales, np.array(TENSOR_SCALE))
    finally:
        exe.close()
    np.testing.assert_array_equal(y[:16].T, want)  # equal values (the zero's sign aside), NaN where NaN


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the stand-in product's NaNs
@pytest.mark.parametrize("tensor_scale", [np.inf, -np.inf, np.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("m", [2, planning.GEMM_FROM_M], ids=["gemv", "gemm"])
def test_non_finite_tensor_scale_decodes_as_defined(dev, tensor_scale, m):
    rng = np.random.default_rng(4)
    q = nvfp4.quantize((rng.standard_normal((32, 64)) * 0.1).astype(np.float32))
    ts = np.array(tensor_scale, np.float32)
    x = rng.standard_normal((m, 64)).astype(np.float32)
    exe = dev.compile(nvfp4.Projection(m=m, n=32, k=64), resident_bytes=BIG)
    try:
        (y,) = exe(x, q.packed, q.scales, ts)
    finally:
        exe.close()
    with np.errstate(invalid="ignore"):  # 0 * inf: the NaNs the definition gives
        want = x @ codec.decode(q.packed, q.scales.view(np.uint8), ts).T
    np.testing.assert_array_equal(y, want)
    assert np.isnan(y).any()


def _kernels(plan) -> list[str]:
    return [s.kernel.name if isinstance(s, Launch) else "gemm" for s in plan.steps]


def test_plan_places_operands_in_slot_order_in_one_arena():
    projection = nvfp4.ExpertProjection(experts=2, m=3, n=24, k=48)
    plan = planning.build(projection)
    places = (*plan.inputs, *plan.outputs)
    assert [p.size for p in places] == [o.nbytes for o in (*projection.inputs, *projection.outputs)]
    assert all(p.buffer == "arena" and p.offset % ALIGNMENT == 0 for p in places)
    assert [p.offset for p in places] == sorted(p.offset for p in places)
    assert all(a.offset + a.size <= b.offset for a, b in itertools.pairwise(places))
    assert plan.arena_bytes >= places[-1].offset + places[-1].size and plan.const_bytes == 0


def test_plan_takes_the_gemv_for_decode_shapes_and_the_product_for_larger_m():
    m = planning.GEMM_FROM_M
    gemv = planning.build(nvfp4.Projection(m=m - 1, n=64, k=64, activation="silu"))
    assert len(gemv.steps) == 1 and gemv.steps[0].kernel.name.startswith("ia_nvfp4_gemv_v4_")
    assert gemv.scratch_bytes == 0 and not gemv.gemms
    assert planning.build(nvfp4.Projection(m=1, n=64, k=48)).steps[0].kernel.name.startswith("ia_nvfp4_gemv_v2_")
    assert _kernels(planning.build(nvfp4.Projection(m=m, n=64, k=64))) == ["ia_nvfp4_decode", "gemm"]
    silu = planning.build(nvfp4.Projection(m=m, n=64, k=64, activation="silu"))
    assert _kernels(silu) == ["ia_nvfp4_decode", "gemm", "ia_nvfp4_activate_silu"]
    assert silu.scratch_bytes >= 4 * 64 * 64
    experts = planning.build(nvfp4.ExpertProjection(experts=3, m=m, n=64, k=64))
    assert _kernels(experts) == ["ia_nvfp4_decode"] * 3 + ["gemm"]
    (gemm,) = experts.gemms  # the experts are the product's batches, the decoded weights taken as [n, k]
    assert isinstance(gemm, Gemm) and (gemm.batch, gemm.m, gemm.n, gemm.k, gemm.b_transposed) == (3, m, 64, 64, True)
    small = planning.build(nvfp4.ExpertProjection(experts=3, m=2, n=64, k=64))
    assert [s.kernel.name.startswith("ia_nvfp4_gemv") for s in small.steps] == [True] * 3
    batched = planning.build(nvfp4.BatchedProjection(batch=100, n=64, k=64))
    assert len(batched.steps) == 1 and batched.steps[0].scalars[6] == 100


def test_plan_decodes_in_registers_when_the_decoded_weights_pass_the_bound():
    projection = nvfp4.Projection(m=planning.GEMM_FROM_M, n=1024, k=1024)
    assert planning.build(projection, 64 << 20).gemms
    assert not planning.build(projection, 1 << 20).gemms


def test_gemv_launch_carries_each_tensor_scale_in_a_scalar_word():
    plan = planning.build(nvfp4.ExpertProjection(experts=2, m=1, n=16, k=32))
    for e, step in enumerate(plan.steps):
        assert isinstance(step, planning.WideLaunch)
        assert step.scalar_places == ((planning.TENSOR_SCALE_WORD, plan.inputs[3 + 3 * e]),)
        assert step.reads == (plan.inputs[0], *plan.inputs[1 + 3 * e : 3 + 3 * e])
        assert step.scalars[4:6] == (e * 32, e * 16)  # x and y offsets of the expert, in elements


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_kernel_kind_compiles_with_nvrtc(arch):
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC is installed with the [cuda] extra")
    from ironaccel.backends.cuda import kernels

    found = planning.kernels()
    assert len({k.name for k in found}) == len(found)
    for kernel in found:
        assert kernels.compile_source(kernel.source, arch)


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["single", "batched", "experts"])
def test_projections_on_a_device_match_the_cpu_backend(form):
    from ironaccel.backends.cuda.registration import why_not

    why = why_not()
    if why is not None:
        pytest.skip(f"no CUDA device opens here: {why}")
    import ironaccel

    device = ironaccel.open("cuda")
    try:
        for m, n, k, activation in [(1, 4096, 4096, "silu"), (5, 100, 48, "none"), (96, 300, 512, "sigmoid")]:
            m = 1 if form == "batched" else m
            _check(device, form, m, n, k, 3, activation, seed=m)
    finally:
        device.close()
        device.accelerator.close()


# ---- the mixture-of-experts form (ADR 0042) ------------------------------------------------------------


def _moe_case(experts: int, width: int, inner: int, shift: int, seed: int = 0):
    """A mixture of ``experts`` experts as upstream lays them out, each plane moved ``shift`` bytes into its
    expert's binding (upstream's rule is 4 bytes; the GEMV's widest loads want 16), with x, the bindings
    and both tensor scales in upstream's argument order, and each expert's weights as floats."""
    rng = np.random.default_rng(seed)
    ups = [nvfp4.quantize((rng.standard_normal((inner, width)) * 0.1).astype(np.float32)) for _ in range(experts)]
    downs = [nvfp4.quantize((rng.standard_normal((width, inner)) * 0.1).astype(np.float32)) for _ in range(experts)]
    layout = nvfp4.MoEProjection.packed(experts, width, inner)
    blobs = []
    for up, down in zip(ups, downs, strict=True):
        blob = np.full(layout.expert_bytes + shift, 0xEE, np.uint8)  # bytes no plane covers are never read
        blob[shift:] = nvfp4.pack_expert(up, down)
        blobs.append(blob)
    offsets = tuple(tuple(o + shift for o in four) for four in layout.offsets)
    moe = nvfp4.MoEProjection(experts, width, inner, layout.expert_bytes + shift, offsets)  # type: ignore[arg-type]
    x = rng.standard_normal((experts, width)).astype(np.float32)
    scales = [np.array([q.tensor_scale for q in qs], np.float32) for qs in (ups, downs)]
    weights = [(nvfp4.dequantize(u).astype(np.float64), nvfp4.dequantize(d)) for u, d in zip(ups, downs, strict=True)]
    return moe, [x, *blobs, *scales], weights


def _moe_bound(want: np.ndarray, x: np.ndarray, weights) -> np.ndarray:
    """1e-5 of |y| plus what the summation orders may move each result by: the up projection's u within
    1e-6 of its terms t = |x| |up| moves h = relu(u)^2 by at most 2 |u| 1e-6 t, and the down projection
    sums |h| |down| within its own 1e-6."""
    terms = []
    for e, (up, down) in enumerate(weights):
        u, t = x[e] @ up.T, np.abs(x[e]) @ np.abs(up).T
        terms.append((np.maximum(u, 0) ** 2 + 2 * np.abs(u) * t) @ np.abs(down).T)
    return 1e-5 * np.abs(want) + 1e-6 * np.stack(terms)


MOE_CASES = [(1, 16, 32, 0), (3, 64, 48, 4), (4, 32, 96, 8), (2, 48, 16, 12), (2, 256, 64, 0)]


@pytest.mark.parametrize(
    ("experts", "width", "inner", "shift"), MOE_CASES, ids=[f"e{e}-w{w}-i{i}-s{s}" for e, w, i, s in MOE_CASES]
)
def test_moe_matches_the_cpu_backend(dev, experts, width, inner, shift):
    moe, inputs, weights = _moe_case(experts, width, inner, shift, seed=experts + width + shift)
    exe = dev.compile(moe.to_bytes(), resident_bytes=BIG)  # upstream's bytes, as they are
    try:
        (y,) = exe(*inputs)
        (queued,) = exe.submit(*inputs).wait()
    finally:
        exe.close()
    (want,) = ProjectionRunner(moe).run(inputs)
    assert y.dtype == np.float32 and y.shape == want.shape == (experts, width)
    bound = _moe_bound(want, inputs[0], weights)
    assert np.all(np.abs(y - want) <= bound), float(np.max(np.abs(y - want) - bound))
    assert np.array_equal(queued, y)


@pytest.mark.parametrize("shift", [0, 4, 8, 12])
def test_moe_plan_reads_each_plane_in_place_with_the_loads_its_offset_allows(shift):
    experts, width, inner = 3, 64, 32
    moe, _, _ = _moe_case(experts, width, inner, shift)
    plan = planning.build(moe)
    x, blobs, (up_ts, down_ts), (y,) = plan.inputs[0], plan.inputs[1:-2], plan.inputs[-2:], plan.outputs
    assert len(plan.steps) == 2 * experts and not plan.gemms  # no copy: every plane is read where it lies
    assert all(isinstance(s, planning.WideLaunch) for s in plan.steps)
    assert plan.scratch_bytes >= 4 * experts * inner
    (h,) = {s.write for s in plan.steps[:experts]}
    assert h.buffer == "scratch" and h.size == 4 * experts * inner
    assert all(s.write == y and s.reads[0] == h for s in plan.steps[experts:])
    vec = {0: 4, 4: 1, 8: 2, 12: 1}[shift]  # the widest chunk (16, 8 or 4 bytes) the plane's offset keeps aligned
    for half, activation, tensor in ((0, "squared_relu", up_ts), (1, "none", down_ts)):
        n, k = (inner, width) if half == 0 else (width, inner)
        for e, step in enumerate(plan.steps[half * experts : (half + 1) * experts]):
            offsets, sizes = moe.offsets[e][2 * half : 2 * half + 2], moe.plane_bytes[2 * half : 2 * half + 2]
            planes = tuple((blobs[e].buffer, blobs[e].offset + o, s) for o, s in zip(offsets, sizes, strict=True))
            assert tuple((p.buffer, p.offset, p.size) for p in step.reads[1:]) == planes
            assert step.kernel.name.startswith(f"ia_nvfp4_gemv_v{vec}_") and step.kernel.name.endswith(activation)
            assert step.scalar_places == ((planning.TENSOR_SCALE_WORD, Place("arena", tensor.offset + 4 * e, 4)),)
            assert step.scalars[1:] == (1, n, k, e * k, e * n, 1)
    assert plan.steps[0].reads[0] == x


def test_cuda_accelerator_lists_every_nvfp4_form():
    from ironaccel.backends.cuda.accelerator import CudaAccelerator

    assert CudaAccelerator.nvfp4_forms == frozenset(nvfp4.Form)


@pytest.mark.gpu
def test_moe_on_a_device_matches_the_cpu_backend():
    from ironaccel.backends.cuda.registration import why_not

    why = why_not()
    if why is not None:
        pytest.skip(f"no CUDA device opens here: {why}")
    import ironaccel

    device = ironaccel.open("cuda")
    try:
        for experts, width, inner, shift in [(6, 2048, 1024, 0), (6, 1024, 2048, 4), (2, 48, 16, 8)]:
            moe, inputs, weights = _moe_case(experts, width, inner, shift, seed=inner + shift)
            exe = device.compile(moe.to_bytes())
            try:
                (y,) = exe(*inputs)
            finally:
                exe.close()
            (want,) = ProjectionRunner(moe).run(inputs)
            bound = _moe_bound(want, inputs[0], weights)
            assert np.all(np.abs(y - want) <= bound), float(np.max(np.abs(y - want) - bound))
    finally:
        device.close()
        device.accelerator.close()
