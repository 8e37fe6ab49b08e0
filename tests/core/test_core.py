"""The discovery core: kinds, flags, descriptors, the registry and its failure isolation."""

from __future__ import annotations

import json
import threading
import time

import pytest

from ironaccel.core import (
    BackendKind,
    BackendRegistry,
    Capability,
    CapabilityFlags,
    DeviceDescriptor,
    DeviceId,
    InvalidArgument,
    PciAddress,
    ProbedBackend,
    Settings,
    Tier,
    Unavailable,
    Vendor,
    software_name,
)

SEED_NAMES = "cuda rocm metal qnn cpu vulkan opengl dx12 webgpu tpu level-zero neuron".split()


def test_exactly_the_twelve_families_of_the_seed():
    assert [k.value for k in BackendKind] == SEED_NAMES
    assert BackendKind.parse("LEVEL_ZERO") is BackendKind.LEVEL_ZERO
    with pytest.raises(ValueError, match="unknown accelerator family 'opencl'"):
        BackendKind.parse("opencl")


@pytest.mark.parametrize(
    ("flag", "bit"),
    [
        ("FP64", 0), ("FP32", 1), ("TF32", 2), ("FP16", 3), ("BF16", 4), ("FP8_E4M3", 5), ("FP8_E5M2", 6),
        ("FP4", 7), ("INT8", 8), ("INT4", 9), ("TENSOR_CORES", 16), ("WMMA", 17), ("SPARSE_2_4", 18),
        ("TRANSFORMER_ENGINE", 19), ("UNIFIED_MEMORY", 24), ("HOST_PINNED", 25), ("PEER_ACCESS", 26),
        ("ASYNC_ALLOC", 27), ("HBM", 28), ("NVLINK", 29), ("INFINITY_FABRIC", 30), ("COOPERATIVE_LAUNCH", 32),
        ("DYNAMIC_PARALLELISM", 33), ("GRAPHS", 34), ("MULTI_STREAM", 35), ("FLASH_ATTN", 36),
        ("RAYTRACING", 37), ("NCCL", 40), ("RCCL", 41), ("MPI_AWARE", 42), ("HVX", 48), ("HMX", 49), ("ANE", 50),
    ],
)  # fmt: skip
def test_flag_bits_follow_ironaccelerator(flag, bit):
    assert CapabilityFlags[flag].value == 1 << bit


def test_tiers_are_ordered():
    assert Tier.BASELINE < Tier.MOBILE < Tier.CONSUMER < Tier.WORKSTATION < Tier.DATACENTER


def _descriptor(kind=BackendKind.CUDA, ordinal=0, flags=CapabilityFlags.FP32 | CapabilityFlags.FP16):
    return DeviceDescriptor(
        id=DeviceId(kind, ordinal),
        vendor=Vendor.NVIDIA,
        name="Example GPU",
        arch="sm_90",
        memory_bytes=80 << 30,
        multiprocessors=132,
        clock_khz=1_980_000,
        driver_version="12.4",
        uuid="01234567-89ab-cdef-0123-456789abcdef",
        pci=PciAddress(0x10DE, 0x2335, "0000:01:00.0"),
        capability=Capability(flags, Tier.DATACENTER, fp16_tflops=989.0),
        extra=(("compute_capability", "9.0"),),
    )


def test_descriptor_is_frozen_and_json_round_trips():
    d = _descriptor()
    with pytest.raises(AttributeError):
        d.name = "other"  # type: ignore[misc]
    data = json.loads(json.dumps(d.to_json()))
    assert data["id"] == "cuda:0"
    assert data["capability"]["flags"] == ["fp32", "fp16"]
    assert data["capability"]["tier"] == "datacenter"
    assert DeviceDescriptor.from_json(data) == d


def test_vendor_and_software_detection():
    assert Vendor.from_pci(0x10DE) is Vendor.NVIDIA
    assert Vendor.from_pci(0x1234) is Vendor.OTHER
    assert Vendor.from_text("Advanced Micro Devices, Inc.") is Vendor.AMD
    assert software_name("llvmpipe (LLVM 15.0.6, 256 bits)") == "llvmpipe"
    assert software_name("NVIDIA H200") is None


