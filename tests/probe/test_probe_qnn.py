"""QNN probe against a fake backend library built from tests/support/fakes/qnn_fake.c, its layouts, and real absence."""

from __future__ import annotations

import ctypes
import json

import pytest

from fakes.build import FAKES, compile_shared, run_c
from ironaccel.core import (
    BackendKind,
    CapabilityFlags,
    DeviceId,
    InvalidArgument,
    ProbedBackend,
    Settings,
    Tier,
    Unavailable,
    Vendor,
)
from ironaccel.probe import qnn


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("qnn")
    return {
        "htp": compile_shared(FAKES / "qnn_fake.c", out, "libQnnHtpFake.so"),
        "cpu": compile_shared(FAKES / "qnn_fake.c", out, "libQnnCpuFake.so", ["FAKE_CPU_ONLY"]),
        "empty": compile_shared("int not_qnn = 1;\n", out, "libNotQnn.so"),
    }


@pytest.fixture
def fake(built):
    control = ctypes.CDLL(str(built["htp"]))  # same path, same handle as the probe's load
    control.fake_set_status.argtypes = [ctypes.c_uint64]
    control.fake_reset()
    yield control
    control.fake_reset()


def _cfg(path) -> Settings:
    return Settings(libraries={"qnn": str(path)})


def test_fake_providers_parsed_field_by_field_on_an_arm_host(built, fake):
    devices = qnn.probe(_cfg(built["htp"]), machine="aarch64")
    assert len(devices) == 2  # the NULL list entry is skipped
    htp, gpu = devices
    assert htp.id == DeviceId(BackendKind.QNN, 0)
    assert htp.vendor is Vendor.QUALCOMM
    assert htp.name == "Qualcomm Hexagon Tensor Processor (HTP_QTI_AISW)"
    assert htp.arch == "htp"
    assert htp.software is None
    assert htp.capability.flags == CapabilityFlags.HVX | CapabilityFlags.HMX
    assert htp.capability.tier is Tier.MOBILE
    assert (htp.memory_bytes, htp.uuid, htp.pci, htp.driver_version) == (None, None, None, None)
    assert dict(htp.extra) == {
        "backend_id": 6,
        "provider": "HTP_QTI_AISW",
        "core_api_version": "2.7.2",
        "backend_api_version": "5.13.0",
        "library": str(built["htp"]),
    }
    assert gpu.id == DeviceId(BackendKind.QNN, 1)
    assert gpu.name == "Qualcomm Adreno GPU"  # providerName NULL
    assert gpu.arch == "gpu"
    assert gpu.capability.flags == CapabilityFlags.NONE  # HVX/HMX only for HTP
    assert dict(gpu.extra)["provider"] is None
    assert dict(gpu.extra)["backend_api_version"] == "3.2.0"
    assert fake.fake_calls() == 1
    assert fake.fake_table_calls() == 0  # nothing in the version-dependent function table is called
    json.dumps([d.to_json() for d in devices])


def test_htp_on_an_x86_host_is_the_simulator(built, fake):
    htp = qnn.probe(_cfg(built["htp"]), machine="x86_64")[0]
    assert htp.software == "qnn-htp-simulator"
    assert htp.capability.flags == CapabilityFlags.NONE
    assert htp.capability.tier is Tier.BASELINE


