"""TPU probe against a fake libtpu (tests/support/fakes/pjrt_fake.c) and a fake sysfs, its layouts, and real absence."""

from __future__ import annotations

import ctypes
import json
import os
import shutil

import pytest

from fakes.build import FAKES, compile_shared, run_c
from ironaccel.core import (
    BackendKind,
    CapabilityFlags,
    DeviceId,
    InvalidArgument,
    PciAddress,
    ProbedBackend,
    Settings,
    Tier,
    Unavailable,
    Vendor,
)
from ironaccel.probe import tpu


@pytest.fixture(scope="module")
def lib_path(tmp_path_factory):
    return compile_shared(FAKES / "pjrt_fake.c", tmp_path_factory.mktemp("pjrt"), "libtpu-fake.so")


@pytest.fixture
def fake(lib_path):
    control = ctypes.CDLL(str(lib_path))
    control.fake_set_struct_size.argtypes = [ctypes.c_size_t]
    control.fake_reset()
    yield control
    control.fake_reset()


def _function(sys_dir, bus_id, vendor, device, subsystem, driver, group=None):
    base = sys_dir / "bus" / "pci" / "devices" / bus_id
    base.mkdir(parents=True)
    (base / "vendor").write_text(f"0x{vendor:04x}\n")
    (base / "device").write_text(f"0x{device:04x}\n")
    (base / "subsystem_device").write_text(f"0x{subsystem:04x}\n")
    os.symlink(f"../../../bus/pci/drivers/{driver}", base / "driver")  # dangling, as only its name matters
    if group is not None:
        os.symlink(f"../../../kernel/iommu_groups/{group}", base / "iommu_group")
    return base


@pytest.fixture
def host(tmp_path):
    """v4 on /dev/accel0, v5e on vfio group 7, v3 on /dev/accel1, plus functions that must be ignored."""
    sys_dir, dev_dir = tmp_path / "sys", tmp_path / "dev"
    (dev_dir / "vfio").mkdir(parents=True)
    v4 = _function(sys_dir, "0000:00:04.0", 0x1AE0, 0x005E, 0x0000, "accel")
    _function(sys_dir, "0000:00:05.0", 0x1AE0, 0x0063, 0x0000, "vfio-pci", group=7)
    _function(sys_dir, "0000:00:06.0", 0x1AE0, 0x0042, 0x0000, "gvnic")  # Google NIC, not a TPU
    _function(sys_dir, "0000:00:07.0", 0x8086, 0x1237, 0x0000, "piix")
    _function(sys_dir, "0000:00:08.0", 0x1AE0, 0x0062, 0x0000, "vfio-pci", group=9)  # no /dev/vfio/9
    v3 = _function(sys_dir, "0000:00:09.0", 0x1AE0, 0x0027, 0x004F, "accel")
    accel = sys_dir / "class" / "accel"
    for name, target in (("accel0", v4), ("accel1", v3)):
        (accel / name).mkdir(parents=True)
        os.symlink(target, accel / name / "device")
        (dev_dir / name).touch()
    (dev_dir / "vfio" / "7").touch()
    return {"dev_dir": str(dev_dir), "sys_dir": str(sys_dir)}


def _cfg(path) -> Settings:
    return Settings(libraries={"tpu": str(path)})


def test_chips_from_sysfs_and_version_from_pjrt(lib_path, fake, host):
    devices = tpu.probe(_cfg(lib_path), **host)
    dev = host["dev_dir"]
    assert [d.id for d in devices] == [DeviceId(BackendKind.TPU, n) for n in range(3)]
    v4, v5e, v3 = devices
    assert v4.vendor is Vendor.GOOGLE
    assert v4.name == "Google TPU v4"
    assert v4.arch == "v4"
    assert v4.pci == PciAddress(vendor_id=0x1AE0, device_id=0x005E, bus_id="0000:00:04.0")
    assert v4.capability.flags == CapabilityFlags.BF16 | CapabilityFlags.HBM
    assert v4.capability.tier is Tier.DATACENTER
    assert (v4.memory_bytes, v4.uuid, v4.driver_version, v4.software) == (None, None, None, None)
    assert dict(v4.extra) == {
        "pjrt_api_version": "0.61",
        "device_node": f"{dev}/accel0",
        "kernel_driver": "accel",
        "pci_subsystem_device": "0x0000",
        "library": str(lib_path),
    }
    assert (v5e.name, v5e.pci.bus_id, dict(v5e.extra)["device_node"]) == (
        "Google TPU v5e",
        "0000:00:05.0",
        f"{dev}/vfio/7",
    )
    assert dict(v5e.extra)["kernel_driver"] == "vfio-pci"
    assert (v3.arch, dict(v3.extra)["device_node"], dict(v3.extra)["pci_subsystem_device"]) == (
        "v3",
        f"{dev}/accel1",
        "0x004f",
    )
    json.dumps([d.to_json() for d in devices])
    assert fake.fake_calls() == 1
    assert fake.fake_client_creates() == 0  # discovery never creates a PJRT client