def test_probed_backend_capabilities_match_enumerate_and_reject_unknown_ordinals():
    devices = [_descriptor(ordinal=0), _descriptor(ordinal=1, flags=CapabilityFlags.FP32)]
    backend = ProbedBackend(BackendKind.CUDA, lambda: devices)
    assert backend.is_available() and backend.reason is None
    for n, d in enumerate(backend.enumerate()):
        assert backend.capabilities(n) == d.capability.flags
    for bad in (-1, 2, "0", 1.0):
        with pytest.raises(InvalidArgument, match="cuda has no device"):
            backend.capabilities(bad)  # type: ignore[arg-type]


def test_probe_runs_once_even_from_many_threads():
    calls = []

    def probe():
        calls.append(1)
        time.sleep(0.01)
        raise Unavailable("libfoo.so not found")

    backend = ProbedBackend(BackendKind.ROCM, probe)
    threads = [threading.Thread(target=backend.is_available) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert backend.reason == "libfoo.so not found"
    assert backend.enumerate() == []
    with pytest.raises(InvalidArgument):
        backend.capabilities(0)


def test_probe_returning_wrong_ordinals_is_reported_not_raised():
    backend = ProbedBackend(BackendKind.CUDA, lambda: [_descriptor(ordinal=3)])
    assert not backend.is_available()
    assert "cuda:3 at position 0" in backend.reason


class _Exploding:
    kind = BackendKind.METAL

    def is_available(self):
        raise RuntimeError("driver exploded")

    def enumerate(self):
        raise AssertionError("never reached")

    def capabilities(self, ordinal):
        raise AssertionError("never reached")


class _Hanging(_Exploding):
    kind = BackendKind.TPU

    def is_available(self):
        time.sleep(1.5)
        return False


def test_registry_first_registration_wins_and_broken_backends_hide_nothing():
    reg = BackendRegistry()
    good = ProbedBackend(BackendKind.CUDA, lambda: [_descriptor()])
    assert reg.register(good)
    assert not reg.register(ProbedBackend(BackendKind.CUDA, lambda: []))
    assert reg.get("cuda") is good
    reg.register(_Exploding())
    reg.register(_Hanging())
    reg.register(ProbedBackend(BackendKind.QNN, lambda: (_ for _ in ()).throw(KeyError("slot"))))
    start = time.perf_counter()
    reports = {r.kind: r for r in reg.describe_all(timeout=0.5)}
    assert time.perf_counter() - start < 3
    assert reports[BackendKind.CUDA].available and len(reports[BackendKind.CUDA].devices) == 1
    assert reports[BackendKind.METAL].reason == "is_available failed: RuntimeError: driver exploded"
    assert reports[BackendKind.TPU].reason == "probe timed out after 0.5 s"
    assert reports[BackendKind.QNN].reason.startswith("probe failed: KeyError")
    assert [b.kind for b in reg.available()] == [BackendKind.CUDA]  # waits out the slow one: it said False
    assert [b.kind for b in reg.iter()] == [BackendKind.CUDA, BackendKind.METAL, BackendKind.QNN, BackendKind.TPU]


def test_settings_from_environment():
    cfg = Settings.from_env({"IRONACCEL_CUDA_LIBRARY": "/x/libcuda.so", "IRONACCEL_VULKAN": "0"})
    assert cfg.library("cuda") == "/x/libcuda.so"
    assert cfg.library("rocm") is None
    assert "vulkan" in cfg.disabled and "cuda" not in cfg.disabled


def test_disabled_family_is_unavailable_with_reason():
    from ironaccel.probe import probe_backend

    backend = probe_backend(BackendKind.LEVEL_ZERO, Settings(disabled=frozenset({"level-zero"})))
    assert not backend.is_available()
    assert backend.reason == "disabled by IRONACCEL_LEVEL_ZERO=0"


def test_default_registry_holds_all_twelve():
    import ironaccel

    reg = ironaccel.init()
    assert [b.kind.value for b in reg.iter()] == SEED_NAMES
    assert ironaccel.init() is reg
