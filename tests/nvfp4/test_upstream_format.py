"""Upstream virtio-accel's NVFP4 artifacts (VKNVFP4 projections, VKNVMOE mixtures of experts; ADR 0042).

Artifacts here are encoded by a small encoder of this file, written from upstream's documented layout
(not by ironaccel.nvfp4.upstream), and what the reader decodes is compared with it field by field; round
trips; hostile headers (hypothesis) refused with HeaderError naming the field; target words compared at
load; the mixture of experts on the CPU backend and on Vulkan (lavapipe) against a float64 numpy oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ironaccel import nvfp4
from ironaccel.backends.cpu.accelerator import CpuAccelerator
from ironaccel.core.errors import Incompatible, InvalidArgument
from ironaccel.nvfp4 import HeaderError, upstream
from ironaccel.nvfp4.bounds import Form
from ironaccel.runtime import ArtifactRef, Device
from ironaccel.runtime.types import NVFP4_FORMAT, TOSA_FORMAT, VKNVFP4_FORMAT, VKNVFP4_TARGET
from ironaccel.tosa.errors import LoweringError
from vulkan_fixtures import DEVICE, clean, close_without_leaks, open_test_device

__all__ = ["clean"]  # the fixture, used by name

RTOL = 1e-5
TARGET = [0x564B4E46, 0x50340001] + [0] * 10  # "VKNF", "P4" and version 1, then ten zero words
ACTIVATION_CODES = {"none": 0, "silu": 1, "sigmoid": 2, "squared_relu": 3}


def _u32(*values: int) -> bytes:
    return b"".join(v.to_bytes(4, "little") for v in values)


def _vknvfp4(m: int, n: int, k: int, activation: int = 0, mode: int = 0, version: int = 1) -> bytes:
    """A VKNVFP4 header: 8-byte magic, then version, m, n, k, activation and weight mode as u32."""
    return b"VKNVFP4\x00" + _u32(version, m, n, k, activation, mode)


def _vknvmoe(batch: int, width: int, inner: int, expert_bytes: int, offsets, version: int = 1) -> bytes:
    """A VKNVMOE header: magic, version, batch, width, inner, expert_bytes, six experts' four offsets
    (zero past ``batch``), zero-filled to 160 bytes."""
    words = [w for four in offsets for w in four]
    words += [0] * (24 - len(words))
    data = b"VKNVMOE\x00" + _u32(version, batch, width, inner, expert_bytes, *words)
    return data + bytes(160 - len(data))


# ---- the layout, field by field ----------------------------------------------------------------------


def test_format_id_and_target_words_are_upstreams():
    assert upstream.FORMAT == VKNVFP4_FORMAT == 0x564E4634
    assert list(upstream.TARGET) == list(VKNVFP4_TARGET) == TARGET
    assert VKNVFP4_FORMAT != NVFP4_FORMAT  # both formats stay recognisable


@pytest.mark.parametrize("activation", list(ACTIVATION_CODES))
def test_single_projection_fields(activation):
    got = nvfp4.from_bytes(_vknvfp4(3, 17, 2688, ACTIVATION_CODES[activation], 0))
    assert type(got) is nvfp4.Projection
    assert (got.m, got.n, got.k, got.activation, got.name) == (3, 17, 2688, activation, "")
    shapes = [(o.name, o.shape, o.dtype.itemsize) for o in (*got.inputs, *got.outputs)]
    # Upstream's slot byte lengths: x m*k*4, packed n*k/2, scales n*k/16, tensor scale 4, y m*n*4.
    assert [int(np.prod(s)) * size for _, s, size in shapes] == [
        3 * 2688 * 4,
        17 * 2688 // 2,
        17 * 2688 // 16,
        4,
        3 * 17 * 4,
    ]


def test_batched_projection_fields():
    got = nvfp4.from_bytes(_vknvfp4(6, 1856, 2688, 0, 1))
    assert type(got) is nvfp4.BatchedProjection and (got.batch, got.n, got.k) == (6, 1856, 2688)
    sizes = [o.nbytes for o in (*got.inputs, *got.outputs)]
    assert sizes == [6 * 2688 * 4, 6 * 1856 * 2688 // 2, 6 * 1856 * 2688 // 16, 6 * 4, 6 * 1856 * 4]


def test_expert_batch_fields_and_binding_order():
    got = nvfp4.from_bytes(_vknvfp4(6, 1856, 2688, 2, 2))
    assert type(got) is nvfp4.ExpertProjection
    assert (got.experts, got.m, got.n, got.k, got.activation) == (6, 1, 1856, 2688, "sigmoid")
    # Upstream binds x, (packed, scales) per expert, then one (experts,) tensor-scale array; ours binds the
    # tensor scale with each expert. The bytes per expert plane are the same.
    experts = [o for o in got.inputs if o.name.startswith("expert")]
    assert [o.nbytes for o in experts[:3]] == [1856 * 2688 // 2, 1856 * 2688 // 16, 4]
    assert got.inputs[0].nbytes == 6 * 2688 * 4 and got.outputs[0].nbytes == 6 * 1856 * 4


def test_moe_fields():
    width, inner = 2688, 1856
    up, scales = inner * width // 2, inner * width // 16
    offsets = [(0, up, 3 << 20, (3 << 20) + up)] * 6
    got = nvfp4.from_bytes(_vknvmoe(6, width, inner, 6 << 20, offsets))
    assert type(got) is nvfp4.MoEProjection and got.form is Form.MOE
    assert (got.experts, got.width, got.inner, got.expert_bytes) == (6, width, inner, 6 << 20)
    assert got.offsets == tuple(offsets)
    assert got.plane_bytes == (up, scales, up, scales)
    assert [o.nbytes for o in got.inputs] == [6 * width * 4, *[6 << 20] * 6, 6 * 4, 6 * 4]
    assert got.outputs[0].nbytes == 6 * width * 4


# ---- round trips -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        _vknvfp4(1, 16, 16),
        _vknvfp4(64, 40, 96, 1, 0),
        _vknvfp4(5, 8, 32, 3, 1),
        _vknvfp4(6, 24, 48, 2, 2),
        _vknvmoe(1, 16, 32, 1024, [(0, 256, 512, 768)]),
        _vknvmoe(3, 32, 16, 4096, [(0, 256, 512, 768), (4, 260, 516, 772), (1024, 2048, 3000, 3600)]),
    ],
)
def test_bytes_round_trip(data):
    assert upstream.write(nvfp4.from_bytes(data)) == data


@pytest.mark.parametrize(
    "projection",
    [
        nvfp4.Projection(m=2, n=48, k=64, activation="silu"),
        nvfp4.BatchedProjection(batch=9, n=16, k=16, activation="squared_relu"),
        nvfp4.ExpertProjection(experts=4, m=1, n=32, k=48),
        nvfp4.MoEProjection.packed(5, 48, 80),
    ],
)
def test_projections_round_trip(projection):
    data = upstream.write(projection)
    assert nvfp4.from_bytes(data) == projection
    rows = projection.m if projection.form is Form.SINGLE else projection.count
    if projection.form is not Form.MOE:
        mode = {Form.SINGLE: 0, Form.BATCHED: 1, Form.EXPERTS: 2}[projection.form]
        assert data == _vknvfp4(rows, projection.n, projection.k, ACTIVATION_CODES[projection.activation], mode)


def test_names_are_not_written_and_unencodable_forms_are_refused():
    named = nvfp4.Projection(m=1, n=16, k=16, name="lm_head")
    assert nvfp4.from_bytes(upstream.write(named)).name == ""
    with pytest.raises(HeaderError, match="one row per expert") as info:
        upstream.write(nvfp4.ExpertProjection(experts=2, m=3, n=16, k=16))
    assert info.value.field == "m"
    with pytest.raises(HeaderError):
        upstream.write(nvfp4.ExpertProjection(experts=7, m=1, n=16, k=16))
    with pytest.raises(HeaderError, match="no NVF4 encoding"):  # the MoE form is carried by VKNVMOE only
        nvfp4.from_bytes(b"NVF4" + (1).to_bytes(2, "little") + (64).to_bytes(2, "little") + bytes([4]) + bytes(55))


# ---- hostile headers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (_vknvfp4(1, 16, 16, version=2), "header.version"),
        (_vknvfp4(0, 16, 16), "m"),
        (_vknvfp4(1, 0, 16), "n"),
        (_vknvfp4(1, 16, 15), "k"),
        (_vknvfp4(1, 16, 0), "k"),
        (_vknvfp4(1, 16, 16, activation=4), "activation"),
        (_vknvfp4(1, 16, 16, mode=3), "weight_mode"),
        (_vknvfp4(7, 16, 16, mode=2), "m"),
        (_vknvfp4(0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFF0), "m"),
        (_vknvfp4(1 << 16, 1 << 18, 1 << 18, mode=1), "packed"),
        (_vknvfp4(1, 16, 16)[:31], "header"),
        (_vknvfp4(1, 16, 16) + b"\0", "header"),
        (b"VKNVFP5\0" + bytes(24), "header.magic"),
        (_vknvmoe(0, 16, 16, 1024, []), "batch"),
        (_vknvmoe(7, 16, 16, 1024, [(0, 0, 0, 0)] * 6), "batch"),
        (_vknvmoe(1, 24, 16, 1024, [(0, 0, 0, 0)]), "width"),
        (_vknvmoe(1, 16, 0, 1024, [(0, 0, 0, 0)]), "inner"),
        (_vknvmoe(1, 16, 16, 0, [(0, 0, 0, 0)]), "expert_bytes"),
        (_vknvmoe(1, 16, 16, 1024, [(2, 0, 0, 0)]), "offsets[0].up_packed"),
        (_vknvmoe(1, 16, 16, 1024, [(0, 1020, 0, 0)]), "offsets[0].up_scales"),
        (_vknvmoe(2, 16, 16, 1024, [(0, 0, 0, 0), (0, 0, 0xFFFFFFFC, 0)]), "offsets[1].down_packed"),
        (_vknvmoe(1, 16, 16, 1024, [(0, 0, 0, 0), (4, 0, 0, 0)]), "offsets"),
        (_vknvmoe(1, 16, 16, 1024, [(0, 0, 0, 0)])[:-1] + b"\1", "header.reserved"),
        (_vknvmoe(1, 16, 16, 1024, [(0, 0, 0, 0)])[:100], "header"),
        (_vknvmoe(1, 16, 16, 1024, [(0, 0, 0, 0)], version=0), "header.version"),
        (_vknvmoe(6, 1 << 20, 16, 1024, [(0, 0, 0, 0)] * 6), "width"),
    ],
)
def test_hostile_headers_name_the_field(data, field):
    with pytest.raises(HeaderError) as info:
        upstream.read(data)
    assert info.value.field == field


@settings(max_examples=800, deadline=None)
@given(
    magic=st.sampled_from([b"VKNVFP4\0", b"VKNVMOE\0"]),
    words=st.lists(st.one_of(st.integers(0, 64), st.integers(0, 0xFFFFFFFF)), min_size=0, max_size=40),
    tail=st.binary(max_size=8),
)
def test_fuzzed_headers_are_read_or_refused_by_field(magic, words, tail):
    data = magic + _u32(*words) + tail
    try:
        got = upstream.read(data)
    except HeaderError as exc:
        assert exc.field
        return
    # What was accepted is exactly what the writer gives back, and every operand is bounded.
    assert upstream.write(got) == data
    assert all(o.nbytes <= 1 << 36 for o in (*got.inputs, *got.outputs))


# ---- loading: format, target words, forms ------------------------------------------------------------


def _load(acc, data: bytes, target=tuple(TARGET)):
    ctx = acc.create_context()
    try:
        return acc.load_program(ctx, ArtifactRef(data, 1 << 20, tuple(target), VKNVFP4_FORMAT))
    finally:
        if not acc.live_resources().get("program"):
            acc.destroy_context(ctx)


def test_upstream_artifact_loads_with_its_target_words():
    acc = CpuAccelerator()
    program = _load(acc, _vknvfp4(2, 16, 32, 1, 0))
    assert [s.shape for s in program.inputs] == [(2, 32), (16, 16), (16, 2), ()]
    acc.unload_program(program)


@pytest.mark.parametrize(("index", "value"), [(0, 0x564B4E47), (1, 0x50340002), (11, 1)])
def test_a_target_word_the_backend_does_not_advertise_is_named(index, value):
    target = list(TARGET)
    target[index] = value
    with pytest.raises(Incompatible, match=rf"target word {index} of the artifact \({value:#010x}\)"):
        _load(CpuAccelerator(), _vknvfp4(1, 16, 16), target)


def test_missing_target_words_are_refused():
    with pytest.raises(Incompatible, match="declares 12 target words, got 0"):
        _load(CpuAccelerator(), _vknvfp4(1, 16, 16), ())


def test_device_compile_recognises_both_formats_by_magic():
    with Device(CpuAccelerator(), "cpu") as device:
        ours = device.compile(nvfp4.Projection(m=1, n=16, k=16).to_bytes())
        theirs = device.compile(_vknvfp4(1, 16, 16))
        assert ours.inputs == theirs.inputs
        with pytest.raises(InvalidArgument, match="TOSA target"):
            from ironaccel.tosa.target import Target

            device.compile(_vknvfp4(1, 16, 16), target=Target())


class _TosaOnly(CpuAccelerator):
    artifact_formats = frozenset({TOSA_FORMAT})


class _NoMoE(CpuAccelerator):
    nvfp4_forms = frozenset({Form.SINGLE, Form.BATCHED, Form.EXPERTS})


def test_backends_refuse_what_they_do_not_run():
    with pytest.raises(LoweringError, match="does not run NVFP4 projections"):
        _load(_TosaOnly(), _vknvfp4(1, 16, 16))
    moe = _vknvmoe(1, 16, 16, 1024, [(0, 128, 256, 384)])
    with pytest.raises(LoweringError, match="does not run the MOE form"):
        _load(_NoMoE(), moe)
    with pytest.raises(HeaderError):  # the header is read (as hostile input) before anything else
        _load(_TosaOnly(), moe[:-4])


# ---- running: the expert batch in upstream's binding order, and the mixture of experts -------------------


@pytest.fixture(scope="module", params=["cpu", DEVICE])
def dev(request):
    device = open_test_device(request.param)
    yield device
    close_without_leaks(device)


def _weights(rng, *shape) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def _assert_close(y: np.ndarray, want: np.ndarray) -> None:
    assert y.dtype == np.float32 and y.shape == want.shape and np.isfinite(y).all()
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=RTOL * np.abs(want).max())


def test_expert_batch_runs_from_upstreams_arguments(dev):
    rng = np.random.default_rng(3)
    experts, n, k = 4, 32, 64
    qs = [nvfp4.quantize(_weights(rng, n, k)) for _ in range(experts)]
    x = rng.standard_normal((experts, k)).astype(np.float32)
    exe = dev.compile(_vknvfp4(experts, n, k, ACTIVATION_CODES["silu"], 2))
    # Upstream's order: x, (packed, scales) per expert as flat bytes, then the (experts,) tensor scales.
    theirs = [x]
    for q in qs:
        theirs += [q.packed.reshape(-1), q.scales.view(np.uint8).reshape(-1)]
    theirs.append(np.array([q.tensor_scale for q in qs], np.float32))
    projection = nvfp4.from_bytes(_vknvfp4(experts, n, k, ACTIVATION_CODES["silu"], 2))
    (y,) = exe(*upstream.arguments(projection, theirs))
    v = np.stack([x[e].astype(np.float64) @ nvfp4.dequantize(qs[e]).T.astype(np.float64) for e in range(experts)])
    _assert_close(y, (v / (1 + np.exp(-v)))[:, None, :])
    exe.close()


def _moe_case(rng, experts: int, width: int, inner: int, shift: int = 0):
    """Weights of ``experts`` experts, their bindings (planes moved ``shift`` bytes into the binding, which
    keeps upstream's 4-byte rule but leaves them off the device's binding alignment) and the oracle."""
    ups = [nvfp4.quantize(_weights(rng, inner, width)) for _ in range(experts)]
    downs = [nvfp4.quantize(_weights(rng, width, inner)) for _ in range(experts)]
    layout = nvfp4.MoEProjection.packed(experts, width, inner)
    blobs = []
    for up, down in zip(ups, downs, strict=True):
        blob = np.full(layout.expert_bytes + shift, 0xEE, np.uint8)  # bytes between planes are never read
        blob[shift:] = nvfp4.pack_expert(up, down)
        blobs.append(blob)
    offsets = tuple(tuple(o + shift for o in four) for four in layout.offsets)
    moe = nvfp4.MoEProjection(experts, width, inner, layout.expert_bytes + shift, offsets)  # type: ignore[arg-type]
    up_scale = np.array([q.tensor_scale for q in ups], np.float32)
    down_scale = np.array([q.tensor_scale for q in downs], np.float32)
    return moe, ups, downs, blobs, up_scale, down_scale


def _moe_oracle(x, ups, downs) -> np.ndarray:
    rows = []
    for e, (up, down) in enumerate(zip(ups, downs, strict=True)):
        h = np.maximum(x[e].astype(np.float64) @ nvfp4.dequantize(up).T.astype(np.float64), 0) ** 2
        rows.append(h @ nvfp4.dequantize(down).T.astype(np.float64))
    return np.stack(rows)


@pytest.mark.parametrize(
    ("experts", "width", "inner", "shift"), [(1, 16, 32, 0), (3, 64, 48, 0), (6, 32, 96, 4), (2, 48, 16, 12)]
)
def test_moe_against_numpy(dev, experts, width, inner, shift):
    rng = np.random.default_rng(experts * 100 + width + shift)
    moe, ups, downs, blobs, up_scale, down_scale = _moe_case(rng, experts, width, inner, shift)
    x = rng.standard_normal((experts, width)).astype(np.float32)
    exe = dev.compile(moe.to_bytes())  # upstream's bytes, as they are
    (y,) = exe(x, *blobs, up_scale, down_scale)
    _assert_close(y, _moe_oracle(x, ups, downs))
    (queued,) = exe.submit(x, *blobs, up_scale, down_scale).wait()
    assert np.array_equal(queued, y)
    exe.close()
