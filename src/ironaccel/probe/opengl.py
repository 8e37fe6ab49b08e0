"""Headless OpenGL 4.3+ (compute) devices through EGL, via ctypes: one descriptor per EGL device.

Path: libEGL.so.1 -> eglQueryDevicesEXT (EGL_EXT_device_enumeration) -> one display per device
(eglGetPlatformDisplayEXT, EGL_EXT_platform_device) -> a 4.6 (else 4.3) core context, current without a surface
(EGL_KHR_surfaceless_context) or on a 1x1 pbuffer -> glGetString / glGetInteger* through libOpenGL.so.0
(or libGL.so.1). Everything is released before returning. When the client library lacks device
enumeration, the default display stands in as the only device.

Constants are from the Khronos headers: EGL/egl.h (EGL 1.5, registry revision 2023-02-24), EGL/eglext.h
(EGL_EGLEXT_VERSION 20230224) and GL/glcorearb.h (GL_GLEXT_VERSION 20230309, core 4.6).

The probe sets no environment variables: NVIDIA's EGL needs __EGL_VENDOR_LIBRARY_FILENAMES pointing at
its glvnd JSON on some hosts, and scripts/gpu-check sets it there.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from ..core import (
    BackendKind,
    Capability,
    CapabilityFlags,
    DeviceDescriptor,
    DeviceId,
    PciAddress,
    Settings,
    Unavailable,
    Vendor,
    software_name,
)
from ._ffi import load_library, uuid_text
from .vulkan import device_tier

# EGL/egl.h
EGL_SUCCESS = 0x3000
EGL_NONE = 0x3038
EGL_VENDOR = 0x3053
EGL_VERSION = 0x3054
EGL_EXTENSIONS = 0x3055
EGL_HEIGHT = 0x3056
EGL_WIDTH = 0x3057
EGL_DRAW = 0x3059
EGL_READ = 0x305A
EGL_SURFACE_TYPE = 0x3033
EGL_PBUFFER_BIT = 0x0001
EGL_RENDERABLE_TYPE = 0x3040
EGL_OPENGL_BIT = 0x0008
EGL_OPENGL_API = 0x30A2
EGL_CONTEXT_MAJOR_VERSION = 0x3098
EGL_CONTEXT_MINOR_VERSION = 0x30FB
EGL_CONTEXT_OPENGL_PROFILE_MASK = 0x30FD
EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT = 0x0001
EGL_DEFAULT_DISPLAY = None
EGL_NO_CONTEXT = None
EGL_NO_SURFACE = None
EGL_NO_CONFIG_KHR = None  # EGL_KHR_no_config_context
# EGL/eglext.h
EGL_PLATFORM_DEVICE_EXT = 0x313F
EGL_DRM_DEVICE_FILE_EXT = 0x3233  # EGL_EXT_device_drm
EGL_CUDA_DEVICE_NV = 0x323A  # EGL_NV_device_cuda
EGL_DEVICE_UUID_EXT = 0x335C  # EGL_EXT_device_persistent_id
EGL_DRIVER_NAME_EXT = 0x335E
EGL_DRM_RENDER_NODE_FILE_EXT = 0x3377  # EGL_EXT_device_drm_render_node
# GL/glcorearb.h
GL_VENDOR = 0x1F00
GL_RENDERER = 0x1F01
GL_VERSION = 0x1F02
GL_EXTENSIONS = 0x1F03
GL_SHADING_LANGUAGE_VERSION = 0x8B8C
GL_MAJOR_VERSION = 0x821B
GL_MINOR_VERSION = 0x821C
GL_NUM_EXTENSIONS = 0x821D
GL_MAX_COMPUTE_SHARED_MEMORY_SIZE = 0x8262
GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS = 0x90EB
GL_MAX_SHADER_STORAGE_BLOCK_SIZE = 0x90DE
GL_MAX_COMPUTE_WORK_GROUP_COUNT = 0x91BE
GL_MAX_COMPUTE_WORK_GROUP_SIZE = 0x91BF
# glext.h: GL_NVX_gpu_memory_info (KiB) and GL_ATI_meminfo (free KiB, 4 values)
GL_GPU_MEMORY_INFO_DEDICATED_VIDMEM_NVX = 0x9047
GL_GPU_MEMORY_INFO_TOTAL_AVAILABLE_MEMORY_NVX = 0x9048
GL_VBO_FREE_MEMORY_ATI = 0x87FB

# GL extensions named in ``extra`` when present (numeric formats, subgroups, memory queries).
RELEVANT_EXTENSIONS = frozenset(
    {
        "GL_ARB_gpu_shader_fp64",
        "GL_ARB_gpu_shader_int64",
        "GL_NV_gpu_shader5",
        "GL_AMD_gpu_shader_half_float",
        "GL_AMD_gpu_shader_int16",
        "GL_EXT_shader_explicit_arithmetic_types",
        "GL_NV_shader_subgroup_partitioned",
        "GL_KHR_shader_subgroup",
        "GL_ARB_shader_ballot",
        "GL_NV_shader_atomic_float",
        "GL_ARB_compute_variable_group_size",
        "GL_ARB_spirv_extensions",
        "GL_ARB_gl_spirv",
        "GL_NVX_gpu_memory_info",
        "GL_ATI_meminfo",
    }
)
# Half-precision *arithmetic* in GLSL: AMD's half-float extension, or NV_gpu_shader5's float16_t types.
HALF_FLOAT_EXTENSIONS = ("GL_AMD_gpu_shader_half_float", "GL_NV_gpu_shader5", "GL_EXT_shader_explicit_arithmetic_types")

_p = ctypes.c_void_p
_int = ctypes.c_int32


class _Egl:
    """The EGL entry points the probe uses, with their signatures fixed."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.getProcAddress = self._bind("eglGetProcAddress", _p, ctypes.c_char_p)
        self.queryString = self._bind("eglQueryString", ctypes.c_char_p, _p, _int)
        self.getDisplay = self._bind("eglGetDisplay", _p, _p)
        self.initialize = self._bind("eglInitialize", ctypes.c_uint, _p, ctypes.POINTER(_int), ctypes.POINTER(_int))
        self.terminate = self._bind("eglTerminate", ctypes.c_uint, _p)
        self.bindAPI = self._bind("eglBindAPI", ctypes.c_uint, ctypes.c_uint)
        self.chooseConfig = self._bind(
            "eglChooseConfig", ctypes.c_uint, _p, ctypes.POINTER(_int), ctypes.POINTER(_p), _int, ctypes.POINTER(_int)
        )
        self.createContext = self._bind("eglCreateContext", _p, _p, _p, _p, ctypes.POINTER(_int))
        self.destroyContext = self._bind("eglDestroyContext", ctypes.c_uint, _p, _p)
        self.createPbufferSurface = self._bind("eglCreatePbufferSurface", _p, _p, _p, ctypes.POINTER(_int))
        self.destroySurface = self._bind("eglDestroySurface", ctypes.c_uint, _p, _p)
        self.makeCurrent = self._bind("eglMakeCurrent", ctypes.c_uint, _p, _p, _p, _p)
        self.getError = self._bind("eglGetError", _int)
        self.releaseThread = self._bind("eglReleaseThread", ctypes.c_uint)
        self.queryAPI = self._bind("eglQueryAPI", ctypes.c_uint)
        self.getCurrentContext = self._bind("eglGetCurrentContext", _p)
        self.getCurrentDisplay = self._bind("eglGetCurrentDisplay", _p)
        self.getCurrentSurface = self._bind("eglGetCurrentSurface", _p, _int)

    def _bind(self, name: str, restype: Any, *argtypes: Any) -> Any:
        try:
            fn = getattr(self.lib, name)
        except AttributeError:
            raise Unavailable(f"libEGL lacks {name}") from None
        fn.restype = restype
        fn.argtypes = list(argtypes)
        return fn

    def ext_proc(self, name: str, restype: Any, *argtypes: Any) -> Any:
        """An extension entry point through eglGetProcAddress, or None."""
        address = self.getProcAddress(name.encode())
        return ctypes.CFUNCTYPE(restype, *argtypes)(address) if address else None

    def error(self) -> str:
        return f"EGL error 0x{self.getError() & 0xFFFFFFFF:04X}"


