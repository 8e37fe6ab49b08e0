"""Metal and DirectX 12 probes: platform absence here, layouts and constants, and the ctypes paths exercised
against stand-in shared objects (a fake Objective-C runtime + MTLCopyAllDevices, a fake DXGI/D3D12 with COM
vtables laid out as dxgi.h declares them)."""

from __future__ import annotations

import ctypes
import json
import sys
import uuid

import pytest

from fakes.build import compile_shared
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
from ironaccel.probe import dx12, metal

GIB = 1 << 30
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks the Linux answer")


# --- real absence -----------------------------------------------------------------------------------------


@linux_only
def test_metal_is_absent_here():
    with pytest.raises(Unavailable, match=r"^Metal exists only on macOS \(this is linux\)$"):
        metal.probe(Settings())


@linux_only
def test_dx12_is_absent_here():
    with pytest.raises(Unavailable, match=r"^DirectX 12 exists only on Windows \(this is linux\)$"):
        dx12.probe(Settings())


def test_absence_is_a_reason_not_an_error():
    for kind, mod, system in ((BackendKind.METAL, metal, "linux"), (BackendKind.DX12, dx12, "macos")):
        backend = ProbedBackend(kind, lambda mod=mod, system=system: mod.probe(Settings(), system=system))
        assert not backend.is_available()
        assert backend.error is None and "exists only on" in backend.reason
        with pytest.raises(InvalidArgument):
            backend.capabilities(0)


# --- Metal through a fake Objective-C runtime ---------------------------------------------------------------

FAKE_OBJC_C = r"""
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
typedef struct { char name[64]; } Sel;
static Sel sels[128];
static int nsels, depth, pushes, releases;
void* sel_registerName(const char* n) {
  for (int i = 0; i < nsels; i++) if (!strcmp(sels[i].name, n)) return &sels[i];
  strncpy(sels[nsels].name, n, 63);
  return &sels[nsels++];
}
void* objc_autoreleasePoolPush(void) { pushes++; return (void*)(intptr_t)++depth; }
void objc_autoreleasePoolPop(void* token) { if ((intptr_t)token == depth) depth--; }
enum { ARRAY, DEVICE, STRING, ARCH };
typedef struct { int kind, idx; const char* text; } Obj;
static Obj array = {ARRAY, 0, 0}, arch = {ARCH, 0, 0}, arch_name = {STRING, 0, "applegpu_g15s"};
static Obj devs[2] = {{DEVICE, 0, 0}, {DEVICE, 1, 0}};
static Obj names[2] = {{STRING, 0, "Apple M3 Max"}, {STRING, 1, "AMD Radeon Pro 5500M"}};
static int responds(Obj* o, const char* s) {
  /* the second device predates these selectors */
  return !(o->kind == DEVICE && o->idx == 1 && (!strcmp(s, "architecture") || !strcmp(s, "supportsRaytracing")));
}
static int family(int d, long f) {
  if (d == 0) return (f >= 1001 && f <= 1009) || f == 2002 || (f >= 3001 && f <= 3003) || f == 5001;
  return f == 2001 || f == 2002 || (f >= 3001 && f <= 3003) || f == 5001;
}
uintptr_t objc_msgSend(void* self, void* sel, ...) {
  Obj* o = self;
  const char* s = ((Sel*)sel)->name;
  uintptr_t r = 0;
  va_list ap;
  va_start(ap, sel);
  if (!strcmp(s, "respondsToSelector:")) r = responds(o, ((Sel*)va_arg(ap, void*))->name);
  else if (o->kind == ARRAY && !strcmp(s, "count")) r = 2;
  else if (o->kind == ARRAY && !strcmp(s, "objectAtIndex:")) r = (uintptr_t)&devs[va_arg(ap, size_t)];
  else if (o->kind == ARRAY && !strcmp(s, "release")) releases++;
  else if (o->kind == STRING && !strcmp(s, "UTF8String")) r = (uintptr_t)o->text;
  else if (o->kind == ARCH && !strcmp(s, "name")) r = (uintptr_t)&arch_name;
  else if (o->kind == DEVICE) {
    int d = o->idx;
    if (!strcmp(s, "name")) r = (uintptr_t)&names[d];
    else if (!strcmp(s, "registryID")) r = 0x100000abcull + d;
    else if (!strcmp(s, "recommendedMaxWorkingSetSize")) r = d ? 4ull << 30 : 96ull << 30;
    else if (!strcmp(s, "hasUnifiedMemory")) r = d == 0;
    else if (!strcmp(s, "isLowPower")) r = 0;
    else if (!strcmp(s, "isRemovable")) r = 0;
    else if (!strcmp(s, "isHeadless")) r = d == 1;
    else if (!strcmp(s, "supportsRaytracing")) r = 1;
    else if (!strcmp(s, "maxBufferLength")) r = d ? 1ull << 30 : 64ull << 30;
    else if (!strcmp(s, "location")) r = d ? 1 : 0;
    else if (!strcmp(s, "architecture")) r = (uintptr_t)&arch;
    else if (!strcmp(s, "supportsFamily:")) r = family(d, va_arg(ap, long));
  }
  va_end(ap);
  return r;
}
void* MTLCopyAllDevices(void) { return &array; }
int fake_depth(void) { return depth; }
int fake_pushes(void) { return pushes; }
int fake_releases(void) { return releases; }
"""


