"""The device: choosing one of the driver's devices, opening it (its primary context, retained), its
identity, limits and memory domains, and tearing down everything the backend made on it.

Choosing (:func:`choose`): a selector is an index in the driver's order (``cuda:0``), a device UUID (32 hex
digits, dashes and nvidia-smi's ``GPU-`` prefix allowed) or a case-insensitive part of the device name; no
selector takes device 0. Two name matches are refused as ambiguous, as ``vulkan:NAME`` is.

The backend runs in the device's primary context, the one the CUDA runtime and other libraries of the
process share, so that device pointers mean the same to all of them. The driver binds a context per thread:
every thread that calls the driver makes it current first (:meth:`CudaDevice.use`).

:class:`CudaDevice` also owns what the backend creates on the device (buffers, loaded programs, queues,
kernel modules), so that :meth:`CudaDevice.close` can destroy whatever is still alive: it refuses new
users, waits for the running ones (a run holds the device while its work is on a stream), waits for the
device, then frees in order and releases the primary context.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from ...core.errors import DeviceLost, InvalidArgument, IronAccelError, Unsupported
from ...runtime.types import Limits, MemoryDomain
from .driver import api, check
from .registration import LIBRARY, NAME

_UUID = re.compile(r"^(?:gpu)?([0-9a-f]{32})$")  # dashes already dropped
# What each kind of object the device owns is destroyed by, in the order close() destroys them.
KINDS = ("queue", "program", "buffer", "modules")


@dataclasses.dataclass(frozen=True)
class Listed:
    """A device as the driver lists it: what a selector is matched against."""

    index: int
    name: str
    uuid: bytes


def _init(driver: ModuleType) -> None:
    """cuInit, with a missing or failing driver library reported as Unsupported."""
    try:
        result = driver.cuInit(0)
    except IronAccelError:
        raise
    except Exception as exc:  # the binding raises its own types when libcuda cannot be loaded
        raise Unsupported(f"the CUDA driver library {LIBRARY} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    check(result, "cuInit")


def device_count() -> int:
    """How many devices the driver lists (initialising it; no context is created)."""
    driver = api()
    _init(driver)
    return int(check(driver.cuDeviceGetCount(), "cuDeviceGetCount"))


def list_devices(driver: ModuleType) -> list[Listed]:
    """Every device of the driver, in its order (the driver initialised)."""
    found = []
    for index in range(int(check(driver.cuDeviceGetCount(), "cuDeviceGetCount"))):
        handle = check(driver.cuDeviceGet(index), "cuDeviceGet")
        raw = check(driver.cuDeviceGetName(256, handle), "cuDeviceGetName")
        name = bytes(raw).split(b"\0", 1)[0].decode(errors="replace").strip()
        raw_uuid = check(driver.cuDeviceGetUuid(handle), "cuDeviceGetUuid").bytes
        uuid = (raw_uuid.encode("latin-1") if isinstance(raw_uuid, str) else bytes(raw_uuid))[:16]
        found.append(Listed(index, name, uuid))
    return found


def _label(d: Listed) -> str:
    return f"#{d.index} {d.name!r}"


def choose(devices: Sequence[Listed], selector: str | None) -> Listed:
    """The device ``selector`` names (see the module doc). Unsupported when none matches (or there is no
    device), InvalidArgument when a name matches several."""
    if not devices:
        raise Unsupported("the CUDA driver lists no device")
    text = (selector or "").strip()
    if not text:
        return devices[0]
    compact = text.replace("-", "").lower()
    uuid = _UUID.match(compact) if not text.isdigit() or len(compact) == 32 else None
    if uuid is not None:  # before indexes: a UUID may be all digits
        matches = [d for d in devices if d.uuid.hex() == uuid.group(1)]
    elif text.isdigit():
        matches = [d for d in devices if d.index == int(text)]
    else:
        matches = [d for d in devices if text.lower() in d.name.lower()]
    listing = "; ".join(_label(d) for d in devices)
    shown = text if len(text) <= 80 else text[:80] + "..."
    if not matches:
        raise Unsupported(f"no CUDA device matches {shown!r} (devices: {listing})")
    if len(matches) > 1:
        names = ", ".join(_label(d) for d in matches)
        raise InvalidArgument(f"CUDA selector {shown!r} is ambiguous ({names}); use an index or a UUID")
    return matches[0]


def _attribute(driver: ModuleType, handle: Any, name: str) -> int:
    attribute = getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
    return int(check(driver.cuDeviceGetAttribute(attribute, handle), f"cuDeviceGetAttribute({name})"))


class CudaDevice:
    """One opened device: its handle, primary context and identity; the objects made on it; the transfer
    stream that ``write_buffer`` and ``read_buffer`` copy on."""

    def __init__(self, driver: ModuleType, listed: Listed) -> None:
        self.api = driver
        self.index = listed.index
        self.name = listed.name
        self.uuid = listed.uuid
        self.handle = check(driver.cuDeviceGet(listed.index), "cuDeviceGet")
        major = _attribute(driver, self.handle, "COMPUTE_CAPABILITY_MAJOR")
        minor = _attribute(driver, self.handle, "COMPUTE_CAPABILITY_MINOR")
        self.capability = (major, minor)
        self.multiprocessors = _attribute(driver, self.handle, "MULTIPROCESSOR_COUNT")
        self.total_memory = int(check(driver.cuDeviceTotalMem(self.handle), "cuDeviceTotalMem"))
        self.domains = frozenset(MemoryDomain)
        self.limits = Limits(max_buffer_bytes=self.total_memory)
        self.context = check(driver.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")
        self._cond = threading.Condition()
        self._users = 0
        self._in_use = _InUse(self)  # a plain context manager: the launch path enters one several times a call
        self.closed = False
        self._owned: dict[str, set[Any]] = {kind: set() for kind in KINDS}
        self._blas: Any = None
        # A binding without graphs (the tests' stand-in driver) has every command enqueued one by one.
        self.graphs = hasattr(driver, "cuGraphLaunch") and os.environ.get("IRONACCEL_CUDA_GRAPHS", "1") != "0"
        try:
            self.current()
            # Not blocking: the legacy default stream, which would order it against every queue, is never used.
            self.transfer_stream = check(
                driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate"
            )
        except BaseException:
            driver.cuDevicePrimaryCtxRelease(self.handle)
            raise

    @property
    def arch(self) -> str:
        """The NVRTC architecture of the device's compute capability (``sm_90``)."""
        return f"sm_{self.capability[0]}{self.capability[1]}"

    def current(self) -> None:
        """Make the device's context current on the calling thread."""
        check(self.api.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def use(self) -> _InUse:
        """Hold the device open while the block runs, its context current on this thread; ``with`` gives the
        driver binding. DeviceLost once the device is closed."""
        return self._in_use

    def _enter(self) -> ModuleType:
        with self._cond:
            if self.closed:
                raise DeviceLost(f"the CUDA device {self.name} was closed")
            self._users += 1
        try:
            self.current()
        except BaseException:
            self._leave()
            raise
        return self.api

    def _leave(self) -> None:
        with self._cond:
            self._users -= 1
            if not self._users:
                self._cond.notify_all()

    def adopt(self, kind: str, obj: Any) -> None:
        """``obj`` (with a ``destroy()``) is the device's until :meth:`forget`; close() destroys it."""
        with self._cond:
            if self.closed:
                raise DeviceLost(f"the CUDA device {self.name} was closed")
            self._owned[kind].add(obj)

    def forget(self, kind: str, obj: Any) -> bool:
        """Drop ``obj``; False when close() has already destroyed it (the caller then leaves it alone)."""
        with self._cond:
            if obj not in self._owned[kind]:
                return False
            self._owned[kind].discard(obj)
            return True

    def release(self, kind: str, obj: Any) -> bool:
        """Forget ``obj`` and destroy it in the device's context. Nothing to do when close() has destroyed
        it already. False when the device was closed between the two: the context's release then takes the
        handles with it, and ``obj`` was not destroyed here."""
        if not self.forget(kind, obj):
            return True  # close() destroyed it
        try:
            with self.use():
                obj.destroy()
        except DeviceLost:
            return False
        return True

    def blas(self) -> Any:
        """The device's cuBLASLt handle (:mod:`.blas`), made on first use with the context current."""
        with self._cond:
            if self._blas is None:
                from .blas import Handle

                self._blas = Handle()
            return self._blas

    def synchronize(self, what: str) -> None:
        """Wait for the transfer stream (the copies of ``write_buffer`` and ``read_buffer``)."""
        check(self.api.cuStreamSynchronize(self.transfer_stream), what)

    def close(self) -> None:
        """Refuse new users, wait for the running ones and the device, destroy everything still owned, and
        release the primary context. Idempotent; a lost device is torn down all the same."""
        with self._cond:
            if self.closed:
                return
            self.closed = True
            while self._users:
                self._cond.wait()
            owned = [list(self._owned[kind]) for kind in KINDS]
            for kind in KINDS:
                self._owned[kind].clear()
        driver = self.api
        driver.cuCtxSetCurrent(self.context)
        driver.cuCtxSynchronize()  # its error, after a fault, is the fault's: nothing runs any more either way
        for objects in owned:
            for obj in objects:
                obj.destroy()
        if self._blas is not None:
            self._blas.destroy()
        driver.cuStreamDestroy(self.transfer_stream)
        driver.cuDevicePrimaryCtxRelease(self.handle)


def open_device(selector: str | None) -> CudaDevice:
    """The device ``selector`` names (None: device 0), opened. Unsupported when the binding, the driver or
    a matching device is missing, or the backend is switched off."""
    from ...core.settings import Settings

    if NAME in Settings.from_env().disabled:
        raise Unsupported("the CUDA family is switched off (IRONACCEL_<FAMILY>=0 with FAMILY CUDA)")
    driver = api()
    _init(driver)
    return CudaDevice(driver, choose(list_devices(driver), selector))


class _InUse:
    """``with device.use() as driver``: one object per device, stateless, so threads share it."""

    __slots__ = ("_device",)

    def __init__(self, device: CudaDevice) -> None:
        self._device = device

    def __enter__(self) -> ModuleType:
        return self._device._enter()

    def __exit__(self, *exc: object) -> None:
        self._device._leave()


__all__ = ["KINDS", "CudaDevice", "Listed", "choose", "device_count", "list_devices", "open_device"]