def _attribs(*pairs: int) -> Any:
    values = [*pairs, EGL_NONE]
    return (_int * len(values))(*values)


def _extensions(text: bytes | None) -> set[str]:
    return set((text or b"").decode("ascii", "replace").split())


def probe(settings: Settings) -> list[DeviceDescriptor]:
    """Every EGL device that gives a 4.3 core context; Unavailable with each device's reason otherwise."""
    egl = _Egl(load_library("OpenGL (EGL)", ["libEGL.so.1", "libEGL.so"], settings.libraries.get("opengl")))
    gl_lib = _load_gl()
    client = _extensions(egl.queryString(None, EGL_EXTENSIONS))

    devices: list[tuple[Any, dict[str, Any]]] = []  # (EGLDisplay, facts about its EGL device)
    query_devices = egl.ext_proc("eglQueryDevicesEXT", ctypes.c_uint, _int, ctypes.POINTER(_p), ctypes.POINTER(_int))
    get_platform_display = egl.ext_proc("eglGetPlatformDisplayEXT", _p, ctypes.c_uint, _p, ctypes.POINTER(_int))
    if (
        ("EGL_EXT_device_enumeration" in client or "EGL_EXT_device_base" in client)
        and "EGL_EXT_platform_device" in client
        and query_devices
        and get_platform_display
    ):
        count = _int(0)
        if not query_devices(0, None, ctypes.byref(count)):
            raise Unavailable(f"eglQueryDevicesEXT failed: {egl.error()}")
        handles = (_p * max(count.value, 1))()
        if count.value and not query_devices(count.value, handles, ctypes.byref(count)):
            raise Unavailable(f"eglQueryDevicesEXT failed: {egl.error()}")
        if count.value == 0:
            raise Unavailable("EGL reports no devices (no EGL vendor library, or no GPU visible to it)")
        for i in range(count.value):
            facts = _device_facts(egl, handles[i])
            devices.append((get_platform_display(EGL_PLATFORM_DEVICE_EXT, handles[i], None), facts))
    else:
        devices.append((egl.getDisplay(EGL_DEFAULT_DISPLAY), {"egl_default_display": True}))

    found: list[DeviceDescriptor] = []
    reasons: list[str] = []
    for index, (display, facts) in enumerate(devices):
        if not display:
            reasons.append(f"EGL device {index}: no display ({egl.error()})")
            continue
        result = _query_display(egl, gl_lib, display)
        if isinstance(result, str):
            reasons.append(f"EGL device {index}: {result}")
            continue
        found.append(_descriptor(len(found), result, facts))
    if not egl.getCurrentContext():
        egl.releaseThread()  # frees this thread's EGL state; skipped when the caller has a context current
    if not found:
        raise Unavailable("no EGL device gives an OpenGL 4.3 core context: " + "; ".join(reasons))
    return found


