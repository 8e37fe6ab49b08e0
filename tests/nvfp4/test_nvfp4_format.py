"""The serialized NVFP4 projection header: round trips, every rule named when broken, and a fuzz over
mutated headers that only ever yields a projection or a HeaderError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ironaccel import nvfp4
from ironaccel.nvfp4 import bounds, format
from ironaccel.runtime.types import NVFP4_FORMAT
from ironaccel.tosa.errors import FormatError, LoweringError

SAMPLES = [
    nvfp4.Projection(m=4, n=64, k=128, activation="silu", name="layers.0.mlp.up_proj"),
    nvfp4.BatchedProjection(batch=8, n=32, k=64, activation="squared_relu"),
    nvfp4.ExpertProjection(experts=4, m=2, n=16, k=32, activation="sigmoid", name="experts"),
]


def test_magic_is_the_artifact_format_id():
    assert int.from_bytes(format.MAGIC, "little") == NVFP4_FORMAT
    assert format.HEADER_BYTES == 64


@pytest.mark.parametrize("projection", SAMPLES, ids=lambda p: type(p).__name__)
def test_round_trip(projection):
    data = projection.to_bytes()
    assert len(data) == 64 + len(projection.name.encode())
    assert nvfp4.from_bytes(data) == projection
    assert nvfp4.from_bytes(memoryview(bytearray(data))) == projection


def test_header_fields_are_where_the_module_says():
    data = nvfp4.ExpertProjection(experts=5, m=3, n=48, k=96, activation="silu", name="ab").to_bytes()
    assert data[:4] == b"NVF4" and struct.unpack_from("<HH", data, 4) == (1, 64)
    assert (data[8], data[9]) == (3, 1)
    assert struct.unpack_from("<IIII", data, 12) == (3, 48, 96, 5)
    assert struct.unpack_from("<QQIIQ", data, 32) == (48 * 48, 48 * 6, 64, 2, 66)
    assert data[64:] == b"ab"


def _patched(offset: int, fmt: str, value: int, base: bytes | None = None) -> bytes:
    data = bytearray(base if base is not None else SAMPLES[0].to_bytes())
    struct.pack_into(fmt, data, offset, value)
    return bytes(data)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"", "header"),
        (SAMPLES[0].to_bytes()[:63], "header"),
        (_patched(0, "<I", 0x41534F54), "header.magic"),
        (_patched(4, "<H", 2), "header.version"),
        (_patched(6, "<H", 128), "header.header_bytes"),
        (_patched(8, "<B", 0), "header.form"),
        (_patched(8, "<B", 4), "header.form"),
        (_patched(9, "<B", 4), "activation"),
        (_patched(10, "<H", 1), "header.reserved"),
        (_patched(28, "<I", 7), "header.reserved"),
        (_patched(12, "<I", 0), "m"),
        (_patched(12, "<I", bounds.MAX_M + 1), "m"),
        (_patched(16, "<I", 0), "n"),
        (_patched(16, "<I", 0xFFFFFFFF), "n"),
        (_patched(20, "<I", 136), "k"),  # not a multiple of 16
        (_patched(20, "<I", 8), "k"),
        (_patched(20, "<I", bounds.MAX_K + 16), "k"),
        (_patched(24, "<I", 2), "count"),  # a single projection has count 1
        (_patched(24, "<I", bounds.MAX_BATCH + 1, SAMPLES[1].to_bytes()), "batch"),
        (_patched(12, "<I", 2, SAMPLES[1].to_bytes()), "m"),  # the batched form's rows are (1, k)
        (_patched(24, "<I", bounds.MAX_EXPERTS + 1, SAMPLES[2].to_bytes()), "experts"),
        (_patched(32, "<Q", 64 * 128 // 2 + 1), "header.weight_bytes"),
        (_patched(32, "<Q", 2**64 - 1), "header.weight_bytes"),
        (_patched(40, "<Q", 0), "header.scale_bytes"),
        (_patched(48, "<I", 0), "header.name_offset"),
        (_patched(52, "<I", 0xFFFFFFFF), "header.name_length"),
        (_patched(56, "<Q", 2**64 - 1), "header.total_bytes"),
        (SAMPLES[0].to_bytes()[:-1], "header.total_bytes"),  # truncated name
        (SAMPLES[0].to_bytes() + b"\0", "header.total_bytes"),  # trailing bytes
        (SAMPLES[0].to_bytes()[:64] + b"\xff" * 20, "name"),  # not UTF-8
        (SAMPLES[0].to_bytes()[:64] + b"\n" * 20, "name"),  # not printable
    ],
)
def test_each_broken_rule_is_named(data, field):
    with pytest.raises(nvfp4.HeaderError) as info:
        nvfp4.from_bytes(data)
    assert info.value.field == field
    assert f"nvfp4 {field}:" in str(info.value)
    assert isinstance(info.value, LoweringError) and isinstance(info.value, FormatError)


def test_operand_sizes_are_bounded_before_anything_is_allocated():
    # Every count within its own bound, their product far beyond any operand bound.
    with pytest.raises(nvfp4.HeaderError, match="packed: operand of"):
        bounds.check_shape(bounds.Form.EXPERTS, 1, bounds.MAX_N, bounds.MAX_K, bounds.MAX_EXPERTS)
    with pytest.raises(nvfp4.HeaderError, match="x: operand of"):
        bounds.check_shape(bounds.Form.EXPERTS, bounds.MAX_M, 16, bounds.MAX_K, 2)
    with pytest.raises(nvfp4.HeaderError, match="y: operand of"):
        bounds.check_shape(bounds.Form.EXPERTS, bounds.MAX_M, bounds.MAX_N, 16, 2)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: nvfp4.Projection(m=1, n=16, k=24), "k"),
        (lambda: nvfp4.Projection(m=0, n=16, k=16), "m"),
        (lambda: nvfp4.Projection(m=1.0, n=16, k=16), "m"),
        (lambda: nvfp4.Projection(m=1, n=16, k=16, activation="relu"), "activation"),
        (lambda: nvfp4.Projection(m=1, n=16, k=16, name="x" * 257), "name"),
        (lambda: nvfp4.BatchedProjection(batch=0, n=16, k=16), "batch"),
        (lambda: nvfp4.ExpertProjection(experts=bounds.MAX_EXPERTS + 1, m=1, n=16, k=16), "experts"),
    ],
)
def test_constructors_check_the_same_rules(make, field):
    with pytest.raises(nvfp4.HeaderError) as info:
        make()
    assert info.value.field == field


@settings(max_examples=1500, deadline=None)
@given(
    base=st.sampled_from([p.to_bytes() for p in SAMPLES]),
    edits=st.lists(st.tuples(st.integers(0, 90), st.integers(0, 255)), max_size=6),
    cut=st.integers(0, 100),
    tail=st.binary(max_size=8),
)
def test_fuzz_mutated_headers_give_a_projection_or_a_header_error(base, edits, cut, tail):
    data = bytearray(base[:cut] if cut < len(base) else base + tail)
    for offset, value in edits:
        if offset < len(data):
            data[offset] = value
    try:
        projection = nvfp4.from_bytes(bytes(data))
    except nvfp4.HeaderError as exc:
        assert exc.field and str(exc).startswith("nvfp4 ")
        return
    # Accepted: it is within every bound and serializes back to the same bytes.
    assert projection.to_bytes() == bytes(data)
    assert all(o.nbytes <= bounds.MAX_OPERAND_BYTES for o in (*projection.inputs, *projection.outputs))
