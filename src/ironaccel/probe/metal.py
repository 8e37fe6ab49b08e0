"""Apple Metal discovery through the Objective-C runtime (ctypes only, no PyObjC).

Facts come from Apple's public Metal API (``Metal/MTLDevice.h``, macOS 26 SDK; the same values appear in
Apple's metal-cpp ``Metal/MTLDevice.hpp``, 2020-2025 edition):

* ``NSArray<id<MTLDevice>>* MTLCopyAllDevices(void)`` returns a retained array (released here).
* ``MTLDevice`` properties read by selector: ``name`` (NSString), ``registryID`` (uint64_t),
  ``recommendedMaxWorkingSetSize`` (uint64_t), ``hasUnifiedMemory``, ``isLowPower``, ``isRemovable``,
  ``isHeadless``, ``supportsRaytracing`` (BOOL), ``maxBufferLength``, ``location`` (NSUInteger),
  ``architecture`` (MTLArchitecture, whose ``name`` is an NSString) and ``supportsFamily:`` (MTLGPUFamily,
  an NSInteger). Optional selectors are checked with ``respondsToSelector:`` first, since sending an
  unknown selector raises an Objective-C exception that would abort the process.
* ``MTLGPUFamily``: Apple1..Apple10 = 1001..1010, Mac1 2001, Mac2 2002, Common1..3 = 3001..3003,
  MacCatalyst1/2 = 4001/4002, Metal3 5001, Metal4 5002.

Every call goes through ``objc_msgSend`` cast to the exact prototype of that call (arm64 requires it),
inside an autorelease pool (``objc_autoreleasePoolPush``/``Pop`` from libobjc).
"""

from __future__ import annotations

import ctypes
import dataclasses
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
from ._ffi import bind, load_library

OBJC_LIBRARY = "/usr/lib/libobjc.A.dylib"
METAL_FRAMEWORK = "/System/Library/Frameworks/Metal.framework/Metal"

MTL_GPU_FAMILIES: dict[str, int] = {
    **{f"Apple{n}": 1000 + n for n in range(1, 11)},
    "Mac1": 2001,
    "Mac2": 2002,
    "Common1": 3001,
    "Common2": 3002,
    "Common3": 3003,
    "MacCatalyst1": 4001,
    "MacCatalyst2": 4002,
    "Metal3": 5001,
    "Metal4": 5002,
}
MTL_DEVICE_LOCATIONS = {0: "built-in", 1: "slot", 2: "external"}
_MAX_DEVICES = 64


@dataclasses.dataclass(frozen=True)
class MetalDevice:
    """What the Objective-C calls returned for one MTLDevice (None where the selector is missing)."""

    name: str
    registry_id: int | None = None
    working_set_bytes: int | None = None
    unified_memory: bool | None = None
    low_power: bool | None = None
    removable: bool | None = None
    headless: bool | None = None
    raytracing: bool | None = None
    max_buffer_bytes: int | None = None
    location: int | None = None
    architecture: str | None = None
    families: tuple[str, ...] = ()


def _system() -> str:
    return {"darwin": "macos", "win32": "windows", "cygwin": "windows"}.get(sys.platform, sys.platform)


def probe(settings: Settings, *, system: str | None = None, objc_path: str = OBJC_LIBRARY) -> list[DeviceDescriptor]:
    """Every Metal device; ``system`` and ``objc_path`` exist so tests can stand in for macOS."""
    system = system or _system()
    if system != "macos":
        raise Unavailable(f"Metal exists only on macOS (this is {system})")
    devices = _read_devices(settings, objc_path)
    if not devices:
        raise Unavailable("MTLCopyAllDevices returned no devices")
    return [_describe(i, dev) for i, dev in enumerate(devices)]


class _ObjC:
    """The few runtime entry points needed, with one typed objc_msgSend per prototype."""

    def __init__(self, objc: ctypes.CDLL) -> None:
        self._sel_register = bind(objc, "sel_registerName", ctypes.c_void_p, ctypes.c_char_p)
        self.pool_push = bind(objc, "objc_autoreleasePoolPush", ctypes.c_void_p)
        self.pool_pop = bind(objc, "objc_autoreleasePoolPop", None, ctypes.c_void_p)
        bind(objc, "objc_msgSend", ctypes.c_void_p)  # presence check only; never called through this binding
        self._msg = ctypes.cast(objc.objc_msgSend, ctypes.c_void_p).value
        self._protos: dict[tuple, ctypes._CFuncPtr] = {}
        self._sels: dict[str, int] = {}

    def sel(self, name: str) -> int:
        if name not in self._sels:
            self._sels[name] = self._sel_register(name.encode())
        return self._sels[name]

    def send(self, restype: object, receiver: int, selector: str, *args: tuple[object, object]) -> object:
        """``[receiver selector]`` with ``args`` as (ctypes type, value) pairs."""
        key = (restype, *(t for t, _ in args))
        fn = self._protos.get(key)
        if fn is None:
            proto = ctypes.CFUNCTYPE(restype, ctypes.c_void_p, ctypes.c_void_p, *(t for t, _ in args))
            fn = self._protos[key] = proto(self._msg)
        return fn(receiver, self.sel(selector), *(v for _, v in args))

    def responds(self, obj: int, selector: str) -> bool:
        return bool(self.send(ctypes.c_bool, obj, "respondsToSelector:", (ctypes.c_void_p, self.sel(selector))))

    def string(self, nsstring: int | None) -> str | None:
        if not nsstring:
            return None
        raw = self.send(ctypes.c_char_p, nsstring, "UTF8String")
        return raw.decode("utf-8", "replace") if raw else None