def _load_gl() -> ctypes.CDLL | None:
    # glvnd's libOpenGL dispatches to whichever vendor owns the current context; libGL drags in GLX.
    for name in ("libOpenGL.so.0", "libGL.so.1"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None  # then every GL entry point comes from eglGetProcAddress


def _device_facts(egl: _Egl, device: Any) -> dict[str, Any]:
    """What EGL_EXT_device_query says about one device: extensions, DRM node, CUDA ordinal, UUID."""
    facts: dict[str, Any] = {}
    query_string = egl.ext_proc("eglQueryDeviceStringEXT", ctypes.c_char_p, _p, _int)
    if query_string is None:
        return facts
    extensions = _extensions(query_string(device, EGL_EXTENSIONS))
    facts["egl_device_extensions"] = sorted(extensions)
    for ext, token, key in (
        ("EGL_EXT_device_drm_render_node", EGL_DRM_RENDER_NODE_FILE_EXT, "drm_render_node"),
        ("EGL_EXT_device_drm", EGL_DRM_DEVICE_FILE_EXT, "drm_device"),
        ("EGL_EXT_device_persistent_id", EGL_DRIVER_NAME_EXT, "egl_driver_name"),
    ):
        if ext in extensions:
            value = query_string(device, token)
            if value:
                facts[key] = value.decode("utf-8", "replace")
    if "EGL_NV_device_cuda" in extensions:
        query_attrib = egl.ext_proc(
            "eglQueryDeviceAttribEXT", ctypes.c_uint, _p, _int, ctypes.POINTER(ctypes.c_ssize_t)
        )
        value = ctypes.c_ssize_t(-1)
        if query_attrib and query_attrib(device, EGL_CUDA_DEVICE_NV, ctypes.byref(value)):
            facts["cuda_device"] = int(value.value)
    if "EGL_EXT_device_persistent_id" in extensions:
        query_binary = egl.ext_proc("eglQueryDeviceBinaryEXT", ctypes.c_uint, _p, _int, _int, _p, ctypes.POINTER(_int))
        raw = (ctypes.c_ubyte * 16)()
        size = _int(0)
        if query_binary and query_binary(device, EGL_DEVICE_UUID_EXT, 16, raw, ctypes.byref(size)) and size.value == 16:
            facts["uuid"] = uuid_text(bytes(raw))
    return facts


def _query_display(egl: _Egl, gl_lib: ctypes.CDLL | None, display: Any) -> dict[str, Any] | str:
    """Initialise ``display``, make a 4.3 core context current, read the GL facts, release it all.

    Returns the facts, or a reason (text) when this display cannot give a 4.3 context.
    """
    # Another user in this process (a GL backend, moderngl) may hold this very display: EGL hands out one
    # EGLDisplay per device and eglTerminate is not reference counted, so terminate only what we opened.
    ours = egl.queryString(display, EGL_VERSION) is None
    egl.getError()  # the query above sets EGL_NOT_INITIALIZED on a fresh display
    major, minor = _int(0), _int(0)
    if not egl.initialize(display, ctypes.byref(major), ctypes.byref(minor)):
        return f"eglInitialize failed ({egl.error()})"
    # Whatever this thread had current (and its bound API) is put back afterwards.
    saved = (
        egl.getCurrentDisplay(),
        egl.getCurrentSurface(EGL_DRAW),
        egl.getCurrentSurface(EGL_READ),
        egl.getCurrentContext(),
        egl.queryAPI(),
    )
    context = surface = None
    try:
        if not egl.bindAPI(EGL_OPENGL_API):
            return f"eglBindAPI(EGL_OPENGL_API) failed ({egl.error()})"
        extensions = _extensions(egl.queryString(display, EGL_EXTENSIONS))
        surfaceless = "EGL_KHR_surfaceless_context" in extensions
        config = _choose_config(egl, display, extensions, surfaceless)
        if config is None:
            return "no EGL config renders OpenGL to a pbuffer"
        # Ask for 4.6 first: NVIDIA reports exactly the version asked for, so 4.3 would understate it.
        for gl_minor in (6, 3):
            context_attribs = _attribs(
                EGL_CONTEXT_MAJOR_VERSION, 4,
                EGL_CONTEXT_MINOR_VERSION, gl_minor,
                EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
            )  # fmt: skip
            context = egl.createContext(display, config, EGL_NO_CONTEXT, context_attribs)
            if context:
                break
        if not context:
            return f"no OpenGL 4.3 core context ({egl.error()})"
        if not surfaceless:
            surface = egl.createPbufferSurface(display, config, _attribs(EGL_WIDTH, 1, EGL_HEIGHT, 1))
            if not surface:
                return f"eglCreatePbufferSurface failed ({egl.error()})"
        if not egl.makeCurrent(display, surface, surface, context):
            return f"eglMakeCurrent failed ({egl.error()})"
        try:
            facts = _read_gl(egl, gl_lib)
        finally:
            egl.makeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT)
            if saved[0] and saved[3]:
                egl.makeCurrent(saved[0], saved[1], saved[2], saved[3])
        facts["egl_version"] = f"{major.value}.{minor.value}"
        vendor = egl.queryString(display, EGL_VENDOR)
        facts["egl_vendor"] = (vendor or b"").decode("utf-8", "replace")
        return facts
    finally:
        if surface:
            egl.destroySurface(display, surface)
        if context:
            egl.destroyContext(display, context)
        if saved[4]:
            egl.bindAPI(saved[4])
        if ours:
            egl.terminate(display)