@pytest.fixture(scope="module")
def objc_path(tmp_path_factory):
    return str(compile_shared(FAKE_OBJC_C, tmp_path_factory.mktemp("objc"), "libfakeobjc.so"))


@pytest.mark.skipif(sys.platform != "linux" or not sys.maxsize > 2**32, reason="fake runtime is 64-bit Linux C")
def test_metal_devices_read_through_objc_msgsend(objc_path):
    cfg = Settings(libraries={"metal": objc_path})
    control = ctypes.CDLL(objc_path)
    before = control.fake_releases()
    devices = metal.probe(cfg, system="macos", objc_path=objc_path)
    apple, amd = devices
    assert apple.id == DeviceId(BackendKind.METAL, 0)
    assert apple.vendor is Vendor.APPLE
    assert apple.name == "Apple M3 Max"
    assert apple.arch == "applegpu_g15s"
    assert apple.memory_bytes == 96 * GIB
    assert apple.capability.flags == (
        CapabilityFlags.FP32
        | CapabilityFlags.FP16
        | CapabilityFlags.UNIFIED_MEMORY
        | CapabilityFlags.WMMA
        | CapabilityFlags.RAYTRACING
    )
    assert apple.capability.tier is Tier.CONSUMER
    assert dict(apple.extra) == {
        "registry_id": 0x100000ABC,
        "recommended_max_working_set_size": 96 * GIB,
        "has_unified_memory": True,
        "low_power": False,
        "removable": False,
        "headless": False,
        "max_buffer_length": 64 * GIB,
        "location": "built-in",
        "gpu_families": [f"Apple{n}" for n in range(1, 10)] + ["Mac2", "Common1", "Common2", "Common3", "Metal3"],
    }
    assert amd.id == DeviceId(BackendKind.METAL, 1)
    assert (amd.vendor, amd.name, amd.arch, amd.memory_bytes) == (Vendor.AMD, "AMD Radeon Pro 5500M", "", 4 * GIB)
    assert amd.capability.flags == CapabilityFlags.FP32 | CapabilityFlags.FP16  # no Apple7, no raytracing answer
    assert dict(amd.extra)["gpu_families"] == ["Mac1", "Mac2", "Common1", "Common2", "Common3", "Metal3"]
    assert dict(amd.extra)["location"] == "slot" and dict(amd.extra)["headless"] is True
    json.dumps([d.to_json() for d in devices])
    # The retained array is released once and every autorelease pool pushed is popped.
    assert control.fake_releases() == before + 1
    assert control.fake_depth() == 0

    backend = ProbedBackend(BackendKind.METAL, lambda: metal.probe(cfg, system="macos", objc_path=objc_path))
    for n, dev in enumerate(backend.enumerate()):
        assert backend.capabilities(n) == dev.capability.flags
    for bad in (-1, 2, "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)


def test_metal_missing_framework_is_a_reason(tmp_path, objc_path):
    cfg = Settings(libraries={"metal": str(tmp_path / "Metal")})
    with pytest.raises(Unavailable, match="metal runtime library not found"):
        metal.probe(cfg, system="macos", objc_path=objc_path)


def test_metal_gpu_family_values_match_mtldevice_h():
    # MTLGPUFamily in Metal/MTLDevice.h (macOS 26 SDK; metal-cpp Metal/MTLDevice.hpp 2020-2025).
    assert metal.MTL_GPU_FAMILIES == {
        "Apple1": 1001, "Apple2": 1002, "Apple3": 1003, "Apple4": 1004, "Apple5": 1005, "Apple6": 1006,
        "Apple7": 1007, "Apple8": 1008, "Apple9": 1009, "Apple10": 1010, "Mac1": 2001, "Mac2": 2002,
        "Common1": 3001, "Common2": 3002, "Common3": 3003, "MacCatalyst1": 4001, "MacCatalyst2": 4002,
        "Metal3": 5001, "Metal4": 5002,
    }  # fmt: skip
    assert metal.MTL_DEVICE_LOCATIONS == {0: "built-in", 1: "slot", 2: "external"}  # MTLDeviceLocation


# --- DirectX 12 ---------------------------------------------------------------------------------------------


def test_dxgi_adapter_desc1_matches_windows_x64_layout():
    # dxgi.h DXGI_ADAPTER_DESC1 on Windows x64 (WCHAR 2 bytes, SIZE_T 8, LUID {DWORD, LONG}).
    if ctypes.sizeof(ctypes.c_size_t) != 8:
        pytest.skip("the x64 layout needs a 64-bit SIZE_T")
    d = dx12.DXGI_ADAPTER_DESC1
    assert ctypes.sizeof(d) == 312
    assert ctypes.alignment(d) == 8
    offsets = {name: getattr(d, name).offset for name, _ in d._fields_}
    assert offsets == {
        "Description": 0,
        "VendorId": 256,
        "DeviceId": 260,
        "SubSysId": 264,
        "Revision": 268,
        "DedicatedVideoMemory": 272,
        "DedicatedSystemMemory": 280,
        "SharedSystemMemory": 288,
        "AdapterLuid": 296,
        "Flags": 304,
    }
    assert ctypes.sizeof(dx12.LUID) == 8 and dx12.LUID.HighPart.offset == 4
    assert ctypes.sizeof(dx12.GUID) == 16


def test_guids_have_the_header_byte_order():
    # DEFINE_GUID(IID_IDXGIFactory1, 0x770aae78, 0xf26f, 0x4dba, 0xa8,0x29, 0x25,0x3c,0x83,0xd1,0xb3,0x87) (dxgi.h)
    g = dx12.GUID.parse(dx12.IID_IDXGIFactory1)
    assert (g.Data1, g.Data2, g.Data3, list(g.Data4)) == (
        0x770AAE78, 0xF26F, 0x4DBA, [0xA8, 0x29, 0x25, 0x3C, 0x83, 0xD1, 0xB3, 0x87]
    )  # fmt: skip
    # DEFINE_GUID(IID_ID3D12Device, 0x189819f1, 0x1db6, 0x4b57, 0xbe,0x54, 0x18,0x21,0x33,0x9b,0x85,0xf7) (d3d12.h)
    g = dx12.GUID.parse(dx12.IID_ID3D12Device)
    assert bytes(g) == uuid.UUID("189819f1-1db6-4b57-be54-1821339b85f7").bytes_le
    assert (g.Data1, g.Data2, g.Data3) == (0x189819F1, 0x1DB6, 0x4B57)


@pytest.mark.parametrize(
    ("name", "value", "source"),
    [
        ("SLOT_RELEASE", 2, "dxgi.h IUnknown::Release"),
        ("SLOT_FACTORY1_ENUM_ADAPTERS1", 12, "dxgi.h IDXGIFactory1Vtbl.EnumAdapters1"),
        ("SLOT_ADAPTER1_GET_DESC1", 10, "dxgi.h IDXGIAdapter1Vtbl.GetDesc1"),
        ("DXGI_ADAPTER_FLAG_NONE", 0, "dxgi.h DXGI_ADAPTER_FLAG"),
        ("DXGI_ADAPTER_FLAG_REMOTE", 1, "dxgi.h DXGI_ADAPTER_FLAG"),
        ("DXGI_ADAPTER_FLAG_SOFTWARE", 2, "dxgi.h DXGI_ADAPTER_FLAG"),
        ("DXGI_ERROR_NOT_FOUND", 0x887A0002, "winerror.h"),
        ("S_OK", 0, "winerror.h"),
        ("S_FALSE", 1, "winerror.h"),
    ],
)
def test_dx12_constants_match_the_headers(name, value, source):
    assert getattr(dx12, name) == value, source


def test_feature_levels_match_d3dcommon_h():
    assert dx12.D3D_FEATURE_LEVELS == {"12_2": 0xC200, "12_1": 0xC100, "12_0": 0xC000, "11_1": 0xB100, "11_0": 0xB000}
    assert list(dx12.D3D_FEATURE_LEVELS.values()) == sorted(dx12.D3D_FEATURE_LEVELS.values(), reverse=True)


FAKE_DXGI_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <uchar.h>
typedef int32_t HRESULT;
typedef struct { uint32_t Data1; uint16_t Data2, Data3; uint8_t Data4[8]; } GUID;
typedef struct { uint32_t LowPart; int32_t HighPart; } LUID;
typedef struct {
  uint16_t Description[128];
  uint32_t VendorId, DeviceId, SubSysId, Revision;
  size_t DedicatedVideoMemory, DedicatedSystemMemory, SharedSystemMemory;
  LUID AdapterLuid;
  uint32_t Flags;
} DXGI_ADAPTER_DESC1;
typedef struct { void** vtbl; int idx, refs; } Obj;
static const GUID IID_IDXGIFactory1 = {0x770aae78, 0xf26f, 0x4dba, {0xa8, 0x29, 0x25, 0x3c, 0x83, 0xd1, 0xb3, 0x87}};
static const GUID IID_ID3D12Device = {0x189819f1, 0x1db6, 0x4b57, {0xbe, 0x54, 0x18, 0x21, 0x33, 0x9b, 0x85, 0xf7}};
struct Info { const char16_t* name; uint32_t vendor, device, flags; size_t vram; int max_level; };
static const struct Info infos[3] = {
  {u"NVIDIA GeForce RTX 4090", 0x10de, 0x2684, 0, (size_t)24 << 30, 0xc200},
  {u"Legacy Display Adapter", 0x1234, 0x1111, 0, (size_t)256 << 20, 0},
  {u"Microsoft Basic Render Driver", 0x1414, 0x008c, 2, 0, 0xc100},
};
static void* factory_vtbl[14];
static void* adapter_vtbl[11];
static Obj factory = {factory_vtbl, 0, 0};
static Obj adapters[3] = {{adapter_vtbl, 0, 0}, {adapter_vtbl, 1, 0}, {adapter_vtbl, 2, 0}};
static int bad_calls, created;
static HRESULT bad_slot(Obj* o) { (void)o; bad_calls++; return (HRESULT)0x80004005; }
static uint32_t add_ref(Obj* o) { return ++o->refs; }
static uint32_t release(Obj* o) { return --o->refs; }
static HRESULT enum_adapters1(Obj* f, uint32_t i, Obj** out) {
  (void)f;
  if (i >= 3) { *out = NULL; return (HRESULT)0x887A0002; }
  adapters[i].refs++;
  *out = &adapters[i];
  return 0;
}
static HRESULT get_desc1(Obj* a, DXGI_ADAPTER_DESC1* d) {
  const struct Info* in = &infos[a->idx];
  memset(d, 0, sizeof *d);
  for (int i = 0; in->name[i] && i < 127; i++) d->Description[i] = in->name[i];
  d->VendorId = in->vendor; d->DeviceId = in->device; d->SubSysId = 0x88ac1043; d->Revision = 0xa1;
  d->DedicatedVideoMemory = in->vram; d->DedicatedSystemMemory = 0; d->SharedSystemMemory = (size_t)32 << 30;
  d->AdapterLuid.LowPart = 0x1000 + a->idx; d->AdapterLuid.HighPart = 0;
  d->Flags = in->flags;
  return 0;
}
__attribute__((constructor)) static void setup(void) {
  for (int i = 0; i < 14; i++) factory_vtbl[i] = (void*)bad_slot;
  for (int i = 0; i < 11; i++) adapter_vtbl[i] = (void*)bad_slot;
  factory_vtbl[1] = adapter_vtbl[1] = (void*)add_ref;
  factory_vtbl[2] = adapter_vtbl[2] = (void*)release;
  factory_vtbl[12] = (void*)enum_adapters1;
  adapter_vtbl[10] = (void*)get_desc1;
}
HRESULT CreateDXGIFactory1(const GUID* riid, void** out) {
  if (memcmp(riid, &IID_IDXGIFactory1, sizeof(GUID))) return (HRESULT)0x80004002;
  factory.refs++;
  *out = &factory;
  return 0;
}
HRESULT D3D12CreateDevice(void* adapter, int level, const GUID* riid, void** device) {
  Obj* a = adapter;
  if (device) { created++; return (HRESULT)0x80004005; }
  if (memcmp(riid, &IID_ID3D12Device, sizeof(GUID))) return (HRESULT)0x80004002;
  int max = infos[a->idx].max_level;
  return max && level <= max ? 1 : (HRESULT)0x887A0004;
}
int fake_live_refs(void) { return factory.refs + adapters[0].refs + adapters[1].refs + adapters[2].refs; }
int fake_bad_calls(void) { return bad_calls; }
int fake_created(void) { return created; }
"""


@pytest.fixture(scope="module")
def dxgi_path(tmp_path_factory):
    return str(compile_shared(FAKE_DXGI_C, tmp_path_factory.mktemp("dxgi"), "libfakedxgi.so"))


@pytest.mark.skipif(sys.platform != "linux" or not sys.maxsize > 2**32, reason="fake DXGI is 64-bit Linux C")
def test_dx12_adapters_read_through_com_vtables(dxgi_path):
    cfg = Settings(libraries={"dx12": dxgi_path})
    devices = dx12.probe(cfg, system="windows", dxgi_path=dxgi_path)
    assert len(devices) == 2  # the adapter without D3D12 support is left out
    rtx, warp = devices
    assert rtx.id == DeviceId(BackendKind.DX12, 0)
    assert (rtx.vendor, rtx.name, rtx.software) == (Vendor.NVIDIA, "NVIDIA GeForce RTX 4090", None)
    assert rtx.memory_bytes == 24 * GIB
    assert rtx.pci == PciAddress(vendor_id=0x10DE, device_id=0x2684, bus_id=None)
    assert rtx.capability.flags == CapabilityFlags.FP32
    assert rtx.capability.tier is Tier.CONSUMER
    assert dict(rtx.extra) == {
        "feature_level": "12_2",
        "dxgi_index": 0,
        "luid": "00000000-00001000",
        "subsys_id": 0x88AC1043,
        "revision": 0xA1,
        "dedicated_system_memory": 0,
        "shared_system_memory": 32 * GIB,
        "remote": False,
    }
    assert warp.id == DeviceId(BackendKind.DX12, 1)
    assert (warp.vendor, warp.name, warp.software) == (Vendor.MICROSOFT, "Microsoft Basic Render Driver", "warp")
    assert warp.memory_bytes is None
    assert warp.capability.tier is Tier.BASELINE
    assert dict(warp.extra)["feature_level"] == "12_1"
    assert dict(warp.extra)["dxgi_index"] == 2
    json.dumps([d.to_json() for d in devices])
    control = ctypes.CDLL(dxgi_path)
    assert control.fake_live_refs() == 0  # every adapter and the factory released
    assert control.fake_bad_calls() == 0  # no vtable slot other than the header's was called
    assert control.fake_created() == 0  # feature levels tested with a NULL device: nothing created

    backend = ProbedBackend(BackendKind.DX12, lambda: dx12.probe(cfg, system="windows", dxgi_path=dxgi_path))
    for n, dev in enumerate(backend.enumerate()):
        assert backend.capabilities(n) == dev.capability.flags
    for bad in (-1, 2, "0"):
        with pytest.raises(InvalidArgument):
            backend.capabilities(bad)


def test_dx12_missing_dlls_are_reasons(tmp_path):
    with pytest.raises(Unavailable, match=r"dxgi\.dll not found"):
        dx12.probe(Settings(), system="windows", dxgi_path="dxgi.dll")
