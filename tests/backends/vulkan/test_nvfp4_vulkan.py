"""NVFP4 projections on Vulkan beyond the shared form/activation tests of test_nvfp4_projection.py: the
shader's decode of every (byte, scale code) pair bit for bit on both kernel paths, non-finite tensor
scales, and the plan's choice of kernels under the device's limits."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ironaccel import nvfp4
from ironaccel.backends.cpu.nvfp4 import ProjectionRunner
from ironaccel.backends.vulkan import nvfp4 as planning
from ironaccel.backends.vulkan.ops.common import Dispatch
from ironaccel.backends.vulkan.ops.matmul import COOP_FP16
from ironaccel.core.errors import ResourceLimit
from ironaccel.nvfp4 import codec
from ironaccel.nvfp4.quantize import E4M3_DTYPE
from vulkan_fixtures import BIG, clean, dev

__all__ = ["clean", "dev"]  # fixtures, used by name

TENSOR_SCALE = np.float32(0.7310586)  # not a power of two: the decode's one rounding matters


def _every_pair() -> tuple[np.ndarray, np.ndarray]:
    """Weights (65536, 16) whose row r is packed byte r % 256 eight times under scale code r // 256: both
    nibbles of every byte under every E4M3 code, NaN codes included."""
    rows = np.arange(65536)
    packed = np.repeat((rows % 256).astype(np.uint8)[:, None], 8, axis=1)
    scales = (rows // 256).astype(np.uint8)[:, None].view(E4M3_DTYPE)
    return packed, scales


def _shader_decode(dev, rows_of_x: range, tiled_from_m: int | None = None) -> np.ndarray:
    """The decoded weights' columns ``rows_of_x`` as the device computes them: x is those rows of the
    16 x 16 identity, so y[i, r] = w_hat[r, i] (a one-hot dot product adds only zeros to the weight)."""
    packed, scales = _every_pair()
    x = np.eye(16, dtype=np.float32)[list(rows_of_x)]
    with pytest.MonkeyPatch.context() as patch:
        if tiled_from_m is not None:  # the path is chosen at load
            patch.setattr(planning, "TILED_FROM_M", tiled_from_m)
        exe = dev.compile(nvfp4.Projection(m=len(x), n=65536, k=16), resident_bytes=BIG)
    try:
        (y,) = exe(x, packed, scales, np.array(TENSOR_SCALE))
    finally:
        exe.close()
    return y.T


def test_gemv_path_decodes_every_byte_under_every_scale_exactly(dev):
    packed, scales = _every_pair()
    want = codec.decode(packed, scales.view(np.uint8), TENSOR_SCALE)
    got = np.concatenate([_shader_decode(dev, range(0, 8)), _shader_decode(dev, range(8, 16))], axis=1)
    nan_rows = np.isin(np.arange(65536) // 256, (0x7F, 0xFF))
    assert np.isnan(want[nan_rows]).all() and not np.isnan(want[~nan_rows]).any()
    np.testing.assert_array_equal(got, want)  # equal values (the zero's sign aside), NaN where NaN


def test_decode_then_matmul_path_decodes_every_byte_under_every_scale_exactly(dev):
    packed, scales = _every_pair()
    want = codec.decode(packed, scales.view(np.uint8), TENSOR_SCALE)
    np.testing.assert_array_equal(_shader_decode(dev, range(16), tiled_from_m=16), want)


@pytest.mark.parametrize("tensor_scale", [np.inf, -np.inf, np.nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("m", [2, 64], ids=["gemv", "tiled"])
def test_non_finite_tensor_scale_decodes_as_defined(dev, tensor_scale, m):
    # (e2m1 * scale) * ts element by element: zero weights become NaN under an infinite tensor scale.
    rng = np.random.default_rng(4)
    q = nvfp4.quantize((rng.standard_normal((32, 64)) * 0.1).astype(np.float32))
    ts = np.array(tensor_scale, np.float32)
    x = rng.standard_normal((m, 64)).astype(np.float32)
    exe = dev.compile(nvfp4.Projection(m=m, n=32, k=64), resident_bytes=BIG)
    (y,) = exe(x, q.packed, q.scales, ts)
    exe.close()
    with np.errstate(invalid="ignore"):  # 0 * inf: the NaNs the definition gives
        want = x @ codec.decode(q.packed, q.scales.view(np.uint8), ts).T
    np.testing.assert_array_equal(y, want)
    assert np.isnan(y).any()


@pytest.mark.parametrize("activation", ["none", "silu"])
def test_expert_form_on_the_tiled_path(dev, activation):
    rng = np.random.default_rng(9)
    experts, m, n, k = 3, 64, 24, 48
    qs = [nvfp4.quantize((rng.standard_normal((n, k)) * (e + 1)).astype(np.float32)) for e in range(experts)]
    x = rng.standard_normal((experts, m, k)).astype(np.float32)
    exe = dev.compile(nvfp4.ExpertProjection(experts=experts, m=m, n=n, k=k, activation=activation))
    (y,) = exe(x, *(a for q in qs for a in q.operands))
    exe.close()
    for e, q in enumerate(qs):
        v = x[e].astype(np.float64) @ nvfp4.dequantize(q).astype(np.float64).T
        want = v / (1 + np.exp(-v)) if activation == "silu" else v
        np.testing.assert_allclose(y[e], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def _shaders(plan) -> list[str]:
    return [s.shader for s in plan.steps if isinstance(s, Dispatch)]


def test_plan_takes_the_gemv_kernel_for_decode_shapes_and_matmul_for_larger_m():
    assert _shaders(planning.build(nvfp4.Projection(m=8, n=64, k=64))) == ["nvfp4_gemv"]
    assert planning.TILED_FROM_M <= 64
    assert _shaders(planning.build(nvfp4.Projection(m=64, n=64, k=64))) == ["nvfp4_decode", "matmul"]
    silu = planning.build(nvfp4.Projection(m=64, n=64, k=64, activation="silu"))
    assert _shaders(silu) == ["nvfp4_decode", "matmul", "nvfp4_activate"]
    experts = planning.build(nvfp4.ExpertProjection(experts=3, m=64, n=64, k=64))
    assert _shaders(experts) == ["nvfp4_decode"] * 3 + ["matmul"]  # the experts are MATMUL's batches
    assert _shaders(planning.build(nvfp4.ExpertProjection(experts=3, m=2, n=64, k=64))) == ["nvfp4_gemv"] * 3


def test_plan_multiplies_on_cooperative_matrices_where_the_device_has_fp16_ones():
    tiles = frozenset({COOP_FP16})
    plan = planning.build(nvfp4.ExpertProjection(experts=2, m=64, n=64, k=64, activation="silu"), matrix_tiles=tiles)
    assert _shaders(plan) == ["nvfp4_decode16"] * 2 + ["nvfp4_split", "matmul_coop"] + ["nvfp4_finish"] * 2
    coop = next(s for s in plan.steps if s.shader == "matmul_coop")
    assert struct.unpack("<4I", coop.push)[1:] == (64, 128, 64)  # h, c = 2k ([x_hi | x_lo]), w
    assert coop.groups[2] == 2  # the experts are the MATMUL's batches
    # Long k: one MATMUL per slice, the slices summed in fp32 by nvfp4_finish.
    assert planning.coop_slice(4096) == 1024 and planning.coop_slice(2032) == 16 and planning.coop_slice(96) == 96
    sliced = planning.build(nvfp4.Projection(m=64, n=64, k=4096), matrix_tiles=tiles)
    assert _shaders(sliced) == ["nvfp4_decode16", "nvfp4_split"] + ["matmul_coop"] * 4 + ["nvfp4_finish"]
    assert struct.unpack("<7I", sliced.steps[-1].push)[5] == 4  # slices
    many = planning.build(nvfp4.Projection(m=64, n=64, k=16 * 127), matrix_tiles=tiles)  # 127 slices of 16
    assert _shaders(many)[0] == "nvfp4_decode"
    # n not a multiple of 8 (the kernel's requirement): the fp32 path.
    odd = planning.build(nvfp4.Projection(m=64, n=60, k=64), matrix_tiles=tiles)
    assert _shaders(odd) == ["nvfp4_decode", "matmul"]
    # From COOP_FROM_M rows on cooperative matrices; the fp32 path only from TILED_FROM_M.
    m = planning.COOP_FROM_M
    assert m < planning.TILED_FROM_M
    assert _shaders(planning.build(nvfp4.Projection(m=m, n=64, k=64), matrix_tiles=tiles))[0] == "nvfp4_decode16"
    assert _shaders(planning.build(nvfp4.Projection(m=m, n=64, k=64))) == ["nvfp4_gemv"]


def test_plan_decodes_in_registers_when_the_decoded_weights_do_not_fit():
    projection = nvfp4.Projection(m=64, n=1024, k=1024)  # 4 MiB decoded; operands and result 1 MiB
    assert _shaders(planning.build(projection, max_buffer_bytes=8 << 20))[0] == "nvfp4_decode"
    assert _shaders(planning.build(projection, max_buffer_bytes=2 << 20)) == ["nvfp4_gemv"] * 1
    assert _shaders(planning.build(projection, max_binding_bytes=1 << 20)) == ["nvfp4_gemv"]


def test_plan_refuses_operands_past_a_binding_naming_them():
    with pytest.raises(ResourceLimit, match=r"operand packed: uint8\[4096, 2048\]"):
        planning.build(nvfp4.Projection(m=1, n=4096, k=4096), max_binding_bytes=4 << 20)
    with pytest.raises(ResourceLimit, match=r"need \d+ bytes in one buffer"):
        planning.build(nvfp4.Projection(m=1, n=4096, k=4096), max_buffer_bytes=4 << 20)


def test_plan_splits_batches_past_the_z_group_limit():
    plan = planning.build(nvfp4.BatchedProjection(batch=5, n=16, k=32), max_groups=(65535, 65535, 2))
    steps = [s for s in plan.steps if isinstance(s, Dispatch)]
    assert [s.groups[2] for s in steps] == [2, 2, 1]
    assert [int.from_bytes(s.push[20:24], "little") for s in steps] == [0, 2, 4]  # z_base
    assert [(s.writes[0].offset - plan.outputs[0].offset) // (16 * 4) for s in steps] == [0, 2, 4]
    assert all(b is None for b in plan.barriers)  # each writes its own rows of y: nothing waits


def test_expert_dispatches_write_their_own_rows_where_the_alignment_allows():
    aligned = planning.build(nvfp4.ExpertProjection(experts=4, m=1, n=16, k=32))  # 64-byte rows of y
    assert all(b is None for b in aligned.barriers)
    assert len({s.writes[0] for s in aligned.steps}) == 4
    # 20-byte rows cannot start a binding: every dispatch binds all of y, ordered by barriers.
    shared = planning.build(nvfp4.ExpertProjection(experts=4, m=1, n=5, k=32))
    assert len({s.writes[0] for s in shared.steps}) == 1 and all(b is not None for b in shared.barriers[1:])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    form=st.sampled_from(["single", "batched", "experts"]),
    m=st.sampled_from([1, 3, 9, 70]),  # one pass, several passes of GEMV_X_ROWS, a MATMUL path
    n=st.sampled_from([1, 3, 5, 8, 17]),  # partial workgroups of rows; rows of y too short to bind apart
    k=st.integers(1, 8).map(lambda b: 16 * b),
    count=st.integers(1, 3),
    activation=st.sampled_from(list(nvfp4.ACTIVATIONS)),
    seed=st.integers(0, 2**16),
)
def test_any_shape_and_form_matches_the_cpu_backend(dev, form, m, n, k, count, activation, seed):
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
        qs = [nvfp4.quantize(rng.standard_normal((n, k)).astype(np.float32)) for _ in range(count)]
        x = rng.standard_normal((count, m, k)).astype(np.float32)
    operands = [a for q in qs for a in q.operands]
    exe = dev.compile(projection, resident_bytes=BIG)
    try:
        (y,) = exe(x, *operands)
    finally:
        exe.close()
    (want,) = ProjectionRunner(projection).run([x, *operands])  # the CPU backend's oracle
    # Summation order differs, so the error scales with each dot product's terms, sum |x| |w|, not with
    # its value: a sum that cancels to near zero (n = 1, k = 80 once came out 2.6e-5 apart, relatively).
    w = [np.abs(nvfp4.dequantize(q)) for q in qs]
    if form == "single":
        terms = np.abs(x) @ w[0].T
    elif form == "batched":
        terms = np.einsum("bk,bnk->bn", np.abs(x), w[0])
    else:
        terms = np.stack([np.abs(x[e]) @ w[e].T for e in range(count)])
    bound = 1e-5 * np.abs(want) + 1e-6 * terms.reshape(want.shape)
    assert np.all(np.abs(y - want) <= bound), float(np.max(np.abs(y - want) - bound))


def _moe(shift: int) -> nvfp4.MoEProjection:
    layout = nvfp4.MoEProjection.packed(3, 32, 64)
    offsets = tuple(tuple(o + shift for o in four) for four in layout.offsets)
    return nvfp4.MoEProjection(3, 32, 64, layout.expert_bytes + shift, offsets)  # type: ignore[arg-type]


def test_moe_plan_is_two_gemv_passes_binding_aligned_planes_in_place():
    from ironaccel.tosa.arena import Copy

    plan = planning.build(_moe(0), min_offset_alignment=16)
    dispatches = [s for s in plan.steps if isinstance(s, Dispatch)]
    assert [d.shader for d in dispatches] == ["nvfp4_gemv"] * 6  # up then down, one dispatch per expert
    # Only the per-expert tensor scales past the first sit off the binding alignment.
    copies = [s for s in plan.steps if isinstance(s, Copy)]
    assert {c.src.size for c in copies} == {4} and len(copies) == 4
    # The down pass reads what the up pass wrote: a barrier before the first down dispatch.
    first_down = plan.steps.index(dispatches[3])
    assert plan.barriers[first_down] is not None


def test_moe_plan_copies_planes_off_the_binding_alignment():
    from ironaccel.tosa.arena import Copy

    plan = planning.build(_moe(4), min_offset_alignment=16)
    copies = [s for s in plan.steps if isinstance(s, Copy)]
    assert len(copies) == 3 * 4 + 4  # every plane of every expert, and the tensor scales past the first
    assert all(c.dst.offset % 16 == 0 for c in copies)
