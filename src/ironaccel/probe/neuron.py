"""AWS Neuron discovery: one device per visible NeuronCore (VNC), the unit the Neuron runtime loads onto.

Facts come from the Neuron runtime's public headers in aws-neuron/aws-neuron-sdk (src/libnrt/include,
``NRT_MAJOR_VERSION`` 2, ``NRT_MINOR_VERSION`` 0):

* ``nrt/nrt.h``: ``NRT_STATUS nrt_init(nrt_framework_type_t framework, const char *fw_version,
  const char *fal_version)`` (three arguments), ``void nrt_close()``, ``nrt_get_total_nc_count`` /
  ``nrt_get_visible_nc_count`` (deprecated names) and ``nrt_get_total_vnc_count`` /
  ``nrt_get_visible_vnc_count``, all ``NRT_STATUS f(uint32_t*)`` and callable before ``nrt_init``;
  ``nrt_framework_type_t``: INVALID 0, NO_FW 1; ``nrt_instance_info_t`` = ``uint32_t family, size;
  char arch_name[16]; char device_revision[8]`` with ``nrt_get_instance_info(info, size_t len)`` and the
  ``NRT_INSTANCE_*`` family enum; ``nrt_vnc_memory_stats_t`` = ``size_t bytes_used, bytes_limit`` with
  ``nrt_get_vnc_memory_stats(uint32_t vnc, stats*, size_t size_in, size_t *size_out)``.
* ``nrt/nrt_version.h``: ``nrt_version_t`` = four ``uint64_t`` (rt_major, rt_minor, rt_patch,
  rt_maintenance), ``char rt_detail[128]``, ``char git_hash[64]``; ``nrt_get_version(ver*, size_t size)``.
* ``nrt/nrt_status.h``: ``NRT_STATUS`` codes (SUCCESS 0, FAILURE 1, INVALID 2, ... RESOURCE 4 ...).

Device nodes are ``/dev/neuron<N>`` (one per Neuron device); the kernel driver's version is
``/sys/module/neuron/version``. ``nrt_init`` claims the visible cores, so ``nrt_close`` always follows.
"""

from __future__ import annotations

import ctypes
import os
import re

from ..core import (
    BackendKind,
    Capability,
    CapabilityFlags,
    DeviceDescriptor,
    DeviceId,
    Settings,
    Tier,
    Unavailable,
    Vendor,
)
from ._ffi import LibraryNotFound, bind, c_string, device_nodes, load_library

CANDIDATES = ("libnrt.so.1", "/opt/aws/neuron/lib/libnrt.so.1")

# --- nrt.h / nrt_status.h ----------------------------------------------------------------------------------
NRT_FRAMEWORK_TYPE_INVALID = 0
NRT_FRAMEWORK_TYPE_NO_FW = 1
NRT_SUCCESS = 0
NRT_STATUS_NAMES = {
    0: "NRT_SUCCESS",
    1: "NRT_FAILURE",
    2: "NRT_INVALID",
    3: "NRT_INVALID_HANDLE",
    4: "NRT_RESOURCE",
    5: "NRT_TIMEOUT",
    6: "NRT_HW_ERROR",
    7: "NRT_QUEUE_FULL",
    9: "NRT_LOAD_NOT_ENOUGH_NC",
    10: "NRT_UNSUPPORTED_NEFF_VERSION",
    13: "NRT_UNINITIALIZED",
    14: "NRT_CLOSED",
    1005: "NRT_EXEC_NC_BUSY",
}
# NRT_INSTANCE_* family ids -> (enum suffix, chip)
NRT_INSTANCE_FAMILIES = {
    0: ("UNKNOWN", None),
    1: ("INF1", "Inferentia"),
    2: ("TRN1", "Trainium"),
    3: ("TRN1N", "Trainium"),
    4: ("INF2", "Inferentia2"),
    5: ("TRN2", "Trainium2"),
    6: ("TRN2N", "Trainium2"),
    7: ("INF2E", "Inferentia2"),
    8: ("TRN2P", "Trainium2"),
    9: ("TRN2U", "Trainium2"),
    10: ("TRN2E", "Trainium2"),
    11: ("TRN2EU", "Trainium2"),
    12: ("TRN2AC", "Trainium2"),
    13: ("TRN2UAC", "Trainium2"),
    14: ("TRN3", "Trainium3"),
    15: ("TRN3PDS98", "Trainium3"),
}
NRT_INSTANCE_SIZES = ("1XL", "2XL", "4XL", "6XL", "8XL", "24XL", "32XL", "48XL", "3XL")

