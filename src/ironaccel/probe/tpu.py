"""Google TPU discovery: chips from PCI sysfs and their device nodes, the PJRT API version from libtpu.

No PJRT client is created: that is slow and claims every chip. Chips come from sysfs instead.

* PJRT facts from ``xla/pjrt/c/pjrt_c_api.h`` in openxla/xla (``PJRT_API_MAJOR`` 0, ``PJRT_API_MINOR``
  113; the prefix read here is unchanged since minor 33, where ``extension_start`` was named ``priv``):
  a plugin exports ``const PJRT_Api* GetPjrtApi()``; ``PJRT_Api`` begins ``size_t struct_size;
  PJRT_Extension_Base* extension_start; PJRT_Api_Version pjrt_api_version;`` and
  ``PJRT_Api_Version`` is ``size_t struct_size; PJRT_Extension_Base* extension_start; int major_version;
  int minor_version;`` (``PJRT_Api_Version_STRUCT_SIZE`` = offsetof(minor_version) + sizeof(int)).
* Chip identity: Google's PCI vendor id 0x1ae0 and the TPU device ids used by Google's ``tpu-info``
  (cloud-accelerator-diagnostics, tpu_info/device.py): 0x0027 is v2 (subsystem 0x004e) or v3 (0x004f),
  0x005e v4, 0x0063 v5e, 0x0062 v5p, 0x006f v6e, 0x0076 TPU7x. Chips up to v4 appear as ``/dev/accel<N>``
  (sysfs class ``accel``); later ones are bound to vfio-pci and appear as ``/dev/vfio/<iommu group>``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os

from ..core import (
    BackendKind,
    Capability,
    CapabilityFlags,
    DeviceDescriptor,
    DeviceId,
    PciAddress,
    Settings,
    Tier,
    Unavailable,
    Vendor,
)
from ._ffi import LibraryNotFound, bind, load_library

GOOGLE_PCI_VENDOR = 0x1AE0
# (device id, subsystem device id or None for any) -> chip generation
TPU_PCI_IDS: dict[tuple[int, int | None], str] = {
    (0x0027, 0x004E): "v2",
    (0x0027, 0x004F): "v3",
    (0x005E, None): "v4",
    (0x0063, None): "v5e",
    (0x0062, None): "v5p",
    (0x006F, None): "v6e",
    (0x0076, None): "7x",
}
# Every TPU generation computes in bfloat16 on its matrix units and sits on HBM (Cloud TPU system docs).
_TPU_FLAGS = CapabilityFlags.BF16 | CapabilityFlags.HBM


class PjrtApiVersion(ctypes.Structure):
    """PJRT_Api_Version."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.c_void_p),
        ("major_version", ctypes.c_int),
        ("minor_version", ctypes.c_int),
    ]