def _read_devices(settings: Settings, objc_path: str) -> list[MetalDevice]:
    objc = load_library("metal", [objc_path])
    metal = load_library("metal", [METAL_FRAMEWORK], settings.library("metal"))
    copy_all = bind(metal, "MTLCopyAllDevices", ctypes.c_void_p)
    rt = _ObjC(objc)
    pool = rt.pool_push()
    try:
        array = copy_all()
        if not array:
            return []
        try:
            count = int(rt.send(ctypes.c_size_t, array, "count"))
            return [
                _read_device(rt, rt.send(ctypes.c_void_p, array, "objectAtIndex:", (ctypes.c_size_t, i)))
                for i in range(min(count, _MAX_DEVICES))
            ]
        finally:
            rt.send(None, array, "release")
    finally:
        rt.pool_pop(pool)


def _read_device(rt: _ObjC, dev: int) -> MetalDevice:
    def get(restype: object, selector: str) -> object:
        return rt.send(restype, dev, selector) if rt.responds(dev, selector) else None

    def flag(selector: str) -> bool | None:
        value = get(ctypes.c_bool, selector)
        return None if value is None else bool(value)

    families: tuple[str, ...] = ()
    if rt.responds(dev, "supportsFamily:"):
        families = tuple(
            name
            for name, value in MTL_GPU_FAMILIES.items()
            if rt.send(ctypes.c_bool, dev, "supportsFamily:", (ctypes.c_long, value))
        )
    arch_obj = get(ctypes.c_void_p, "architecture")
    architecture = rt.string(rt.send(ctypes.c_void_p, arch_obj, "name")) if arch_obj else None
    return MetalDevice(
        name=rt.string(get(ctypes.c_void_p, "name")) or "Metal device",
        registry_id=get(ctypes.c_uint64, "registryID"),
        working_set_bytes=get(ctypes.c_uint64, "recommendedMaxWorkingSetSize"),
        unified_memory=flag("hasUnifiedMemory"),
        low_power=flag("isLowPower"),
        removable=flag("isRemovable"),
        headless=flag("isHeadless"),
        raytracing=flag("supportsRaytracing"),
        max_buffer_bytes=get(ctypes.c_size_t, "maxBufferLength"),
        location=get(ctypes.c_size_t, "location"),
        architecture=architecture,
        families=families,
    )


def _describe(ordinal: int, dev: MetalDevice) -> DeviceDescriptor:
    # float and half are core Metal Shading Language types on every Metal device.
    flags = CapabilityFlags.FP32 | CapabilityFlags.FP16
    if dev.unified_memory:
        flags |= CapabilityFlags.UNIFIED_MEMORY
    if any(f in dev.families for f in ("Apple7", "Apple8", "Apple9", "Apple10")):
        flags |= CapabilityFlags.WMMA  # SIMD-group matrix functions: Apple7 and later
    if dev.raytracing:
        flags |= CapabilityFlags.RAYTRACING
    vendor = Vendor.APPLE if dev.name.lower().startswith("apple") else Vendor.from_text(dev.name)
    return DeviceDescriptor(
        id=DeviceId(BackendKind.METAL, ordinal),
        vendor=vendor,
        name=dev.name,
        arch=dev.architecture or "",
        memory_bytes=dev.working_set_bytes or None,
        capability=Capability(flags=flags, tier=Tier.MOBILE if dev.low_power else Tier.CONSUMER),
        extra=(
            ("registry_id", dev.registry_id),
            ("recommended_max_working_set_size", dev.working_set_bytes),
            ("has_unified_memory", dev.unified_memory),
            ("low_power", dev.low_power),
            ("removable", dev.removable),
            ("headless", dev.headless),
            ("max_buffer_length", dev.max_buffer_bytes),
            ("location", MTL_DEVICE_LOCATIONS.get(dev.location) if dev.location is not None else None),
            ("gpu_families", list(dev.families)),
        ),
    )