# NeuronCore-v2 (Inferentia2, Trainium) and -v3 (Trainium2) compute FP32, FP16 and BF16 and sit on HBM
# (AWS Neuron architecture guide). Other families get no flags until their data types are confirmed.
_V2_PLUS = CapabilityFlags.FP32 | CapabilityFlags.FP16 | CapabilityFlags.BF16 | CapabilityFlags.HBM
_FAMILY_FLAGS = {family: _V2_PLUS for family in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)}

_FW_VERSION = b""  # no framework (NRT_FRAMEWORK_TYPE_NO_FW)
_FAL_VERSION = b"ironaccel"  # the framework abstraction layer calling the runtime
_MAX_CORES = 4096


class NrtVersion(ctypes.Structure):
    """nrt_version_t (nrt_version.h)."""

    _fields_ = [
        ("rt_major", ctypes.c_uint64),
        ("rt_minor", ctypes.c_uint64),
        ("rt_patch", ctypes.c_uint64),
        ("rt_maintenance", ctypes.c_uint64),
        ("rt_detail", ctypes.c_char * 128),
        ("git_hash", ctypes.c_char * 64),
    ]


class NrtInstanceInfo(ctypes.Structure):
    """nrt_instance_info_t (nrt.h); older runtimes fill only family and size, hence the length argument."""

    _fields_ = [
        ("family", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("arch_name", ctypes.c_char * 16),
        ("device_revision", ctypes.c_char * 8),
    ]


class NrtVncMemoryStats(ctypes.Structure):
    """nrt_vnc_memory_stats_t (nrt.h)."""

    _fields_ = [("bytes_used", ctypes.c_size_t), ("bytes_limit", ctypes.c_size_t)]


def probe(settings: Settings, *, dev_dir: str = "/dev", sys_dir: str = "/sys") -> list[DeviceDescriptor]:
    """Every visible NeuronCore; ``dev_dir``/``sys_dir`` are where device nodes and sysfs live (tests)."""
    nodes = [p for p in device_nodes(dev_dir, "neuron") if re.fullmatch(r"neuron\d+", os.path.basename(p))]
    override = settings.library("neuron")
    try:
        lib = load_library("neuron", CANDIDATES, override)
    except LibraryNotFound as exc:
        tried = exc.tried
        if nodes:
            raise Unavailable(
                f"libnrt.so.1 not found (tried {tried}), yet {len(nodes)} Neuron device node(s) exist "
                f"({', '.join(nodes)}): install the Neuron runtime (aws-neuronx-runtime-lib)"
            ) from None
        raise Unavailable(f"libnrt.so.1 not found (tried {tried}) and no {dev_dir}/neuron* device nodes") from None

    u32p = ctypes.POINTER(ctypes.c_uint32)
    nrt_init = bind(lib, "nrt_init", ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
    nrt_close = bind(lib, "nrt_close", None)
    total_name, total_fn = _first(lib, ("nrt_get_total_vnc_count", "nrt_get_total_nc_count"), ctypes.c_int, u32p)
    visible_name, visible_fn = _first(
        lib, ("nrt_get_visible_vnc_count", "nrt_get_visible_nc_count"), ctypes.c_int, u32p
    )
    get_version = _optional(lib, "nrt_get_version", ctypes.c_int, ctypes.POINTER(NrtVersion), ctypes.c_size_t)
    get_info = _optional(lib, "nrt_get_instance_info", ctypes.c_int, ctypes.POINTER(NrtInstanceInfo), ctypes.c_size_t)
    get_mem = _optional(
        lib,
        "nrt_get_vnc_memory_stats",
        ctypes.c_int,
        ctypes.c_uint32,
        ctypes.POINTER(NrtVncMemoryStats),
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    )

    # Counts and version are exempt from nrt_init, so an idle host never claims its cores.
    total = _count(total_name, total_fn)
    visible = _count(visible_name, visible_fn)
    if visible == 0:
        where = f"{len(nodes)} device node(s) in {dev_dir}" if nodes else f"no {dev_dir}/neuron* device nodes"
        raise Unavailable(f"libnrt reports no visible NeuronCores ({total} in total; {where})")
    if visible > _MAX_CORES:
        raise Unavailable(f"{visible_name} reported {visible} NeuronCores (implausible)")
    runtime = _runtime_version(get_version)

    status = int(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, _FW_VERSION, _FAL_VERSION))
    if status != NRT_SUCCESS:
        raise Unavailable(f"nrt_init failed with code {status} ({NRT_STATUS_NAMES.get(status, 'unknown status')})")
    try:
        info = _instance_info(get_info)
        limits = [_memory_limit(get_mem, vnc) for vnc in range(visible)]
    finally:
        nrt_close()

    driver = _read_text(os.path.join(sys_dir, "module", "neuron", "version"))
    family_id = int(info.family) if info else -1
    family, chip = NRT_INSTANCE_FAMILIES.get(family_id, (f"family {family_id}" if info else None, None))
    arch = (c_string(info.arch_name) if info else "") or (family.lower() if chip else "")
    flags = _FAMILY_FLAGS.get(family_id, CapabilityFlags.NONE)
    size = None
    if info and info.size < len(NRT_INSTANCE_SIZES):
        size = NRT_INSTANCE_SIZES[info.size]
    shared = (
        ("runtime_version", runtime),
        ("total_nc_count", total),
        ("visible_nc_count", visible),
        ("device_nodes", nodes),
        ("instance_family", family),
        ("instance_size", size),
        ("device_revision", (c_string(info.device_revision) or None) if info else None),
        ("library", getattr(lib, "_name", None)),
    )
    return [
        DeviceDescriptor(
            id=DeviceId(BackendKind.NEURON, vnc),
            vendor=Vendor.AWS,
            name=f"AWS {chip} NeuronCore" if chip else "AWS Neuron NeuronCore",
            arch=arch,
            memory_bytes=limits[vnc],
            driver_version=driver,
            capability=Capability(flags=flags, tier=Tier.DATACENTER),
            extra=(("vnc", vnc), *shared),
        )
        for vnc in range(visible)
    ]


def _optional(lib: ctypes.CDLL, name: str, restype: object, *argtypes: object) -> ctypes._CFuncPtr | None:
    try:
        return bind(lib, name, restype, *argtypes)
    except Unavailable:
        return None


def _first(
    lib: ctypes.CDLL, names: tuple[str, ...], restype: object, *argtypes: object
) -> tuple[str, ctypes._CFuncPtr]:
    """The first of ``names`` the library exports (the VNC names replace the deprecated NC ones)."""
    for name in names:
        fn = _optional(lib, name, restype, *argtypes)
        if fn is not None:
            return name, fn
    raise Unavailable(f"{getattr(lib, '_name', 'libnrt')} lacks symbol {names[-1]}")


def _count(name: str, fn: ctypes._CFuncPtr) -> int:
    value = ctypes.c_uint32(0)
    status = int(fn(ctypes.byref(value)))
    if status != NRT_SUCCESS:
        raise Unavailable(f"{name} failed with code {status} ({NRT_STATUS_NAMES.get(status, 'unknown status')})")
    return value.value


def _runtime_version(fn: ctypes._CFuncPtr | None) -> str | None:
    if fn is None:
        return None
    ver = NrtVersion()
    if int(fn(ctypes.byref(ver), ctypes.sizeof(ver))) != NRT_SUCCESS:
        return None
    return f"{ver.rt_major}.{ver.rt_minor}.{ver.rt_patch}.{ver.rt_maintenance}"


def _instance_info(fn: ctypes._CFuncPtr | None) -> NrtInstanceInfo | None:
    if fn is None:
        return None
    info = NrtInstanceInfo()
    if int(fn(ctypes.byref(info), ctypes.sizeof(info))) != NRT_SUCCESS:
        return None
    return info


def _memory_limit(fn: ctypes._CFuncPtr | None, vnc: int) -> int | None:
    if fn is None:
        return None
    stats = NrtVncMemoryStats()
    written = ctypes.c_size_t(0)
    status = int(fn(vnc, ctypes.byref(stats), ctypes.sizeof(stats), ctypes.byref(written)))
    # bytes_limit is the second field: only trust it when the runtime wrote that far.
    if status != NRT_SUCCESS or written.value < ctypes.sizeof(stats):
        return None
    return int(stats.bytes_limit) or None


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None
