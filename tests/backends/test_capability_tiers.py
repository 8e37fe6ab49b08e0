"""The per-tier view of the CPU, Vulkan and CUDA descriptors (ironaccel.tosa.tiers, ADR 0043): the tiers
virtio-accel's providers list (fp32, fp16, fp8, integer), each for one exact target, cut from our one
combined descriptor; and the extension check that decides which type extensions a target may claim.
The CUDA descriptor needs no GPU to build."""

from __future__ import annotations

import json

import pytest

from ironaccel.backends.cpu.capability import descriptor as cpu_descriptor
from ironaccel.backends.cuda.capability import descriptor as cuda_descriptor
from ironaccel.backends.vulkan import capability as vulkan
from ironaccel.backends.vulkan.device import Limits
from ironaccel.tosa import ProgramBuilder, admit, read
from ironaccel.tosa.capability import CapabilityDescriptor, OperatorSupport, Signature
from ironaccel.tosa.dtypes import DType
from ironaccel.tosa.errors import LoweringError
from ironaccel.tosa.operators import Op
from ironaccel.tosa.spec import operator as spec_of
from ironaccel.tosa.target import Extension, Profile
from ironaccel.tosa.tiers import outside_tiers, summary, tiers, unmet_rows

LIMITS = Limits(1 << 30, 1 << 30, 1 << 30, 64, 64, 64, 128, (65535, 65535, 65535), 49152)
FP8 = {DType.FP8E4M3, DType.FP8E5M2}
NARROW = FP8 | {DType.FP16, DType.BF16}


def _descriptors() -> dict[str, CapabilityDescriptor]:
    return {"cpu": cpu_descriptor(), "vulkan": vulkan.descriptor(LIMITS), "cuda": cuda_descriptor()}


DESCRIPTORS = _descriptors()


def _types(sig: Signature) -> set[DType]:
    return {dt for _, dt in sig.types if dt is not DType.SHAPE}


@pytest.mark.parametrize("backend", sorted(DESCRIPTORS))
def test_every_backend_lists_the_four_tiers_in_upstreams_order(backend):
    found = tiers(DESCRIPTORS[backend])
    assert list(found) == ["fp32", "fp16", "fp8", "integer"]
    assert {t.name for t in found.values()} == {f"{DESCRIPTORS[backend].name}/{n}" for n in found}
    profiles = {name: {p for p in t.target.profiles} for name, t in found.items()}
    assert profiles == {"fp32": {Profile.FP}, "fp16": {Profile.FP}, "fp8": {Profile.FP}, "integer": {Profile.INT}}


@pytest.mark.parametrize("backend", sorted(DESCRIPTORS))
def test_each_tier_is_a_part_of_the_combined_descriptor_its_own_target_allows(backend):
    combined = DESCRIPTORS[backend]
    for name, tier in tiers(combined).items():
        assert tier.target.extensions <= combined.target.extensions, name
        assert tier.target.level == combined.target.level
        assert tier.max_rank == combined.max_rank and tier.max_tensor_bytes == combined.max_tensor_bytes
        for op, support in tier.operators.items():
            assert support.constraints == combined.operators[op].constraints, (name, op)
            rows = spec_of(op).typesupport
            for sig in support.signatures:
                assert sig in combined.signatures(op), (name, op, str(sig))
                assert any(r.enabled(tier.target.enabled) and sig.matches(dict(r.types)) for r in rows), (name, op)


@pytest.mark.parametrize("backend", sorted(DESCRIPTORS))
def test_the_tiers_types(backend):
    found = tiers(DESCRIPTORS[backend])
    fp32, fp16, fp8, integer = (found[n] for n in ("fp32", "fp16", "fp8", "integer"))
    assert DType.FP32 in fp32.dtypes and not fp32.dtypes & NARROW
    assert fp16.dtypes == fp32.dtypes | {DType.FP16}  # upstream's fp16 tier is the fp32 one over binary16 too
    assert FP8 <= fp8.dtypes and DType.BF16 not in fp8.dtypes
    assert all(_types(s) & FP8 or not _types(s) for op in fp8.operators for s in fp8.signatures(op))
    assert {DType.INT8, DType.INT32, DType.INT4} <= integer.dtypes
    assert not integer.dtypes & (NARROW | {DType.FP32})
    for name, tier in found.items():  # no extension of another type family rides along
        assert Extension.BF16 not in tier.target.extensions, name
    assert not fp32.target.extensions & {Extension.FP8E4M3, Extension.FP8E5M2}
    assert {Extension.FP8E4M3, Extension.FP8E5M2} <= fp8.target.extensions


@pytest.mark.parametrize("backend", sorted(DESCRIPTORS))
def test_what_no_tier_takes_is_bf16(backend):
    """bf16 has no tier upstream; every other signature of the combined descriptor is in one, but for
    Vulkan's int16 rows that only EXT-INT16 enables (claimed only where int48 is offered too)."""
    left = {(op, sig) for op, sigs in outside_tiers(DESCRIPTORS[backend]).items() for sig in sigs}
    assert all(DType.BF16 in _types(sig) for op, sig in left) or backend == "vulkan"
    not_bf16 = {(op.name, str(sig)) for op, sig in left if DType.BF16 not in _types(sig)}
    if backend == "vulkan":
        assert not_bf16 and all("int16" in s for _, s in not_bf16)
        assert Extension.INT16 not in DESCRIPTORS[backend].target.extensions
    assert any(DType.BF16 in _types(sig) for _, sig in left)