def test_capabilities_agree_with_enumerate(lib_path, fake, host):
    cfg = _cfg(lib_path)
    backend = ProbedBackend(BackendKind.TPU, lambda: tpu.probe(cfg, **host))
    devices = backend.enumerate()
    assert len(devices) == 3
    for n, dev in enumerate(devices):
        assert backend.capabilities(n) == dev.capability.flags
    for bad in (-1, len(devices), "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)


def test_libtpu_is_found_through_its_python_package(lib_path, fake, host, tmp_path, monkeypatch):
    package = tmp_path / "site" / "libtpu"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy(lib_path, package / "libtpu.so")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    devices = tpu.probe(Settings(), **host)
    assert dict(devices[0].extra)["library"] == str(package / "libtpu.so")


def test_null_api_and_short_struct_are_reasons(lib_path, fake, host):
    fake.fake_set_null(1)
    with pytest.raises(Unavailable, match=r"^GetPjrtApi returned NULL$"):
        tpu.probe(_cfg(lib_path), **host)
    fake.fake_set_null(0)
    fake.fake_set_struct_size(16)
    with pytest.raises(Unavailable, match=r"PJRT_Api\.struct_size is 16, smaller than its 40-byte header"):
        tpu.probe(_cfg(lib_path), **host)


def test_chips_without_libtpu_say_so(host, tmp_path):
    with pytest.raises(Unavailable) as info:
        tpu.probe(_cfg(tmp_path / "libtpu.so"), **host)
    reason = info.value.reason
    assert reason.startswith("libtpu.so not found")
    assert "yet 3 TPU chip(s) exist (TPU v4 at 0000:00:04.0, TPU v5e at 0000:00:05.0, TPU v3 at 0000:00:09.0)" in reason


def test_libtpu_without_chips_is_not_even_loaded(lib_path, fake, tmp_path):
    with pytest.raises(Unavailable) as info:
        tpu.probe(_cfg(lib_path), dev_dir=str(tmp_path), sys_dir=str(tmp_path))
    assert "no TPU chips found" in info.value.reason
    assert f"libtpu.so found at {lib_path}" in info.value.reason
    assert fake.fake_calls() == 0


def test_chip_without_a_device_node_is_reported_in_the_reason(lib_path, tmp_path):
    sys_dir = tmp_path / "sys"
    _function(sys_dir, "0000:00:08.0", 0x1AE0, 0x0062, 0x0000, "vfio-pci", group=9)
    with pytest.raises(Unavailable, match=r"1 TPU chip\(s\) without a device node \(0000:00:08\.0\)"):
        tpu.probe(_cfg(lib_path), dev_dir=str(tmp_path / "dev"), sys_dir=str(sys_dir))


def test_real_absence_names_the_library():
    if tpu._scan("/dev", "/sys")[0]:
        pytest.skip("this host has TPU chips")
    with pytest.raises(Unavailable) as info:
        tpu.probe(Settings())
    assert "no TPU chips found" in info.value.reason
    assert "libtpu.so" in info.value.reason


# --- layouts and constants against openxla/xla xla/pjrt/c/pjrt_c_api.h (PJRT_API_MAJOR 0) -----------------

LAYOUT_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
typedef enum { PJRT_Extension_Type_Gpu_Custom_Call = 0 } PJRT_Extension_Type;
typedef struct PJRT_Extension_Base {
  size_t struct_size; PJRT_Extension_Type type; struct PJRT_Extension_Base* next;
} PJRT_Extension_Base;
struct PJRT_Api_Version {
  size_t struct_size; PJRT_Extension_Base* extension_start; int major_version; int minor_version;
};
typedef struct PJRT_Api_Version PJRT_Api_Version;
typedef struct PJRT_Error PJRT_Error;
typedef struct PJRT_Error_Destroy_Args PJRT_Error_Destroy_Args;
typedef void PJRT_Error_Destroy(PJRT_Error_Destroy_Args* args);
typedef struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;
  PJRT_Error_Destroy* PJRT_Error_Destroy;
} PJRT_Api;
#define P(name, value) printf("%s %zu\n", name, (size_t)(value))
int main(void) {
  P("version.size", sizeof(PJRT_Api_Version));
  P("version.struct_size", offsetof(PJRT_Api_Version, struct_size));
  P("version.extension_start", offsetof(PJRT_Api_Version, extension_start));
  P("version.major_version", offsetof(PJRT_Api_Version, major_version));
  P("version.minor_version", offsetof(PJRT_Api_Version, minor_version));
  P("version.STRUCT_SIZE", offsetof(PJRT_Api_Version, minor_version) + sizeof(int));
  P("api.struct_size", offsetof(PJRT_Api, struct_size));
  P("api.extension_start", offsetof(PJRT_Api, extension_start));
  P("api.pjrt_api_version", offsetof(PJRT_Api, pjrt_api_version));
  P("api.first_function", offsetof(PJRT_Api, PJRT_Error_Destroy));
  return 0;
}
"""


def test_struct_layouts_match_the_header(tmp_path):
    expected = run_c(LAYOUT_C, tmp_path, "pjrt_layout")
    v, a = tpu.PjrtApiVersion, tpu.PjrtApiPrefix
    got = {
        "version.size": ctypes.sizeof(v),
        "version.struct_size": v.struct_size.offset,
        "version.extension_start": v.extension_start.offset,
        "version.major_version": v.major_version.offset,
        "version.minor_version": v.minor_version.offset,
        "version.STRUCT_SIZE": tpu.PJRT_API_VERSION_STRUCT_SIZE,
        "api.struct_size": a.struct_size.offset,
        "api.extension_start": a.extension_start.offset,
        "api.pjrt_api_version": a.pjrt_api_version.offset,
        "api.first_function": ctypes.sizeof(a),  # the prefix ends where the function pointers begin
    }
    assert got == expected


def test_pci_ids_match_the_reference():
    # Google's PCI vendor id and the TPU device ids of tpu_info/device.py (cloud-accelerator-diagnostics).
    assert tpu.GOOGLE_PCI_VENDOR == 0x1AE0
    assert tpu.TPU_PCI_IDS == {
        (0x0027, 0x004E): "v2",
        (0x0027, 0x004F): "v3",
        (0x005E, None): "v4",
        (0x0063, None): "v5e",
        (0x0062, None): "v5p",
        (0x006F, None): "v6e",
        (0x0076, None): "7x",
    }