def test_capabilities_agree_with_enumerate(built, fake):
    cfg = _cfg(built["htp"])
    backend = ProbedBackend(BackendKind.QNN, lambda: qnn.probe(cfg, machine="aarch64"))
    devices = backend.enumerate()
    assert backend.is_available() and backend.reason is None
    for n, dev in enumerate(devices):
        assert backend.capabilities(n) == dev.capability.flags
    for bad in (-1, len(devices), "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)


def test_every_loadable_backend_library_is_probed_in_order(built, fake, monkeypatch, tmp_path):
    monkeypatch.setattr(qnn, "CANDIDATES", (str(built["htp"]), str(tmp_path / "libQnnDsp.so"), str(built["cpu"])))
    devices = qnn.probe(Settings(), machine="aarch64")
    assert [(d.ordinal, d.arch) for d in devices] == [(0, "htp"), (1, "gpu"), (2, "cpu")]
    cpu = devices[2]
    assert cpu.name == "Qualcomm QNN CPU (CPU_QTI_AISW)"
    assert cpu.software == "qnn-cpu"
    assert dict(cpu.extra)["library"] == str(built["cpu"])


def test_get_providers_failure_is_a_reason_with_the_low_16_bit_code(built, fake):
    fake.fake_set_status((7 << 32) | 1002)
    with pytest.raises(Unavailable, match=r"QnnInterface_getProviders in .* failed with code 1002$"):
        qnn.probe(_cfg(built["htp"]))


def test_library_without_the_entry_point(built):
    with pytest.raises(Unavailable, match="lacks symbol QnnInterface_getProviders"):
        qnn.probe(_cfg(built["empty"]))


def test_missing_override_names_the_path(tmp_path):
    missing = tmp_path / "libQnnHtp.so"
    with pytest.raises(Unavailable, match=rf"QNN backend library not found: tried {missing} \(not found\)"):
        qnn.probe(_cfg(missing))


def test_real_absence_names_the_libraries():
    for name in qnn.CANDIDATES:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        pytest.skip(f"this host has {name}")
    with pytest.raises(Unavailable) as info:
        qnn.probe(Settings())
    assert info.value.reason.startswith("QNN backend library not found: tried ")
    for name in qnn.CANDIDATES:
        assert name in info.value.reason
    backend = ProbedBackend(BackendKind.QNN, lambda: qnn.probe(Settings()))
    assert not backend.is_available() and backend.error is None


# --- layouts and constants against QnnInterface.h / QnnTypes.h / QnnCommon.h (QNN SDK v2.13.0) -------------

LAYOUT_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
typedef uint64_t Qnn_ErrorHandle_t;
typedef struct { uint32_t major; uint32_t minor; uint32_t patch; } Qnn_Version_t;
typedef struct { Qnn_Version_t coreApiVersion; Qnn_Version_t backendApiVersion; } Qnn_ApiVersion_t;
typedef Qnn_ErrorHandle_t (*Fn)(void);
typedef struct { Fn slot[45]; } QnnInterface_ImplementationV2_7_t;
typedef struct {
  uint32_t backendId;
  const char* providerName;
  Qnn_ApiVersion_t apiVersion;
  union { QnnInterface_ImplementationV2_7_t v2_7; };
} QnnInterface_t;
#define P(name, value) printf("%s %zu\n", name, (size_t)(value))
int main(void) {
  P("version.size", sizeof(Qnn_Version_t));
  P("version.major", offsetof(Qnn_Version_t, major));
  P("version.minor", offsetof(Qnn_Version_t, minor));
  P("version.patch", offsetof(Qnn_Version_t, patch));
  P("api.size", sizeof(Qnn_ApiVersion_t));
  P("api.core", offsetof(Qnn_ApiVersion_t, coreApiVersion));
  P("api.backend", offsetof(Qnn_ApiVersion_t, backendApiVersion));
  P("iface.backendId", offsetof(QnnInterface_t, backendId));
  P("iface.providerName", offsetof(QnnInterface_t, providerName));
  P("iface.apiVersion", offsetof(QnnInterface_t, apiVersion));
  P("iface.table", offsetof(QnnInterface_t, v2_7));
  return 0;
}
"""


@pytest.fixture(scope="module")
def header_layout(tmp_path_factory):
    return run_c(LAYOUT_C, tmp_path_factory.mktemp("qnn_layout"), "qnn_layout")


def test_struct_layouts_match_the_header(header_layout):
    got = {
        "version.size": ctypes.sizeof(qnn.QnnVersion),
        "version.major": qnn.QnnVersion.major.offset,
        "version.minor": qnn.QnnVersion.minor.offset,
        "version.patch": qnn.QnnVersion.patch.offset,
        "api.size": ctypes.sizeof(qnn.QnnApiVersion),
        "api.core": qnn.QnnApiVersion.coreApiVersion.offset,
        "api.backend": qnn.QnnApiVersion.backendApiVersion.offset,
        "iface.backendId": qnn.QnnInterfacePrefix.backendId.offset,
        "iface.providerName": qnn.QnnInterfacePrefix.providerName.offset,
        "iface.apiVersion": qnn.QnnInterfacePrefix.apiVersion.offset,
        "iface.table": qnn.TABLE_OFFSET,
    }
    assert got == header_layout
    # The function table is inline: on 64-bit hosts it starts 40 bytes in, never behind a pointer.
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        assert qnn.TABLE_OFFSET == 40


@pytest.mark.parametrize(
    ("name", "value", "source"),
    [
        ("QNN_SUCCESS", 0, "QnnCommon.h"),
        ("QNN_ERROR_CODE_MASK", 0xFFFF, "QnnCommon.h QNN_GET_ERROR_CODE"),
        ("QNN_BACKEND_ID_NULL", 0, "QnnCommon.h"),
        ("QNN_BACKEND_ID_REFERENCE", 1, "QnnCommon.h"),
        ("QNN_BACKEND_ID_SAVER", 2, "QnnCommon.h"),
        ("QNN_BACKEND_ID_CPU", 3, "QnnCommon.h"),
        ("QNN_BACKEND_ID_GPU", 4, "GPU/QnnGpuCommon.h"),
        ("QNN_BACKEND_ID_DSP", 5, "QnnCommon.h"),
        ("QNN_BACKEND_ID_HTP", 6, "HTP/QnnHtpCommon.h"),
        ("QNN_BACKEND_ID_HTA", 7, "QnnHtaCommon.h"),
        ("QNN_BACKEND_ID_LPAI", 12, "QnnLpaiCommon.h"),
    ],
)
def test_constants_match_the_headers(name, value, source):
    assert getattr(qnn, name) == value, source