class PjrtApiPrefix(ctypes.Structure):
    """The members of PJRT_Api before its function pointers."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.c_void_p),
        ("pjrt_api_version", PjrtApiVersion),
    ]


PJRT_API_VERSION_STRUCT_SIZE = PjrtApiVersion.minor_version.offset + ctypes.sizeof(ctypes.c_int)


def probe(settings: Settings, *, dev_dir: str = "/dev", sys_dir: str = "/sys") -> list[DeviceDescriptor]:
    """Every TPU chip with a device node; ``dev_dir``/``sys_dir`` locate device nodes and sysfs (tests)."""
    chips, unusable = _scan(dev_dir, sys_dir)
    candidates = _candidates(settings)
    if not chips:
        # No chip: say where libtpu is without paying for loading a library of hundreds of megabytes.
        located = _locate(candidates)
        lib_text = f"libtpu.so found at {located}" if located else "libtpu.so not found"
        extra = f"; {len(unusable)} TPU chip(s) without a device node ({', '.join(unusable)})" if unusable else ""
        raise Unavailable(
            f"no TPU chips found (no Google 0x1ae0 TPU function with a device node under "
            f"{sys_dir}/bus/pci/devices){extra}; {lib_text}"
        )
    try:
        lib = load_library("tpu", candidates, settings.library("tpu"))
    except LibraryNotFound as exc:
        tried = exc.tried
        names = ", ".join(f"TPU {c['chip']} at {c['bus_id']}" for c in chips)
        raise Unavailable(
            f"libtpu.so not found (tried {tried}), yet {len(chips)} TPU chip(s) exist ({names}): pip install libtpu"
        ) from None
    api = _pjrt_api(lib)
    library = getattr(lib, "_name", None)
    return [
        DeviceDescriptor(
            id=DeviceId(BackendKind.TPU, i),
            vendor=Vendor.GOOGLE,
            name=f"Google TPU{c['chip']}" if c["chip"][0].isdigit() else f"Google TPU {c['chip']}",
            arch=c["chip"],
            pci=PciAddress(vendor_id=GOOGLE_PCI_VENDOR, device_id=c["device_id"], bus_id=c["bus_id"]),
            capability=Capability(flags=_TPU_FLAGS, tier=Tier.DATACENTER),
            extra=(
                ("pjrt_api_version", api),
                ("device_node", c["node"]),
                ("kernel_driver", c["driver"]),
                ("pci_subsystem_device", c["subsystem"]),
                ("library", library),
            ),
        )
        for i, c in enumerate(chips)
    ]


def _candidates(settings: Settings) -> list[str]:
    override = settings.library("tpu")
    if override:
        return [override]
    names = []
    try:
        # find_spec locates the libtpu wheel without importing it.
        spec = importlib.util.find_spec("libtpu")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        names.append(os.path.join(location, "libtpu.so"))
    names.append("libtpu.so")
    return names


def _locate(candidates: list[str]) -> str | None:
    for name in candidates:
        if os.sep in name:
            if os.path.exists(name):
                return name
        else:
            found = ctypes.util.find_library(name.removeprefix("lib").split(".")[0])
            if found:
                return found
    return None


def _pjrt_api(lib: ctypes.CDLL) -> str:
    get_api = bind(lib, "GetPjrtApi", ctypes.c_void_p)
    address = get_api()
    if not address:
        raise Unavailable("GetPjrtApi returned NULL")
    # Read struct_size first: an older or broken plugin's struct may be shorter than our prefix.
    size = ctypes.c_size_t.from_address(address).value
    if size < ctypes.sizeof(PjrtApiPrefix):
        raise Unavailable(
            f"PJRT_Api.struct_size is {size}, smaller than its {ctypes.sizeof(PjrtApiPrefix)}-byte header"
        )
    prefix = PjrtApiPrefix.from_address(address)
    version = prefix.pjrt_api_version
    if version.struct_size < PJRT_API_VERSION_STRUCT_SIZE:
        raise Unavailable(f"PJRT_Api_Version.struct_size is {version.struct_size}, expected >= 24")
    return f"{version.major_version}.{version.minor_version}"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _hex(text: str | None) -> int | None:
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def _link_name(path: str) -> str | None:
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None


def _scan(dev_dir: str, sys_dir: str) -> tuple[list[dict], list[str]]:
    """TPU chips (sorted by PCI address) with a device node, and bus ids of those without one."""
    accel_of: dict[str, str] = {}  # PCI bus id -> accel node name
    accel_dir = os.path.join(sys_dir, "class", "accel")
    try:
        accel_names = sorted(os.listdir(accel_dir))
    except OSError:
        accel_names = []
    for name in accel_names:
        target = os.path.realpath(os.path.join(accel_dir, name, "device"))
        accel_of[os.path.basename(target)] = name

    pci_dir = os.path.join(sys_dir, "bus", "pci", "devices")
    try:
        functions = sorted(os.listdir(pci_dir))
    except OSError:
        functions = []
    chips, unusable = [], []
    for bus_id in functions:
        base = os.path.join(pci_dir, bus_id)
        if _hex(_read(os.path.join(base, "vendor"))) != GOOGLE_PCI_VENDOR:
            continue
        device_id = _hex(_read(os.path.join(base, "device")))
        subsystem = _hex(_read(os.path.join(base, "subsystem_device")))
        chip = TPU_PCI_IDS.get((device_id, subsystem)) or TPU_PCI_IDS.get((device_id, None))
        if chip is None:
            continue  # another Google function (gVNIC, ...)
        driver = _link_name(os.path.join(base, "driver"))
        node = None
        if bus_id in accel_of:
            node = os.path.join(dev_dir, accel_of[bus_id])
        elif driver == "vfio-pci":
            group = _link_name(os.path.join(base, "iommu_group"))
            node = os.path.join(dev_dir, "vfio", group) if group else None
        if node is None or not os.path.exists(node):
            unusable.append(bus_id)
            continue
        chips.append(
            {
                "chip": chip,
                "bus_id": bus_id,
                "device_id": device_id,
                "subsystem": f"0x{subsystem:04x}" if subsystem is not None else None,
                "driver": driver,
                "node": node,
            }
        )
    return chips, unusable