def test_vulkans_tiers():
    found = tiers(DESCRIPTORS["vulkan"])
    integer = found["integer"]
    assert integer.target.extensions == {Extension.INT4, Extension.DOUBLEROUND, Extension.INEXACTROUND}
    assert Signature.of(in_out_t="int4") in integer.signatures(Op.IDENTITY)
    int4_conv = Signature.of(in_t="int8", weight_t="int4", out_t="int32", acc_t="int32")
    for op in (Op.CONV2D, Op.CONV3D, Op.DEPTHWISE_CONV2D, Op.TRANSPOSE_CONV2D):
        assert int4_conv in integer.signatures(op)
    assert found["fp32"].target.extensions == frozenset()
    # the FP32 tier's constraints are the combined descriptor's, named as admission quotes them
    assert "zero zero-points for float operands" in summary(DESCRIPTORS["vulkan"])["fp32"]["operators"]["MATMUL"]
    matmul8 = found["fp8"].signatures(Op.MATMUL)
    assert Signature.of(in_t="fp8e4m3", out_t="fp16") in matmul8


def test_the_summary_is_upstreams_shape_and_json():
    record = summary(DESCRIPTORS["cuda"])
    assert list(record) == ["fp32", "fp16", "fp8", "integer"]
    for name, tier in record.items():
        assert set(tier) == {"name", "target", "dtypes", "operators"}
        assert tier["name"] == f"cuda-nvrtc-cublaslt/{name}"
        assert set(tier["target"]) == {"profiles", "extensions", "level"}
    assert record["fp8"]["target"]["extensions"] == ["EXT-FP8E4M3", "EXT-FP8E5M2"]
    assert record["integer"]["dtypes"][:2] == ["bool", "int4"]  # in DType order
    assert "IDENTITY" in record["fp16"]["operators"]
    assert json.loads(json.dumps(record)) == record


def test_a_tier_admits_only_its_own_types():
    found = tiers(DESCRIPTORS["vulkan"])

    def program(dtype: str):
        b = ProgramBuilder()
        b.output(b.add(b.input("x", (4,), dtype), b.input("y", (4,), dtype)))
        return b.build()

    admit(program("fp16"), found["fp16"])
    admit(program("fp32"), found["fp16"])
    with pytest.raises(LoweringError, match="fp16"):
        admit(program("fp16"), found["fp32"])
    with pytest.raises(LoweringError):
        admit(program("bf16"), found["fp16"])
    admit(program("int32"), found["integer"])
    with pytest.raises(LoweringError):
        admit(program("int32"), found["fp8"])


def test_a_tier_is_listed_only_where_the_combined_target_has_its_profile_and_type():
    combined = vulkan.bf16_descriptor(LIMITS)  # PRO-FP with EXT-BF16: no fp8, no integer profile
    assert list(tiers(combined)) == ["fp32", "fp16"]
    fp32_only = CapabilityDescriptor(
        combined.target, {DType.FP32}, {Op.ADD: OperatorSupport((Signature.of(in_out_t="fp32"),))}, name="t"
    )
    assert list(tiers(fp32_only)) == ["fp32"]
    assert summary(fp32_only)["fp32"]["operators"] == {"ADD": []}


def test_an_extension_is_claimed_where_every_row_naming_it_is_registered():
    table = vulkan.ALL_OPERATORS
    assert unmet_rows(table, "int4") == []
    assert unmet_rows(table, Extension.BF16) == [] and unmet_rows(table, "fp8e4m3") == []
    assert "MATMUL(in_t=int16, out_t=int48)" in unmet_rows(table, "int16")
    claimed = {e for e in vulkan.TARGET.extensions if e not in (Extension.DOUBLEROUND, Extension.INEXACTROUND)}
    assert claimed == {Extension.INT4, Extension.BF16, Extension.FP8E4M3, Extension.FP8E5M2}
    without = {op: s for op, s in table.items() if op is not Op.IDENTITY}
    assert "IDENTITY(in_out_t=int4)" in unmet_rows(without, "int4")
    assert unmet_rows(cpu_descriptor().operators, "int16") == []


@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
def test_each_corpus_case_is_admitted_by_the_tier_upstream_runs_it_under(backend):
    """A case written for FLOATING_POINT with fp8 runs in the fp8 tier, with fp16 in the fp16 tier, else in
    the fp32 tier; one written for INTEGER in the integer tier (identity-int4 under EXT-INT4)."""
    from corpus import CASES, NAMES

    if not NAMES:
        pytest.skip(f"no corpus at {CASES}")
    found = tiers(DESCRIPTORS[backend])
    for name in NAMES:
        meta = json.loads((CASES / name / "meta.json").read_text())
        types = {t["dtype"] for t in (*meta["inputs"], *meta["expected"])}
        if meta["target"]["profile"] == "INTEGER":
            tier = "integer"
        else:
            tier = "fp8" if any(t.startswith("FP8") for t in types) else "fp16" if "FP16" in types else "fp32"
        admit(read((CASES / name / "program.tosa").read_bytes()), found[tier])