def _choose_config(egl: _Egl, display: Any, extensions: set[str], surfaceless: bool) -> Any | None:
    """A pbuffer-capable GL config; without a surface any GL config, or none at all, will do."""
    wanted = [_attribs(EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT)]
    if surfaceless:
        wanted.append(_attribs(EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT))
    for attribs in wanted:
        config, n = _p(), _int(0)
        if egl.chooseConfig(display, attribs, ctypes.byref(config), 1, ctypes.byref(n)) and n.value:
            return config
    if surfaceless and "EGL_KHR_no_config_context" in extensions:
        return _p(EGL_NO_CONFIG_KHR)
    return None


def _read_gl(egl: _Egl, gl_lib: ctypes.CDLL | None) -> dict[str, Any]:
    def fn(name: str, restype: Any, *argtypes: Any) -> Any:
        proto = ctypes.CFUNCTYPE(restype, *argtypes)
        if gl_lib is not None and hasattr(gl_lib, name):
            return proto((name, gl_lib))
        address = egl.getProcAddress(name.encode())
        if not address:
            raise Unavailable(f"OpenGL entry point {name} not found")
        return proto(address)

    get_string = fn("glGetString", ctypes.c_char_p, ctypes.c_uint)
    get_stringi = fn("glGetStringi", ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint)
    get_integerv = fn("glGetIntegerv", None, ctypes.c_uint, ctypes.POINTER(_int))
    get_integeri_v = fn("glGetIntegeri_v", None, ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(_int))
    get_integer64v = fn("glGetInteger64v", None, ctypes.c_uint, ctypes.POINTER(ctypes.c_int64))
    get_error = fn("glGetError", ctypes.c_uint)

    def text(name: int) -> str:
        return (get_string(name) or b"").decode("utf-8", "replace")

    def integer(name: int, count: int = 1) -> list[int]:
        values = (_int * count)()
        get_integerv(name, values)
        return list(values)

    def indexed(name: int) -> list[int]:
        out = []
        for i in range(3):
            value = _int(0)
            get_integeri_v(name, i, ctypes.byref(value))
            out.append(value.value)
        return out

    facts: dict[str, Any] = {
        "vendor": text(GL_VENDOR),
        "renderer": text(GL_RENDERER),
        "version": text(GL_VERSION),
        "glsl_version": text(GL_SHADING_LANGUAGE_VERSION),
        "gl_major_minor": integer(GL_MAJOR_VERSION) + integer(GL_MINOR_VERSION),
    }
    count = integer(GL_NUM_EXTENSIONS)[0]
    extensions = {(get_stringi(GL_EXTENSIONS, i) or b"").decode("ascii", "replace") for i in range(count)}
    facts["extensions"] = extensions
    facts["max_compute_work_group_count"] = indexed(GL_MAX_COMPUTE_WORK_GROUP_COUNT)
    facts["max_compute_work_group_size"] = indexed(GL_MAX_COMPUTE_WORK_GROUP_SIZE)
    facts["max_compute_work_group_invocations"] = integer(GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS)[0]
    facts["max_compute_shared_memory_size"] = integer(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE)[0]
    block = ctypes.c_int64(0)
    get_integer64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, ctypes.byref(block))
    facts["max_shader_storage_block_size"] = block.value
    if "GL_NVX_gpu_memory_info" in extensions:
        facts["dedicated_vidmem_kib"] = integer(GL_GPU_MEMORY_INFO_DEDICATED_VIDMEM_NVX)[0]
        facts["total_available_memory_kib"] = integer(GL_GPU_MEMORY_INFO_TOTAL_AVAILABLE_MEMORY_NVX)[0]
    if "GL_ATI_meminfo" in extensions:
        facts["vbo_free_memory_kib"] = integer(GL_VBO_FREE_MEMORY_ATI, 4)[0]  # free, not total: extra only
    get_error()  # clear anything a query above raised, so the next user of this thread starts clean
    return facts


