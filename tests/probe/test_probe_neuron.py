"""Neuron probe against a fake libnrt built from tests/support/fakes/nrt_fake.c, its layouts, and real absence."""

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
from ironaccel.probe import neuron

GIB = 1 << 30


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("nrt")
    return {
        "nrt": compile_shared(FAKES / "nrt_fake.c", out, "libnrt.so.1"),
        "old": compile_shared(FAKES / "nrt_fake.c", out, "libnrt-old.so.1", ["NO_VNC"]),
    }


def _control(path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.fake_last_fal.restype = ctypes.c_char_p
    lib.fake_set_visible.argtypes = [ctypes.c_uint32]
    lib.fake_reset()
    return lib


@pytest.fixture
def fake(built):
    lib = _control(built["nrt"])
    yield lib
    lib.fake_reset()


@pytest.fixture
def host(tmp_path):
    """A /dev with two Neuron nodes (and a look-alike) and a /sys with the driver version."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("neuron0", "neuron1", "neuron_monitor"):
        (dev / name).touch()
    version = tmp_path / "sys" / "module" / "neuron" / "version"
    version.parent.mkdir(parents=True)
    version.write_text("2.19.64.0\n")
    return {"dev_dir": str(dev), "sys_dir": str(tmp_path / "sys")}


def _cfg(path) -> Settings:
    return Settings(libraries={"neuron": str(path)})


def test_fake_runtime_parsed_field_by_field(built, fake, host):
    devices = neuron.probe(_cfg(built["nrt"]), **host)
    assert [d.id for d in devices] == [DeviceId(BackendKind.NEURON, 0), DeviceId(BackendKind.NEURON, 1)]
    for vnc, dev in enumerate(devices):
        assert dev.vendor is Vendor.AWS
        assert dev.name == "AWS Trainium NeuronCore"
        assert dev.arch == "trn1"
        assert dev.memory_bytes == 16 * GIB | vnc
        assert dev.driver_version == "2.19.64.0"
        assert dev.capability.flags == (
            CapabilityFlags.FP32 | CapabilityFlags.FP16 | CapabilityFlags.BF16 | CapabilityFlags.HBM
        )
        assert dev.capability.tier is Tier.DATACENTER
        assert (dev.uuid, dev.pci, dev.software) == (None, None, None)
        assert dict(dev.extra) == {
            "vnc": vnc,
            "runtime_version": "2.21.5.7",
            "total_nc_count": 4,
            "visible_nc_count": 2,
            "device_nodes": [f"{host['dev_dir']}/neuron0", f"{host['dev_dir']}/neuron1"],
            "instance_family": "TRN1",
            "instance_size": "32XL",
            "device_revision": "v2",
            "library": str(built["nrt"]),
        }
    json.dumps([d.to_json() for d in devices])
    # nrt_init got all three arguments, and nrt_close released the cores afterwards.
    assert fake.fake_init_calls() == 1
    assert fake.fake_last_framework() == neuron.NRT_FRAMEWORK_TYPE_NO_FW
    assert fake.fake_args_ok() == 1
    assert fake.fake_last_fal() == b"ironaccel"
    assert fake.fake_close_calls() == 1


def test_capabilities_agree_with_enumerate(built, fake, host):
    cfg = _cfg(built["nrt"])
    backend = ProbedBackend(BackendKind.NEURON, lambda: neuron.probe(cfg, **host))
    devices = backend.enumerate()
    assert len(devices) == 2
    for n, dev in enumerate(devices):
        assert backend.capabilities(n) == dev.capability.flags
    for bad in (-1, len(devices), "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)


def test_older_runtime_with_only_the_nc_count_names(built, host):
    old = _control(built["old"])
    devices = neuron.probe(_cfg(built["old"]), **host)
    assert [d.ordinal for d in devices] == [0, 1]
    assert old.fake_close_calls() == 1


def test_nrt_init_failure_is_a_reason_and_claims_nothing(built, fake, host):
    fake.fake_set_init_status(4)
    with pytest.raises(Unavailable, match=r"^nrt_init failed with code 4 \(NRT_RESOURCE\)$"):
        neuron.probe(_cfg(built["nrt"]), **host)
    assert fake.fake_close_calls() == 0


def test_no_visible_cores_skips_nrt_init(built, fake, host):
    fake.fake_set_visible(0)
    with pytest.raises(Unavailable, match=r"no visible NeuronCores \(4 in total; 2 device node"):
        neuron.probe(_cfg(built["nrt"]), **host)
    assert fake.fake_init_calls() == 0


def test_device_nodes_without_the_library_say_so(host, tmp_path):
    with pytest.raises(Unavailable) as info:
        neuron.probe(_cfg(tmp_path / "libnrt.so.1"), **host)
    reason = info.value.reason
    assert reason.startswith("libnrt.so.1 not found")
    assert "yet 2 Neuron device node(s) exist" in reason
    assert f"{host['dev_dir']}/neuron0" in reason and "neuron_monitor" not in reason


def test_real_absence_names_the_library(tmp_path):
    try:
        ctypes.CDLL("libnrt.so.1")
    except OSError:
        pass
    else:
        pytest.skip("this host has the Neuron runtime")
    with pytest.raises(Unavailable, match=r"^libnrt\.so\.1 not found \(tried libnrt\.so\.1.*and no .*neuron\*"):
        neuron.probe(Settings(), dev_dir=str(tmp_path))
    with pytest.raises(Unavailable, match=r"^libnrt\.so\.1 not found"):
        neuron.probe(Settings())


# --- layouts and constants against aws-neuron-sdk src/libnrt/include/nrt/{nrt,nrt_version,nrt_status}.h ----

LAYOUT_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#define RT_VERSION_DETAIL_LEN 128
#define GIT_HASH_LEN 64
typedef struct nrt_version {
  uint64_t rt_major; uint64_t rt_minor; uint64_t rt_patch; uint64_t rt_maintenance;
  char rt_detail[RT_VERSION_DETAIL_LEN];
  char git_hash[GIT_HASH_LEN];
} nrt_version_t;
typedef struct nrt_instance_info {
  uint32_t family; uint32_t size; char arch_name[16]; char device_revision[8];
} nrt_instance_info_t;
typedef struct nrt_vnc_memory_stats { size_t bytes_used; size_t bytes_limit; } nrt_vnc_memory_stats_t;
#define P(name, value) printf("%s %zu\n", name, (size_t)(value))
int main(void) {
  P("version.size", sizeof(nrt_version_t));
  P("version.rt_major", offsetof(nrt_version_t, rt_major));
  P("version.rt_minor", offsetof(nrt_version_t, rt_minor));
  P("version.rt_patch", offsetof(nrt_version_t, rt_patch));
  P("version.rt_maintenance", offsetof(nrt_version_t, rt_maintenance));
  P("version.rt_detail", offsetof(nrt_version_t, rt_detail));
  P("version.git_hash", offsetof(nrt_version_t, git_hash));
  P("info.size", sizeof(nrt_instance_info_t));
  P("info.family", offsetof(nrt_instance_info_t, family));
  P("info.size_field", offsetof(nrt_instance_info_t, size));
  P("info.arch_name", offsetof(nrt_instance_info_t, arch_name));
  P("info.device_revision", offsetof(nrt_instance_info_t, device_revision));
  P("mem.size", sizeof(nrt_vnc_memory_stats_t));
  P("mem.bytes_used", offsetof(nrt_vnc_memory_stats_t, bytes_used));
  P("mem.bytes_limit", offsetof(nrt_vnc_memory_stats_t, bytes_limit));
  return 0;
}
"""


def test_struct_layouts_match_the_headers(tmp_path):
    expected = run_c(LAYOUT_C, tmp_path, "nrt_layout")
    v, i, m = neuron.NrtVersion, neuron.NrtInstanceInfo, neuron.NrtVncMemoryStats
    got = {
        "version.size": ctypes.sizeof(v),
        "version.rt_major": v.rt_major.offset,
        "version.rt_minor": v.rt_minor.offset,
        "version.rt_patch": v.rt_patch.offset,
        "version.rt_maintenance": v.rt_maintenance.offset,
        "version.rt_detail": v.rt_detail.offset,
        "version.git_hash": v.git_hash.offset,
        "info.size": ctypes.sizeof(i),
        "info.family": i.family.offset,
        "info.size_field": i.size.offset,
        "info.arch_name": i.arch_name.offset,
        "info.device_revision": i.device_revision.offset,
        "mem.size": ctypes.sizeof(m),
        "mem.bytes_used": m.bytes_used.offset,
        "mem.bytes_limit": m.bytes_limit.offset,
    }
    assert got == expected


@pytest.mark.parametrize(
    ("name", "value", "source"),
    [
        ("NRT_FRAMEWORK_TYPE_INVALID", 0, "nrt.h nrt_framework_type_t"),
        ("NRT_FRAMEWORK_TYPE_NO_FW", 1, "nrt.h nrt_framework_type_t"),
        ("NRT_SUCCESS", 0, "nrt_status.h NRT_STATUS"),
    ],
)
def test_constants_match_the_headers(name, value, source):
    assert getattr(neuron, name) == value, source


def test_status_and_instance_tables_match_the_headers():
    # nrt_status.h
    assert neuron.NRT_STATUS_NAMES[1] == "NRT_FAILURE"
    assert neuron.NRT_STATUS_NAMES[4] == "NRT_RESOURCE"
    assert neuron.NRT_STATUS_NAMES[9] == "NRT_LOAD_NOT_ENOUGH_NC"
    assert neuron.NRT_STATUS_NAMES[13] == "NRT_UNINITIALIZED"
    assert neuron.NRT_STATUS_NAMES[1005] == "NRT_EXEC_NC_BUSY"
    # nrt.h NRT_INSTANCE_* (family) and NRT_INSTANCE_SIZE_* (size) enums
    families = {k: v[0] for k, v in neuron.NRT_INSTANCE_FAMILIES.items()}
    assert families == {
        0: "UNKNOWN", 1: "INF1", 2: "TRN1", 3: "TRN1N", 4: "INF2", 5: "TRN2", 6: "TRN2N", 7: "INF2E",
        8: "TRN2P", 9: "TRN2U", 10: "TRN2E", 11: "TRN2EU", 12: "TRN2AC", 13: "TRN2UAC", 14: "TRN3",
        15: "TRN3PDS98",
    }  # fmt: skip
    assert neuron.NRT_INSTANCE_SIZES.index("1XL") == 0
    assert neuron.NRT_INSTANCE_SIZES.index("48XL") == 7
    assert neuron.NRT_INSTANCE_SIZES.index("3XL") == 8
