"""Qualcomm AI Engine Direct (QNN) discovery: one device per interface provider of each backend library.

Facts come from the QNN SDK v2.13.0 public headers (build id v2.13.0.230725130242_60412, core API 2.7.2):

* ``QnnInterface.h``: ``Qnn_ErrorHandle_t QnnInterface_getProviders(const QnnInterface_t*** providerList,
  uint32_t* numProviders)`` and ``QnnInterface_t`` = ``uint32_t backendId``, ``const char* providerName``,
  ``Qnn_ApiVersion_t apiVersion``, then an unnamed union holding the versioned function table *inline*
  (not a pointer to it).
* ``QnnTypes.h``: ``Qnn_Version_t`` = three ``uint32_t`` (major, minor, patch); ``Qnn_ApiVersion_t`` =
  ``coreApiVersion`` then ``backendApiVersion``.
* ``QnnCommon.h``: ``Qnn_ErrorHandle_t`` is ``uint64_t`` whose low 16 bits are the error code
  (``QNN_GET_ERROR_CODE``); ``QNN_SUCCESS`` = 0; backend ids NULL 0, REFERENCE 1, SAVER 2, CPU 3, GPU 4,
  DSP 5, HTP 6. ``HTP/QnnHtpCommon.h`` and ``GPU/QnnGpuCommon.h`` repeat HTP = 6 and GPU = 4;
  ``QnnHtaCommon.h`` gives HTA = 7 and the later ``QnnLpaiCommon.h`` gives LPAI = 12.

Only the fixed prefix (40 bytes on 64-bit targets) is read; no function of the table is called. The table's
slot order is not stable across core API minors (2.7 has no ``backendSetConfig``; later SDKs insert it
after ``backendCreate``, shifting every slot behind it), so a fixed slot for ``deviceGetPlatformInfo``
would call the wrong function on some SDKs. Discovery therefore reports providers, not platform devices.
"""

from __future__ import annotations

import ctypes
import platform
import sys

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
from ._ffi import LibraryNotFound, bind, load_library

# --- QnnTypes.h ------------------------------------------------------------------------------------------