def _pci_from_drm(node: str | None) -> PciAddress | None:
    """vendor/device ids and bus id of a DRM node, from sysfs (Linux)."""
    if not node:
        return None
    base = f"/sys/class/drm/{os.path.basename(node)}/device"
    try:
        vendor = int(open(f"{base}/vendor").read().strip(), 16)
        device = int(open(f"{base}/device").read().strip(), 16)
    except (OSError, ValueError):
        return None
    bus = os.path.basename(os.path.realpath(base))
    return PciAddress(vendor_id=vendor, device_id=device, bus_id=bus if bus.count(":") == 2 else None)


def _descriptor(ordinal: int, facts: dict[str, Any], device: dict[str, Any]) -> DeviceDescriptor:
    renderer, gl_vendor = facts["renderer"], facts["vendor"]
    extensions: set[str] = facts["extensions"]
    software = software_name(renderer, gl_vendor)
    pci = _pci_from_drm(device.get("drm_render_node"))
    vendor = Vendor.from_pci(pci.vendor_id) if pci else Vendor.OTHER
    if vendor is Vendor.OTHER:
        vendor = (
            Vendor.from_text(gl_vendor)
            if Vendor.from_text(gl_vendor) is not Vendor.OTHER
            else Vendor.from_text(renderer)
        )

    flags = CapabilityFlags.FP32
    if "GL_ARB_gpu_shader_fp64" in extensions:
        flags |= CapabilityFlags.FP64
    if any(e in extensions for e in HALF_FLOAT_EXTENSIONS):
        flags |= CapabilityFlags.FP16
    memory = facts.get("dedicated_vidmem_kib")

    extra: dict[str, Any] = {
        k: v
        for k, v in facts.items()
        if k not in ("extensions", "vendor", "renderer", "version", "gl_major_minor", "dedicated_vidmem_kib")
    }
    extra.update({k: v for k, v in device.items() if k != "uuid"})
    extra["gl_version"] = facts["version"]
    extra["gl_vendor"] = gl_vendor
    extra["extension_count"] = len(extensions)
    extra["extensions"] = sorted(e for e in extensions if e in RELEVANT_EXTENSIONS)
    major, minor = facts["gl_major_minor"]
    return DeviceDescriptor(
        id=DeviceId(BackendKind.OPENGL, ordinal),
        vendor=vendor,
        name=renderer,
        arch=f"gl{major}.{minor}",
        memory_bytes=memory * 1024 if memory else None,
        driver_version=_driver_version(facts["version"]),
        uuid=device.get("uuid"),
        pci=pci,
        software=software,
        capability=Capability(flags=flags, tier=device_tier(renderer, vendor, None, software)),
        extra=tuple(sorted(extra.items())),
    )


def _driver_version(gl_version: str) -> str | None:
    """The driver's part of GL_VERSION: "4.5 (Core Profile) Mesa 22.3.6" -> "Mesa 22.3.6",
    "4.6.0 NVIDIA 580.159.04" -> "NVIDIA 580.159.04"."""
    parts = gl_version.split(" ", 1)
    if len(parts) < 2:
        return None
    rest = parts[1].strip()
    if rest.startswith("("):
        rest = rest.partition(")")[2].strip()
    return rest or None
