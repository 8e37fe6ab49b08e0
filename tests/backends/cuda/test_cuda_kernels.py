"""The CUDA backend's kernels without a GPU: every registered lowering's kernel sources pass NVRTC's front end
for sm_80 and sm_90 (and, in the slow run, compile to cubins), and the fp16 / bf16 conversions every kernel
carries agree bit for bit with numpy and ml_dtypes over every 16-bit pattern (and a dense sample of fp32
ones), built from the same C text with the host's C compiler.
"""

from __future__ import annotations

import ctypes

import host_conversions
import ml_dtypes
import numpy as np
import pytest

import operator_cases
from ironaccel.backends.cuda import plan
from ironaccel.backends.cuda.capability import descriptor
from ironaccel.backends.cuda.ops import registrations
from ironaccel.backends.cuda.ops.common import Kernel
from ironaccel.backends.cuda.ops.registry import TABLE
from ironaccel.backends.cuda.prelude import PRELUDE

ARCHITECTURES = ("sm_80", "sm_90")


def _advertised() -> list[tuple]:
    d = descriptor()
    return [(op, sig) for op in d.operators for sig in d.signatures(op) if all(dt in d.dtypes for _, dt in sig.types)]


def _kernels() -> dict[str, tuple[Kernel, str]]:
    """Every distinct kernel the lowerings of the advertised pairs produce, with the pair that first did."""
    found: dict[str, tuple[Kernel, str]] = {}
    for op, sig in _advertised():
        for k in plan.build(operator_cases.case(op, sig).program).kernels:
            found.setdefault(k.source, (k, f"{op.name} ({sig})"))
    return found


def test_every_registered_operator_is_advertised_and_has_a_case():
    advertised = {op for op, _ in _advertised()}
    assert {r.op for r in registrations()} == advertised
    assert advertised <= set(operator_cases.CASES)


def test_every_registration_lives_in_the_module_of_its_operators_group():
    assert TABLE.misplaced("ironaccel.backends.cuda.ops") == []


def _unit(found: dict[str, tuple[Kernel, str]]) -> str:
    """Every kernel in one translation unit with one prelude, each kernel's own text in a namespace of its
    own (their helper functions may share names); the entry points keep their C names."""
    bodies = (f"namespace ia_unit_{i} {{\n{k.source[len(PRELUDE) :]}\n}}" for i, (k, _) in enumerate(found.values()))
    return PRELUDE + "\n".join(bodies)


def _each_alone(found: dict[str, tuple[Kernel, str]], compile_one) -> list[str]:
    """Every kernel compiled alone: the failing ones named with the pair that produced them."""
    failures = []
    for kernel, pair in found.values():
        try:
            compile_one(kernel.source)
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            failures.append(f"{pair}: {kernel.name}: {exc}")
    return failures


def _found() -> dict[str, tuple[Kernel, str]]:
    found = _kernels()
    assert len(found) > 40, "the lowerings produced too few kernels"
    assert all(k.source.startswith(PRELUDE) for k, _ in found.values()), "a kernel without the prelude"
    assert len({k.name for k, _ in found.values()}) == len(found), "two kernel sources share an entry name"
    return found


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_kernel_source_passes_nvrtc_s_front_end(arch):
    """The whole text of every kernel, checked by NVRTC's front end (what make test runs: a full compile of
    every kernel for both architectures takes NVRTC about a minute, see the next test)."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC is installed with the [cuda] extra")
    from ironaccel.backends.cuda import kernels

    found = _found()
    try:
        kernels.check_syntax(_unit(found), arch)
    except Exception:  # then each kernel alone, so that every failing one is named
        failures = _each_alone(found, lambda source: kernels.check_syntax(source, arch))
        assert not failures, "\n".join(failures)
        raise


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_kernel_source_compiles_with_nvrtc(arch):
    """Every kernel compiled to a cubin (scripts/gpu-check runs this; the device compiles each kernel it
    loads the same way)."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC is installed with the [cuda] extra")
    from ironaccel.backends.cuda import kernels

    assert arch in kernels.supported_architectures()
    found = _found()
    try:
        image = kernels.compile_source(_unit(found), arch)
    except Exception:  # then each kernel alone, so that every failing one is named
        failures = _each_alone(found, lambda source: kernels.compile_source(source, arch))
        assert not failures, "\n".join(failures)
        raise
    assert image[:4] == b"\x7fELF", "NVRTC gave no cubin"