class QnnVersion(ctypes.Structure):
    """Qnn_Version_t."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("patch", ctypes.c_uint32)]


class QnnApiVersion(ctypes.Structure):
    """Qnn_ApiVersion_t."""

    _fields_ = [("coreApiVersion", QnnVersion), ("backendApiVersion", QnnVersion)]


class QnnInterfacePrefix(ctypes.Structure):
    """The members of QnnInterface_t that precede its inline function-table union."""

    _fields_ = [
        ("backendId", ctypes.c_uint32),
        ("providerName", ctypes.c_char_p),
        ("apiVersion", QnnApiVersion),
    ]


# The union holds only pointers, so it starts at the prefix size rounded up to pointer alignment.
_PTR = ctypes.sizeof(ctypes.c_void_p)
TABLE_OFFSET = -(-ctypes.sizeof(QnnInterfacePrefix) // _PTR) * _PTR

# --- QnnCommon.h -----------------------------------------------------------------------------------------
QNN_SUCCESS = 0
QNN_ERROR_CODE_MASK = 0xFFFF  # QNN_GET_ERROR_CODE
QNN_BACKEND_ID_NULL = 0
QNN_BACKEND_ID_REFERENCE = 1
QNN_BACKEND_ID_SAVER = 2
QNN_BACKEND_ID_CPU = 3
QNN_BACKEND_ID_GPU = 4
QNN_BACKEND_ID_DSP = 5
QNN_BACKEND_ID_HTP = 6
QNN_BACKEND_ID_HTA = 7
QNN_BACKEND_ID_LPAI = 12

# backend id -> (arch tag, display name, software marker or None)
_BACKENDS: dict[int, tuple[str, str, str | None]] = {
    QNN_BACKEND_ID_REFERENCE: ("reference", "QNN Reference", "qnn-reference"),
    QNN_BACKEND_ID_SAVER: ("saver", "QNN Saver", "qnn-saver"),
    QNN_BACKEND_ID_CPU: ("cpu", "QNN CPU", "qnn-cpu"),
    QNN_BACKEND_ID_GPU: ("gpu", "Adreno GPU", None),
    QNN_BACKEND_ID_DSP: ("dsp", "Hexagon DSP", None),
    QNN_BACKEND_ID_HTP: ("htp", "Hexagon Tensor Processor", None),
    QNN_BACKEND_ID_HTA: ("hta", "Hexagon Tensor Accelerator", None),
    QNN_BACKEND_ID_LPAI: ("lpai", "Low Power AI", None),
}

# One library per backend; HTP first since it is the NPU most callers want.
if sys.platform == "win32":
    CANDIDATES: tuple[str, ...] = ("QnnHtp.dll", "QnnGpu.dll", "QnnDsp.dll", "QnnCpu.dll")
else:
    CANDIDATES = ("libQnnHtp.so", "libQnnGpu.so", "libQnnDsp.so", "libQnnCpu.so")

_MAX_PROVIDERS = 64  # a count above this means a broken library, not a real list
_ARM_MACHINES = ("aarch64", "arm64", "armv8l", "armv7l", "armv8")


def probe(settings: Settings, *, machine: str | None = None) -> list[DeviceDescriptor]:
    """Every QNN interface provider of every loadable backend library, as one device each.

    ``machine`` is the host CPU architecture (default: ``platform.machine()``); an HTP backend on a
    non-Arm host is Qualcomm's x86 simulator, so it is marked software and gets no Hexagon flags.
    """
    host = (machine or platform.machine() or "").lower()
    override = settings.library("qnn")
    names = [override] if override else list(CANDIDATES)
    problems: list[str] = []
    found: list[tuple[str, QnnInterfacePrefix]] = []
    loaded = 0
    for name in names:
        try:
            lib = load_library("qnn", [name], override)
        except LibraryNotFound as exc:
            problems.append(exc.tried)
            continue
        loaded += 1
        try:
            found += [(name, entry) for entry in _providers(lib, name)]
        except Unavailable as exc:
            problems.append(exc.reason)
    if not found:
        if not loaded:
            raise Unavailable("QNN backend library not found: tried " + ", ".join(problems))
        raise Unavailable("; ".join(problems) or "QNN backend libraries loaded but reported no interface providers")
    return [_describe(i, name, entry, host) for i, (name, entry) in enumerate(found)]


def _providers(lib: ctypes.CDLL, name: str) -> list[QnnInterfacePrefix]:
    get = bind(
        lib,
        "QnnInterface_getProviders",
        ctypes.c_uint64,
        ctypes.POINTER(ctypes.POINTER(ctypes.POINTER(QnnInterfacePrefix))),
        ctypes.POINTER(ctypes.c_uint32),
    )
    plist = ctypes.POINTER(ctypes.POINTER(QnnInterfacePrefix))()
    count = ctypes.c_uint32(0)
    status = int(get(ctypes.byref(plist), ctypes.byref(count)))
    if status & QNN_ERROR_CODE_MASK != QNN_SUCCESS:
        raise Unavailable(f"QnnInterface_getProviders in {name} failed with code {status & QNN_ERROR_CODE_MASK}")
    n = count.value
    if n > _MAX_PROVIDERS:
        raise Unavailable(f"QnnInterface_getProviders in {name} reported {n} providers (implausible)")
    if n and not plist:
        raise Unavailable(f"QnnInterface_getProviders in {name} reported {n} providers but no list")
    out = []
    for i in range(n):
        entry = plist[i]
        if entry:  # copy now: the library owns the memory
            out.append(QnnInterfacePrefix.from_buffer_copy(entry.contents))
    return out


def _version(v: QnnVersion) -> str:
    return f"{v.major}.{v.minor}.{v.patch}"


def _describe(ordinal: int, library: str, entry: QnnInterfacePrefix, host: str) -> DeviceDescriptor:
    backend = int(entry.backendId)
    provider = (entry.providerName or b"").decode("utf-8", "replace")
    arch, label, software = _BACKENDS.get(backend, (f"backend-{backend}", f"QNN backend {backend}", None))
    flags = CapabilityFlags.NONE
    if backend == QNN_BACKEND_ID_HTP:
        if host.startswith(_ARM_MACHINES):
            # HTP is the Hexagon vector (HVX) plus matrix (HMX) engine; the id alone says so.
            flags = CapabilityFlags.HVX | CapabilityFlags.HMX
        else:
            software = "qnn-htp-simulator"
    tier = Tier.BASELINE if software else Tier.MOBILE
    return DeviceDescriptor(
        id=DeviceId(BackendKind.QNN, ordinal),
        vendor=Vendor.QUALCOMM,
        name=f"Qualcomm {label} ({provider})" if provider else f"Qualcomm {label}",
        arch=arch,
        software=software,
        capability=Capability(flags=flags, tier=tier),
        extra=(
            ("backend_id", backend),
            ("provider", provider or None),
            ("core_api_version", _version(entry.apiVersion.coreApiVersion)),
            ("backend_api_version", _version(entry.apiVersion.backendApiVersion)),
            ("library", library),
        ),
    )
