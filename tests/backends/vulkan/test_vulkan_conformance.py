"""Arm's TOSA conformance suite on the Vulkan backend (lavapipe), through ``ironaccel conformance``.

The device is judged on what its capability descriptor advertises (the FP16 tier: PRO-FP without
extensions, fp32 and fp16 (MATMUL's fp16 aside) and the BOOL / INT32 signatures beside them). Tests
of types, operators or extensions it does not advertise are reported as not applicable and never run;
negative tests of the operators it offers must be rejected whatever their types. The bounded subset
here (``make test``) takes a few tests of every advertised operator, positive and negative;
``make conformance DEVICE=vulkan:lavapipe`` runs all of them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ironaccel.backends.vulkan import capability, open_accelerator
from ironaccel.conformance import applicability
from ironaccel.conformance.runner import CaseInfo
from ironaccel.core.errors import Unsupported
from ironaccel.core.settings import Settings
from ironaccel.tosa import ProgramBuilder, write
from tosa_fixtures import run_conformance

DEVICE = "vulkan:lavapipe"
_FP16 = re.compile(r"(^|[_x])f16")  # the suite's test names spell fp16 tensors f16 (bf16 is not one)


def _lavapipe_reason() -> str | None:
    try:
        acc = open_accelerator("lavapipe", settings=Settings())
    except Unsupported as exc:
        return f"lavapipe unavailable: {exc}"
    acc.close()
    return None


_REASON = _lavapipe_reason()
needs_lavapipe = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


def _test_dir(tmp: Path, program, *, negative=False, operator="ADD", extensions=(), profiles=("tosa-pro-fp",)) -> Path:
    test = tmp / f"{operator.lower()}_{len(list(tmp.iterdir()))}"
    test.mkdir()
    (test / "test.tosa").write_bytes(write(program))
    desc = {
        "tosa_file": "test.tosa",
        "expected_failure": negative,
        "test_requirements": {"profiles_supported": list(profiles), "extensions_required": list(extensions)},
        "test_details": {"operator": operator},
    }
    (test / "desc.json").write_text(json.dumps(desc))
    return test


def _program(dtype: str, op: str = "add"):
    b = ProgramBuilder()
    x = b.input("x", (2, 3), dtype)
    b.output(getattr(b, op)(x, x))
    return b.build()


def _resize_int16():
    b = ProgramBuilder()
    x = b.input("x", (1, 2, 2, 1), "int16")
    b.output(b.op("RESIZE", [x, (2, 1, 2, 1), (0, 0), (0, 0)], mode="nearest", out_dtype="int16"))
    return b.build()


@needs_lavapipe
def test_applicability_follows_the_descriptor(tmp_path):
    descriptor = applicability.device_capabilities(DEVICE)
    assert descriptor.name == "vulkan-float-int"
    fp32 = _test_dir(tmp_path, _program("fp32"))
    fp16 = _test_dir(tmp_path, _program("fp16"))
    int16_resize = _resize_int16()  # the INT16 extension's, not lowered
    int16 = _test_dir(tmp_path, int16_resize, operator="RESIZE", profiles=["tosa-pro-int"])
    int16_negative = _test_dir(tmp_path, int16_resize, negative=True, operator="RESIZE", profiles=["tosa-pro-int"])
    bf16 = _test_dir(tmp_path, _program("fp32"), extensions=["tosa-ext-bf16"])
    int_only = _test_dir(tmp_path, _program("int32"), profiles=["tosa-pro-int"])
    fft = _test_dir(tmp_path, _program("fp32"), negative=True, operator="FFT2D")
    assert applicability.reason(fp32, descriptor) is None
    assert applicability.reason(fp16, descriptor) is None
    assert "int16" in applicability.reason(int16, descriptor)
    assert applicability.reason(int16_negative, descriptor) is None  # RESIZE is offered: it must reject it
    assert applicability.reason(bf16, descriptor) is None  # the BF16 tier is advertised too
    assert applicability.reason(int_only, descriptor) is None  # the integer tier is advertised too
    assert applicability.reason(fft, descriptor) == "FFT2D not offered"
    infos = [CaseInfo.of(p) for p in (fp32, fp16, int16, int16_negative, bf16)]
    run, skipped = applicability.split(infos, descriptor)
    assert [i.path for i in run] == [fp32, fp16, int16_negative, bf16]
    assert all(applicability.is_not_applicable(o) and not o.passed for o in skipped)


def test_the_cpu_backend_is_never_short_of_anything(tmp_path):
    descriptor = applicability.device_capabilities("cpu")
    fp16 = _test_dir(tmp_path, _program("fp16"))
    assert applicability.reason(fp16, descriptor) is None
    assert applicability.reason(_test_dir(tmp_path, _program("fp32"), extensions=["tosa-ext-fft"]), descriptor) is None


def test_the_tier_has_every_base_pro_fp_operator():
    """FP32 signatures of every PRO-FP operator outside the extensions (FFT, control flow, variables)."""
    from ironaccel.tosa.operators import TOSA_1_0_OPS, Op
    from ironaccel.tosa.spec import operator as spec_of
    from ironaccel.tosa.target import Target

    base = Target.of(profiles=["pro-fp"], level="8k").enabled
    wanted = set()
    for op in TOSA_1_0_OPS:
        spec = spec_of(op)
        rows = [r for r in (spec.typesupport if spec else ()) if r.enabled(base)]
        if any(not r.types or any(t.name == "FP32" for t in r.types.values()) for r in rows):
            wanted.add(op)
    wanted -= {Op.CUSTOM}  # an implementation's own operators, nothing the suite tests
    assert wanted - set(capability.OPERATORS) == set()


@needs_lavapipe
@pytest.mark.tosa_tools
def test_bounded_subset_of_the_suite_passes_on_lavapipe(tmp_path):
    """A few tests of every advertised operator (each output type, negatives included), through Arm's runner."""
    text, cases = run_conformance(
        tmp_path / "report",
        *("--device", DEVICE, "--profile", "pro-fp", "--per-operator", "6", "-j", "2"),
        # The tiers take no extension (bf16, fp8, fft, ...): the suite is generated without them.
        *("--extension", "none"),
    )
    ran = [c for c in cases if c.find("skipped") is None]
    operators_run = {c.get("classname").removeprefix("tosa.").upper() for c in ran}
    offered = {op.name for op in capability.OPERATORS} - {"CONST_SHAPE"}  # no test of its own
    assert offered - operators_run == set()
    assert len(ran) >= 3 * len(offered)
    # The FP16 tier's operators are picked in fp16 too: every output type of an operator comes first.
    fp16_run = {c.get("classname").removeprefix("tosa.").upper() for c in ran if _FP16.search(c.get("name", ""))}
    fp16_offered = {op.name for op in capability.FP16_SIGNATURES} - {"CAST"}  # fp16 -> int reads as int
    assert fp16_offered - fp16_run == set()
    # Without extensions every generated test applies to the tiers (what does not is covered above).
    assert "| negative (rejected) |" in text


# Operators with bf16 and fp8 forms whose extension tests the bounded run takes: every conversion, a
# product and a pool (the suite is generated for these alone; the whole one takes most of an hour).
EXTENSION_OPERATORS = ("cast", "matmul", "avg_pool2d")


@needs_lavapipe
@pytest.mark.tosa_tools
def test_bounded_bf16_and_fp8_extension_tests_pass_on_lavapipe(tmp_path):
    """The BF16 and FP8 tiers judged by the suite's extension tests (positive and negative) of a few
    operators; ``make conformance-vulkan-float`` runs all of them."""
    _, cases = run_conformance(
        tmp_path / "report",
        *("--device", DEVICE, "--profile", "pro-fp", "--per-operator", "8", "-j", "2"),
        *("--extension", "bf16", "--extension", "fp8e4m3", "--extension", "fp8e5m2"),
        *("--operators", *EXTENSION_OPERATORS),
    )
    ran = [c.get("name", "") for c in cases if c.find("skipped") is None]
    assert any("bf16" in name for name in ran)
    assert any("fp8e4m3" in name or "f8e4m3" in name for name in ran)
    assert any("fp8e5m2" in name or "f8e5m2" in name for name in ran)