def test_a_broken_source_fails_with_nvrtc_s_log():
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC is installed with the [cuda] extra")
    from ironaccel.backends.cuda import kernels
    from ironaccel.core.errors import InternalError

    broken = 'extern "C" __global__ void k() { undefined_name(); }'
    with pytest.raises(InternalError, match="undefined_name"):
        kernels.compile_source(broken, "sm_80")
    with pytest.raises(InternalError, match="undefined_name"):
        kernels.check_syntax(broken, "sm_90")


# ---- the conversions, on the host -----------------------------------------------------------------------

# One array entry point per conversion: in[i] -> out[i], as bit patterns.
_WRAPPERS = host_conversions.wrappers(
    (
        ("f16_to_f32", "unsigned short", "unsigned", "ia_bits(ia_f16_to_f32(in[i]))"),
        ("bf16_to_f32", "unsigned short", "unsigned", "ia_bits(ia_bf16_to_f32(in[i]))"),
        ("f32_to_f16", "unsigned", "unsigned short", "ia_f32_to_f16(ia_float(in[i]))"),
        ("f32_to_bf16", "unsigned", "unsigned short", "ia_f32_to_bf16(ia_float(in[i]))"),
    )
)


@pytest.fixture(scope="module")
def conversions(tmp_path_factory) -> ctypes.CDLL:
    return host_conversions.build(tmp_path_factory.mktemp("conversions"), _WRAPPERS)


def _same_bits_or_nans(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bit for bit, except that a NaN only has to be a NaN of the same sign (numpy keeps payloads, the
    kernels give the plain quiet NaN, as the CPU backend does)."""
    nan = np.isnan(want.astype(np.float32))
    bits = got.view(np.uint32 if got.itemsize == 4 else np.uint16)
    want_bits = want.view(bits.dtype)
    wrong = (bits != want_bits) & ~nan
    shown = [hex(int(v)) for v in np.flatnonzero(wrong)[:5]]
    assert not wrong.any(), f"{what}: {int(wrong.sum())} values differ, first at indexes {shown}"
    assert np.isnan(got.astype(np.float32)[nan]).all(), f"{what}: a NaN became a number"
    sign = bits.dtype.itemsize * 8 - 1
    assert ((bits[nan] >> sign) == (want_bits[nan] >> sign)).all(), f"{what}: a NaN lost its sign"


def test_fp16_and_bf16_widen_exactly_for_every_pattern(conversions):
    patterns = np.arange(1 << 16, dtype=np.uint16)
    for name, dtype in (("f16_to_f32", np.float16), ("bf16_to_f32", ml_dtypes.bfloat16)):
        got = host_conversions.run(conversions, name, patterns, np.uint32).view(np.float32)
        _same_bits_or_nans(got, patterns.view(dtype).astype(np.float32), name)


def _fp32_patterns() -> np.ndarray:
    """Every sign, exponent and top 10 mantissa bits, each with low bits at and around the rounding points of
    fp16 (bit 13) and bf16 (bit 16): ties, just below and above, the extremes; and random patterns."""
    high = np.arange(1 << 19, dtype=np.uint32) << 13
    fp16_lows = np.array([0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x0800, 0x17FF], dtype=np.uint32)
    ties = (high[:, None] | fp16_lows[None, :]).ravel()
    top = np.arange(1 << 16, dtype=np.uint32) << 16
    bf16_lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
    bf16_ties = (top[:, None] | bf16_lows[None, :]).ravel()
    rng = np.random.default_rng(34)
    noise = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([ties, bf16_ties, noise])


def test_fp32_narrows_to_nearest_even(conversions):
    patterns = _fp32_patterns()
    values = patterns.view(np.float32)
    for name, dtype in (("f32_to_f16", np.float16), ("f32_to_bf16", ml_dtypes.bfloat16)):
        got = host_conversions.run(conversions, name, patterns, np.uint16).view(dtype)
        with np.errstate(all="ignore"):
            want = values.astype(dtype)
        _same_bits_or_nans(got, want, name)
